// The tables an installation's data lives in, read from the migrated database itself, so dump, load
// and copy cover a table added by any later migration without being edited.
import { sql } from 'kysely'
import type { Database } from '../../db/connect.js'

/** How a column's values travel: whole numbers (ids, epoch milliseconds, flags) or text. */
export type ColumnKind = 'integer' | 'text'

export interface ColumnInfo {
  readonly name: string
  readonly kind: ColumnKind
}

export interface TableInfo {
  readonly name: string
  /** Sorted by name: the order is the same on both databases whatever order migrations added them in. */
  readonly columns: readonly ColumnInfo[]
  /** The primary key's columns in key order; rows are read and checksummed in this order. */
  readonly primaryKey: readonly string[]
  /** The column filled by a sequence (SQLite AUTOINCREMENT, PostgreSQL identity), if any. */
  readonly generatedId: string | null
  /** Tables this one's foreign keys point to (itself excluded). */
  readonly references: readonly string[]
}

/**
 * Tables that hold no installation data and are deliberately not dumped or copied, each with the
 * reason. Everything else the database holds is covered: a new table is included by construction,
 * and test/domain/operations-tables.test.ts fails if one is neither covered nor listed here.
 */
export const EXCLUDED_TABLES: Readonly<Record<string, string>> = {
  kysely_migration: "Kysely's record of applied migrations: the target's own migrations write it",
  kysely_migration_lock: "Kysely's migration lock",
  // SQLite only: the version search index (migration 0003) is derived from events and rebuilt by
  // the background indexer from its high-water mark, which a fresh schema starts at 0.
  events_version_index: 'SQLite version-search high-water mark; the indexer rebuilds from events',
  events_version_fts: 'SQLite FTS5 version-search index; rebuilt from events',
  // Kept by `shiplog copy` in its target while a copy is unfinished (see copy.ts).
  shiplog_copy_progress: "copy's own resume state in the target",
}

/** SQLite's internal tables and the shadow tables of an FTS5 index belong to their owners. */
function isExcluded(name: string): boolean {
  if (name in EXCLUDED_TABLES) return true
  if (name.startsWith('sqlite_')) return true
  return /^events_version_fts_(data|idx|content|docsize|config)$/.test(name)
}

/** Every table name in the database, excluded ones too (the coverage test uses this). */
export async function allTableNames(database: Database): Promise<string[]> {
  if (database.dialect === 'sqlite') {
    const { rows } = await sql<{ name: string }>`
      select name from sqlite_master where type = 'table' order by name`.execute(database.db)
    return rows.map((r) => r.name)
  }
  const { rows } = await sql<{ name: string }>`
    select table_name as name from information_schema.tables
    where table_schema = current_schema() and table_type = 'BASE TABLE' order by table_name`.execute(
    database.db,
  )
  return rows.map((r) => r.name)
}

function kindOf(declared: string): ColumnKind {
  return /int/i.test(declared) ? 'integer' : 'text'
}

async function sqliteTable(database: Database, name: string): Promise<TableInfo> {
  const { rows: cols } = await sql<{ name: string; type: string; pk: number }>`
    select name, type, pk from pragma_table_info(${name})`.execute(database.db)
  const { rows: fks } = await sql<{ table: string }>`
    select "table" from pragma_foreign_key_list(${name})`.execute(database.db)
  const { rows: ddl } = await sql<{ sql: string }>`
    select sql from sqlite_master where type = 'table' and name = ${name}`.execute(database.db)
  const primaryKey = cols
    .filter((c) => c.pk > 0)
    .sort((a, b) => a.pk - b.pk)
    .map((c) => c.name)
  const autoincrement = /autoincrement/i.test(ddl[0]?.sql ?? '')
  return {
    name,
    columns: cols.map((c) => ({ name: c.name, kind: kindOf(c.type) })).sort(byName),
    primaryKey,
    generatedId: autoincrement && primaryKey.length === 1 ? (primaryKey[0] ?? null) : null,
    references: [...new Set(fks.map((f) => f.table))].filter((t) => t !== name),
  }
}

async function postgresTable(database: Database, name: string): Promise<TableInfo> {
  const { rows: cols } = await sql<{ name: string; type: string; identity: string; serial: boolean }>`
    select column_name as name, data_type as type, is_identity as identity,
           coalesce(column_default like 'nextval(%', false) as serial
    from information_schema.columns
    where table_schema = current_schema() and table_name = ${name}`.execute(database.db)
  const { rows: pk } = await sql<{ name: string }>`
    select a.attname as name
    from pg_index i
    join lateral unnest(i.indkey) with ordinality as k(attnum, n) on true
    join pg_attribute a on a.attrelid = i.indrelid and a.attnum = k.attnum
    where i.indrelid = (quote_ident(current_schema()) || '.' || quote_ident(${name}))::regclass
      and i.indisprimary
    order by k.n`.execute(database.db)
  const { rows: fks } = await sql<{ table: string }>`
    select c2.relname as table
    from pg_constraint k
    join pg_class c2 on c2.oid = k.confrelid
    where k.contype = 'f'
      and k.conrelid = (quote_ident(current_schema()) || '.' || quote_ident(${name}))::regclass`.execute(
    database.db,
  )
  const generated = cols.find((c) => c.identity === 'YES' || c.serial)
  return {
    name,
    columns: cols.map((c) => ({ name: c.name, kind: kindOf(c.type) })).sort(byName),
    primaryKey: pk.map((r) => r.name),
    generatedId: generated?.name ?? null,
    references: [...new Set(fks.map((f) => f.table))].filter((t) => t !== name),
  }
}

function byName(a: { name: string }, b: { name: string }): number {
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0
}

/**
 * The application tables, parents before the tables that reference them (so a load never inserts a
 * row before the row its foreign key needs), ties broken by name. A table without a primary key
 * cannot be read in a stable order or resumed, so it is an error, not a silent omission.
 */
export async function applicationTables(database: Database): Promise<TableInfo[]> {
  const names = (await allTableNames(database)).filter((n) => !isExcluded(n))
  const tables: TableInfo[] = []
  for (const name of names) {
    const table =
      database.dialect === 'sqlite' ? await sqliteTable(database, name) : await postgresTable(database, name)
    if (table.primaryKey.length === 0) {
      throw new Error(`table ${name} has no primary key: dump and copy need one to read it in a stable order`)
    }
    tables.push(table)
  }
  return parentsFirst(tables)
}

function parentsFirst(tables: TableInfo[]): TableInfo[] {
  const byTable = new Map(tables.map((t) => [t.name, t]))
  const ordered: TableInfo[] = []
  const placed = new Set<string>()
  const visiting = new Set<string>()
  const visit = (table: TableInfo) => {
    if (placed.has(table.name)) return
    if (visiting.has(table.name)) throw new Error(`foreign keys form a cycle through table ${table.name}`)
    visiting.add(table.name)
    for (const parent of [...table.references].sort()) {
      const parentTable = byTable.get(parent)
      if (parentTable) visit(parentTable)
    }
    visiting.delete(table.name)
    placed.add(table.name)
    ordered.push(table)
  }
  for (const table of [...tables].sort(byName)) visit(table)
  return ordered
}

/** The latest migration applied to this database: the dump's schema version. */
export async function schemaVersion(database: Database): Promise<string | null> {
  const { rows } = await sql<{ name: string }>`
    select name from kysely_migration order by name desc limit 1`.execute(database.db)
  return rows[0]?.name ?? null
}

/** Every applied migration's name, oldest first. */
export async function appliedMigrations(database: Database): Promise<string[]> {
  const { rows } = await sql<{ name: string }>`select name from kysely_migration order by name`.execute(
    database.db,
  )
  return rows.map((r) => r.name)
}

/** Quotes an identifier for either database (both accept double quotes). */
export function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`
}
