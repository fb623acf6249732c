// The CSV cell rule exists once: the byte writer and SQLite's cell expression write exactly what csvCell writes.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import SqliteDatabase from 'better-sqlite3'
import fc from 'fast-check'
import { BINARY_COPY_SIGNATURE, BinaryCopyReader } from '../../src/db/copy-binary.js'
import { csvCellBytes } from '../../src/domain/events/export/bytes.js'
import { csvCell } from '../../src/domain/events/export/format.js'
import { sqliteCsvCell } from '../../src/domain/events/export/sqlite.js'

/** Text built from what the rule looks at (quotes, commas, line breaks, formula starts) and anything else. */
const cellText = fc
  .array(
    fc.oneof(
      fc.constantFrom('"', '""', ',', '\r', '\n', '\r\n', '=', '+', '-', '@', '\t', "'", ' ', 'a', '1', '\\'),
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

test("SQLite's cell expression, generated from the rule, gives csvCell's cell for any text and for NULL", (t) => {
  const sqlite = new SqliteDatabase(':memory:')
  t.after(() => sqlite.close())
  const cell = sqlite.prepare(`select ${sqliteCsvCell('v')} as cell from (select ? as v)`).pluck()
  assert.equal(cell.get(null), csvCell(null))
  fc.assert(
    fc.property(cellText, (value) => {
      assert.equal(cell.get(value), csvCell(value))
    }),
    { numRuns: 2000 },
  )
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
