// Live updates in real Chromium: a new event appears on /logs/ (as a row on the unfiltered first
// page, as a bar on a filtered one) and on the board, without a reload, at 1280 and 390 px.
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
  saveScreenshot,
  setUpFirstAdmin,
  startShiplog,
} from '../support/browser.js'

const HOSTILE = 'svc <img src=x onerror=alert(1)>'

/** Marks the page; the mark survives only if the page is not reloaded. */
async function mark(page: Page): Promise<void> {
  await page.evaluate('window.liveMark = 1')
}
async function notReloaded(page: Page): Promise<void> {
  assert.equal(await page.evaluate('window.liveMark'), 1, 'the page was reloaded')
}
/** Opens a page and waits until its stream answered, so nothing sent next is missed. */
async function gotoLive(page: Page, url: string): Promise<void> {
  const opened = page.waitForResponse((r) => r.url().includes('/api/v1/stream'))
  await page.goto(url)
  assert.equal((await opened).status(), 200)
  // The hub adds a stream just after its headers are sent; give it a moment.
  await page.waitForTimeout(300)
}

test('new events appear on /logs/ and on the board without a reload', {
  timeout: BROWSER_TEST_TIMEOUT_MS,
  skip: browserSkip(),
}, async (t) => {
  const [server, browser] = await Promise.all([startShiplog(t), launchBrowser(t)])
  const base = server.url
  const { page, watch } = await openPage(browser, { viewport: { width: 1280, height: 900 } })
  await setUpFirstAdmin(page, base, {
    team: 'Live Inc',
    email: 'ada@live.example',
    password: 'correct horse battery',
  })
  const key = await createKeyInSettings(page, 'ci')
  const send = (service: string, environment: string, version: string, status: string) =>
    recordEvent(base, key, 'deploy', { service, environment, version, status, deployer: 'ada' })
  await send('api', 'prod', '1.0.0', 'Deployed')
  await send('web', 'prod', '3.0.0', 'Deployed')

  // The unfiltered first page: the row is added on top.
  await gotoLive(page, `${base}/logs/`)
  await mark(page)

  await send(HOSTILE, 'prod', '2.0.0', 'Deploying')
  await page.locator('main table tbody tr.live-new').first().waitFor()
  const rows = await readLogRows(page)
  assert.equal(rows.length, 3)
  assert.equal(rows[0]?.service, HOSTILE, 'shown as text, not markup')
  assert.equal(rows[0]?.status, 'Deploying')
  assert.equal(rows[0]?.details, 'by ada')
  assert.equal(rows[1]?.service, 'web')
  await notReloaded(page)
  await saveScreenshot(page, 'live-logs-1280')

  // A filtered page: a bar says how many arrived; following it shows them.
  await gotoLive(page, `${base}/logs/?service=api`)
  await mark(page)

  await send('api', 'prod', '1.1.0', 'Deploying')
  const bar = page.locator('.live-bar')
  await bar.getByText('1 new event.').waitFor()
  assert.equal((await readLogRows(page)).length, 1, 'rows are not added under a filter')
  await notReloaded(page)
  await bar.getByRole('link', { name: 'Show' }).click()
  await page.waitForLoadState()
  assert.equal((await readLogRows(page)).length, 2)

  // The board: the cell of the service and environment changes in place.
  await gotoLive(page, `${base}/services/`)
  await mark(page)

  const cell = page.locator('table.board tbody tr[data-service="web"] td[data-environment="prod"]')
  await send('web', 'prod', '3.1.0', 'Deploying')
  await cell.locator('.alert.in_progress').getByText('3.1.0').waitFor()
  assert.match((await cell.textContent()) ?? '', /3\.0\.0[\s\S]*In progress[\s\S]*3\.1\.0/)
  await send('web', 'prod', '3.1.0', 'Deployed')
  await cell.locator('.running .version', { hasText: '3.1.0' }).waitFor()
  assert.equal(await cell.locator('.alert').count(), 0)
  await notReloaded(page)
  await saveScreenshot(page, 'live-board-1280')

  // A service the board does not show yet: a bar offers the reload.
  await send('brand-new', 'prod', '0.1.0', 'Deployed')
  await page.locator('.live-bar').getByText('The board has changed.').waitFor()

  // At 390 px the added row is a card like the others, and the board cell updates too.
  await page.setViewportSize({ width: 390, height: 844 })
  await gotoLive(page, `${base}/logs/`)

  await send('api', 'prod', '1.2.0', 'Failed')
  await page.locator('main table tbody tr.live-new').first().waitFor()
  assert.equal((await readLogRows(page))[0]?.version, '1.2.0')
  await saveScreenshot(page, 'live-logs-390')
  await gotoLive(page, `${base}/services/`)

  await send('api', 'prod', '1.3.0', 'Deploying')
  await page
    .locator('table.board tbody tr[data-service="api"] td[data-environment="prod"] .alert')
    .getByText('1.3.0')
    .waitFor()
  await saveScreenshot(page, 'live-board-390')
  assert.deepEqual(watch.errors, [])
})
