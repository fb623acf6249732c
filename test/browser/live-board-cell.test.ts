// A live-updated board cell is the cell the server draws: after a deployment arrives over the
// stream, the row shows the sender and the "≠" (waiting to be promoted) marks exactly as a reload
// does, in real Chromium.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { Page } from 'playwright-core'
import {
  BROWSER_TEST_TIMEOUT_MS,
  browserSkip,
  createKeyInSettings,
  launchBrowser,
  openPage,
  recordEvent,
  saveScreenshot,
  setUpFirstAdmin,
  startShiplog,
} from '../support/browser.js'

/**
 * Each cell of the service's row as markup, the relative time's words ("3 s ago", which move on
 * with the clock) replaced by the instant it stands for, and the live update's highlight left out.
 */
async function rowCells(page: Page, service: string): Promise<string[]> {
  const cells = await page.evaluate(`(() => {
    const row = [...document.querySelectorAll('table.board tbody tr')].find((r) => r.dataset.service === ${JSON.stringify(service)})
    if (!row) return []
    return [...row.cells].map((td) => {
      const copy = td.cloneNode(true)
      copy.classList.remove('live-changed')
      for (const time of copy.querySelectorAll('time')) time.textContent = '@' + time.getAttribute('datetime')
      return copy.outerHTML
    })
  })()`)
  assert.ok(Array.isArray(cells))
  return cells.map(String)
}

const cellText = (page: Page, service: string, environment: string) =>
  page
    .locator(`table.board tbody tr[data-service="${service}"] td[data-environment="${environment}"]`)
    .innerText()

test('a live board update draws the sender and the ≠ marks as a reload does', {
  timeout: BROWSER_TEST_TIMEOUT_MS,
  skip: browserSkip(),
}, async (t) => {
  const [server, browser] = await Promise.all([startShiplog(t), launchBrowser(t)])
  const base = server.url
  const { page, watch } = await openPage(browser, { viewport: { width: 1280, height: 900 } })
  await setUpFirstAdmin(page, base, {
    team: 'Cells Inc',
    email: 'ada@cells.example',
    password: 'correct horse battery',
  })
  const key = await createKeyInSettings(page, 'ci')
  const send = (environment: string, version: string, deployer: string) =>
    recordEvent(base, key, 'deploy', { service: 'api', environment, version, status: 'Deployed', deployer })
  await send('staging', '1.0.0', 'ada')
  await send('prod', '1.0.0', 'ada')

  const opened = page.waitForResponse((r) => r.url().includes('/api/v1/stream'))
  await page.goto(`${base}/services/`)
  assert.equal((await opened).status(), 200)
  await page.waitForTimeout(300)
  await page.evaluate('window.liveMark = 1')
  assert.doesNotMatch(await cellText(page, 'api', 'prod'), /≠/)

  // staging moves on to 1.1.0, sent by grace: prod (a later environment, not the cell that changed)
  // now waits to be promoted.
  await send('staging', '1.1.0', 'grace <ops>')
  const staging = page.locator('table.board tbody tr[data-service="api"] td[data-environment="staging"]')
  await staging.locator('.running .version', { hasText: '1.1.0' }).waitFor()
  assert.equal(await page.evaluate('window.liveMark'), 1, 'the page was reloaded')
  assert.match(await cellText(page, 'api', 'staging'), /^1\.1\.0\n.* · grace <ops>$/)
  assert.match(await cellText(page, 'api', 'prod'), /^1\.0\.0 ≠ staging\n[\s\S]*\n\d+ s ago · ada$/)
  assert.equal(
    await page.locator('tr[data-service="api"] td[data-environment="prod"] .drift').getAttribute('title'),
    'Differs from staging, which runs 1.1.0: waiting to be promoted',
  )
  assert.equal(await staging.getAttribute('class'), 'cell live-changed')
  await saveScreenshot(page, 'live-board-cell-1280')
  const live = await rowCells(page, 'api')

  await page.reload()
  await page.locator('table.board tbody tr[data-service="api"]').waitFor()
  const reloaded = await rowCells(page, 'api')
  assert.equal(reloaded.length, 3)
  assert.deepEqual(live, reloaded)
  assert.deepEqual(watch.errors, [])
})
