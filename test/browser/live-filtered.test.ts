// Live updates in real Chromium that must say exactly what the server would show (issue 28): the
// bar of a filtered /logs/ page counts only events its filters select (point 9).
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { Page } from 'playwright-core'
import {
  BROWSER_TEST_TIMEOUT_MS,
  browserSkip,
  createKeyInSettings,
  launchBrowser,
  openPage,
  readLogRows,
  recordEvent,
  setUpFirstAdmin,
  startShiplog,
} from '../support/browser.js'

/** Opens a page and waits until its stream answered, so nothing sent next is missed. */
async function gotoLive(page: Page, url: string): Promise<void> {
  const opened = page.waitForResponse((r) => r.url().includes('/api/v1/stream'))
  await page.goto(url)
  assert.equal((await opened).status(), 200)
  await page.waitForTimeout(300)
}

test('the live bar of a filtered log counts only the events its filters select', {
  timeout: BROWSER_TEST_TIMEOUT_MS,
  skip: browserSkip(),
}, async (t) => {
  const [server, browser] = await Promise.all([startShiplog(t), launchBrowser(t)])
  const base = server.url
  const { page, watch } = await openPage(browser, { viewport: { width: 1280, height: 900 } })
  await setUpFirstAdmin(page, base, {
    team: 'Filter Inc',
    email: 'ada@filter.example',
    password: 'correct horse battery',
  })
  const key = await createKeyInSettings(page, 'ci')
  const send = (service: string, environment: string, version: string, status: string) =>
    recordEvent(base, key, 'deploy', { service, environment, version, status })
  await send('api', 'prod', '1.0.0', 'Deployed')

  // Service (any case), environment, status and version text, as the form sends them.
  await gotoLive(page, `${base}/logs/?service=API&environment=prod&status=Deploying&version=rc`)
  assert.equal((await readLogRows(page)).length, 0)
  await send('web', 'prod', '2.0-rc1', 'Deploying')
  await send('api', 'staging', '2.0-rc1', 'Deploying')
  await send('api', 'prod', '2.0-rc1', 'Deployed')
  await send('api', 'prod', '2.0.0', 'Deploying')
  await send('api', 'prod', '2.1-rc1', 'Deploying')
  await send('web', 'prod', '2.1-rc1', 'Deployed')
  const bar = page.locator('.live-bar')
  await bar.getByText('1 new event.').waitFor()
  // Every event above has reached the page's stream by now or within a moment; the count stays.
  await page.waitForTimeout(1500)
  assert.equal((await bar.textContent())?.trim(), '1 new event. Show')
  await bar.getByRole('link', { name: 'Show' }).click()
  await page.waitForLoadState()
  const rows = await readLogRows(page)
  assert.deepEqual(
    rows.map((r) => r.version),
    ['2.1-rc1'],
    'the page lists what the bar counted',
  )

  // A time range that has ended: nothing new can match, so no bar appears.
  await gotoLive(page, `${base}/logs/?to=2020-01-01T00:00`)
  await send('api', 'prod', '3.0.0', 'Deployed')
  await page.waitForTimeout(1500)
  assert.equal(await bar.isHidden(), true)
  assert.deepEqual(watch.errors, [])
})
