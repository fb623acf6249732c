// The SQLite side of `shiplog backup`: a consistent copy of a live file (VACUUM INTO), then the copy checked and made self-contained.
import { closeSync, constants, openSync } from 'node:fs'
import { isBusy, openConnection, StatementCache } from './connection.js'

const BUSY_WAIT_MS = 10_000
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/**
 * Writes a copy of the SQLite database at `source` to the new file `target`, while other processes
 * keep reading and writing it. VACUUM INTO reads one snapshot in one read transaction (WAL lets
 * writers go on), so the copy holds every transaction committed before it began and none
 * half-written; it never restarts under load the way the page-by-page backup API does when the
 * source changes. Its connection is SQLite's own, opened and closed by SQLite, so it leaves the
 * locks of any other connection of this process alone.
 *
 * The target is created here first, empty and readable by its owner only (it will hold every
 * account's password hashes and key digests): left to SQLite it would be created 0644 less the
 * umask and stay so until the backup ends. VACUUM INTO accepts an empty file as its target, and
 * SQLite gives the journal it may create beside it the same mode. O_EXCL makes it a new inode that
 * no connection holds a lock on, so closing this descriptor drops no lock.
 */
export async function vacuumInto(source: string, target: string): Promise<void> {
  closeSync(openSync(target, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600))
  const connection = openConnection(source, 'plain')
  try {
    const vacuum = new StatementCache(connection).statement('VACUUM INTO ?')
    const deadline = Date.now() + BUSY_WAIT_MS
    for (let attempt = 1; ; attempt++) {
      try {
        vacuum.run(target)
        return
      } catch (err) {
        // Only while a crashed writer's WAL is being recovered, or a connection holds the file exclusively.
        if (!isBusy(err) || Date.now() >= deadline) throw err
      }
      await sleep(Math.min(100, 5 * attempt))
    }
  } finally {
    connection.close()
  }
}

export interface CopyCheck {
  /** What PRAGMA quick_check said: ["ok"] for a sound file. */
  quickCheck: string[]
  /** Events in the copy (0 when it has no events table). */
  events: number
}

/**
 * Checks a finished copy and makes it one self-contained file (journal_mode DELETE: no -wal beside
 * it to lose when it is copied away).
 */
export function settleCopy(path: string): CopyCheck {
  const connection = openConnection(path, 'plain')
  try {
    const statements = new StatementCache(connection)
    const quickCheck = (
      statements.statement('PRAGMA quick_check').all() as Array<{ quick_check: string }>
    ).map((row) => row.quick_check)
    const hasEvents = statements
      .statement("SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'events'")
      .get() as { n: number }
    const events =
      hasEvents.n === 1
        ? (statements.statement('SELECT count(*) AS n FROM events').get() as { n: number }).n
        : 0
    connection.exec('PRAGMA journal_mode = DELETE')
    return { quickCheck, events }
  } finally {
    connection.close()
  }
}
