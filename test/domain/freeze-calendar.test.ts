// Freeze windows and their cron: hand-computed openings across Berlin's and New York's clock
// changes, the errors people get, and the fast lookup checked against a minute-by-minute one.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import fc from 'fast-check'
import { type CronSchedule, describeCron, parseCron } from '../../src/domain/guardrails/cron.js'
import {
  activeOccurrence,
  nextOccurrence,
  type Occurrence,
  occurrencesBetween,
  parseWeeklyRange,
  type RecurringWindow,
  validateRecurring,
  windowsOverlap,
} from '../../src/domain/guardrails/freeze-calendar.js'
import { wallClock, zonedToInstant } from '../../src/domain/time-zones.js'

const at = (iso: string) => Date.parse(iso)
const span = (start: string, end: string): Occurrence => ({ start: at(start), end: at(end) })
const MS = 1

// Berlin 2026: clocks go 02:00 CET → 03:00 CEST on Sun 29 March (01:00Z), and 03:00 CEST → 02:00 CET
// on Sun 25 October (01:00Z). CET is UTC+1, CEST UTC+2.
const weekend: RecurringWindow = { cron: '0 16 * * 5', durationMinutes: 64 * 60, timeZone: 'Europe/Berlin' }

test('Fri 16:00 for 64 hours ends Mon 08:00 local on both sides of the March change', () => {
  const march = span('2026-03-27T15:00:00Z', '2026-03-30T06:00:00Z') // 16:00 CET → 08:00 CEST: 63 real hours
  assert.equal(activeOccurrence(weekend, at('2026-03-27T15:00:00Z') - MS), null)
  assert.deepEqual(activeOccurrence(weekend, at('2026-03-27T15:00:00Z')), march)
  assert.deepEqual(activeOccurrence(weekend, at('2026-03-29T01:30:00Z')), march)
  assert.deepEqual(activeOccurrence(weekend, at('2026-03-30T06:00:00Z') - MS), march)
  assert.equal(activeOccurrence(weekend, at('2026-03-30T06:00:00Z')), null)
  // The week before, all in winter time: 15:00Z to 07:00Z.
  assert.deepEqual(
    activeOccurrence(weekend, at('2026-03-22T12:00:00Z')),
    span('2026-03-20T15:00:00Z', '2026-03-23T07:00:00Z'),
  )
})

test('Fri 16:00 for 64 hours ends Mon 08:00 local on both sides of the October change', () => {
  const october = span('2026-10-23T14:00:00Z', '2026-10-26T07:00:00Z') // 16:00 CEST → 08:00 CET: 65 real hours
  assert.equal(activeOccurrence(weekend, at('2026-10-23T14:00:00Z') - MS), null)
  assert.deepEqual(activeOccurrence(weekend, at('2026-10-23T14:00:00Z')), october)
  // 07:30 CET on Monday: 64 real hours would have ended at 06:00Z, the wall clock says 08:00.
  assert.deepEqual(activeOccurrence(weekend, at('2026-10-26T06:30:00Z')), october)
  assert.deepEqual(activeOccurrence(weekend, at('2026-10-26T07:00:00Z') - MS), october)
  assert.equal(activeOccurrence(weekend, at('2026-10-26T07:00:00Z')), null)
})

test('next occurrence and the occurrences between two instants', () => {
  assert.deepEqual(
    nextOccurrence(weekend, at('2026-03-27T15:00:00Z') - MS),
    span('2026-03-27T15:00:00Z', '2026-03-30T06:00:00Z'),
  )
  assert.deepEqual(
    nextOccurrence(weekend, at('2026-03-27T15:00:00Z')),
    span('2026-04-03T14:00:00Z', '2026-04-06T06:00:00Z'),
  )
  const all = [
    span('2026-03-20T15:00:00Z', '2026-03-23T07:00:00Z'),
    span('2026-03-27T15:00:00Z', '2026-03-30T06:00:00Z'),
    span('2026-04-03T14:00:00Z', '2026-04-06T06:00:00Z'),
  ]
  // From inside the 20 March window (it overlaps), up to the start of 3 April's (it does).
  assert.deepEqual(
    occurrencesBetween(weekend, at('2026-03-23T06:00:00Z'), at('2026-04-03T14:00:00Z') + 1, 10),
    all,
  )
  assert.deepEqual(
    occurrencesBetween(weekend, at('2026-03-23T06:00:00Z'), at('2026-04-03T14:00:00Z'), 10),
    all.slice(0, 2),
  )
  assert.deepEqual(
    occurrencesBetween(weekend, at('2026-03-23T07:00:00Z'), at('2026-04-10T00:00:00Z'), 1),
    all.slice(1, 2),
  )
  assert.equal(
    nextOccurrence({ cron: '0 0 31 2 *', durationMinutes: 60, timeZone: 'UTC' }, at('2026-01-01T00:00:00Z')),
    null,
  )
})

test('a daily 02:30 window on the day it does not exist and on the day it comes twice', () => {
  const nightly: RecurringWindow = { cron: '30 2 * * *', durationMinutes: 60, timeZone: 'Europe/Berlin' }
  assert.deepEqual(occurrencesBetween(nightly, at('2026-03-28T00:00:00Z'), at('2026-03-31T00:00:00Z'), 10), [
    span('2026-03-28T01:30:00Z', '2026-03-28T02:30:00Z'), // 02:30–03:30 CET
    span('2026-03-29T01:30:00Z', '2026-03-29T02:30:00Z'), // no 02:30: opens after the gap, 03:30–04:30 CEST
    span('2026-03-30T00:30:00Z', '2026-03-30T01:30:00Z'), // 02:30–03:30 CEST
  ])
  assert.equal(activeOccurrence(nightly, at('2026-03-29T01:30:00Z') - MS), null)
  assert.deepEqual(
    activeOccurrence(nightly, at('2026-03-29T01:30:00Z')),
    span('2026-03-29T01:30:00Z', '2026-03-29T02:30:00Z'),
  )
  const twice = span('2026-10-25T00:30:00Z', '2026-10-25T02:30:00Z') // the first 02:30 (CEST) to 03:30 CET
  assert.deepEqual(occurrencesBetween(nightly, at('2026-10-24T00:00:00Z'), at('2026-10-27T00:00:00Z'), 10), [
    span('2026-10-24T00:30:00Z', '2026-10-24T01:30:00Z'),
    twice,
    span('2026-10-26T01:30:00Z', '2026-10-26T02:30:00Z'),
  ])
  assert.deepEqual(activeOccurrence(nightly, at('2026-10-25T01:30:00Z')), twice) // the second 02:30, CET
  assert.deepEqual(activeOccurrence(nightly, at('2026-10-25T02:30:00Z') - MS), twice)
  assert.equal(activeOccurrence(nightly, at('2026-10-25T02:30:00Z')), null)
  // 02:30 and 03:30 both name 01:30Z on 29 March: one opening, not two.
  const both: RecurringWindow = { cron: '30 2,3 * * *', durationMinutes: 30, timeZone: 'Europe/Berlin' }
  assert.deepEqual(occurrencesBetween(both, at('2026-03-29T00:00:00Z'), at('2026-03-29T12:00:00Z'), 10), [
    span('2026-03-29T01:30:00Z', '2026-03-29T02:00:00Z'),
  ])
})

test('New York: a Saturday-night window is 11 hours in March and 13 in November', () => {
  // 2026: 02:00 EST → 03:00 EDT on Sun 8 March (07:00Z); 02:00 EDT → 01:00 EST on Sun 1 November (06:00Z).
  const night: RecurringWindow = {
    cron: '0 22 * * sat',
    durationMinutes: 12 * 60,
    timeZone: 'America/New_York',
  }
  const march = span('2026-03-08T03:00:00Z', '2026-03-08T14:00:00Z') // Sat 22:00 EST → Sun 10:00 EDT
  assert.deepEqual(activeOccurrence(night, at('2026-03-08T13:59:59Z')), march)
  assert.equal(activeOccurrence(night, at('2026-03-08T14:00:00Z')), null)
  assert.deepEqual(
    nextOccurrence(night, at('2026-10-25T00:00:00Z')),
    span('2026-10-25T02:00:00Z', '2026-10-25T14:00:00Z'),
  )
  assert.deepEqual(
    nextOccurrence(night, at('2026-10-25T02:00:00Z')),
    span('2026-11-01T02:00:00Z', '2026-11-01T15:00:00Z'),
  )
})

test('overlapping windows: one-off against recurring, recurring against recurring', () => {
  const from = at('2026-03-01T00:00:00Z')
  const oneOff = { startsAt: at('2026-03-30T05:00:00Z'), endsAt: at('2026-03-30T07:00:00Z') }
  assert.deepEqual(windowsOverlap(weekend, oneOff, from, 60), {
    a: span('2026-03-27T15:00:00Z', '2026-03-30T06:00:00Z'),
    b: span('2026-03-30T05:00:00Z', '2026-03-30T07:00:00Z'),
  })
  // Exactly the gap between two weekends (Mon 08:00 CEST to Fri 16:00 CEST): touching is not overlapping.
  const between = { startsAt: at('2026-03-30T06:00:00Z'), endsAt: at('2026-04-03T14:00:00Z') }
  assert.equal(windowsOverlap(weekend, between, from, 60), null)
  const afterOneOff = { startsAt: at('2026-03-30T07:00:00Z'), endsAt: at('2026-03-30T09:00:00Z') }
  assert.equal(windowsOverlap(afterOneOff, oneOff, from, 60), null)
  assert.deepEqual(
    windowsOverlap(
      oneOff,
      { startsAt: at('2026-03-30T06:59:00Z'), endsAt: at('2026-03-31T00:00:00Z') },
      from,
      60,
    ),
    {
      a: span('2026-03-30T05:00:00Z', '2026-03-30T07:00:00Z'),
      b: span('2026-03-30T06:59:00Z', '2026-03-31T00:00:00Z'),
    },
  )
  const mondaySeven: RecurringWindow = { cron: '0 7 * * 1', durationMinutes: 60, timeZone: 'Europe/Berlin' }
  assert.deepEqual(windowsOverlap(weekend, mondaySeven, from, 400), {
    a: span('2026-02-27T15:00:00Z', '2026-03-02T07:00:00Z'),
    b: span('2026-03-02T06:00:00Z', '2026-03-02T07:00:00Z'),
  })
  // Monday 08:00–09:00 local starts as the weekend ends, in winter and in summer: never overlaps.
  const mondayEight: RecurringWindow = { cron: '0 8 * * 1', durationMinutes: 60, timeZone: 'Europe/Berlin' }
  assert.equal(windowsOverlap(weekend, mondayEight, from, 400), null)
  assert.equal(windowsOverlap(weekend, oneOff, at('2026-03-31T00:00:00Z'), 60), null) // before the horizon
})

test('validating a recurring window', () => {
  assert.deepEqual(validateRecurring(weekend), [])
  assert.deepEqual(validateRecurring({ ...weekend, timeZone: 'Mars/Olympus' }), [
    'timeZone: "Mars/Olympus" is not a known time zone (e.g. Europe/Berlin)',
  ])
  assert.deepEqual(validateRecurring({ ...weekend, durationMinutes: 0 }), [
    'durationMinutes: 0 is too short; a window lasts at least 1 minute',
  ])
  assert.deepEqual(validateRecurring({ ...weekend, durationMinutes: 10081 }), [
    'durationMinutes: 10081 is longer than 7 days (10080 minutes)',
  ])
  assert.deepEqual(validateRecurring({ ...weekend, durationMinutes: 10080 }), []) // ends as the next one opens
  assert.deepEqual(validateRecurring({ cron: '0 16 * * 5 *', durationMinutes: 1.5, timeZone: '' }), [
    'timeZone: "" is not a known time zone (e.g. Europe/Berlin)',
    'the expression has 6 fields; a cron expression has 5 (minute hour day-of-month month day-of-week)',
    'durationMinutes: 1.5 is not a whole number of minutes',
  ])
  assert.deepEqual(validateRecurring({ cron: '0 0 31 2 *', durationMinutes: 60, timeZone: 'UTC' }), [
    'cron: "0 0 31 2 *" never matches a date (such as 31 February)',
  ])
  assert.deepEqual(validateRecurring({ cron: '0 * * * *', durationMinutes: 61, timeZone: 'UTC' }), [
    'durationMinutes: a window of 61 minutes is still open when it opens again (2026-01-01 00:00 and 2026-01-01 01:00 UTC)',
  ])
  // 23.5 hours from 02:00 daily: fine on every day but the one 02:00 does not exist, when it opens at
  // 03:00 CEST (01:00Z) and runs to 02:30 CEST next day (00:30Z), past that day's 02:00 (00:00Z).
  assert.deepEqual(
    validateRecurring({ cron: '0 2 * * *', durationMinutes: 1410, timeZone: 'Europe/Berlin' }),
    [
      'durationMinutes: a window of 1410 minutes is still open when it opens again (2026-03-29 03:00 and 2026-03-30 02:00 Europe/Berlin)',
    ],
  )
  // Every minute for a minute never overlaps; for two it does. Both answer without listing 400 days of minutes.
  assert.deepEqual(
    validateRecurring({ cron: '* * * * *', durationMinutes: 1, timeZone: 'Europe/Berlin' }),
    [],
  )
  assert.equal(
    validateRecurring({ cron: '* * * * *', durationMinutes: 2, timeZone: 'Europe/Berlin' }).length,
    1,
  )
})

test('cron: each field out of range, names the field and its range', () => {
  const errors = (text: string) => {
    const parsed = parseCron(text)
    return parsed.ok ? [] : parsed.errors
  }
  assert.deepEqual(errors('61 * * * *'), ['minute: 61 is out of range 0–59'])
  assert.deepEqual(errors('* 24 * * *'), ['hour: 24 is out of range 0–23'])
  assert.deepEqual(errors('* * 0 * *'), ['day-of-month: 0 is out of range 1–31'])
  assert.deepEqual(errors('* * 32 * *'), ['day-of-month: 32 is out of range 1–31'])
  assert.deepEqual(errors('* * * 13 *'), ['month: 13 is out of range 1–12'])
  assert.deepEqual(errors('* * * * 8'), ['day-of-week: 8 is out of range 0–7'])
  assert.deepEqual(errors('60 24 * 0 *'), [
    'minute: 60 is out of range 0–59',
    'hour: 24 is out of range 0–23',
    'month: 0 is out of range 1–12',
  ])
  assert.deepEqual(errors('0 16 * *'), [
    'the expression has 4 fields; a cron expression has 5 (minute hour day-of-month month day-of-week)',
  ])
  assert.deepEqual(errors('  '), [
    'the expression is empty; a cron expression has 5 (minute hour day-of-month month day-of-week)',
  ])
  assert.deepEqual(errors('*/0 5-1 1,,2 foo funday'), [
    'minute: the step in "*/0" must be a whole number from 1 to 60',
    'hour: the range 5-1 runs backwards (0–23, low to high)',
    'day-of-month: "1,,2" has an empty item between commas',
    'month: "foo" is not a number in 1–12 or a month name jan–dec',
    'day-of-week: "funday" is not a number in 0–7 or a day name sun–sat',
  ])
})

test('cron: lists, ranges, steps, names, Sunday as 0 or 7, and the Vixie day rule', () => {
  const parsed = (text: string): CronSchedule => {
    const result = parseCron(text)
    assert.ok(result.ok, text)
    return result.value
  }
  assert.deepEqual(parsed('*/15 * * * *').minutes, [0, 15, 30, 45])
  assert.deepEqual(parsed('10-50/10 * * * *').minutes, [10, 20, 30, 40, 50])
  assert.deepEqual(parsed('1,5,3 1-3 * * *').timesOfDay, [61, 63, 65, 121, 123, 125, 181, 183, 185])
  assert.deepEqual(parsed('0 0 * JAN-mar,Dec *').months.slice(1), [
    true,
    true,
    true,
    false,
    false,
    false,
    false,
    false,
    false,
    false,
    false,
    true,
  ])
  assert.deepEqual(parsed('0 0 * * 7').daysOfWeek, parsed('0 0 * * sun').daysOfWeek)
  assert.deepEqual(parsed('0 0 * * 5-7').daysOfWeek, [true, false, false, false, false, true, true])
  assert.deepEqual(parsed('0 0 * * Mon-FRI').daysOfWeek, [false, true, true, true, true, true, false])
  // Both day fields restricted: the 13th OR any Friday. In January 2026 the 13th is a Tuesday.
  const either = { cron: '0 12 13 * 5', durationMinutes: 60, timeZone: 'UTC' }
  const starts = occurrencesBetween(either, at('2026-01-01T00:00:00Z'), at('2026-01-20T00:00:00Z'), 10).map(
    (o) => new Date(o.start).toISOString().slice(0, 10),
  )
  assert.deepEqual(starts, ['2026-01-02', '2026-01-09', '2026-01-13', '2026-01-16'])
  // A day field written with `*` does not restrict, so the other one alone decides (Vixie).
  const fridays = { cron: '0 12 * * 5', durationMinutes: 60, timeZone: 'UTC' }
  assert.equal(
    occurrencesBetween(fridays, at('2026-01-01T00:00:00Z'), at('2026-01-20T00:00:00Z'), 10).length,
    3,
  )
  assert.equal(describeCron(parsed('0 16 * * 5')), 'at 16:00 on Fri')
  assert.equal(describeCron(parsed('*/15 * * * *')), 'every 15 minutes')
  assert.equal(describeCron(parsed('0 18 * * 1-5')), 'at 18:00 on Mon, Tue, Wed, Thu and Fri')
  assert.deepEqual(parsed('@daily'), parsed('0 0 * * *'))
})

test('weekly ranges people write become a cron and a wall-clock duration', () => {
  const value = (text: string) => {
    const result = parseWeeklyRange(text)
    return result.ok ? result.value : result.errors
  }
  assert.deepEqual(value('Fri 16:00-Mon 08:00'), { cron: '0 16 * * 5', durationMinutes: 64 * 60 })
  assert.deepEqual(value('Sat 00:00 - Mon 00:00'), { cron: '0 0 * * 6', durationMinutes: 48 * 60 })
  assert.deepEqual(value('Mon-Fri 18:00-08:00'), { cron: '0 18 * * 1-5', durationMinutes: 14 * 60 })
  assert.deepEqual(value('daily 22:00-06:00'), { cron: '0 22 * * *', durationMinutes: 8 * 60 })
  assert.deepEqual(value('Friday 09:30-Friday 12:00'), { cron: '30 9 * * 5', durationMinutes: 150 })
  assert.deepEqual(value('Fri 18:00-Fri 16:00'), { cron: '0 18 * * 5', durationMinutes: 7 * 1440 - 120 })
  assert.deepEqual(value('fri-mon 10:00-11:00'), { cron: '0 10 * * 0-1,5-6', durationMinutes: 60 })
  assert.deepEqual(value('Fri 16:00-Fri 16:00'), ['"Fri 16:00-Fri 16:00" is empty: it ends when it starts'])
  assert.deepEqual(value('daily 08:00-08:00'), ['"daily 08:00-08:00" is empty: it ends when it starts'])
  assert.deepEqual(value('Fryday 10:00-12:00'), [
    '"fryday" is not a day or a range of days (Mon–Sun, Monday–Sunday, or daily)',
  ])
  assert.deepEqual(value('daily 24:00-06:00'), ['"24:00" is not a time of day (00:00–23:59)'])
  assert.deepEqual(value('whenever'), [
    '"whenever" is not a weekly range; write it as e.g. "Fri 16:00-Mon 08:00", "Mon-Fri 18:00-08:00" or "daily 22:00-06:00"',
  ])
})

// --- The plain definition: every minute of the local wall clock, converted one by one.

function matchesWall(schedule: CronSchedule, wall: number): boolean {
  const date = new Date(wall)
  const dayOfMonth = schedule.daysOfMonth[date.getUTCDate()] === true
  const dayOfWeek = schedule.daysOfWeek[date.getUTCDay()] === true
  const day =
    schedule.dayOfMonthStar || schedule.dayOfWeekStar ? dayOfMonth && dayOfWeek : dayOfMonth || dayOfWeek
  return (
    day &&
    schedule.months[date.getUTCMonth() + 1] === true &&
    schedule.hours.includes(date.getUTCHours()) &&
    schedule.minutes.includes(date.getUTCMinutes())
  )
}

function plainOccurrences(spec: RecurringWindow, fromWall: number, toWall: number): Occurrence[] {
  const parsed = parseCron(spec.cron)
  assert.ok(parsed.ok)
  const found: Occurrence[] = []
  for (let wall = Math.ceil(fromWall / 60_000) * 60_000; wall <= toWall; wall += 60_000) {
    if (!matchesWall(parsed.value, wall)) continue
    const start = zonedToInstant(spec.timeZone, wall)
    found.push({
      start,
      end: zonedToInstant(spec.timeZone, wallClock(spec.timeZone, start) + spec.durationMinutes * 60_000),
    })
  }
  return found
}

function plainActive(spec: RecurringWindow, instant: number): Occurrence | null {
  const wall = wallClock(spec.timeZone, instant)
  const around = plainOccurrences(
    spec,
    wall - spec.durationMinutes * 60_000 - 2 * 86_400_000,
    wall + 86_400_000,
  )
  let best: Occurrence | null = null
  for (const o of around)
    if (o.start <= instant && instant < o.end)
      if (!best || o.end > best.end || (o.end === best.end && o.start > best.start)) best = o
  return best
}

const changes = [
  '2026-03-29T01:00:00Z', // Europe/Berlin forward
  '2026-10-25T01:00:00Z', // Europe/Berlin back
  '2026-03-08T07:00:00Z', // America/New_York forward
  '2026-11-01T06:00:00Z', // America/New_York back
  '2026-04-04T15:00:00Z', // Australia/Lord_Howe back half an hour
  '2026-06-15T12:00:00Z', // no change anywhere near
].map(at)

const windowSpec = fc.record({
  cron: fc
    .tuple(
      fc.constantFrom('0', '30', '*/15', '0,45', '59', '*/7'),
      fc.constantFrom('*', '2', '1-3', '16', '22', '*/5', '0,2,3'),
      fc.constantFrom('*', '*', '13', '1-7', '*/2', '25,29'),
      fc.constantFrom('*', '*', 'mar,oct,nov', '3-4'),
      fc.constantFrom('*', '*', '5', 'sat,sun', '0-3', '7'),
    )
    .map((fields) => fields.join(' ')),
  durationMinutes: fc.oneof(fc.integer({ min: 1, max: 120 }), fc.integer({ min: 1, max: 4000 })),
  timeZone: fc.constantFrom(
    'Europe/Berlin',
    'America/New_York',
    'Australia/Lord_Howe',
    'Asia/Kolkata',
    'UTC',
  ),
})

test('property: activeOccurrence, nextOccurrence and occurrencesBetween equal the minute-by-minute definition', () => {
  fc.assert(
    fc.property(
      windowSpec,
      fc.constantFrom(...changes),
      fc.integer({ min: -4 * 86_400, max: 4 * 86_400 }),
      (spec, change, seconds) => {
        const instant = change + seconds * 1000
        assert.deepEqual(activeOccurrence(spec, instant), plainActive(spec, instant))
        const wall = wallClock(spec.timeZone, instant)
        const later = plainOccurrences(spec, wall - 86_400_000, wall + 3 * 86_400_000).filter(
          (o) => o.start > instant,
        )
        const first = later.reduce<Occurrence | null>((a, o) => (!a || o.start < a.start ? o : a), null)
        if (first) assert.deepEqual(nextOccurrence(spec, instant), first)
        const until = instant + 86_400_000
        const overlapping = new Map<number, Occurrence>()
        for (const o of plainOccurrences(
          spec,
          wall - spec.durationMinutes * 60_000 - 2 * 86_400_000,
          wall + 2 * 86_400_000,
        ))
          if (o.start < until && o.end > instant) overlapping.set(o.start, o)
        const plainBetween = [...overlapping.values()].sort((a, b) => a.start - b.start).slice(0, 30)
        assert.deepEqual(occurrencesBetween(spec, instant, until, 30), plainBetween)
      },
    ),
    { numRuns: 150 },
  )
})
