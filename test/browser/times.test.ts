// Proves times are shown in the viewer's time zone, with the UTC time kept in the hover title (and shown when scripts are off).
import assert from 'node:assert/strict'
import { test } from 'node:test'
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
