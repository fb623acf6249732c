// The one grammar for instants (docs/API.md, "Instants") and for whole numbers ("Whole numbers"):
// what each accepts, to the exact millisecond or value, and what each refuses.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { daysFrom, isDate, parseDate, parseInstant, readInstant } from '../../src/domain/instants.js'
import { parseWholeNumber } from '../../src/domain/whole-numbers.js'
import { ACCEPTED_INSTANTS, HOSTILE_WHOLE_NUMBERS, REFUSED_INSTANTS } from '../support/parsing-tables.js'

const utc = (iso: string) => new Date(iso).getTime()

test('instants: every accepted form names its exact instant (UTC when no zone is written)', () => {
  for (const [text, iso] of ACCEPTED_INSTANTS) assert.equal(parseInstant(text), utc(iso), text)
})

test('instants: every other text is refused, however Date.parse would read it', () => {
  for (const text of REFUSED_INSTANTS) assert.equal(parseInstant(text), undefined, JSON.stringify(text))
})

test('instants: the precision written and the zone given are kept for a page that reads in its own zone', () => {
  assert.deepEqual(readInstant('2026-11-20'), { wall: utc('2026-11-20T00:00:00Z'), precision: 'day' })
  assert.deepEqual(readInstant('2026-11-20T14:30'), {
    wall: utc('2026-11-20T14:30:00Z'),
    precision: 'minute',
  })
  assert.deepEqual(readInstant('2026-11-20T14:30:05+02:00'), {
    wall: utc('2026-11-20T14:30:05Z'),
    offsetMinutes: 120,
    precision: 'second',
  })
  assert.equal(readInstant('2026-11-20T14:30:05.5')?.precision, 'fraction')
})

test('dates: real calendar dates only, and whole days between them', () => {
  assert.deepEqual(parseDate('2028-02-29'), { year: 2028, month: 2, day: 29 })
  for (const bad of [
    '2026-02-29',
    '2100-02-29',
    '2026-06-31',
    '2026-1-01',
    '1969-12-31',
    '2026-11-20T00:00',
  ]) {
    assert.equal(isDate(bad), false, bad)
  }
  const d = (text: string) => parseDate(text) ?? assert.fail(text)
  assert.equal(daysFrom(d('2026-03-01'), d('2026-04-01')), 31)
  assert.equal(daysFrom(d('2026-04-01'), d('2026-03-01')), -31)
  assert.equal(daysFrom(d('2024-01-01'), d('2025-01-01')), 366)
})

test('whole numbers: decimal digits only, no leading zero but "0", within the range', () => {
  assert.equal(parseWholeNumber('0', 0, 10), 0)
  assert.equal(parseWholeNumber('10', 0, 10), 10)
  assert.equal(parseWholeNumber('9007199254740991', 0, Number.MAX_SAFE_INTEGER), Number.MAX_SAFE_INTEGER)
  assert.equal(parseWholeNumber('0', 1, 10), undefined)
  assert.equal(parseWholeNumber('11', 0, 10), undefined)
  assert.equal(parseWholeNumber('', 0, 10), undefined)
  for (const text of HOSTILE_WHOLE_NUMBERS) {
    assert.equal(parseWholeNumber(text, 0, Number.MAX_SAFE_INTEGER), undefined, JSON.stringify(text))
  }
})
