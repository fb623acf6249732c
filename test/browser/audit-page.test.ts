// Settings → Audit log in Chromium on a 390 px phone: the admin finds it from Settings, filters by
// action, and downloads the filtered log; the page does not scroll sideways. (A 1280 px look too.)
import assert from 'node:assert/strict'
import { test } from 'node:test'
import {
  BROWSER_TEST_TIMEOUT_MS,
  browserSkip,
  createKeyInSettings,
  downloadVia,
  launchBrowser,
  openPage,
  parseCsv,
  pathOf,
  saveScreenshot,
  setUpFirstAdmin,
  startShiplog,
} from '../support/browser.js'

const PHONE = 390

test('an admin filters the audit log and downloads it on a 390 px phone', {
  timeout: BROWSER_TEST_TIMEOUT_MS,
  skip: browserSkip(),
}, async (t) => {
  const [server, browser] = await Promise.all([startShiplog(t), launchBrowser(t)])
  const base = server.url
  const { page, watch } = await openPage(browser, { viewport: { width: PHONE, height: 844 }, isMobile: true })
  await setUpFirstAdmin(page, base, {
    team: 'Acme',
    email: 'ada@acme.example',
    password: 'correct horse battery',
  })
  const key = await createKeyInSettings(page, 'github-actions')

  await page.getByRole('link', { name: 'Audit log', exact: true }).click()
  await page.waitForURL(`${base}/settings/audit/`)
  const rows = page.locator('table.audit-table tbody tr')
  assert.equal(await rows.count(), 2, 'the set-up and the new key')
  const width = (await page.evaluate('document.documentElement.scrollWidth')) as number
  assert.ok(width <= PHONE, `the page does not scroll sideways (scrollWidth ${width})`)
  await saveScreenshot(page, 'audit-390')

  // The filter box starts folded on a phone; open it, choose the action, filter.
  const filters = page.locator('details.filter-box')
  if (!(await filters.evaluate((d) => d.hasAttribute('open')))) {
    await page.locator('summary.filter-summary').click()
  }
  await page.getByLabel('Action').selectOption('key.created')
  await page.getByRole('button', { name: 'Filter' }).click()
  await page.waitForURL(/action=key\.created/)
  assert.equal(await rows.count(), 1)
  assert.match(await rows.first().innerText(), /key\.created[\s\S]*github-actions \(shl_/)

  const file = await downloadVia(page, 'Download CSV')
  assert.match(file.filename, /^shiplog-audit-\d{8}T\d{6}Z\.csv$/)
  const csv = parseCsv(file.text)
  assert.equal(csv.length, 2, 'the header and the one filtered entry')
  assert.equal(csv[1]?.[5], 'key.created')
  assert.ok(!file.text.includes(key), 'the key itself is in no entry')
  assert.match(pathOf(page), /^\/settings\/audit\/\?/)

  // The same page wide, for a person to look at.
  await page.setViewportSize({ width: 1280, height: 900 })
  await page.goto(`${base}/settings/audit/`)
  await saveScreenshot(page, 'audit-1280')
  assert.deepEqual(watch.errors, [])
})
