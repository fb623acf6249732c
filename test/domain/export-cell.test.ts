// The CSV cell rule exists once: the byte writers write exactly what csvCell writes, and binary COPY reads right.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import fc from 'fast-check'
import { BINARY_COPY_SIGNATURE, BinaryCopyReader } from '../../src/db/copy-binary.js'
import {
  csvCellBytes,
  csvCellsFromSeparated,
  plainCsvCellsInPlace,
} from '../../src/domain/events/export/bytes.js'
import { csvCell } from '../../src/domain/events/export/format.js'

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

test('csvCellsFromSeparated writes csvCell of each value, comma-joined, and refuses a split it cannot be sure of', () => {
  const SEPARATOR = '\u001f'
  fc.assert(
    fc.property(
      fc.array(cellText, { minLength: 1, maxLength: 12 }),
      fc.integer({ min: 1, max: 12 }),
      (values, cells) => {
        const joined = values.join(SEPARATOR)
        const pieces = joined.split(SEPARATOR)
        const source = Buffer.from(joined, 'utf8')
        const out = Buffer.alloc(2 * source.length + 3 * pieces.length)
        const written = csvCellsFromSeparated(source, 0, source.length, 0x1f, cells, out, 0)
        // The bytes split into exactly `cells` values, or the answer is -1.
        if (pieces.length === cells) {
          assert.equal(out.subarray(0, written).toString('utf8'), pieces.map(csvCell).join(','))
        } else {
          assert.equal(written, -1)
        }
        // So `cells` values of which one holds the separator are never misread as other values.
        if (values.length === cells && values.some((v) => v.includes(SEPARATOR))) assert.equal(written, -1)
      },
    ),
    { numRuns: 3000 },
  )
})

test('plainCsvCellsInPlace says yes exactly when csvCell leaves every value as it is, and then writes the cells', () => {
  const SEPARATOR = '\u001f'
  fc.assert(
    fc.property(
      fc.array(fc.oneof(cellText, fc.constantFrom('a', 'b c', '', 'é😀')), { minLength: 1, maxLength: 12 }),
      fc.integer({ min: 1, max: 12 }),
      (values, cells) => {
        const joined = values.join(SEPARATOR)
        const pieces = joined.split(SEPARATOR)
        const buffer = Buffer.from(joined, 'utf8')
        const plain = plainCsvCellsInPlace(buffer, 0, buffer.length, 0x1f, cells)
        assert.equal(plain, pieces.length === cells && pieces.every((p) => csvCell(p) === p))
        if (plain) assert.equal(buffer.toString('utf8'), pieces.map(csvCell).join(','))
      },
    ),
    { numRuns: 3000 },
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
