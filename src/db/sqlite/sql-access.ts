// What the SQLite owner (owner.ts) lends its borrowers: reading and writing on a connection for
// the length of a call, a writer held across awaits, a snapshot; and the one way those calls reach
// a connection's prepared statements.
import type { PreparedStatement, StatementCache } from './connection.js'

/** Rows as SQLite gives them: objects keyed by column name. */
export type Rows = Record<string, unknown>[]

/** Reading on a connection the owner lends for the length of one synchronous call. */
export interface SqlReader {
  /**
   * The statement for `sql`, prepared once for the connection's life. Hot paths keep it for the
   * length of their call; it must not be used after the call returns.
   */
  statement(sql: string): PreparedStatement
  get<T>(sql: string, ...params: unknown[]): T | undefined
  all<T>(sql: string, ...params: unknown[]): T[]
  /** Rows as arrays of values, in column order (cheaper than objects for wide reads). */
  arrays(sql: string, ...params: unknown[]): unknown[][]
}

/** Writing, inside a transaction the owner began and will commit. */
export interface SqlWriter extends SqlReader {
  run(sql: string, ...params: unknown[]): { changes: number; lastInsertRowid: number }
  /** Runs any statement: its rows when it returns some, [] otherwise. */
  execute(sql: string, params: readonly unknown[]): Rows
}

/**
 * The write connection lent to one holder (a Kysely transaction, a load, a migration statement
 * that begins a transaction) for as long as it needs it across awaits; every other writer of this
 * process waits in the queue meanwhile.
 */
export interface WriterHold {
  readonly sql: SqlWriter
  /** Whether a transaction is open on the write connection. */
  readonly inTransaction: boolean
  /** BEGIN IMMEDIATE (or `statement`), tried again after a pause while another process holds the write lock. */
  begin(statement?: string): Promise<void>
  /**
   * COMMIT, then gives the writer back to the queue. Resolves once the WAL holding the commit is on
   * disk; with `durable: false` at once (a later flush, or a checkpoint, writes it).
   */
  commit(options?: { durable?: boolean }): Promise<void>
  /** Rolls back the open transaction (if any) and gives the writer back. */
  release(): void
  /** Gives the writer back after the holder's own COMMIT; resolves once the WAL is on disk. */
  released(): Promise<void>
}

/** A read transaction on a connection of its own: one consistent view, whatever is written meanwhile. */
export interface SqliteSnapshot {
  readonly sql: SqlReader
  close(): void
}

/** The calls of a reader or writer, on the statements prepared once for its connection. */
export function sqlOn(statements: StatementCache): SqlWriter {
  return {
    statement: (sql) => statements.statement(sql),
    get: <T>(sql: string, ...params: unknown[]) => statements.statement(sql).get(...params) as T | undefined,
    all: <T>(sql: string, ...params: unknown[]) => statements.statement(sql).all(...params) as T[],
    arrays: (sql, ...params) => statements.arrays(sql).all(...params) as unknown[][],
    run: (sql, ...params) => {
      const { changes, lastInsertRowid } = statements.statement(sql).run(...params)
      return { changes, lastInsertRowid: Number(lastInsertRowid) }
    },
    execute: (sql, params) => {
      const statement = statements.statement(sql)
      if (statement.reader) return statement.all(...params) as Rows
      statement.run(...params)
      return []
    },
  }
}
