// The secondary indexes (and, on PostgreSQL, the foreign keys) a bulk load drops first and builds
// once at the end, as pg_restore does: building an index over a million rows at once is several
// times faster than updating it per row, and checking a foreign key once by a join is far cheaper
// than its trigger firing for every row.
import { sql } from 'kysely'
import type { Database } from '../../db/connect.js'
import type { TableInfo } from './tables.js'

export interface IndexDefinition {
  name: string
  table: string
  /** The statement that creates it again, as the database reports it. */
  definition: string
}

/**
 * The non-unique indexes of the given tables. Unique indexes and those behind constraints stay:
 * they guard the data while it goes in, and a load must fail on a duplicate, not finish with one.
 */
export async function secondaryIndexes(
  database: Database,
  tables: readonly TableInfo[],
): Promise<IndexDefinition[]> {
  const names = tables.map((t) => t.name)
  if (names.length === 0) return []
  if (database.dialect === 'sqlite') {
    const { rows } = await sql<{ name: string; table: string; definition: string | null }>`
      select name, tbl_name as "table", sql as definition from sqlite_master
      where type = 'index' and sql is not null and tbl_name in (${sql.join(names)})
      order by name`.execute(database.db)
    return rows
      .filter(
        (r): r is IndexDefinition => r.definition !== null && !/^\s*create\s+unique/i.test(r.definition),
      )
      .map((r) => ({ name: r.name, table: r.table, definition: r.definition }))
  }
  const { rows } = await sql<IndexDefinition>`
    select i.indexname as name, i.tablename as "table", i.indexdef as definition
    from pg_indexes i
    join pg_class c on c.relname = i.indexname and c.relnamespace = (select oid from pg_namespace where nspname = current_schema())
    join pg_index x on x.indexrelid = c.oid
    where i.schemaname = current_schema() and i.tablename in (${sql.join(names)})
      and not x.indisunique and not x.indisprimary
      and not exists (select 1 from pg_constraint k where k.conindid = c.oid)
    order by i.indexname`.execute(database.db)
  return rows
}

/** A foreign key, with the clause that adds it again. */
export interface ForeignKeyDefinition {
  name: string
  table: string
  /** What follows `alter table … add constraint <name>`, as PostgreSQL reports it. */
  definition: string
}

/**
 * The foreign keys of the given tables on PostgreSQL. SQLite cannot drop a constraint from a table
 * (and checks them only where a connection asks it to), so there the list is empty.
 */
export async function foreignKeys(
  database: Database,
  tables: readonly TableInfo[],
): Promise<ForeignKeyDefinition[]> {
  const names = tables.map((t) => t.name)
  if (names.length === 0 || database.dialect === 'sqlite') return []
  const { rows } = await sql<ForeignKeyDefinition>`
    select k.conname as name, c.relname as "table", pg_get_constraintdef(k.oid) as definition
    from pg_constraint k
    join pg_class c on c.oid = k.conrelid
    where k.contype = 'f' and c.relname in (${sql.join(names)})
      and c.relnamespace = (select oid from pg_namespace where nspname = current_schema())
    order by k.conname`.execute(database.db)
  return rows
}
