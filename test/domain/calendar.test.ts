// Board environment order and days in the viewer's time zone, across clock changes.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { orderEnvironments } from '../../src/domain/board/environments.js'
import { isTimeZone, localDays, startOfLocalDate } from '../../src/domain/deployments/calendar.js'
import { localDate } from '../../src/domain/time-zones.js'

test('environments: placed ones first, then the built-in order without letter case, then first seen', () => {
  const seen = [
    { name: 'Prod', firstSeenId: 1 },
    { name: 'canary', firstSeenId: 2 },
    { name: 'staging', firstSeenId: 3 },
    { name: 'DEV', firstSeenId: 4 },
    { name: 'eu-west', firstSeenId: 5 },
    { name: 'canary', firstSeenId: 9 },
  ]
  assert.deepEqual(orderEnvironments(seen, []), ['DEV', 'staging', 'Prod', 'canary', 'eu-west'])
  const settings = [
    { name: 'eu-west', position: 0, hidden: false },
    { name: 'Prod', position: 1, hidden: false },
    { name: 'canary', position: 2, hidden: true },
  ]
  assert.deepEqual(orderEnvironments(seen, settings), ['eu-west', 'Prod', 'DEV', 'staging'])
  assert.deepEqual(orderEnvironments(seen, settings, { includeHidden: true }), [
    'eu-west',
    'Prod',
    'canary',
    'DEV',
    'staging',
  ])
})

test('time zones: known IANA names only', () => {
  assert.ok(isTimeZone('Europe/Berlin'))
  assert.ok(isTimeZone('UTC'))
  for (const bad of ['', 'Mars/Olympus', 'Europe/Berlin\u0000', 'x'.repeat(100), '../etc/passwd'])
    assert.ok(!isTimeZone(bad), bad)
})

test('Berlin in late March: the day the clocks go forward has 23 hours, and events fall on the right local day', () => {
  const zone = 'Europe/Berlin'
  // 2026-03-29: 02:00 CET becomes 03:00 CEST.
  const days = localDays(Date.UTC(2026, 2, 27, 23, 0), Date.UTC(2026, 2, 30, 22, 0), zone)
  assert.deepEqual(
    days.map((d) => [d.date, new Date(d.start).toISOString(), (d.end - d.start) / 3_600_000]),
    [
      ['2026-03-28', '2026-03-27T23:00:00.000Z', 24],
      ['2026-03-29', '2026-03-28T23:00:00.000Z', 23],
      ['2026-03-30', '2026-03-29T22:00:00.000Z', 24],
    ],
  )
  // 23:30 UTC on the 29th is 01:30 on the 30th in Berlin (summer time), but 00:30 on the 29th→30th in winter.
  assert.equal(localDate(Date.UTC(2026, 2, 29, 22, 30), zone), '2026-03-30')
  assert.equal(localDate(Date.UTC(2026, 2, 28, 22, 30), zone), '2026-03-28')
  // October: 03:00 CEST becomes 02:00 CET, a 25-hour day.
  const autumn = localDays(Date.UTC(2026, 9, 24, 22, 0), Date.UTC(2026, 9, 25, 22, 30), zone)
  assert.deepEqual(
    autumn.map((d) => [d.date, (d.end - d.start) / 3_600_000]),
    [['2026-10-25', 25]],
  )
})

test('a zone whose clocks skip midnight starts that date at the first instant it exists', () => {
  // America/Santiago moves from -04 to -03 at 24:00 on 2026-09-05: 2026-09-06 begins at 01:00 local.
  const start = startOfLocalDate('2026-09-06', 'America/Santiago')
  assert.equal(localDate(start, 'America/Santiago'), '2026-09-06')
  assert.equal(localDate(start - 1, 'America/Santiago'), '2026-09-05')
  assert.equal(new Date(start).toISOString(), '2026-09-06T04:00:00.000Z')
})
