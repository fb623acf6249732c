// Keeps SQLite's version search index (migration 0003) up to date, in batches, off the write path.
import type { Database, SqliteHandle } from '../../db/connect.js'

/**
 * Adds the next events (by id) that the index does not hold yet, at most `limit`, and returns how
 * many. The index holds every event up to `events_version_index.through` and none after it, so a
 * search reads the index up to there and scans the rest (queries.ts). Ids only grow, in commit
 * order (AUTOINCREMENT under SQLite's single writer), so whatever commits later is past `through`.
 *
 * Indexing in the inserting transaction, by trigger, made each event cost its trigrams' share of a
 * new FTS5 segment at every commit: ingest on SQLite lost about a third of its throughput. In
 * batches it costs a few microseconds an event, outside the commit that acknowledges it.
 */
export function indexVersions(database: Database, limit: number): number {
  if (database.dialect !== 'sqlite') return 0
  // The batch is made durable by the next commit that syncs (every ingest commit does), not by an
  // fsync of its own: better-sqlite3 would wait for that on the event loop. Lost in a crash, it is
  // lost whole, `through` with it, and indexed again.
  const { synchronous } = database.prepare('pragma synchronous').get() as { synchronous: number }
  database.prepare('pragma synchronous = normal').run()
  try {
    return indexBatch(database, limit)
  } finally {
    database.prepare(`pragma synchronous = ${Number(synchronous)}`).run()
  }
}

function indexBatch(database: SqliteHandle, limit: number): number {
  // The write lock is taken first, so `through` cannot move under this batch (another process
  // indexing the same file waits, then starts after it). This fails, and nothing is done, when a
  // transaction of Kysely's is open on the connection.
  database.prepare('begin immediate').run()
  try {
    const { through } = database.prepare('select through from events_version_index').get() as {
      through: number
    }
    const batch = database
      .prepare(
        'select count(*) as count, max(id) as last from (select id from events where id > ? order by id limit ?)',
      )
      .get(through, limit) as { count: number; last: number | null }
    if (batch.last !== null) {
      database
        .prepare(
          'insert into events_version_fts (rowid, version) select id, casefold(version) from events where id > ? and id <= ?',
        )
        .run(through, batch.last)
      database.prepare('update events_version_index set through = ?').run(batch.last)
    }
    database.prepare('commit').run()
    return batch.count
  } catch (err) {
    // The transaction is this function's own: it began above.
    if (database.sqlite.inTransaction) database.prepare('rollback').run()
    throw err
  }
}

/** Events per batch: a few milliseconds of the event loop (and of the write lock) each. */
const BATCH = 500
/** Pause between batches while catching up: about a fifth of the event loop goes to indexing. */
const CATCHING_UP_MS = 15
/** Pause when there was nothing (or little) to index. */
const IDLE_MS = 1000

/**
 * Runs indexVersions in the background on one database until stopped. The batches run on the
 * connection the requests use (an in-memory database has no other) and hold the write lock for a
 * few milliseconds; the ingest writer waits that long at most.
 */
export class VersionIndexer {
  private timer: NodeJS.Timeout | null = null
  private stopped = false
  private failures = 0

  constructor(
    private readonly database: Database,
    private readonly onError: (err: unknown) => void,
  ) {}

  start(): void {
    if (this.database.dialect !== 'sqlite' || this.stopped || this.timer) return
    this.schedule(0)
  }

  stop(): void {
    this.stopped = true
    if (this.timer) clearTimeout(this.timer)
    this.timer = null
  }

  private schedule(ms: number): void {
    if (this.stopped) return
    this.timer = setTimeout(() => this.run(), ms)
    // Never the reason the process stays up.
    this.timer.unref()
  }

  private run(): void {
    this.timer = null
    try {
      const indexed = indexVersions(this.database, BATCH)
      this.failures = 0
      this.schedule(indexed === BATCH ? CATCHING_UP_MS : IDLE_MS)
    } catch (err) {
      // Busy (another writer held the lock past its timeout) or the database is away: try again,
      // less and less often while it lasts, and say so the first time.
      if (this.failures++ === 0) this.onError(err)
      this.schedule(Math.min(IDLE_MS * 2 ** this.failures, 60_000))
    }
  }
}
