// The table registry behind dump, load and copy covers every table the migrations create, and any
// table added later, without being edited. Both databases.
import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { sql } from 'kysely'
import { parseDatabaseUrl } from '../../src/config.js'
import { type Database, openDatabase } from '../../src/db/connect.js'
import { migrateToLatest } from '../../src/db/migrate.js'
import type { DB } from '../../src/db/schema.js'
import { dumpDatabase } from '../../src/domain/operations/dump.js'
import { SEEDED_BY_MIGRATIONS } from '../../src/domain/operations/load.js'
import { allTableNames, applicationTables, EXCLUDED_TABLES } from '../../src/domain/operations/tables.js'
import { type Cleanup, freshDatabaseUrl } from '../helper.js'

/** Every table schema.ts declares: a table added there and not covered fails the test below. */
const DECLARED: Record<keyof DB, true> = {
  accounts: true,
  users: true,
  api_keys: true,
  events: true,
  idempotency_keys: true,
  settings: true,
  sessions: true,
  deployments: true,
  deployment_heads: true,
  version_firsts: true,
  deployments_progress: true,
  deployment_gaps: true,
  environment_settings: true,
  services: true,
  webhooks: true,
  webhook_deliveries: true,
  audit_entries: true,
  chain_links: true,
  chain_heads: true,
  user_identities: true,
  oidc_logins: true,
  name_aliases: true,
  chain_erasures: true,
  environment_locks: true,
  freeze_windows: true,
  bad_versions: true,
  promotion_rules: true,
  deployment_incidents: true,
}

async function migrated(t: Cleanup): Promise<Database> {
  const database = openDatabase(parseDatabaseUrl(await freshDatabaseUrl(t)))
  t.after(() => database.close())
  await migrateToLatest(database)
  return database
}

const SQLITE_OWNED = /^(sqlite_|events_version_fts_(data|idx|content|docsize|config)$)/

test('every table in the migrated database is dumped and copied, or excluded for a stated reason', async (t) => {
  const database = await migrated(t)
  const covered = (await applicationTables(database)).map((table) => table.name)
  for (const name of await allTableNames(database)) {
    const excluded = name in EXCLUDED_TABLES || (database.dialect === 'sqlite' && SQLITE_OWNED.test(name))
    assert.ok(
      covered.includes(name) !== excluded,
      `table ${name} is either covered or excluded, not both or neither`,
    )
  }
  for (const name of Object.keys(DECLARED))
    assert.ok(covered.includes(name), `schema.ts table ${name} is covered`)
  for (const reason of Object.values(EXCLUDED_TABLES))
    assert.ok(reason.length > 10, 'each exclusion says why')
})

test('tables come parents first, with sorted columns and a primary key read from the database', async (t) => {
  const database = await migrated(t)
  const tables = await applicationTables(database)
  const seen = new Set<string>()
  for (const table of tables) {
    assert.ok(table.primaryKey.length > 0, `${table.name} has a primary key`)
    const names = table.columns.map((c) => c.name)
    assert.deepEqual(names, [...names].sort(), `${table.name}'s columns are in name order`)
    for (const key of table.primaryKey) assert.ok(names.includes(key))
    for (const parent of table.references) assert.ok(seen.has(parent), `${parent} comes before ${table.name}`)
    seen.add(table.name)
  }
  const events = tables.find((table) => table.name === 'events')
  assert.equal(events?.generatedId, 'id')
  assert.deepEqual(events?.primaryKey, ['id'])
  assert.equal(events?.columns.find((c) => c.name === 'received_at')?.kind, 'integer')
  assert.equal(events?.columns.find((c) => c.name === 'version')?.kind, 'text')
})

test('only the tables SEEDED_BY_MIGRATIONS names hold rows in a freshly migrated database', async (t) => {
  const database = await migrated(t)
  const seeded: string[] = []
  for (const table of await applicationTables(database)) {
    const { rows } = await sql<{
      n: number | string
    }>`select count(*) as n from ${sql.table(table.name)}`.execute(database.db)
    if (Number(rows[0]?.n) > 0) seeded.push(table.name)
  }
  assert.deepEqual(seeded.sort(), [...SEEDED_BY_MIGRATIONS].sort())
})

test('a table a later migration adds is dumped without any edit to the registry', async (t) => {
  const database = await migrated(t)
  await sql`create table future_audit (id bigint primary key, note text, account_id bigint references accounts (id))`.execute(
    database.db,
  )
  await sql`insert into accounts (name, created_at) values ('Acme', 1)`.execute(database.db)
  await sql`insert into future_audit (id, note, account_id) values (7, ${'a "note"\nwith a line'}, 1)`.execute(
    database.db,
  )
  const tables = await applicationTables(database)
  const names = tables.map((table) => table.name)
  assert.ok(names.indexOf('future_audit') > names.indexOf('accounts'), 'after the table it references')

  const dir = mkdtempSync(join(tmpdir(), 'shiplog-tables-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const out = join(dir, 'dump.ndjson')
  const summaries = await dumpDatabase(database, out)
  assert.equal(summaries.future_audit?.rows, 1)
  const lines = readFileSync(out, 'utf8').split('\n')
  const at = lines.findIndex((l) => l.startsWith('{"table":"future_audit"'))
  assert.ok(at > 0, 'the dump has a future_audit section')
  assert.deepEqual(JSON.parse(lines[at + 1] ?? ''), [1, 7, 'a "note"\nwith a line'])
})
