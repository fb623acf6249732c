// fsyncs the SQLite WAL on libuv's thread pool, so a commit is on disk before it is acknowledged without stopping the event loop.
import { type FileHandle, open } from 'node:fs/promises'

/** The part of an open file the flusher uses. */
export type WalFile = Pick<FileHandle, 'sync' | 'close'>

/**
 * Opens the WAL for the fsync after each commit. Read-only is enough: fsync flushes whatever any
 * process wrote to the file. SQLite never locks the -wal file (its WAL-mode locks are on the
 * database file and the -shm), so this descriptor, unlike one of the database file itself, drops
 * no lock when it is closed.
 */
export const openWalForSync = (path: string): Promise<WalFile> => open(path, 'r')

/**
 * fsyncs the WAL file, coalescing callers: a flush already under way may have started before the
 * caller's commit, so it does not count for that caller, who waits for the next one; every caller
 * that arrives meanwhile shares that next one.
 */
export class WalFlusher {
  #handle: Promise<WalFile> | null = null
  #running: Promise<void> | null = null
  #next: Promise<void> | null = null

  constructor(
    private readonly path: string,
    private readonly openWal: (path: string) => Promise<WalFile>,
  ) {}

  flush(): Promise<void> {
    const running = this.#running
    if (!running) return this.#start()
    this.#next ??= running.then(
      () => this.#startQueued(),
      () => this.#startQueued(),
    )
    return this.#next
  }

  #startQueued(): Promise<void> {
    this.#next = null
    return this.#start()
  }

  #start(): Promise<void> {
    const run = this.#sync().finally(() => {
      if (this.#running === run) this.#running = null
    })
    this.#running = run
    return run
  }

  async #sync(): Promise<void> {
    // Opened on first use: SQLite creates the WAL file at the first commit, which precedes this.
    this.#handle ??= this.openWal(this.path)
    try {
      await (await this.#handle).sync()
    } catch (err) {
      // A failed open is tried again next time; a failed fsync means the disk refused the data.
      this.#handle = null
      throw err
    }
  }

  async close(): Promise<void> {
    while (this.#running || this.#next) await (this.#next ?? this.#running)?.catch(() => {})
    const handle = this.#handle
    this.#handle = null
    if (handle) await (await handle).close().catch(() => {})
  }
}
