// The few column definitions that differ between SQLite and PostgreSQL, chosen from configuration.
import type { ColumnDefinitionBuilder } from 'kysely'
import type { DialectName } from '../config.js'

export interface ColumnSpec {
  type: 'integer' | 'bigint'
  build: (c: ColumnDefinitionBuilder) => ColumnDefinitionBuilder
}

/**
 * An auto-increasing primary key that never reuses a value: SQLite's AUTOINCREMENT (a plain
 * INTEGER PRIMARY KEY may hand out a deleted maximum again), PostgreSQL's identity column.
 */
export function idColumn(dialect: DialectName): ColumnSpec {
  if (dialect === 'sqlite') return { type: 'integer', build: (c) => c.primaryKey().autoIncrement() }
  return { type: 'bigint', build: (c) => c.primaryKey().generatedAlwaysAsIdentity() }
}
