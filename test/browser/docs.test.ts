// /docs in real Chromium: Swagger UI renders the OpenAPI document with every request staying on
// the server (no CDN, no validator, nothing outside 127.0.0.1) and no script or CSP errors.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import {
  BROWSER_TEST_TIMEOUT_MS,
  browserSkip,
  launchBrowser,
  openPage,
  saveScreenshot,
  startShiplog,
} from '../support/browser.js'

test('/docs renders the API from local files only', {
  timeout: BROWSER_TEST_TIMEOUT_MS,
  skip: browserSkip(),
}, async (t) => {
  const [server, browser] = await Promise.all([startShiplog(t), launchBrowser(t)])
  const base = server.url
  for (const width of [1280, 390]) {
    const { context, page, watch } = await openPage(browser, { viewport: { width, height: 900 } })
    const outside: string[] = []
    const csp: string[] = []
    // Anything not addressed to the server is recorded and refused, so a CDN cannot hide behind a cache.
    await context.route('**/*', (route) => {
      const url = new URL(route.request().url())
      if (url.protocol === 'data:' || url.host === new URL(base).host) return route.continue()
      outside.push(route.request().url())
      return route.abort()
    })
    page.on('console', (message) => {
      if (/Content Security Policy/i.test(message.text())) csp.push(message.text())
    })
    const res = await page.goto(`${base}/docs`)
    assert.equal(res?.status(), 200)
    await page.locator('.swagger-ui .info .title').waitFor()
    assert.match((await page.locator('.swagger-ui .info .title').textContent()) ?? '', /Shiplog API/)
    for (const path of [
      '/api/v1/events',
      '/api/v1/deployments',
      '/api/v1/services',
      '/api/v1/metrics',
      '/put',
      '/deploy',
      '/get/logs',
    ]) {
      assert.ok(
        (await page.locator(`.opblock-summary-path[data-path="${path}"]`).count()) > 0,
        `${path} is listed at ${width} px`,
      )
    }
    // Open one operation: its parameters and problem answers render.
    await page.locator('.opblock-summary-path[data-path="/api/v1/events"]').first().click()
    await page.locator('.opblock.is-open .parameters').waitFor()
    assert.match((await page.locator('.opblock.is-open').textContent()) ?? '', /cursor/)
    await saveScreenshot(page, `docs-${width}`, false)
    assert.deepEqual(outside, [], `no request left the server at ${width} px`)
    assert.deepEqual(csp, [], 'no Content-Security-Policy violation')
    assert.deepEqual(watch.errors, [], 'no script errors')
    await context.close()
  }
})
