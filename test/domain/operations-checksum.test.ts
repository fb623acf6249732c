// The per-table checksum that dump, load and copy compare: the batched form copy uses must hash
// exactly what adding rows one by one hashes, whatever the values.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { type Row, TableChecksum } from '../../src/domain/operations/checksum.js'

const hostile: Row[] = [
  [1, 'plain', null, 0],
  [2, 'line\nbreak\ttab\\slash', 'quote " and \u2028\u2029', -1],
  [3, '<script>alert(1)</script>', 'ünïcødé 🚀 日本', Number.MAX_SAFE_INTEGER],
  [4, '', ' ', 1.5],
  [5, '\u0000nul', null, null],
]

test('addRows hashes the same bytes as add, row by row, in any split into batches', () => {
  const one = new TableChecksum()
  for (const row of hostile) one.add(row)
  for (let split = 0; split <= hostile.length; split++) {
    const batched = new TableChecksum()
    batched.addRows(hostile.slice(0, split))
    batched.addRows(hostile.slice(split))
    assert.deepEqual(batched.summary(), one.summary(), `split at ${split}`)
  }
})

test('the order of rows changes the checksum, and an empty batch changes nothing', () => {
  const a = new TableChecksum()
  a.addRows(hostile)
  const b = new TableChecksum()
  b.addRows([...hostile].reverse())
  assert.notEqual(a.summary().sha256, b.summary().sha256)
  const c = new TableChecksum()
  c.addRows([])
  c.addRows(hostile)
  assert.deepEqual(c.summary(), a.summary())
})
