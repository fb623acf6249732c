// Retention: each account may keep its events for N days; a background task prunes what is older,
// in small transactions, together with everything derived from it (see README "Retention").
import type { Kysely } from 'kysely'
import type { Database, Rows } from '../../db/connect.js'
import type { DB } from '../../db/schema.js'
import { counted } from '../plural.js'
import type { Task, TaskLogger } from '../tasks.js'
import { parseWholeNumber } from '../whole-numbers.js'

export const DAY_MS = 86_400_000
/** Longest retention one can set: about 100 years (forever is null). */
export const MAX_RETENTION_DAYS = 36_500
/** Events deleted per transaction at most (a deployment's events are never split). */
export const PRUNE_BATCH_EVENTS = 1000
/** Deployments looked at per transaction. */
const CANDIDATES_PER_BATCH = 1000
/** Pause between two transactions, so ingest and derivation get the database in between. */
const PAUSE_MS = 20

/** Parses "30", "forever": the number of days, null for forever; a string saying why not. */
export function parseRetention(raw: string): number | null | { problem: string } {
  const value = raw.trim().toLowerCase()
  if (value === 'forever') return null
  // An empty field is a mistake, not a wish to keep everything: deleting is not undone.
  if (value === '') return { problem: 'needs a number of days or "forever"' }
  // The one grammar of whole numbers (whole-numbers.ts): "1e1", "0x10", "+5" or "030" are refused.
  const days = parseWholeNumber(value, 0, Number.MAX_SAFE_INTEGER)
  if (days === undefined)
    return { problem: `must be a whole number of days or "forever", got "${raw.slice(0, 40)}"` }
  if (days < 1 || days > MAX_RETENTION_DAYS)
    return { problem: `must be between 1 and ${MAX_RETENTION_DAYS} days (or "forever"), got ${days}` }
  return days
}

export function describeRetention(days: number | null): string {
  if (days === null) return 'forever'
  return days === 1 ? '1 day' : `${days} days`
}

export async function setRetention(db: Kysely<DB>, accountId: number, days: number | null): Promise<void> {
  await db.updateTable('accounts').set({ retention_days: days }).where('id', '=', accountId).execute()
}

export async function getRetention(db: Kysely<DB>, accountId: number): Promise<number | null> {
  const row = await db
    .selectFrom('accounts')
    .select('retention_days')
    .where('id', '=', accountId)
    .executeTakeFirst()
  return row?.retention_days === null || row?.retention_days === undefined ? null : Number(row.retention_days)
}

export interface PruneCounts {
  events: number
  deployments: number
  deliveries: number
}

/** One statement for the driver to run: `?` placeholders; an array parameter is an id list. */
interface Step {
  sql: string
  params: Array<string | number | number[] | string[]>
}

interface Candidate {
  id: number
  service: string
  version: string
  event_ids: string
}

/**
 * One prune transaction for an account, as a sequence of statements: the same steps run
 * synchronously on SQLite (nothing else may use the connection inside a transaction there) and
 * over one pooled connection on PostgreSQL.
 *
 * The rule: a deployment is pruned, with all its events, when every one of its events happened
 * (occurred_at, SPEC §1.2) before the cut-off, unless it is its service and environment's running deployment or latest
 * one (so the board still shows what runs now and what happened last). Deliveries of webhooks
 * for pruned events go with them; idempotency keys go by their foreign key; the first
 * deployment of a version (lead time) moves to the earliest one kept.
 */
function* pruneBatch(
  dialect: Database['dialect'],
  accountId: number,
  cutoff: number,
  after: number,
  batchEvents: number,
  newestBefore: number,
): Generator<Step, { counts: PruneCounts; cursor: number; done: boolean }, Rows> {
  const inList = dialect === 'sqlite' ? 'IN (SELECT value FROM json_each(?))' : '= ANY(?::bigint[])'
  // Taking the derivation's lock row: derivation waits, and its per-process memory of the groups
  // (state-cache.ts) sees another writer's generation and reads the groups again.
  const [lock] = yield {
    sql: 'UPDATE deployments_progress SET generation = generation + 1 WHERE id = 1 RETURNING through',
    params: [],
  }
  const through = Number(lock?.through ?? 0)
  // Deployment ids are event ids: none that started before the cut-off has an id above this.
  const last = Math.min(newestBefore, through)
  const empty = { events: 0, deployments: 0, deliveries: 0 }
  if (last <= after) return { counts: empty, cursor: after, done: true }
  const candidates = (yield {
    sql:
      // Walk the deployments by id from the cursor: on SQLite the unary + keeps the planner from
      // choosing an index by account instead, which read every deployment of the account per batch
      // (14 s a batch at 100k deployments, against 1 ms).
      `SELECT d.id, d.service, d.version, d.event_ids FROM deployments d WHERE ${dialect === 'sqlite' ? '+' : ''}d.account_id = ? AND d.id > ? AND d.id <= ? ` +
      'AND d.started_at < ? AND (d.finished_at IS NULL OR d.finished_at < ?) ' +
      'AND NOT EXISTS (SELECT 1 FROM deployment_heads h WHERE h.account_id = d.account_id AND h.service = d.service ' +
      'AND h.environment = d.environment AND h.running_id = d.id) ' +
      'AND EXISTS (SELECT 1 FROM deployments l WHERE l.account_id = d.account_id AND l.service = d.service ' +
      'AND l.environment = d.environment AND l.id > d.id) ' +
      `ORDER BY d.id LIMIT ${CANDIDATES_PER_BATCH}`,
    params: [accountId, after, last, cutoff, cutoff],
  }) as unknown as Candidate[]
  if (candidates.length === 0) return { counts: empty, cursor: last, done: true }

  const eventIdsOf = new Map(candidates.map((c) => [Number(c.id), c.event_ids.split(',').map(Number)]))
  const times = new Map<number, number>()
  for (const row of yield {
    sql: `SELECT id, occurred_at FROM events WHERE id ${inList}`,
    params: [[...eventIdsOf.values()].flat()],
  }) {
    times.set(Number(row.id), Number(row.occurred_at))
  }
  const deployments: number[] = []
  const events: number[] = []
  let cursor = after
  for (const [id, ids] of eventIdsOf) {
    if (events.length >= batchEvents) break
    cursor = id
    // An open deployment may have had an event since the cut-off (a repeated Deploying): it stays.
    if (ids.some((e) => (times.get(e) ?? 0) >= cutoff)) continue
    deployments.push(id)
    events.push(...ids.filter((e) => times.has(e)))
  }
  const done = candidates.length < CANDIDATES_PER_BATCH && cursor === Number(candidates.at(-1)?.id)

  const deliveries = yield {
    sql:
      'DELETE FROM webhook_deliveries WHERE webhook_id IN (SELECT id FROM webhooks WHERE account_id = ?) ' +
      `AND event_id ${inList} RETURNING id`,
    params: [accountId, events],
  }
  yield { sql: `DELETE FROM idempotency_keys WHERE event_id ${inList}`, params: [events] }
  yield { sql: `DELETE FROM events WHERE id ${inList}`, params: [events] }
  yield { sql: `DELETE FROM deployments WHERE id ${inList}`, params: [deployments] }
  // A version's first deployment that goes: found by its key (a seek each), not by a scan.
  const prunedSet = new Set(deployments)
  const gone = candidates.filter((c) => prunedSet.has(Number(c.id)))
  const firsts: Rows = []
  if (dialect === 'sqlite') {
    for (const d of gone) {
      firsts.push(
        ...(yield {
          sql: 'DELETE FROM version_firsts WHERE account_id = ? AND service = ? AND version = ? AND deployment_id = ? RETURNING service, version',
          params: [accountId, d.service, d.version, Number(d.id)],
        }),
      )
    }
  } else if (gone.length > 0) {
    firsts.push(
      ...(yield {
        sql:
          'DELETE FROM version_firsts v USING unnest(?::text[], ?::text[], ?::bigint[]) AS k(service, version, id) ' +
          'WHERE v.account_id = ? AND v.service = k.service AND v.version = k.version AND v.deployment_id = k.id ' +
          'RETURNING v.service, v.version',
        params: [
          gone.map((d) => d.service),
          gone.map((d) => d.version),
          gone.map((d) => Number(d.id)),
          accountId,
        ],
      }),
    )
  }
  if (firsts.length > 0) {
    // The earliest deployment kept of each of those versions, found in one pass over the
    // account's deployments (no index leads with the version: one per key walked a whole service).
    const wanted = new Set(firsts.map((f) => `${String(f.service)}\u001f${String(f.version)}`))
    const inTexts = dialect === 'sqlite' ? 'IN (SELECT value FROM json_each(?))' : '= ANY(?::text[])'
    const earliest = yield {
      sql: `SELECT service, version, min(id) AS id FROM deployments WHERE account_id = ? AND version ${inTexts} GROUP BY service, version`,
      params: [accountId, [...new Set(firsts.map((f) => String(f.version)))]],
    }
    const ids = earliest
      .filter((e) => wanted.has(`${String(e.service)}\u001f${String(e.version)}`))
      .map((e) => Number(e.id))
    if (ids.length > 0) {
      yield {
        sql:
          'INSERT INTO version_firsts (account_id, service, version, deployment_id, started_at) ' +
          `SELECT account_id, service, version, id, started_at FROM deployments WHERE id ${inList}`,
        params: [ids],
      }
    }
  }
  return {
    counts: { events: events.length, deployments: deployments.length, deliveries: deliveries.length },
    cursor,
    done,
  }
}

type BatchResult = { counts: PruneCounts; cursor: number; done: boolean }

/** One batch as a unit of the write connection's queue: one transaction, on disk before it resolves. */
function runSqlite(
  database: Extract<Database, { dialect: 'sqlite' }>,
  steps: Generator<Step, BatchResult, Rows>,
): Promise<BatchResult> {
  const bind = (params: Step['params']) => params.map((p) => (Array.isArray(p) ? JSON.stringify(p) : p))
  return database.write((sql) => {
    let next = steps.next([])
    while (!next.done) next = steps.next(sql.execute(next.value.sql, bind(next.value.params)))
    return next.value
  })
}

async function runPostgres(
  database: Extract<Database, { dialect: 'postgres' }>,
  steps: Generator<Step, BatchResult, Rows>,
): Promise<BatchResult> {
  const client = await database.pool.connect()
  try {
    await client.query('BEGIN')
    try {
      let next = steps.next([])
      while (!next.done) {
        let n = 0
        const text = next.value.sql.replace(/\?/g, () => `$${++n}`)
        const { rows } = await client.query(text, next.value.params)
        next = steps.next(rows as Rows)
      }
      await client.query('COMMIT')
      return next.value
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {})
      throw err
    }
  } finally {
    client.release()
  }
}

export interface PruneOptions {
  pauseMs?: number
  /** Events per transaction (tests make it small to get many transactions). */
  batchEvents?: number
}

/**
 * Prunes one account's events older than `cutoff` (epoch ms), a transaction of at most
 * PRUNE_BATCH_EVENTS events at a time with a short pause between, until nothing older is left.
 */
export async function pruneAccount(
  database: Database,
  accountId: number,
  cutoff: number,
  options: PruneOptions = {},
): Promise<PruneCounts> {
  const total: PruneCounts = { events: 0, deployments: 0, deliveries: 0 }
  const newestBefore = await newestIdBefore(database, accountId, cutoff)
  let cursor = 0
  for (;;) {
    const started = performance.now()
    const steps = pruneBatch(
      database.dialect,
      accountId,
      cutoff,
      cursor,
      options.batchEvents ?? PRUNE_BATCH_EVENTS,
      newestBefore,
    )
    const result =
      database.dialect === 'sqlite' ? await runSqlite(database, steps) : await runPostgres(database, steps)
    total.events += result.counts.events
    total.deployments += result.counts.deployments
    total.deliveries += result.counts.deliveries
    cursor = result.cursor
    if (result.done) return total
    // At least twice as long as the transaction took: pruning gets at most a third of the time.
    const pause = options.pauseMs ?? Math.max(PAUSE_MS, 2 * (performance.now() - started))
    await new Promise((resolve) => setTimeout(resolve, pause))
  }
}

/**
 * The highest event id that happened before the cut-off: no deployment past it can be pruned. Since
 * events may carry their own time (a backfill arrives after newer ones), ids do not follow
 * occurred_at, so this is a max over the index on (account_id, occurred_at, id): it reads the
 * events older than the cut-off, which are what this run deletes (and the few it keeps), once a run.
 */
async function newestIdBefore(database: Database, accountId: number, cutoff: number): Promise<number> {
  const row = await database.db
    .selectFrom('events')
    .select((eb) => eb.fn.max('id').as('id'))
    .where('account_id', '=', accountId)
    .where('occurred_at', '<', cutoff)
    .executeTakeFirst()
  return Number(row?.id ?? 0)
}

export interface RetentionRun extends PruneCounts {
  accounts: number
  ms: number
}

/** Prunes every account that has a retention set. */
export async function pruneExpiredEvents(
  database: Database,
  now = Date.now(),
  options: PruneOptions = {},
): Promise<RetentionRun> {
  const started = performance.now()
  const accounts = await database.db
    .selectFrom('accounts')
    .select(['id', 'retention_days'])
    .where('retention_days', 'is not', null)
    .orderBy('id')
    .execute()
  const run: RetentionRun = { accounts: 0, events: 0, deployments: 0, deliveries: 0, ms: 0 }
  for (const account of accounts) {
    const days = Number(account.retention_days)
    const counts = await pruneAccount(database, Number(account.id), now - days * DAY_MS, options)
    run.accounts++
    run.events += counts.events
    run.deployments += counts.deployments
    run.deliveries += counts.deliveries
  }
  run.ms = Math.round(performance.now() - started)
  return run
}

/** The background task: every ten minutes (the first a minute after start), one log line a run. */
export function retentionTask(database: Database, log: TaskLogger, intervalMs = 10 * 60_000): Task {
  return {
    name: 'retention',
    intervalMs,
    firstRunMs: Math.min(60_000, intervalMs),
    run: async () => {
      const run = await pruneExpiredEvents(database)
      if (run.accounts === 0) return undefined
      log.info(
        { retention: run },
        `retention: pruned ${counted(run.events, 'event')}, ${counted(run.deployments, 'deployment')} and ${counted(run.deliveries, 'webhook delivery', 'webhook deliveries')} in ${counted(run.accounts, 'account')} (${run.ms} ms)`,
      )
      return undefined
    },
  }
}
