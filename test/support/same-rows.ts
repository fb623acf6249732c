// Compares two installations row by row, every table and every column, read straight from each
// database's own catalog: a round trip (dump/load, copy) is proven by the rows themselves, not by
// checksums the tool under test computes on both sides.
import assert from 'node:assert/strict'
import { sql } from 'kysely'
import { parseDatabaseUrl } from '../../src/config.js'
import { type Database, openDatabase } from '../../src/db/connect.js'

/**
 * Tables that are not installation data and may rightly differ between two databases holding the
 * same installation. Every other table either database has is compared, so a table a later
 * migration adds is covered without editing this file.
 */
const NOT_DATA: readonly RegExp[] = [
  // Kysely's record of applied migrations (with the time each ran) and its lock.
  /^kysely_migration(_lock)?$/,
  // SQLite's own tables.
  /^sqlite_/,
  // SQLite only: the version-search index and its high-water mark, rebuilt from events by the
  // background indexer on each database.
  /^events_version_(index|fts)/,
]

type Columns = Map<string, 'integer' | 'text'>

/** Table name → column name → how its values compare, from the database's catalog. */
async function catalog(database: Database): Promise<Map<string, Columns>> {
  const tables = new Map<string, Columns>()
  const add = (table: string, column: string, declared: string) => {
    if (NOT_DATA.some((re) => re.test(table))) return
    const columns = tables.get(table) ?? new Map()
    tables.set(table, columns)
    columns.set(column, /int|bool/i.test(declared) ? 'integer' : 'text')
  }
  if (database.dialect === 'sqlite') {
    const { rows } = await sql<{ table: string; column: string; type: string }>`
      select m.name as "table", c.name as "column", c.type as type
      from sqlite_master m join pragma_table_info(m.name) c
      where m.type = 'table'`.execute(database.db)
    for (const r of rows) add(r.table, r.column, r.type)
  } else {
    const { rows } = await sql<{ table: string; column: string; type: string }>`
      select c.table_name as "table", c.column_name as "column", c.data_type as type
      from information_schema.columns c
      join information_schema.tables t
        on t.table_schema = c.table_schema and t.table_name = c.table_name
      where c.table_schema = current_schema() and t.table_type = 'BASE TABLE'`.execute(database.db)
    for (const r of rows) add(r.table, r.column, r.type)
  }
  return tables
}

/**
 * One value as both databases should agree on it: whole numbers (SQLite numbers, PostgreSQL bigint
 * strings, JavaScript bigints, booleans as 0 and 1) as decimal text, text as itself, null as null.
 */
function normalise(value: unknown, kind: 'integer' | 'text', where: string): string | null {
  if (value === null || value === undefined) return null
  if (kind === 'integer') {
    if (typeof value === 'boolean') return value ? '1' : '0'
    if (typeof value === 'number') {
      assert.ok(Number.isInteger(value), `${where}: ${value} is not a whole number`)
      return BigInt(value).toString()
    }
    if (typeof value === 'bigint') return value.toString()
    if (typeof value === 'string' && /^-?\d+$/.test(value)) return BigInt(value).toString()
    assert.fail(`${where}: ${JSON.stringify(value)} is not a whole number`)
  }
  assert.equal(typeof value, 'string', `${where}: ${String(value)} is not text`)
  return value as string
}

/** Rows of one table, each as its normalised values in column-name order, sorted. */
async function rowsOf(database: Database, table: string, columns: Columns): Promise<string[]> {
  const names = [...columns.keys()].sort()
  const { rows } = await sql<Record<string, unknown>>`select * from ${sql.table(table)}`.execute(database.db)
  return rows
    .map((row) =>
      JSON.stringify(names.map((c) => normalise(row[c], columns.get(c) ?? 'text', `${table}.${c}`))),
    )
    .sort()
}

export interface SameRowsOptions {
  /**
   * Rows left out on both sides, by table, with why (a dump never carries the master secret, say).
   * The predicate sees the row with its values normalised, by column name.
   */
  leaveOut?: Record<string, (row: Record<string, string | null>) => boolean>
}

/**
 * Asserts that the databases at `expectedUrl` and `actualUrl` hold the same tables with the same
 * columns, and the same rows in each, value for value. Returns how many rows were compared.
 */
export async function assertSameRows(
  expectedUrl: string,
  actualUrl: string,
  options: SameRowsOptions = {},
): Promise<number> {
  const expected = openDatabase(parseDatabaseUrl(expectedUrl))
  const actual = openDatabase(parseDatabaseUrl(actualUrl))
  try {
    const left = await catalog(expected)
    const right = await catalog(actual)
    assert.deepEqual([...right.keys()].sort(), [...left.keys()].sort(), 'the same tables on both sides')
    assert.ok(left.has('events') && left.size > 5, `the catalog lists the tables (${[...left.keys()]})`)
    let compared = 0
    for (const [table, columns] of [...left].sort(([a], [b]) => (a < b ? -1 : 1))) {
      const theirs = right.get(table) ?? new Map()
      assert.deepEqual([...theirs.keys()].sort(), [...columns.keys()].sort(), `the same columns in ${table}`)
      // A column that is a whole number on either side is compared as one.
      const kinds: Columns = new Map(
        [...columns].map(([c, kind]) => [
          c,
          kind === 'integer' || theirs.get(c) === 'integer' ? 'integer' : kind,
        ]),
      )
      const names = [...kinds.keys()].sort()
      const leaveOut = options.leaveOut?.[table]
      const keep = (encoded: string) =>
        !leaveOut?.(
          Object.fromEntries(names.map((c, i) => [c, (JSON.parse(encoded) as (string | null)[])[i] ?? null])),
        )
      const want = (await rowsOf(expected, table, kinds)).filter(keep)
      const got = (await rowsOf(actual, table, kinds)).filter(keep)
      if (got.length !== want.length || got.some((row, i) => row !== want[i])) {
        const gotSet = new Set(got)
        const wantSet = new Set(want)
        const missing = want.filter((row) => !gotSet.has(row)).slice(0, 3)
        const extra = got.filter((row) => !wantSet.has(row)).slice(0, 3)
        assert.fail(
          `${table} differs (${got.length} rows, expected ${want.length}; columns ${names.join(', ')})\n` +
            `  missing: ${missing.join('\n           ')}\n  unexpected: ${extra.join('\n              ')}`,
        )
      }
      compared += want.length
    }
    return compared
  } finally {
    await expected.close()
    await actual.close()
  }
}
