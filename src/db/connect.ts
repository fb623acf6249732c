// Opens the database named by the configuration as a Kysely handle (SQLite or PostgreSQL).
import { createRequire } from 'node:module'
import { Kysely, PostgresDialect } from 'kysely'
import type pg from 'pg'
import type { DatabaseTarget } from '../config.js'
import type { DB } from './schema.js'
import { kyselyOver } from './sqlite/kysely.js'
import {
  type OwnerOptions,
  SqliteOwner,
  type SqliteSnapshot,
  type SqlReader,
  type SqlWriter,
  type WriterHold,
} from './sqlite/owner.js'

export type { Rows, SqliteSnapshot, SqlReader, SqlWriter, WriterHold } from './sqlite/owner.js'

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

/**
 * An embedded SQLite database: checking `dialect` gives what only SQLite has. Its connections are
 * the owner's (sqlite/owner.ts): `db` routes Kysely's queries through them, and the few hot paths
 * written by hand use `read` and `write`, never a connection of their own.
 */
export interface SqliteHandle extends DatabaseBase {
  readonly dialect: 'sqlite'
  /** The SQLite file (":memory:" for a private in-memory database). */
  readonly sqlitePath: string
  /** Runs a synchronous read on the read-only connection (see SqliteOwner.read). */
  read<T>(read: (sql: SqlReader) => T): Promise<T>
  /** Queues a synchronous unit for the write connection; resolves once it is committed and on disk. */
  write<T>(unit: (sql: SqlWriter) => T): Promise<T>
  /** Lends the write connection, in queue order, for a transaction that spans awaits. */
  hold(): Promise<WriterHold>
  /** A consistent read-only view on a connection of its own, until closed. */
  snapshot(): Promise<SqliteSnapshot>
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
  /** SQLite: opens the WAL for its fsyncs (tests wrap the default to watch them). */
  openWal?: OwnerOptions['openWal']
  /** SQLite: how long a write may wait for the write lock (tests shorten it). */
  lockWaitMs?: number
}

export function openDatabase(target: DatabaseTarget, options: ConnectOptions = {}): Database {
  if (target.dialect === 'sqlite') return openSqlite(target.path, options)
  return openPostgres(target.connectionString, options)
}

function openSqlite(path: string, options: ConnectOptions): SqliteHandle {
  const owner = new SqliteOwner(path, { openWal: options.openWal, lockWaitMs: options.lockWaitMs })
  const db = kyselyOver(owner)
  return {
    db,
    dialect: 'sqlite',
    sqlitePath: path,
    read: (read) => owner.read(read),
    write: (unit) => owner.write(unit),
    hold: () => owner.hold(),
    snapshot: () => owner.snapshot(),
    // Kysely's driver closes the owner, and with it every connection.
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
