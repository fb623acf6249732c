// Kysely over a SqliteOwner: reads on the read-only connection, writes and transactions through the writer's queue.
import {
  CompiledQuery,
  type DatabaseConnection,
  type Dialect,
  type Driver,
  Kysely,
  type QueryResult,
  SqliteAdapter,
  SqliteIntrospector,
  SqliteQueryCompiler,
  type TransactionSettings,
} from 'kysely'
import type { DB } from '../schema.js'
import type { SqliteOwner, SqliteSnapshot, SqlReader, SqlWriter, WriterHold } from './owner.js'

/** A statement that opens a transaction when it runs outside one (a migration's own BEGIN). */
const OPENS_TRANSACTION = /^\s*(begin|savepoint)\b/i

function runOn(sql: SqlReader | SqlWriter, query: CompiledQuery): QueryResult<unknown> {
  const statement = sql.statement(query.sql)
  const params = query.parameters as unknown[]
  if (statement.reader) return { rows: statement.all(...params) }
  const { changes, lastInsertRowid } = statement.run(...params)
  return { numAffectedRows: BigInt(changes), insertId: BigInt(lastInsertRowid), rows: [] }
}

/**
 * One Kysely "connection": a route, not a connection of its own. Outside a transaction each query
 * goes where SQLite says it belongs: a query that only reads to the read connection, anything else
 * to the writer's queue as a unit of its own. Inside a transaction every query runs on the write
 * connection, which the transaction holds from BEGIN to COMMIT; a read-only transaction runs on a
 * snapshot instead and holds no writer.
 */
class RoutedConnection implements DatabaseConnection {
  #hold: WriterHold | null = null
  /** The hold was taken for a BEGIN the caller ran itself; it ends when its transaction does. */
  #heldForStatement = false
  #snapshot: SqliteSnapshot | null = null

  constructor(private readonly owner: SqliteOwner) {}

  async begin(settings: TransactionSettings): Promise<void> {
    if (settings.accessMode === 'read only') {
      this.#snapshot = await this.owner.snapshot()
      return
    }
    const hold = await this.owner.hold()
    try {
      await hold.begin()
    } catch (err) {
      hold.release()
      throw err
    }
    this.#hold = hold
  }

  async commit(): Promise<void> {
    // A snapshot has nothing to commit. A failed COMMIT rolls back and gives the writer back itself,
    // so Kysely's rollback that follows finds nothing left.
    if (this.#snapshot) this.release()
    else await this.#takeHold().commit()
  }

  async rollback(): Promise<void> {
    this.release()
  }

  /** Ends what the connection still holds: a snapshot closed, a hold given back with its work undone. */
  release(): void {
    this.#snapshot?.close()
    this.#snapshot = null
    this.#hold?.release()
    this.#hold = null
    this.#heldForStatement = false
  }

  #takeHold(): WriterHold {
    const hold = this.#hold
    if (!hold) throw new Error('no transaction is open on this connection')
    this.#hold = null
    this.#heldForStatement = false
    return hold
  }

  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    return (await this.#execute(query)) as QueryResult<R>
  }

  async #execute(query: CompiledQuery): Promise<QueryResult<unknown>> {
    const snapshot = this.#snapshot
    if (snapshot) return runOn(snapshot.sql, query)
    const hold = this.#hold
    if (hold) {
      const result = runOn(hold.sql, query)
      if (this.#heldForStatement && !hold.inTransaction) await this.#takeHold().released()
      return result
    }
    if (OPENS_TRANSACTION.test(query.sql)) {
      const taken = await this.owner.hold()
      try {
        await taken.begin(query.sql)
      } catch (err) {
        taken.release()
        throw err
      }
      this.#hold = taken
      this.#heldForStatement = true
      return { rows: [] }
    }
    if (this.owner.readsOnly(query.sql)) return this.owner.read((sql) => runOn(sql, query))
    return this.owner.write((sql) => runOn(sql, query))
  }

  async *streamQuery<R>(query: CompiledQuery): AsyncIterableIterator<QueryResult<R>> {
    // A statement left open across awaits would keep the shared read connection busy (better-sqlite3
    // allows one running statement per connection): the rows are read whole, then handed out.
    const { rows } = await this.#execute(query)
    for (const row of rows) yield { rows: [row as R] }
  }
}

class OwnedSqliteDriver implements Driver {
  constructor(private readonly owner: SqliteOwner) {}

  async init(): Promise<void> {}

  async acquireConnection(): Promise<DatabaseConnection> {
    return new RoutedConnection(this.owner)
  }

  async beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    await (connection as RoutedConnection).begin(settings)
  }

  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    await (connection as RoutedConnection).commit()
  }

  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    await (connection as RoutedConnection).rollback()
  }

  async savepoint(connection: DatabaseConnection, name: string): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw(`savepoint "${name.replaceAll('"', '""')}"`))
  }

  async rollbackToSavepoint(connection: DatabaseConnection, name: string): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw(`rollback to savepoint "${name.replaceAll('"', '""')}"`))
  }

  async releaseSavepoint(connection: DatabaseConnection, name: string): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw(`release savepoint "${name.replaceAll('"', '""')}"`))
  }

  async releaseConnection(connection: DatabaseConnection): Promise<void> {
    ;(connection as RoutedConnection).release()
  }

  async destroy(): Promise<void> {
    await this.owner.close()
  }
}

/** Kysely on the owner's connections. */
export function kyselyOver(owner: SqliteOwner): Kysely<DB> {
  const dialect: Dialect = {
    createAdapter: () => new SqliteAdapter(),
    createDriver: () => new OwnedSqliteDriver(owner),
    createIntrospector: (db) => new SqliteIntrospector(db),
    createQueryCompiler: () => new SqliteQueryCompiler(),
  }
  return new Kysely<DB>({ dialect })
}
