// Opens the database named by the configuration as a Kysely handle (SQLite or PostgreSQL).
import { closeSync, mkdirSync, openSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname } from 'node:path'
import SqliteDatabase from 'better-sqlite3'
import {
  Kysely,
  PostgresDialect,
  SqliteDialect,
  type SqliteDatabase as SqliteDialectDatabase,
  type Transaction,
  type TransactionBuilder,
} from 'kysely'
import type pg from 'pg'
import type { DatabaseTarget } from '../config.js'
import type { DB } from './schema.js'

// pg is loaded on first use, so an installation on SQLite does not load it at every start.
const requireFromHere = createRequire(import.meta.url)
let pgModule: typeof pg | null = null

/** The pg module, set up for Shiplog on first use. */
export function loadPg(): typeof pg {
  if (!pgModule) {
    const loaded = requireFromHere('pg') as typeof pg
    // BIGINT (int8) columns hold ids and epoch milliseconds, both far below 2^53: read them as
    // numbers, the same runtime form better-sqlite3 gives.
    loaded.types.setTypeParser(loaded.types.builtins.INT8, (value: string) => Number.parseInt(value, 10))
    pgModule = loaded
  }
  return pgModule
}

interface DatabaseBase {
  readonly db: Kysely<DB>
  close(): Promise<void>
}

/** An embedded SQLite database: checking `dialect` gives its synchronous handles. */
export interface SqliteHandle extends DatabaseBase {
  readonly dialect: 'sqlite'
  /** The raw SQLite connection, for the few places that use its synchronous API directly. */
  readonly sqlite: SqliteDatabase.Database
  /** The SQLite file (":memory:" for a private in-memory database). */
  readonly sqlitePath: string
  /**
   * A prepared statement on the SQLite connection, from the same process-lifetime cache Kysely uses
   * (see statementCache); the hot paths use it to skip query building.
   */
  prepare(sql: string): SqliteDatabase.Statement
}

/** A PostgreSQL database: checking `dialect` gives its pool. */
export interface PostgresHandle extends DatabaseBase {
  readonly dialect: 'postgres'
  readonly pool: pg.Pool
  readonly connectionString: string
}

export type Database = SqliteHandle | PostgresHandle

export interface ConnectOptions {
  /** Called when an idle PostgreSQL connection fails (the server went away); never fatal. */
  onPoolError?: (err: Error) => void
  poolSize?: number
}

export function openDatabase(target: DatabaseTarget, options: ConnectOptions = {}): Database {
  if (target.dialect === 'sqlite') return openSqlite(target.path)
  return openPostgres(target.connectionString, options)
}

/**
 * better-sqlite3 12 (its 13.x needs Node 22) aborts the whole process on Node 24 when one of its
 * Database or Statement objects is garbage-collected at the wrong moment: node::ObjectWrap's
 * destructor asserts that an Environment exists ("RemoveEnvironmentCleanupHook: (env) !=
 * nullptr"). So none of them may ever become garbage: every connection and every prepared
 * statement stays reachable from here until the process exits, when Node's own cleanup hooks
 * delete them safely. Statements are cached by SQL text, which Kysely parameterises, so the cache
 * is bounded by the number of distinct queries the code can build.
 */
const retainedForProcessLifetime: unknown[] = []

export interface StatementCache extends SqliteDialectDatabase {
  prepare(sql: string): SqliteDatabase.Statement
}

function statementCache(sqlite: SqliteDatabase.Database): StatementCache {
  const statements = new Map<string, SqliteDatabase.Statement>()
  retainedForProcessLifetime.push(sqlite, statements)
  return {
    prepare(sql: string) {
      let statement = statements.get(sql)
      if (!statement) {
        statement = sqlite.prepare(sql)
        statements.set(sql, statement)
      }
      return statement
    },
    close: () => sqlite.close(),
  }
}

/** Keeps better-sqlite3 objects made outside the statement cache (transactions) alive; see above. */
export function retainForProcessLifetime(...objects: unknown[]): void {
  retainedForProcessLifetime.push(...objects)
}

/**
 * Creates the database file (and its directory, when missing) readable by its owner only: it holds
 * every account's events and users. SQLite would create it with the umask's usual 0644; it gives
 * the -wal and -shm files it makes later the main file's permissions, so they are 0600 too. An
 * existing file is left as the operator set it, and never opened here: POSIX locks belong to the
 * process, and closing any descriptor of the file drops every lock this process's SQLite
 * connections hold on it. Then the next outside client to close its connection (the sqlite3 shell)
 * believes itself the last one, checkpoints and deletes the -wal and -shm under the running server,
 * and what the server writes afterwards goes to a deleted WAL ("How To Corrupt An SQLite Database
 * File", §2.2). Opening with O_EXCL only ever creates a new inode, on which nothing holds a lock.
 */
function createPrivately(path: string): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 })
  let created: number
  try {
    created = openSync(path, 'wx', 0o600)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return
    throw err
  }
  closeSync(created)
}

/** A SQLite connection set up the way Shiplog needs it, with its statement cache. */
export function openSqliteConnection(
  path: string,
  options: { synchronous: 'FULL' | 'NORMAL' } = { synchronous: 'FULL' },
): {
  sqlite: SqliteDatabase.Database
  statements: StatementCache
} {
  if (path !== ':memory:') createPrivately(path)
  const sqlite = new SqliteDatabase(path)
  // WAL lets readers run beside the writer; synchronous=FULL fsyncs the WAL at every commit, so a
  // committed change survives power loss, not only a process crash. NORMAL is only for the event
  // connection, whose store fsyncs the WAL itself before answering (see domain/events/store.ts). exec()
  // rather than pragma(): it prepares no Statement object (see statementCache).
  sqlite.exec(
    `PRAGMA journal_mode = WAL; PRAGMA synchronous = ${options.synchronous}; PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 5000`,
  )
  // SQLite's lower() and LIKE fold only ASCII letters; this folds all of Unicode, like
  // PostgreSQL's ILIKE, for searches that need it.
  sqlite.function('casefold', { deterministic: true }, (value: unknown) =>
    typeof value === 'string' ? value.toLowerCase() : value,
  )
  return { sqlite, statements: statementCache(sqlite) }
}

/** The SQLite error codes of a write that lost the race for the write lock (see RetryingKysely). */
const LOCK_LOST = new Set(['SQLITE_BUSY', 'SQLITE_BUSY_SNAPSHOT'])
/** How long a transaction is tried again after losing the write lock, at most. */
export const LOCK_RETRY_MS = 10_000

/** A transaction that lost the race for SQLite's write lock: nothing of it was written. */
export function lostWriteLock(err: unknown): boolean {
  return typeof err === 'object' && err !== null && LOCK_LOST.has(String((err as { code?: unknown }).code))
}

/**
 * Kysely on SQLite, whose transactions are tried again, whole, when they lose the race for the
 * write lock. Kysely begins them DEFERRED: a transaction that reads and then writes upgrades to a
 * writer at its first write, and SQLite refuses that at once (SQLITE_BUSY_SNAPSHOT, or SQLITE_BUSY
 * while another connection writes; its busy timeout is not used for an upgrade) when another
 * connection committed since the transaction's first read: this process's event store, another
 * instance, or a `shiplog` command beside a running server. The refused statement was the first
 * write, so nothing was written and the whole callback runs again on fresh data, after a short
 * pause. Taking the lock at BEGIN (IMMEDIATE) instead would hold it across the callback's other
 * awaits, and the event store's connection in this same thread would then wait for it with the
 * event loop stopped.
 */
class RetryingKysely extends Kysely<DB> {
  override transaction(): TransactionBuilder<DB> {
    return retrying(super.transaction())
  }
}

function retrying(builder: TransactionBuilder<DB>): TransactionBuilder<DB> {
  const execute = async <T>(callback: (trx: Transaction<DB>) => Promise<T>): Promise<T> => {
    const deadline = Date.now() + LOCK_RETRY_MS
    for (let attempt = 1; ; attempt++) {
      try {
        return await builder.execute(callback)
      } catch (err) {
        if (!lostWriteLock(err) || Date.now() >= deadline) throw err
        // A few milliseconds, growing, with jitter so two losers do not collide again.
        const pause = Math.min(200, 2 ** Math.min(attempt, 7)) * (0.5 + Math.random())
        await new Promise((resolve) => setTimeout(resolve, pause))
      }
    }
  }
  return new Proxy(builder, {
    get(target, property, receiver) {
      if (property === 'execute') return execute
      if (property === 'setAccessMode' || property === 'setIsolationLevel') {
        return (value: never) => retrying(target[property](value))
      }
      const value: unknown = Reflect.get(target, property, receiver)
      return typeof value === 'function' ? value.bind(target) : value
    },
  })
}

function openSqlite(path: string): SqliteHandle {
  const { sqlite, statements } = openSqliteConnection(path)
  const db = new RetryingKysely({ dialect: new SqliteDialect({ database: statements }) })
  return {
    db,
    dialect: 'sqlite',
    sqlite,
    sqlitePath: path,
    prepare: (sql) => statements.prepare(sql),
    // Kysely's SQLite driver closes the better-sqlite3 handle itself.
    close: () => db.destroy(),
  }
}

function openPostgres(connectionString: string, options: ConnectOptions): PostgresHandle {
  const pool = new (loadPg().Pool)({
    connectionString,
    max: options.poolSize ?? 10,
    // Fail fast when the server is away, so requests get a 503 instead of hanging.
    connectionTimeoutMillis: 5000,
    idleTimeoutMillis: 30_000,
    statement_timeout: 15_000,
    // The server enforces statement_timeout; this client-side bound also covers a connection whose
    // packets silently vanish, where a query would otherwise wait for TCP to give up.
    query_timeout: 20_000,
    application_name: 'shiplog',
  })
  pool.on('error', (err) => options.onPoolError?.(err))
  // A connection can die while checked out but before its next query (the pool only listens on idle
  // ones); without a listener of its own that 'error' event would crash the process. The query that
  // uses it fails on its own and is answered with a 503.
  pool.on('connect', (client) => {
    client.on('error', (err) => options.onPoolError?.(err))
  })
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) })
  return {
    db,
    dialect: 'postgres',
    pool,
    connectionString,
    close: () => db.destroy(),
  }
}
