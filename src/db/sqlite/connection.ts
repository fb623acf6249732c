// Opens and sets up better-sqlite3 connections, and keeps their prepared statements: the only file that constructs one.
import { closeSync, mkdirSync, openSync } from 'node:fs'
import { dirname } from 'node:path'
import SqliteDatabase from 'better-sqlite3'

export type Connection = SqliteDatabase.Database

/** What a prepared statement offers; the statement itself stays better-sqlite3's. */
export interface PreparedStatement {
  run(...params: unknown[]): { changes: number; lastInsertRowid: number | bigint }
  get(...params: unknown[]): unknown
  all(...params: unknown[]): unknown[]
  /** Whether it returns rows (SELECT, RETURNING, most PRAGMAs). */
  readonly reader: boolean
  /** Whether it leaves the database file as it is (SQLite's sqlite3_stmt_readonly). */
  readonly readonly: boolean
}

/**
 * better-sqlite3 12 (its 13.x needs Node 22) aborts the whole process on Node 24 when one of its
 * Database or Statement objects is garbage-collected at the wrong moment: node::ObjectWrap's
 * destructor asserts that an Environment exists ("RemoveEnvironmentCleanupHook: (env) !=
 * nullptr"). So none of them may ever become garbage: every connection and every prepared
 * statement stays reachable from here until the process exits, when Node's own cleanup hooks
 * delete them safely. Statements are cached by SQL text, which Kysely parameterises, so a cache is
 * bounded by the number of distinct queries the code can build.
 */
const retainedForProcessLifetime: unknown[] = []

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

/**
 * What a connection is for. `writer`: the one connection that writes, synchronous=NORMAL because
 * its owner fsyncs the WAL off the event loop before anything is acknowledged (owner.ts). `reader`:
 * read-only (query_only), for requests. `solo`: a private in-memory database, which another
 * connection cannot see, so one connection does both. `plain`: a connection for one operation on a
 * file that is not the live database's role (VACUUM INTO, checking a backup).
 */
export type ConnectionRole = 'writer' | 'reader' | 'solo' | 'plain'

/** A connection set up for its role. Pragmas are set here, once, and never changed afterwards. */
export function openConnection(path: string, role: ConnectionRole): Connection {
  if (path !== ':memory:' && role !== 'plain') createPrivately(path)
  // The constructor's busy timeout covers only the set-up below (journal_mode=WAL on a new file takes
  // the write lock); the connection then waits for nobody on the event loop (busy_timeout 0): the
  // owner tries again after a pause instead (owner.ts). A plain connection is to an existing file.
  const sqlite = new SqliteDatabase(path, { timeout: 5000, fileMustExist: role === 'plain' })
  retainedForProcessLifetime.push(sqlite)
  const pragmas = ['PRAGMA foreign_keys = ON']
  if (role === 'writer' || role === 'solo')
    pragmas.push('PRAGMA journal_mode = WAL', 'PRAGMA synchronous = NORMAL')
  if (role === 'reader') pragmas.push('PRAGMA query_only = ON')
  // A derivation run over a backlog dirties thousands of index pages; past SQLite's default 2 MB
  // cache it would write them to the WAL before its commit, and again at the commit if they change
  // once more. The cache grows only as far as it is used.
  if (role === 'writer' || role === 'solo') pragmas.push('PRAGMA cache_size = -65536')
  pragmas.push('PRAGMA busy_timeout = 0')
  // exec() rather than pragma(): it prepares no Statement object (see retainedForProcessLifetime).
  sqlite.exec(pragmas.join('; '))
  // SQLite's lower() and LIKE fold only ASCII letters; this folds all of Unicode, like
  // PostgreSQL's ILIKE, for searches that need it (and for the version index's trigger).
  sqlite.function('casefold', { deterministic: true }, (value: unknown) =>
    typeof value === 'string' ? value.toLowerCase() : value,
  )
  return sqlite
}

/** A connection's prepared statements, one per SQL text for the connection's life. */
export class StatementCache {
  readonly #objects = new Map<string, SqliteDatabase.Statement>()
  readonly #arrays = new Map<string, SqliteDatabase.Statement>()

  constructor(private readonly sqlite: Connection) {
    retainedForProcessLifetime.push(this.#objects, this.#arrays)
  }

  /** The statement for `sql`, giving rows as objects. */
  statement(sql: string): SqliteDatabase.Statement {
    let statement = this.#objects.get(sql)
    if (!statement) {
      statement = this.sqlite.prepare(sql)
      this.#objects.set(sql, statement)
    }
    return statement
  }

  /** The statement for `sql`, giving rows as arrays (a statement of its own: the mode is its state). */
  arrays(sql: string): SqliteDatabase.Statement {
    let statement = this.#arrays.get(sql)
    if (!statement) {
      statement = this.sqlite.prepare(sql).raw(true)
      this.#arrays.set(sql, statement)
    }
    return statement
  }
}

/** The SQLite error codes of an attempt refused because another connection holds a lock it needs. */
const BUSY = new Set(['SQLITE_BUSY', 'SQLITE_BUSY_SNAPSHOT', 'SQLITE_BUSY_RECOVERY', 'SQLITE_LOCKED'])

/** Whether `err` says another connection held a lock: nothing was done, and trying again may work. */
export function isBusy(err: unknown): boolean {
  return typeof err === 'object' && err !== null && BUSY.has(String((err as { code?: unknown }).code))
}
