// The one owner of a process's connections to a SQLite file: a write connection fed by a queue, a read-only connection, and snapshots.
import { type Connection, isBusy, openConnection, StatementCache } from './connection.js'
import { LOCK_WAIT_MS, pause, READ_WAIT_MS, sleep, waitedTooLong } from './lock-wait.js'
import { type SqliteSnapshot, type SqlReader, type SqlWriter, sqlOn, type WriterHold } from './sql-access.js'
import { openWalForSync, type WalFile, WalFlusher } from './wal.js'

// What the owner lends is described beside it (sql-access.ts); its callers take it from here.
export type { Rows, SqliteSnapshot, SqlReader, SqlWriter, WriterHold } from './sql-access.js'

export interface OwnerOptions {
  /** Opens the WAL file for its fsyncs; tests wrap the default to watch them. */
  openWal?: (path: string) => Promise<WalFile>
  /** How long a write may wait for the write lock (LOCK_WAIT_MS unless a test says otherwise). */
  lockWaitMs?: number
}

interface UnitJob {
  kind: 'unit'
  unit: (sql: SqlWriter) => unknown
  resolve: (value: unknown) => void
  reject: (err: unknown) => void
  /** When it stops waiting for its turn, or for another process's lock. */
  deadline: number
  attempts: number
}

interface HoldJob {
  kind: 'hold'
  grant: () => void
  reject: (err: unknown) => void
  deadline: number
}

/**
 * Every SQLite connection of a process to one file is opened, set up and used here (ARCHITECTURE.md
 * in docs/ tells the whole model):
 *
 * - One write connection. Writes come as synchronous units, run first-in first-out, each in its own
 *   BEGIN IMMEDIATE … COMMIT; a holder (a Kysely transaction) takes the connection for its whole
 *   duration, across awaits, while the queue waits. So nothing of this process ever meets its own
 *   write lock, and nothing joins another's transaction by accident.
 * - The write connection commits with synchronous=NORMAL, and a unit's promise resolves only after
 *   the WAL holding its commit is fsynced on the thread pool (WalFlusher): the event loop never waits
 *   for the disk, and every acknowledged write is on it. Commits that meet during one fsync share the
 *   next (group commit).
 * - One read-only connection (query_only) for reads, run at once: WAL readers see every committed
 *   write and never wait for the writer.
 * - Snapshots (dump, copy, verify) get a read connection of their own, so a long read transaction
 *   never holds the shared reader in the past.
 * - busy_timeout is 0 everywhere: when another process (the sqlite3 shell, a `shiplog` command,
 *   another instance) holds the write lock, BEGIN IMMEDIATE fails at once and is tried again after a
 *   pause on a timer, never by sleeping on the event loop.
 *
 * A private in-memory database (":memory:") cannot be shared between connections: one connection
 * does everything, and a read while a holder's transaction is open sees that transaction's writes.
 */
export class SqliteOwner {
  readonly #writer: Connection
  readonly #writerSql: SqlWriter
  /** Transaction control on the write connection, prepared once. */
  readonly #control: (statement: string) => void
  readonly #readerSql: SqlReader
  readonly #connections: Connection[]
  readonly #flusher: WalFlusher | null
  readonly #queue: Array<UnitJob | HoldJob> = []
  #held = false
  #pumping = false
  #retry: NodeJS.Timeout | null = null
  /** Fails the jobs whose wait ran out while the writer is held or another process has the lock. */
  #expiry: NodeJS.Timeout | null = null
  readonly #lockWaitMs: number
  #snapshot: { connection: Connection; statements: StatementCache; busy: boolean } | null = null
  readonly #snapshotWaiters: Array<() => void> = []
  #closed = false

  constructor(
    readonly path: string,
    options: OwnerOptions = {},
  ) {
    this.#lockWaitMs = options.lockWaitMs ?? LOCK_WAIT_MS
    const solo = path === ':memory:'
    // The writer first: it creates the file and puts it in WAL mode before the reader opens it.
    this.#writer = openConnection(path, solo ? 'solo' : 'writer')
    const writerStatements = new StatementCache(this.#writer)
    this.#writerSql = sqlOn(writerStatements)
    this.#control = (statement) => {
      writerStatements.statement(statement).run()
    }
    if (solo) {
      this.#readerSql = this.#writerSql
      this.#connections = [this.#writer]
      this.#flusher = null
      return
    }
    const reader = openConnection(path, 'reader')
    this.#readerSql = sqlOn(new StatementCache(reader))
    this.#connections = [this.#writer, reader]
    this.#flusher = new WalFlusher(`${path}-wal`, options.openWal ?? openWalForSync)
  }

  /**
   * Whether `sql` only reads, as SQLite decides without running it. Asked of the write connection,
   * whose schema is always this process's latest: the reader may still hold the schema of before a
   * migration's last statement, and preparing DDL against that fails (a table "already exists").
   */
  readsOnly(sql: string): boolean {
    return this.#writerSql.statement(sql).readonly
  }

  /**
   * Runs `read` on the read-only connection at once. Should another process hold a lock a reader
   * needs (it recovers a crashed writer's WAL), it is run again after a pause.
   */
  read<T>(read: (sql: SqlReader) => T): Promise<T> {
    try {
      return Promise.resolve(read(this.#readerSql))
    } catch (err) {
      if (!isBusy(err)) return Promise.reject(err)
      return this.#readAgain(read)
    }
  }

  async #readAgain<T>(read: (sql: SqlReader) => T): Promise<T> {
    const deadline = Date.now() + READ_WAIT_MS
    for (let attempt = 1; ; attempt++) {
      await sleep(pause(attempt))
      try {
        return read(this.#readerSql)
      } catch (err) {
        if (!isBusy(err) || Date.now() >= deadline) throw err
      }
    }
  }

  /**
   * Queues `unit` for the write connection. It runs in a transaction of its own, in queue order;
   * throwing rolls it back. Resolves with its result once the commit is on disk.
   */
  write<T>(unit: (sql: SqlWriter) => T): Promise<T> {
    if (this.#closed) return Promise.reject(new Error('the database is closed'))
    return new Promise<T>((resolve, reject) => {
      this.#enqueue({
        kind: 'unit',
        unit,
        resolve: resolve as (value: unknown) => void,
        reject,
        deadline: Date.now() + this.#lockWaitMs,
        attempts: 0,
      })
    })
  }

  /** Waits for the write connection, in queue order, and lends it until the hold is given back. */
  hold(): Promise<WriterHold> {
    if (this.#closed) return Promise.reject(new Error('the database is closed'))
    return new Promise<WriterHold>((resolve, reject) => {
      this.#enqueue({
        kind: 'hold',
        grant: () => resolve(this.#lend()),
        reject,
        deadline: Date.now() + this.#lockWaitMs,
      })
    })
  }

  #enqueue(job: UnitJob | HoldJob): void {
    this.#queue.push(job)
    this.#pump()
    if (this.#queue.length > 0 && this.#expiry === null) this.#scheduleExpiry()
  }

  /** While jobs wait, each is failed once its wait runs out, whatever holds the writer up. */
  #scheduleExpiry(): void {
    const first = this.#queue.reduce(
      (soonest, job) => Math.min(soonest, job.deadline),
      Number.POSITIVE_INFINITY,
    )
    if (first === Number.POSITIVE_INFINITY) return
    this.#expiry = setTimeout(
      () => {
        this.#expiry = null
        const now = Date.now()
        // The head job waiting on another process's lock is failed by its own next attempt.
        const retrying = this.#retry === null ? null : this.#queue[0]
        for (const job of this.#queue.filter((j) => j.deadline <= now && j !== retrying)) {
          this.#queue.splice(this.#queue.indexOf(job), 1)
          job.reject(waitedTooLong(this.#lockWaitMs))
        }
        if (this.#queue.length > 0) this.#scheduleExpiry()
      },
      Math.max(0, first - Date.now()) + 1,
    )
  }

  #lend(): WriterHold {
    const writer = this.#writer
    const control = this.#control
    const rollBack = () => this.#rollBack()
    const lockWaitMs = this.#lockWaitMs
    let released = false
    const giveBack = () => {
      if (released) return
      released = true
      this.#held = false
      this.#pump()
    }
    return {
      sql: this.#writerSql,
      get inTransaction() {
        return writer.inTransaction
      },
      begin: async (statement = 'BEGIN IMMEDIATE') => {
        const deadline = Date.now() + lockWaitMs
        for (let attempt = 1; ; attempt++) {
          try {
            control(statement)
            return
          } catch (err) {
            if (!isBusy(err)) throw err
            if (Date.now() >= deadline) throw waitedTooLong(lockWaitMs)
          }
          await sleep(pause(attempt))
        }
      },
      commit: async ({ durable = true } = {}) => {
        try {
          control('COMMIT')
        } catch (err) {
          // Nothing was committed (a full disk, say): undo what is left and give the writer back.
          rollBack()
          giveBack()
          throw err
        }
        giveBack()
        if (durable) await this.#flusher?.flush()
      },
      release: () => {
        rollBack()
        giveBack()
      },
      released: async () => {
        giveBack()
        await this.#flusher?.flush()
      },
    }
  }

  #pump(): void {
    if (this.#pumping) return
    this.#pumping = true
    try {
      while (!this.#held && this.#retry === null) {
        const job = this.#queue[0]
        if (!job) return
        if (job.kind === 'hold') {
          this.#queue.shift()
          this.#held = true
          job.grant()
          return
        }
        this.#runUnit(job)
      }
    } finally {
      this.#pumping = false
      // Nothing waits any more: a pending expiry would only keep the process alive for nothing.
      if (this.#queue.length === 0 && this.#expiry !== null) {
        clearTimeout(this.#expiry)
        this.#expiry = null
      }
    }
  }

  #runUnit(job: UnitJob): void {
    const control = this.#control
    try {
      control('BEGIN IMMEDIATE')
    } catch (err) {
      if (isBusy(err) && Date.now() < job.deadline) {
        // Another process writes: the queue waits, on a timer, and tries again.
        this.#retry = setTimeout(
          () => {
            this.#retry = null
            this.#pump()
          },
          pause(++job.attempts),
        )
        return
      }
      this.#queue.shift()
      job.reject(isBusy(err) ? waitedTooLong(this.#lockWaitMs) : err)
      return
    }
    this.#queue.shift()
    let result: unknown
    try {
      result = job.unit(this.#writerSql)
      control('COMMIT')
    } catch (err) {
      this.#rollBack()
      job.reject(err)
      return
    }
    if (this.#flusher === null) job.resolve(result)
    else
      this.#flusher.flush().then(
        () => job.resolve(result),
        (err: unknown) => job.reject(err),
      )
  }

  /**
   * Ends whatever transaction is open on the write connection. SQLite may already have rolled it back
   * itself (after a full disk, an I/O error), and then there is nothing to undo; a ROLLBACK that
   * fails leaves nothing to do either, and must not keep the writer from the queue.
   */
  #rollBack(): void {
    if (!this.#writer.inTransaction) return
    try {
      this.#control('ROLLBACK')
    } catch {
      // Reported through the error that led here.
    }
  }

  /** A read transaction on a connection of its own, taken at once; one snapshot at a time. */
  async snapshot(): Promise<SqliteSnapshot> {
    if (this.path === ':memory:') {
      // Nothing outside this process can write to a private in-memory database.
      return { sql: this.#readerSql, close: () => {} }
    }
    while (this.#snapshot?.busy) await new Promise<void>((resolve) => this.#snapshotWaiters.push(resolve))
    if (!this.#snapshot) {
      const connection = openConnection(this.path, 'reader')
      this.#connections.push(connection)
      this.#snapshot = { connection, statements: new StatementCache(connection), busy: false }
    }
    const taken = this.#snapshot
    taken.busy = true
    const sql = sqlOn(taken.statements)
    try {
      taken.connection.exec('BEGIN')
      // A deferred transaction takes its snapshot at its first read.
      sql.arrays('SELECT count(*) FROM sqlite_master')
    } catch (err) {
      this.#endSnapshot(taken)
      throw err
    }
    let open = true
    return {
      sql,
      close: () => {
        if (!open) return
        open = false
        this.#endSnapshot(taken)
      },
    }
  }

  #endSnapshot(taken: { connection: Connection; busy: boolean }): void {
    if (taken.connection.inTransaction) taken.connection.exec('COMMIT')
    taken.busy = false
    this.#snapshotWaiters.shift()?.()
  }

  /** Waits for the queue to empty and the last fsync, then closes every connection. */
  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    while (this.#queue.length > 0 || this.#held) await sleep(5)
    await this.#flusher?.close()
    // The writer last: as the last connection it checkpoints the WAL into the database file.
    for (const connection of [...this.#connections].reverse()) connection.close()
  }
}
