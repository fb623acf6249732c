// /insights/ in real Chromium at 1280 and 390 px: the figures, both charts drawn (an SVG with
// bars and points, links to the days behind them), the viewer's zone picked up by the script, no
// sideways scrolling on a phone, and a bar followed to its deployments. Screenshots go to
// test-results/screenshots (see saveScreenshot).
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { Page } from 'playwright-core'
import { parseDatabaseUrl } from '../../src/config.js'
import { openDatabase } from '../../src/db/connect.js'
import { freshDatabaseUrl } from '../helper.js'
import {
  BROWSER_TEST_TIMEOUT_MS,
  browserSkip,
  launchBrowser,
  openPage,
  pathOf,
  saveScreenshot,
  setUpFirstAdmin,
} from '../support/browser.js'
import { startServer } from '../support/processes.js'
import { insertEvents } from '../support/ui.js'

const ADMIN = { team: 'Chart Team', email: 'charts@example.com', password: 'correct horse battery' }
const DAY = 86_400_000

/** How far the page reaches past the viewport's width (0: nothing to scroll sideways). */
async function sidewaysOverflow(page: Page): Promise<number> {
  // A string, evaluated in the page (the tests are compiled without the DOM's types).
  return page.evaluate<number>('document.documentElement.scrollWidth - window.innerWidth')
}

test('/insights/ draws its figures and charts at 1280 and 390 px, in the viewer’s zone', {
  timeout: BROWSER_TEST_TIMEOUT_MS,
  skip: browserSkip(),
}, async (t) => {
  const databaseUrl = await freshDatabaseUrl(t)
  const [server, browser] = await Promise.all([startServer(t, { databaseUrl }), launchBrowser(t)])
  const base = server.url
  const wide = await openPage(browser, {
    timezoneId: 'Europe/Berlin',
    locale: 'en-GB',
    viewport: { width: 1280, height: 900 },
  })
  await setUpFirstAdmin(wide.page, base, ADMIN)

  // Three weeks of history, placed at known instants: a few deployments a day in prod (some fail,
  // one is rolled back), each with a Deploying first, and a staging run before each version.
  const database = openDatabase(parseDatabaseUrl(databaseUrl))
  t.after(() => database.close())
  const account = await database.db.selectFrom('accounts').select('id').executeTakeFirstOrThrow()
  const start = Date.now() - 20 * DAY
  const seeds: Parameters<typeof insertEvents>[2] = []
  for (let day = 0; day < 20; day++) {
    for (let n = 0; n < 1 + (day % 4); n++) {
      const service = n % 2 === 0 ? 'payments-api' : 'web <shop>/ü'
      const version = `1.${day}.${n}`
      const t0 = start + day * DAY + n * 3 * 3_600_000
      seeds.push({ service, environment: 'staging', version, status: 'Deploying', received_at: t0 })
      seeds.push({ service, environment: 'staging', version, status: 'Deployed', received_at: t0 + 120_000 })
      seeds.push({ service, environment: 'prod', version, status: 'Deploying', received_at: t0 + 3_600_000 })
      const fails = (day + n) % 5 === 0
      seeds.push({
        service,
        environment: 'prod',
        version,
        status: fails ? 'Failed' : 'Deployed',
        received_at: t0 + 3_600_000 + (3 + ((day * 7 + n * 5) % 25)) * 60_000,
      })
    }
  }
  // A rollback: payments-api goes back to 1.1.0 (it succeeded on day 1).
  seeds.push({
    service: 'payments-api',
    environment: 'prod',
    version: '1.1.0',
    status: 'Deployed',
    received_at: start + 19 * DAY + 12 * 3_600_000,
  })
  await insertEvents(database, account.id, seeds)

  const { page, watch } = wide
  await page.goto(`${base}/insights/`)
  // The script sends the viewer's zone once; the page then counts days in it and says so.
  await page.waitForURL(/tz=Europe%2FBerlin/)
  assert.match((await page.locator('#zone-note').textContent()) ?? '', /Europe\/Berlin/)
  assert.equal(await page.locator('#i-environment').inputValue(), 'prod', 'the last environment by default')
  const frequency = (await page.locator('#figure-frequency').textContent()) ?? ''
  // The seeded history covers part of the 30 days: the page divides by the days with data and
  // shows the whole window's figure (SPEC §6.2's) under it.
  assert.match(
    frequency.replace(/\s+/g, ' '),
    /\d+ succeeded ÷ \d+ days with data = \d+\.\d\d \/ day Over the whole window: \d+ ÷ 30 days = \d+\.\d\d \/ day/,
  )
  const rate = (await page.locator('#figure-failure-rate').textContent()) ?? ''
  assert.match(
    rate.replace(/\s+/g, ' '),
    /\(\d+ failed \+ 1 rolled back\) ÷ \(\d+ succeeded \+ \d+ failed\) = \d+ %/,
  )
  // The charts: SVG in the page, bars and points drawn with a size, linked.
  const bars = page.locator('.chart-wide svg[data-chart="outcomes-wide"] rect.bar')
  assert.ok((await bars.count()) >= 20, `bars drawn: ${await bars.count()}`)
  const firstBar = await bars.first().boundingBox()
  assert.ok(firstBar && firstBar.height > 0 && firstBar.width > 2, JSON.stringify(firstBar))
  assert.ok((await page.locator('.chart-wide svg[data-chart="duration-wide"] circle.point').count()) >= 15)
  assert.equal(await page.locator('.chart-narrow svg').first().isVisible(), false, 'one chart per size')
  assert.equal(await sidewaysOverflow(page), 0)
  await saveScreenshot(page, 'insights-1280')

  // A bar leads to the deployments of its day.
  await page.locator('.chart-wide svg[data-chart="outcomes-wide"] a').last().click()
  await page.waitForURL(/\/insights\/deployments\?/)
  assert.ok((await page.locator('table.deploy-list tbody tr').count()) >= 1)
  await saveScreenshot(page, 'insights-list-1280')
  assert.deepEqual(watch.errors, [])

  // A phone: the narrow charts, filters folded, nothing to scroll sideways.
  const phone = await openPage(browser, {
    timezoneId: 'Europe/Berlin',
    locale: 'en-GB',
    viewport: { width: 390, height: 844 },
    isMobile: true,
    hasTouch: true,
    deviceScaleFactor: 2,
  })
  await phone.context.addCookies(await wide.context.cookies())
  await phone.page.goto(`${base}/insights/`)
  await phone.page.waitForURL(/tz=Europe%2FBerlin/)
  assert.equal(await phone.page.locator('details.filter-box').getAttribute('open'), null, 'filters folded')
  const narrow = phone.page.locator('.chart-narrow svg[data-chart="outcomes-narrow"]')
  assert.ok(await narrow.isVisible(), 'the narrow bar chart is shown')
  assert.ok((await narrow.locator('rect.bar').count()) >= 20)
  const box = await narrow.boundingBox()
  assert.ok(box && box.x >= 0 && box.x + box.width <= 390, JSON.stringify(box))
  assert.ok(await phone.page.locator('#figure-frequency').isVisible())
  assert.equal(await sidewaysOverflow(phone.page), 0, 'no sideways scrolling at 390 px')
  await saveScreenshot(phone.page, 'insights-390')
  // The table of the same numbers, opened, scrolls inside its own box if at all.
  await phone.page.locator('details.day-table > summary').click()
  assert.ok(await phone.page.locator('table.days').isVisible())
  assert.equal(await sidewaysOverflow(phone.page), 0, 'the open table does not widen the page')
  const tableOverflow = await phone.page.evaluate<number>(
    "(() => { const w = document.querySelector('details.day-table .table-wrap'); return w.scrollWidth - w.clientWidth })()",
  )
  assert.ok(tableOverflow <= 0, `the day table fits the phone without scrolling inside: ${tableOverflow}`)
  await saveScreenshot(phone.page, 'insights-390-table')
  await phone.page.locator('#figure-restore a').first().click()
  await phone.page.waitForURL(/kind=restore/)
  assert.equal(await sidewaysOverflow(phone.page), 0, 'the list has no sideways scrolling at 390 px')
  await saveScreenshot(phone.page, 'insights-list-390')
  assert.deepEqual(phone.watch.errors, [])

  // Without scripts: days in UTC (the page says so), and the filter form still works.
  const plain = await openPage(browser, {
    timezoneId: 'Europe/Berlin',
    javaScriptEnabled: false,
    viewport: { width: 1280, height: 900 },
  })
  await plain.context.addCookies(await wide.context.cookies())
  await plain.page.goto(`${base}/insights/`)
  assert.match((await plain.page.locator('#zone-note').textContent()) ?? '', /UTC/)
  await plain.page.getByLabel('Range').selectOption('7')
  await plain.page.getByLabel('Service').selectOption('payments-api')
  await plain.page.getByRole('button', { name: 'Show' }).click()
  await plain.page.waitForURL(/range=7/)
  assert.match(pathOf(plain.page), /service=payments-api/)
  const week = (await plain.page.locator('#figure-frequency').textContent()) ?? ''
  assert.match(week.replace(/\s+/g, ' '), /\d+ succeeded ÷ 7 days/)
  assert.ok((await plain.page.locator('svg[data-chart="outcomes-wide"] rect.bar').count()) > 0)
})
