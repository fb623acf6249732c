// Keeps the deployments table in step with the events, off the ingest path: each run derives the
// events that arrived since the last one, in one transaction (derivation.ts plans it; the two
// modules beside this one read and write for each database).
import type { Kysely } from 'kysely'
import type { Database } from '../../db/connect.js'
import type { DB } from '../../db/schema.js'
import { BACKLOG_BATCH, CATCH_UP_BATCH } from './derivation.js'
import { DerivationCache } from './state-cache.js'
import { catchUpPostgres, resetPostgres } from './store-postgres.js'
import { catchUpSqlite, resetSqlite } from './store-sqlite.js'

/** One memory of derived state per database handle: every caller in the process shares it. */
const caches = new WeakMap<Database, DerivationCache>()

function cacheFor(database: Database): DerivationCache {
  let cache = caches.get(database)
  if (!cache) {
    cache = new DerivationCache()
    caches.set(database, cache)
  }
  return cache
}

export { BACKLOG_BATCH, CATCH_UP_BATCH, GAP_PATIENCE_MS, rowToDeployment } from './derivation.js'

export interface CatchUpResult {
  /** Events derived by this run (late ones included). */
  events: number
  /** Services and environments derived again from all their events (an event arrived late). */
  regrouped: number
  /** True when more events wait beyond this run's batch. */
  more: boolean
  /** Every event up to this id is derived (when the run moved it; else null). */
  through: number | null
}

/**
 * Whether events wait to be derived, without taking the lock: the usual answer to a read is "no",
 * and it costs three index lookups.
 */
export async function deploymentsBehind(db: Kysely<DB>): Promise<boolean> {
  const progress = await db
    .selectFrom('deployments_progress')
    .select('through')
    .where('id', '=', 1)
    .executeTakeFirst()
  const newest = await db.selectFrom('events').select('id').orderBy('id', 'desc').limit(1).executeTakeFirst()
  const gap = await db.selectFrom('deployment_gaps').select('from_id').limit(1).executeTakeFirst()
  return gap !== undefined || Number(newest?.id ?? 0) > Number(progress?.through ?? 0)
}

/** Derives the next batch of events (waiting for a run elsewhere to finish first). */
export async function catchUpDeployments(
  database: Database,
  options: { limit?: number; now?: number } = {},
): Promise<CatchUpResult> {
  const limit = options.limit ?? CATCH_UP_BATCH
  const now = options.now ?? Date.now()
  const cache = cacheFor(database)
  const writes =
    database.dialect === 'sqlite'
      ? await catchUpSqlite(database, limit, now, cache)
      : await catchUpPostgres(database, limit, now, cache)
  return {
    events: writes.derived,
    regrouped: writes.deleteGroups.length,
    more: writes.batchSize >= limit,
    through: writes.through,
  }
}

/** Forgets every deployment: the next runs derive everything again from the events. */
export async function resetDeployments(database: Database): Promise<void> {
  if (database.dialect === 'sqlite') await resetSqlite(database)
  else await database.db.transaction().execute((trx) => resetPostgres(trx))
}

/**
 * Forgets every deployment and derives them all again from the events, in runs of their own
 * transactions so that ingest goes on meanwhile.
 */
export async function rebuildDeployments(
  database: Database,
  onProgress: (derived: number) => void = () => {},
): Promise<number> {
  await resetDeployments(database)
  let derived = 0
  for (;;) {
    const result = await catchUpDeployments(database, { limit: BACKLOG_BATCH })
    derived += result.events
    onProgress(derived)
    if (!result.more && result.events === 0) return derived
  }
}
