// Proves times are shown in the viewer's time zone, with the UTC time kept in the hover title (and shown when scripts are off).
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { parseDatabaseUrl } from '../../src/config.js'
import { openDatabase } from '../../src/db/connect.js'
import { freshDatabaseUrl } from '../helper.js'
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
  submitLogin,
} from '../support/browser.js'
import { startServer } from '../support/processes.js'

const ADMIN = { team: 'Time Team', email: 'tz@example.com', password: 'correct horse battery' }

/** `2026-11-21 22:40:00 UTC`, as the page writes the UTC time. */
function utcText(iso: string): string {
  return `${iso.slice(0, 19).replace('T', ' ')} UTC`
}

/** HH:MM:SS of this instant at a fixed offset from UTC (Asia/Tokyo has no daylight saving). */
function clockAt(iso: string, offsetHours: number): string {
  return new Date(Date.parse(iso) + offsetHours * 3_600_000).toISOString().slice(11, 19)
}

test("a <time> shows the viewer's local time and keeps UTC in its title", {
  timeout: BROWSER_TEST_TIMEOUT_MS,
  skip: browserSkip(),
}, async (t) => {
  const [server, browser] = await Promise.all([startShiplog(t), launchBrowser(t)])
  const base = server.url

  const tokyo = await openPage(browser, { timezoneId: 'Asia/Tokyo', locale: 'en-GB' })
  await setUpFirstAdmin(tokyo.page, base, ADMIN)
  const key = await createKeyInSettings(tokyo.page, 'ci')
  const event = await recordEvent(base, key, 'deploy', {
    service: 'clock',
    environment: 'Prod',
    version: '1',
    status: 'Deployed',
  })

  await tokyo.page.goto(`${base}/logs/`)
  const [row] = await readLogRows(tokyo.page)
  assert.ok(row, 'the event is listed')
  assert.equal(row.datetime, event.received_at)
  assert.equal(row.title, utcText(event.received_at), 'the title holds the UTC time')
  assert.notEqual(row.time, utcText(event.received_at), 'the text is not the UTC text')
  assert.ok(!row.time.includes('UTC'))
  assert.ok(
    row.time.includes(clockAt(event.received_at, 9)),
    `"${row.time}" should show the Tokyo time ${clockAt(event.received_at, 9)}`,
  )
  assert.ok(!row.time.includes(clockAt(event.received_at, 0)), 'and not the UTC clock time')
  // The same instant formatted by this browser for Tokyo, as a person there would read it.
  const expected = await tokyo.page.evaluate(
    `new Intl.DateTimeFormat(undefined, { timeZone: 'Asia/Tokyo', year: 'numeric', month: 'short',
        day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit' })
        .format(new Date(${JSON.stringify(event.received_at)}))`,
  )
  assert.equal(row.time, expected)
  // Hovering shows the UTC time: the title is on the element under the pointer.
  const time = tokyo.page.locator('main table time').first()
  await time.hover()
  assert.equal(await time.getAttribute('title'), utcText(event.received_at))
  assert.deepEqual(tokyo.watch.errors, [])

  // A viewer elsewhere sees the same instant in their own zone.
  const newYork = await openPage(browser, { timezoneId: 'America/New_York', locale: 'en-GB' })
  await submitLogin(newYork.page, base, ADMIN.email, ADMIN.password)
  await newYork.page.waitForURL(`${base}/logs/`)
  const [nyRow] = await readLogRows(newYork.page)
  assert.ok(nyRow)
  assert.notEqual(nyRow.time, row.time, 'New York and Tokyo read different local times')
  assert.equal(nyRow.title, utcText(event.received_at))
  const nyOffsets = [-5, -4].map((h) => clockAt(event.received_at, h))
  assert.ok(
    nyOffsets.some((clock) => nyRow.time.includes(clock)),
    `"${nyRow.time}" should show a New York time (${nyOffsets.join(' or ')})`,
  )

  // Without scripts the page still works and shows the UTC time as text.
  const plain = await openPage(browser, { timezoneId: 'Asia/Tokyo', javaScriptEnabled: false })
  await submitLogin(plain.page, base, ADMIN.email, ADMIN.password)
  await plain.page.waitForURL(`${base}/logs/`)
  const [plainRow] = await readLogRows(plain.page)
  assert.equal(plainRow?.time, utcText(event.received_at))
})

/** Where the screenshots go when SHIPLOG_SCREENSHOTS names a directory (to look at them), else nowhere. */
async function screenshot(page: import('playwright-core').Page, name: string): Promise<void> {
  const dir = process.env.SHIPLOG_SCREENSHOTS
  if (dir) await page.screenshot({ path: `${dir}/${name}.png`, fullPage: true })
}

test("/logs/ speaks one zone, the viewer's: rows, From/To and the filter agree across the late-March change (Europe/Berlin)", {
  timeout: BROWSER_TEST_TIMEOUT_MS,
  skip: browserSkip(),
}, async (t) => {
  const databaseUrl = await freshDatabaseUrl(t)
  const [server, browser] = await Promise.all([startServer(t, { databaseUrl }), launchBrowser(t)])
  const base = server.url
  const berlin = await openPage(browser, {
    timezoneId: 'Europe/Berlin',
    locale: 'en-GB',
    viewport: { width: 1280, height: 900 },
  })
  await setUpFirstAdmin(berlin.page, base, { ...ADMIN, email: 'berlin@example.com' })
  const key = await createKeyInSettings(berlin.page, 'ci')
  await recordEvent(base, key, 'deploy', {
    service: 'clock',
    environment: 'Prod',
    version: 'now',
    status: 'Deployed',
  })
  // The events of the night of 29 March 2026 are placed by the test, at known instants: 02:00 CET
  // (01:00 UTC) became 03:00 CEST.
  const database = openDatabase(parseDatabaseUrl(databaseUrl))
  t.after(() => database.close())
  const account = await database.db.selectFrom('accounts').select('id').executeTakeFirstOrThrow()
  const night = [
    ['before', '2026-03-29T00:30:00.000Z'],
    ['edge', '2026-03-29T00:59:59.000Z'],
    ['switch', '2026-03-29T01:00:00.000Z'],
    ['after', '2026-03-29T01:30:00.000Z'],
  ] as const
  for (const [version, iso] of night) {
    await database.db
      .insertInto('events')
      .values({
        account_id: account.id,
        service: 'clock',
        environment: 'Prod',
        version,
        status: 'Deployed',
        url: null,
        commit_sha: null,
        description: null,
        deployer: null,
        source: 'deploy',
        api_key_id: null,
        api_key_name: 'ci',
        received_at: Date.parse(iso),
        occurred_at: Date.parse(iso),
      })
      .execute()
  }

  const { page } = berlin
  await page.goto(`${base}/logs/`)
  // The labels name the zone the fields are read in.
  assert.equal((await page.locator('label[for="f-from"]').textContent())?.trim(), 'From (Europe/Berlin)')
  assert.equal((await page.locator('label[for="f-to"]').textContent())?.trim(), 'To (Europe/Berlin)')
  // 03:00 on that night is the first instant of summer time: 01:00 UTC.
  await page.locator('#f-from').fill('2026-03-29T03:00:00')
  await page.locator('#f-to').fill('2026-03-29T03:30:00')
  await page.getByRole('button', { name: 'Filter' }).click()
  await page.waitForURL(/from=/)
  const rows = await readLogRows(page)
  assert.deepEqual(
    rows.map((r) => r.version),
    ['after', 'switch'],
    'From 03:00 Berlin time is 01:00 UTC, so 00:59:59 UTC is left out',
  )
  const local = (iso: string) =>
    page.evaluate(
      `new Intl.DateTimeFormat(undefined, { year: 'numeric', month: 'short', day: '2-digit', hour: '2-digit',
        minute: '2-digit', second: '2-digit' }).format(new Date(${JSON.stringify(iso)}))`,
    )
  assert.equal(rows[0]?.time, await local('2026-03-29T01:30:00.000Z'))
  assert.ok(rows[0]?.time.includes('03:30:00'), `01:30 UTC is 03:30 in Berlin: ${rows[0]?.time}`)
  assert.ok(rows[1]?.time.includes('03:00:00'), `01:00 UTC is 03:00 in Berlin: ${rows[1]?.time}`)
  assert.equal(rows[0]?.title, '2026-03-29 01:30:00 UTC', 'UTC on hover')
  // The fields still say what was typed, in the same zone as the rows.
  // (Chromium writes a whole minute without its seconds.)
  assert.equal(await page.locator('#f-from').inputValue(), '2026-03-29T03:00')
  await screenshot(page, 'logs-1280-berlin')
  // At 1280 px the filter fields sit in rows whose labels and fields line up (issue 10, point 23).
  const boxes =
    (await page.evaluate(`[...document.querySelectorAll('form[role=search] .field')].map((field) => {
      const label = field.querySelector('label').getBoundingClientRect()
      const control = field.querySelector('input, select').getBoundingClientRect()
      return { label: label.top, control: control.top, height: control.height }
    })`)) as { label: number; control: number; height: number }[]
  assert.equal(boxes.length, 6)
  const rowsOfFields = new Map<number, typeof boxes>()
  for (const box of boxes) {
    const row = Math.round(box.control / 40)
    rowsOfFields.set(row, [...(rowsOfFields.get(row) ?? []), box])
  }
  assert.ok(rowsOfFields.size <= 2, 'six fields in at most two rows')
  for (const row of rowsOfFields.values()) {
    const spread = (values: number[]) => Math.max(...values) - Math.min(...values)
    assert.ok(spread(row.map((b) => b.label)) <= 1, `labels line up: ${JSON.stringify(row)}`)
    assert.ok(spread(row.map((b) => b.control)) <= 1, `fields line up: ${JSON.stringify(row)}`)
    assert.ok(spread(row.map((b) => b.height)) <= 1, `fields are one height: ${JSON.stringify(row)}`)
  }

  // Following a link that carries UTC instants (the download and pager links do) shows them in
  // Berlin time in the fields too: one zone on the page.
  await page.goto(`${base}/logs/?from=2026-03-29T00%3A30%3A00.000Z&to=2026-03-29T01%3A00%3A00.000Z`)
  assert.equal(await page.locator('#f-from').inputValue(), '2026-03-29T01:30', 'winter time, +01:00')
  assert.equal(await page.locator('#f-to').inputValue(), '2026-03-29T03:00', 'summer time, +02:00')
  assert.deepEqual(
    (await readLogRows(page)).map((r) => r.version),
    ['switch', 'edge', 'before'],
  )
  // Submitting those fields unchanged keeps the same events.
  await page.getByRole('button', { name: 'Filter' }).click()
  await page.waitForURL(/tz=Europe%2FBerlin/)
  assert.deepEqual(
    (await readLogRows(page)).map((r) => r.version),
    ['switch', 'edge', 'before'],
  )
  assert.deepEqual(berlin.watch.errors, [])

  // Without scripts, everything on the page is UTC and says so.
  const plain = await openPage(browser, { timezoneId: 'Europe/Berlin', javaScriptEnabled: false })
  await submitLogin(plain.page, base, 'berlin@example.com', ADMIN.password)
  await plain.page.waitForURL(`${base}/logs/`)
  assert.equal((await plain.page.locator('label[for="f-from"]').textContent())?.trim(), 'From (UTC)')
  assert.match((await plain.page.locator('main .toolbar').textContent()) ?? '', /Times are UTC\./)
  await plain.page.locator('#f-from').fill('2026-03-29T01:00:00')
  await plain.page.locator('#f-to').fill('2026-03-29T01:30:00')
  await plain.page.getByRole('button', { name: 'Filter' }).click()
  await plain.page.waitForURL(/from=/)
  assert.deepEqual(
    (await readLogRows(plain.page)).map((r) => r.version),
    ['after', 'switch'],
  )
})
