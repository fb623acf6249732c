// The CSV cell rule exists once: the byte writers write exactly what csvCell writes, and binary COPY reads right.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import fc from 'fast-check'
import { BINARY_COPY_SIGNATURE, BinaryCopyReader } from '../../src/db/copy-binary.js'
import {
  CSV_CELL_JOIN,
  csvCellBytes,
  guardQuotedCells,
  QUOTED_AMBIGUOUS,
  QUOTED_GUARDS,
  QUOTED_PLAIN,
  quotedJoinState,
  writeCsvEmpty,
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

test('quotedJoinState and guardQuotedCells: values joined by "," and quoted at both ends are csvCell of each, or the record is refused when a value holds a quote', () => {
  fc.assert(
    fc.property(
      fc.array(fc.oneof(cellText, fc.constantFrom('a', 'b c', '', 'é😀', ';=x', '-1', CSV_CELL_JOIN)), {
        minLength: 1,
        maxLength: 12,
      }),
      (values) => {
        const joined = values.join(CSV_CELL_JOIN)
        const buffer = Buffer.from(joined, 'utf8')
        const want = values.map(csvCell).join(',')
        const state = quotedJoinState(buffer, 0, buffer.length, values.length)
        if (values.some((v) => v.includes('"'))) {
          // Where one value ends is a guess: never taken.
          assert.equal(state, QUOTED_AMBIGUOUS)
          return
        }
        if (state === QUOTED_PLAIN) {
          assert.equal(`"${joined}"`, want)
        } else {
          assert.equal(state, QUOTED_GUARDS)
          const out = Buffer.alloc(buffer.length + values.length)
          const written = guardQuotedCells(buffer, 0, buffer.length, out, 0)
          assert.equal(`"${out.subarray(0, written).toString('utf8')}"`, want)
          assert.notEqual(`"${joined}"`, want, 'guards were needed')
        }
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
