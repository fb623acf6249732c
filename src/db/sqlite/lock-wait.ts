// How the SQLite owner (owner.ts) waits for a lock another process holds: how long, how often it
// looks again, and the error when the wait runs out.

/**
 * How long a write waits for the write lock before it fails as busy (a 503 for a request): another
 * process holding it, or the queue ahead of it. A deadlock (a write awaited from inside a
 * transaction that holds the writer, through another handle) ends this way too, never as a hang.
 */
export const LOCK_WAIT_MS = 10_000
/** How long a read waits for a lock (WAL readers wait only while a crashed writer's WAL is recovered). */
export const READ_WAIT_MS = 5_000

/** How long to wait before trying a lock again, the `attempt`th time. */
export function pause(attempt: number): number {
  // Short at first (another process's commit takes a millisecond or two), with jitter so two
  // waiting processes do not keep colliding; at most 25 ms, so a lock freed is taken soon.
  return Math.min(25, 2 ** Math.min(attempt, 5)) * (0.5 + Math.random())
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** A wait for the write lock that ran out: an outage to the caller (SQLITE_BUSY), as SQLite says it. */
export function waitedTooLong(ms: number): Error {
  return Object.assign(
    new Error(
      `database is locked: no turn at the write connection within ${ms} ms (another process holds the write lock, or a transaction held it all that time)`,
    ),
    { code: 'SQLITE_BUSY' },
  )
}
