// The CSV cell rule exists once: the byte writers and the joined chunk reader write exactly what the plain encoder writes, and binary COPY reads right.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import fc from 'fast-check'
import { BINARY_COPY_SIGNATURE, BinaryCopyReader } from '../../src/db/copy-binary.js'
import type { EventRow } from '../../src/db/schema.js'
import { csvCellBytes, writeCsvEmpty } from '../../src/domain/events/export/bytes.js'
import { csvCell, eventToCsvLine, eventToJson } from '../../src/domain/events/export/format.js'
import {
  csvFromJoined,
  FIELD_SEPARATOR,
  jsonFromJoined,
  RECORD_SEPARATOR,
} from '../../src/domain/events/export/joined.js'

/** Text built from what the rule looks at (quotes, commas, line breaks, formula starts) and anything else. */
const cellText = fc
  .array(
    fc.oneof(
      fc.constantFrom(
        '"',
        '""',
        ',',
        '\r',
        '\n',
        '\r\n',
        '=',
        '+',
        '-',
        '@',
        '\t',
        "'",
        ' ',
        'a',
        '1',
        '\\',
        '\u001f',
      ),
      fc.string({ unit: 'binary', maxLength: 3 }),
    ),
    { maxLength: 8 },
  )
  .map((parts) => parts.join(''))
  // Lone surrogates have no UTF-8 form: neither database can hold one.
  .filter((text) => text.isWellFormed())

test('csvCellBytes writes the UTF-8 of csvCell, for any text, wherever the value sits in the source', () => {
  fc.assert(
    fc.property(cellText, cellText, cellText, (before, value, after) => {
      // The value between other bytes, as in a COPY row: the writer must read only its own range.
      const source = Buffer.from(before + value + after, 'utf8')
      const start = Buffer.byteLength(before)
      const end = start + Buffer.byteLength(value)
      const out = Buffer.alloc(2 * (end - start) + 3)
      const written = csvCellBytes(source, start, end, out, 0)
      assert.equal(out.subarray(0, written).toString('utf8'), csvCell(value))
    }),
    { numRuns: 2000 },
  )
})

test('every text cell is quoted: csvCell quotes any text (empty and absent too), guards formula starts, leaves integers bare', () => {
  assert.equal(csvCell(null), '""')
  assert.equal(csvCell(''), '""')
  assert.equal(csvCell('prod'), '"prod"')
  assert.equal(csvCell("x;=cmd|' /C calc'!A0"), `"x;=cmd|' /C calc'!A0"`)
  assert.equal(csvCell('=1+1'), `"'=1+1"`)
  assert.equal(csvCell('a"b'), '"a""b"')
  assert.equal(csvCell(42), '42')
  assert.equal(csvCell(-1), `"'-1"`)
  const out = Buffer.alloc(2)
  assert.equal(out.subarray(0, writeCsvEmpty(out, 0)).toString(), csvCell(null))
})

/** The ten text values of a record, as the joined query puts them (NULL as empty for CSV). */
const TEXT_KEYS = [
  'service',
  'environment',
  'version',
  'status',
  'url',
  'commit_sha',
  'description',
  'deployer',
  'source',
  'api_key_name',
] as const

/** Text that may hold either separator, alone or as many as make a record look like two. */
const joinedText = fc.oneof(
  {
    weight: 150,
    arbitrary: cellText.filter(
      (text) =>
        !text.includes(String.fromCharCode(FIELD_SEPARATOR)) &&
        !text.includes(String.fromCharCode(RECORD_SEPARATOR)),
    ),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      String.fromCharCode(FIELD_SEPARATOR),
      String.fromCharCode(RECORD_SEPARATOR),
      // A value that, joined, forges a second record of twelve fields.
      `x${String.fromCharCode(RECORD_SEPARATOR)}7${String.fromCharCode(FIELD_SEPARATOR)}0${String.fromCharCode(FIELD_SEPARATOR).repeat(10)}y`,
    ),
  },
)

/** Rows newest first (ids falling), as an export chunk reads them. */
const chunkRows = fc
  .array(
    fc.record({
      gap: fc.integer({ min: 1, max: 3 }),
      received_at: fc.oneof(
        fc.integer({ min: 0, max: 4_000_000_000_000 }),
        fc.integer({ min: -8_640_000_000_000_000, max: 8_640_000_000_000_000 }),
      ),
      values: fc.array(fc.option(joinedText, { nil: null, freq: 4 }), { minLength: 10, maxLength: 10 }),
    }),
    { minLength: 1, maxLength: 8 },
  )
  .map((specs) => {
    let id = 10_000
    return specs.map((spec): EventRow => {
      id -= spec.gap
      const row: Record<string, unknown> = {
        id,
        account_id: 1,
        api_key_id: null,
        received_at: spec.received_at,
      }
      TEXT_KEYS.forEach((key, i) => {
        row[key] = spec.values[i] ?? null
      })
      return row as unknown as EventRow
    })
  })

const FIELD = String.fromCharCode(FIELD_SEPARATOR)
const RECORD = String.fromCharCode(RECORD_SEPARATOR)

/** What SQLite's concat() and group_concat() hand over for these rows (sqlite.ts). */
function joined(rows: EventRow[], last: (row: EventRow) => string[]): Buffer {
  const field = String.fromCharCode(FIELD_SEPARATOR)
  const records = rows.map((row) => [String(row.id), String(row.received_at), ...last(row)].join(field))
  return Buffer.from(records.join(String.fromCharCode(RECORD_SEPARATOR)), 'utf8')
}

/** SQLite's json_object of the keys after id and received_at (its escapes are JSON.stringify's). */
function jsonObject(row: EventRow): string {
  const { id: _id, received_at: _at, ...rest } = JSON.parse(eventToJson(row)) as Record<string, unknown>
  return JSON.stringify(rest)
}

test('property: the joined chunk reader writes exactly what the plain encoder writes, or refuses the chunk when a value holds a separator', () => {
  let fast = 0
  fc.assert(
    fc.property(chunkRows, fc.boolean(), (rows, continues) => {
      const lastRow = rows.at(-1) as EventRow
      const clean = rows.every((row) =>
        TEXT_KEYS.every((key) => {
          const text = String(row[key] ?? '')
          return !text.includes(FIELD) && !text.includes(RECORD)
        }),
      )
      const after = continues ? { id: 10_000, receivedAt: 0 } : undefined
      // CSV: the ten values, NULL as empty.
      const csv = { buffer: Buffer.alloc(1), length: 0 }
      const csvEnd = csvFromJoined(
        joined(rows, (row) => TEXT_KEYS.map((key) => String(row[key] ?? ''))),
        rows.length,
        after,
        false,
        csv,
      )
      // JSON: SQLite's json_object, whose escapes are JSON.stringify's (export-format.test.ts).
      const json = { buffer: Buffer.alloc(1), length: 0 }
      const jsonEnd = jsonFromJoined(
        joined(rows, (row) => [jsonObject(row)]),
        rows.length,
        after,
        false,
        json,
      )
      if (clean) {
        fast++
        assert.deepEqual(csvEnd, { id: lastRow.id, receivedAt: lastRow.received_at })
        assert.deepEqual(jsonEnd, csvEnd)
      }
      if (csvEnd === null) assert.ok(!clean, 'only a value holding a separator makes the chunk refused')
      else {
        assert.equal(csv.buffer.toString('utf8', 0, csv.length), rows.map(eventToCsvLine).join(''))
        assert.deepEqual(csvEnd, { id: lastRow.id, receivedAt: lastRow.received_at })
      }
      if (jsonEnd !== null) {
        const want = rows.map((row, i) => `${continues || i > 0 ? ',' : ''}\n${eventToJson(row)}`).join('')
        assert.equal(json.buffer.toString('utf8', 0, json.length), want)
      }
      // Read against the order asked for (by time, when ids fall but times do not), it is refused.
      const byTimeEnd = csvFromJoined(
        joined(rows, (row) => TEXT_KEYS.map((key) => String(row[key] ?? ''))),
        rows.length,
        undefined,
        true,
        { buffer: Buffer.alloc(1), length: 0 },
      )
      // (received_at, id) falls from row to row: ties are broken by id, which always falls here.
      const timesFall = rows.every(
        (row, i) => i === 0 || row.received_at <= (rows[i - 1] as EventRow).received_at,
      )
      if (!timesFall) assert.equal(byTimeEnd, null)
    }),
    { numRuns: 3000 },
  )
  assert.ok(fast > 1000, `the reader took most chunks (${fast} of 3000)`)
})

test('the joined chunk reader refuses what SQLite did not count, and integers it cannot read exactly', () => {
  const field = String.fromCharCode(FIELD_SEPARATOR)
  const record = (id: string, at: string) =>
    [id, at, 'a', 'b', 'c', 'd', '', '', '', '', 'e', 'f'].join(field)
  const read = (text: string, rows: number) =>
    csvFromJoined(Buffer.from(text, 'utf8'), rows, undefined, false, { buffer: Buffer.alloc(1), length: 0 })
  assert.deepEqual(read(record('5', '-3'), 1), { id: 5, receivedAt: -3 })
  assert.equal(read(record('5', '1'), 2), null, 'fewer records than SQLite counted')
  assert.equal(read(record('-5', '1'), 1), null, 'a negative id')
  assert.equal(read(record('05', '1'), 1), null, 'a leading zero')
  assert.equal(read(record('5', '1.5'), 1), null, 'a fraction')
  assert.equal(read(record('5', '99999999999999999'), 1), null, 'past 2^53')
  assert.equal(read(`${record('5', '1')}${field}extra`, 1), null, 'an eleventh value')
  assert.equal(read(record('5', '1').replace(`${field}f`, 'f'), 1), null, 'a ninth value')
  const two = `${record('5', '1')}${String.fromCharCode(RECORD_SEPARATOR)}${record('6', '1')}`
  assert.equal(read(two, 2), null, 'ids that do not fall')
})

test('the binary COPY reader checks the signature and reads fields, NULLs and bigints in order', () => {
  const header = Buffer.concat([BINARY_COPY_SIGNATURE, Buffer.alloc(4), Buffer.from([0, 0, 0, 2, 9, 9])])
  const int8 = Buffer.from([0, 0, 0, 8, 0, 0, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06])
  const text = Buffer.concat([Buffer.from([0, 0, 0, 2]), Buffer.from('hé', 'latin1')])
  const nil = Buffer.from([0xff, 0xff, 0xff, 0xff])
  const row = Buffer.concat([Buffer.from([0, 3]), int8, nil, text])
  const reader = new BinaryCopyReader()
  assert.equal(reader.row(Buffer.concat([header, row])), 3)
  assert.equal(reader.int8(), 0x0102_0304_0506)
  assert.equal(reader.field(), -1)
  assert.equal(reader.field(), 2)
  assert.equal(reader.message.toString('latin1', reader.start, reader.start + 2), 'hé')
  assert.equal(reader.row(row), 3, 'the header is read once')
  assert.equal(reader.row(Buffer.from([0xff, 0xff])), -1, 'the end marker')
  assert.throws(() => new BinaryCopyReader().row(row), /signature/)
  const short = new BinaryCopyReader()
  short.row(Buffer.concat([header, Buffer.from([0, 1, 0, 0, 0, 9, 1])]))
  assert.throws(() => short.field(), /past its row/)
})
