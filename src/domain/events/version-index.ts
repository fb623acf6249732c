// Keeps SQLite's version search index (migration 0003) up to date, in batches, off the write path.
import type { Database, SqliteHandle } from '../../db/connect.js'
import { type Task, type TaskLogger, TaskRunner } from '../tasks.js'

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
 * The background task that keeps the index up to date on SQLite (see tasks.ts). The batches run on
 * the connection the requests use (an in-memory database has no other) and hold the write lock for
 * a few milliseconds; the ingest writer waits that long at most. Busy (another writer held the lock
 * past its timeout) or the database away: the runner retries, less and less often.
 */
export function versionIndexTask(database: Database): Task {
  return {
    name: 'version-index',
    intervalMs: IDLE_MS,
    firstRunMs: 0,
    run: () => (indexVersions(database, BATCH) === BATCH ? CATCHING_UP_MS : IDLE_MS),
  }
}

const QUIET: TaskLogger = { debug: () => {}, info: () => {}, warn: () => {} }

/** The version index task on a runner of its own, for code that runs only this one. */
export class VersionIndexer {
  readonly #runner: TaskRunner

  constructor(database: Database, onError: (err: unknown) => void) {
    this.#runner = new TaskRunner(QUIET, (_, err) => {
      onError(err)
      return true
    })
    if (database.dialect === 'sqlite') this.#runner.add(versionIndexTask(database))
  }

  start(): void {
    this.#runner.start()
  }

  stop(): void {
    void this.#runner.stop()
  }
}
