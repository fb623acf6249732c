// The per-table checksum that dump, load and copy compare: the batched form copy uses must hash
// exactly what adding rows one by one hashes, whatever the values; so must copy's fast reader of a
// PostgreSQL target.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import fc from 'fast-check'
import { sql } from 'kysely'
import { parseDatabaseUrl } from '../../src/config.js'
import { openDatabase } from '../../src/db/connect.js'
import { migrateToLatest } from '../../src/db/migrate.js'
import { type Row, TableChecksum } from '../../src/domain/operations/checksum.js'
import { checksums } from '../../src/domain/operations/copy.js'
import { openSnapshot } from '../../src/domain/operations/rows.js'
import { applicationTables, type TableInfo } from '../../src/domain/operations/tables.js'
import { addTenant, freshDatabaseUrl } from '../helper.js'

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

// The fast way copy checksums a PostgreSQL target (binary COPY, pg-checksum.ts) against the plain
// way (batches through the snapshot, TableChecksum): equal whatever the values, on the real schema
// and on a table of every column type it decodes. SQLite has no fast way (the plain one is used).
const hostileText = fc.oneof(
  fc.constantFrom(
    '',
    ' ',
    '"',
    '\\',
    '\\N',
    '\t',
    '\n',
    '\r\n',
    '\u2028\u2029',
    '</script>',
    'ünï 🚀 日本',
    '\u007f\u0001',
  ),
  fc.string({ unit: 'grapheme', maxLength: 12 }),
  fc.string({ unit: 'binary', maxLength: 12 }).map((s) => s.replaceAll(String.fromCharCode(0), '')),
)
// Longer than a third of the reader's buffer (laid out as text, not in the buffer); only where no
// B-tree index holds the value (PostgreSQL refuses an index entry over about 2.7 kB).
const anyText = fc.oneof(
  hostileText,
  fc.constantFrom(`long ${'ü'.repeat(200_000)}`, `long "${'ü'.repeat(200_000)}`),
)
const probeRow = fc.record({
  big: fc.oneof(
    fc.constantFrom(0, -1, 2 ** 31, -(2 ** 31) - 1, Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER),
    fc.maxSafeInteger(),
  ),
  int: fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }),
  small: fc.integer({ min: -32768, max: 32767 }),
  text: fc.option(anyText),
  label: fc.option(hostileText),
})

test('the binary-COPY checksum of a PostgreSQL table equals the plain one, whatever the values', async (t) => {
  const database = openDatabase(parseDatabaseUrl(await freshDatabaseUrl(t)))
  t.after(() => database.close())
  await migrateToLatest(database)
  if (database.dialect === 'sqlite') {
    const snapshot = await openSnapshot(database)
    t.after(() => snapshot.close())
    assert.equal(snapshot.checksum, undefined, 'SQLite reads the plain way')
    return
  }
  const { account } = await addTenant(database, 'Acme')
  await sql`create table checksum_probe (
    k text not null, n integer not null, big bigint not null, int integer, small smallint,
    text text, label varchar(40), primary key (k, n))`.execute(database.db)
  const probe: TableInfo = {
    name: 'checksum_probe',
    columns: [
      { name: 'big', kind: 'integer' },
      { name: 'int', kind: 'integer' },
      { name: 'k', kind: 'text' },
      { name: 'label', kind: 'text' },
      { name: 'n', kind: 'integer' },
      { name: 'small', kind: 'integer' },
      { name: 'text', kind: 'text' },
    ],
    primaryKey: ['k', 'n'],
    generatedId: null,
    references: [],
  }
  const compare = async (tables: readonly TableInfo[]) => {
    const snapshot = await openSnapshot(database)
    try {
      const plain = await checksums(snapshot, tables)
      const fast = await checksums(snapshot, tables, { fast: true })
      assert.deepEqual(fast, plain)
      for (const table of tables)
        assert.ok(await snapshot.checksum?.(table), `${table.name} has a fast reader`)
    } finally {
      await snapshot.close()
    }
  }
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.tuple(hostileText, probeRow), { maxLength: 25 }),
      fc.array(fc.tuple(hostileText, hostileText, hostileText, fc.option(anyText)), { maxLength: 8 }),
      async (probes, events) => {
        await sql`delete from checksum_probe`.execute(database.db)
        await sql`delete from events`.execute(database.db)
        let n = 0
        for (const [k, row] of probes) {
          await sql`insert into checksum_probe (k, n, big, int, small, text, label)
            values (${k}, ${n++}, ${row.big}, ${row.int}, ${row.small}, ${row.text}, ${row.label?.slice(0, 40) ?? null})`.execute(
            database.db,
          )
        }
        for (const [service, environment, version, description] of events) {
          await database.db
            .insertInto('events')
            .values({
              account_id: account.id,
              service,
              environment,
              version,
              status: 'Deployed',
              url: null,
              commit_sha: null,
              description,
              deployer: null,
              source: 'deploy',
              api_key_id: null,
              api_key_name: null,
              received_at: 1_700_000_000_000 + n,
              occurred_at: 1_700_000_000_000 + n++,
            })
            .execute()
        }
        await compare([probe, ...(await applicationTables(database))])
      },
    ),
    { numRuns: 40 },
  )
  // Enough rows to fill the reader's buffer several times, escapes and plain rows interleaved.
  await sql`delete from checksum_probe`.execute(database.db)
  await sql`insert into checksum_probe (k, n, big, int, small, text, label)
    select 'k' || (g % 7), g, g * 1000003 - 5000000000, g % 2000, g % 300,
      case when g % 3 = 0 then repeat('é"', 2000) else repeat('plain ', 1500) end, null
    from generate_series(1, 600) g`.execute(database.db)
  await compare([probe])
})
