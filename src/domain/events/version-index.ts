// Keeps SQLite's version search index (migration 0003) up to date, in batches, off the write path.
import type { Database } from '../../db/connect.js'
import { type Task, type TaskLogger, TaskRunner } from '../tasks.js'

/**
 * Adds the next events (by id) that the index does not hold yet, at most `limit`, and returns how
 * many. The index holds every event up to `events_version_index.through` and none after it, so a
 * search reads the index up to there and scans the rest (query-plan.ts). Ids only grow, in commit
 * order (AUTOINCREMENT under SQLite's single writer), so whatever commits later is past `through`.
 *
 * Indexing in the inserting transaction, by trigger, made each event cost its trigrams' share of a
 * new FTS5 segment at every commit: ingest on SQLite lost about a third of its throughput. In
 * batches it costs a few microseconds an event, outside the commit that acknowledges it.
 */
export async function indexVersions(database: Database, limit: number): Promise<number> {
  if (database.dialect !== 'sqlite') return 0
  // One unit of the write connection's queue: the write lock is held from its start, so `through`
  // cannot move under the batch (another process indexing the same file waits, then starts after).
  return database.write((sql) => {
    const head = sql.get<{ through: number }>('select through from events_version_index')
    if (!head) throw new Error('events_version_index has no row (run shiplog migrate)')
    const { through } = head
    // An aggregate always gives one row.
    const batch = sql.get<{ count: number; last: number | null }>(
      'select count(*) as count, max(id) as last from (select id from events where id > ? order by id limit ?)',
      through,
      limit,
    ) as { count: number; last: number | null }
    if (batch.last !== null) {
      sql.run(
        'insert into events_version_fts (rowid, version) select id, casefold(version) from events where id > ? and id <= ?',
        through,
        batch.last,
      )
      sql.run('update events_version_index set through = ?', batch.last)
    }
    return batch.count
  })
}

/** Events per batch: a few milliseconds of the event loop (and of the write lock) each. */
const BATCH = 500
/** Pause between batches while catching up: about a fifth of the event loop goes to indexing. */
const CATCHING_UP_MS = 15
/** Pause when there was nothing (or little) to index. */
const IDLE_MS = 1000

/**
 * The background task that keeps the index up to date on SQLite (see tasks.ts). Each batch is a
 * unit of a few milliseconds in the write connection's queue; an ingest batch queued behind it
 * waits that long at most. Busy (another process held the lock past the owner's wait) or the
 * database away: the runner retries, less and less often.
 */
export function versionIndexTask(database: Database): Task {
  return {
    name: 'version-index',
    intervalMs: IDLE_MS,
    firstRunMs: 0,
    run: async () => ((await indexVersions(database, BATCH)) === BATCH ? CATCHING_UP_MS : IDLE_MS),
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
