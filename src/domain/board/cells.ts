// The board's cells (SPEC §6.3): for every service and environment, what ran there now or at a past
// instant and how the latest deployment there stood, in one statement remembered per generation;
// and when the account's first deployment started. Laid out as rows in rows.ts.
import { type Kysely, sql } from 'kysely'
import type { DB, DeploymentRow } from '../../db/schema.js'
import { cachePerHandle, derivedGeneration } from '../deployments/read-cache.js'
import { type Deployment, type DeploymentOutcome, outcomeAt } from '../deployments/rules.js'
import { rowToDeployment } from '../deployments/store.js'

export interface BoardCell {
  service: string
  environment: string
  /** What ran there at the board's instant; null when nothing had succeeded there yet. */
  running: Deployment | null
  /** The latest deployment that had started by then, and its outcome as it stood then. */
  latest: { deployment: Deployment; outcome: DeploymentOutcome } | null
}

/** The columns of a deployment row, which the board reads twice (running and latest) in one join. */
const DEPLOYMENT_COLUMNS = [
  'id',
  'account_id',
  'service',
  'environment',
  'version',
  'started_at',
  'finished_at',
  'result',
  'instant',
  'finish_event_id',
  'rollback',
  'rolled_back',
  'deployer',
  'api_key_name',
  'commit_time',
  'event_ids',
] as const

function prefixedColumns(alias: 'r' | 'l') {
  return sql.raw(DEPLOYMENT_COLUMNS.map((c) => `${alias}.${c} as ${alias}_${c}`).join(', '))
}

function prefixedRow(row: Record<string, unknown>, alias: 'r' | 'l'): DeploymentRow | null {
  if (row[`${alias}_id`] === null || row[`${alias}_id`] === undefined) return null
  return Object.fromEntries(
    DEPLOYMENT_COLUMNS.map((c) => [c, row[`${alias}_${c}`]]),
  ) as unknown as DeploymentRow
}

/** What a board cell reads from the database: the running and the latest deployment, as stored. */
export interface BoardPair {
  service: string
  environment: string
  running: Deployment | null
  latest: Deployment | null
}

/** Recent boards as read, per database handle and account and instant, for one generation each. */
const boardCache = cachePerHandle<readonly BoardPair[]>(16)

/**
 * Every service and environment of an account with what ran there at `at` (null: now). `now` and
 * `stallMs` decide whether an open deployment is stalled. The deployments come from boardPairs,
 * remembered while the derivation's generation stands (read-cache.ts); the outcomes, which depend
 * on the clock and the stall time, are worked out on every call.
 */
export async function boardCells(
  db: Kysely<DB>,
  accountId: number,
  at: number | null,
  options: { now: number; stallMs: number },
): Promise<BoardCell[]> {
  const generation = await derivedGeneration(db)
  const pairs = await boardCache(db).get(`${accountId}|${at ?? 'now'}`, generation, () =>
    boardPairs(db, accountId, at),
  )
  return cellsOf(pairs, at ?? options.now, options.stallMs)
}

/** The plain computation boardCells remembers: the same cells, read from the database every time. */
export async function boardCellsUncached(
  db: Kysely<DB>,
  accountId: number,
  at: number | null,
  options: { now: number; stallMs: number },
): Promise<BoardCell[]> {
  return cellsOf(await boardPairs(db, accountId, at), at ?? options.now, options.stallMs)
}

function cellsOf(pairs: readonly BoardPair[], instant: number, stallMs: number): BoardCell[] {
  return pairs.map((p) => ({
    service: p.service,
    environment: p.environment,
    running: p.running,
    latest: p.latest ? { deployment: p.latest, outcome: outcomeThen(p.latest, instant, stallMs) } : null,
  }))
}

/**
 * One statement: the pairs with the ids of their running and latest deployment, joined to both
 * rows. Pairs with neither are left out.
 */
async function boardPairs(db: Kysely<DB>, accountId: number, at: number | null): Promise<BoardPair[]> {
  const pairs = at === null ? pairsNow(accountId) : pairsAt(accountId, at)
  const { rows } = await sql<Record<string, unknown> & { service: string; environment: string }>`
    select p.service, p.environment, ${prefixedColumns('r')}, ${prefixedColumns('l')}
    from (${pairs}) p
    left join deployments r on r.id = p.running_id
    left join deployments l on l.id = p.latest_id`.execute(db)
  const out: BoardPair[] = []
  for (const row of rows) {
    const runningRow = prefixedRow(row, 'r')
    const latestRow = prefixedRow(row, 'l')
    if (!runningRow && !latestRow) continue
    out.push({
      service: row.service,
      environment: row.environment,
      running: runningRow ? rowToDeployment(runningRow) : null,
      latest: latestRow ? rowToDeployment(latestRow) : null,
    })
  }
  return out
}

/** A deployment's outcome as it stood at `at`: one that finished later was still open then. */
function outcomeThen(d: Deployment, at: number, stallMs: number): DeploymentOutcome {
  if (d.finishedAt !== null && d.finishedAt <= at) return outcomeAt(d, at, stallMs)
  return at - d.startedAt > stallMs ? 'stalled' : 'in_progress'
}

/** Each service and environment's running deployment (from its head) and latest one (the last started). */
function pairsNow(accountId: number) {
  return sql`select h.service, h.environment, h.running_id,
      (select d.id from deployments d
        where d.account_id = h.account_id and d.service = h.service and d.environment = h.environment
        order by d.started_at desc, d.id desc limit 1) as latest_id
    from deployment_heads h where h.account_id = ${accountId}`
}

/**
 * Each service and environment's running and latest deployment at a past instant: two correlated
 * lookups per pair, each one seek in an index ordered by time (deployments_success_time_idx,
 * deployments_started_idx), however far back the instant is.
 */
function pairsAt(accountId: number, at: number) {
  return sql`select h.service, h.environment,
      (select d.id from deployments d
        where d.account_id = h.account_id and d.service = h.service and d.environment = h.environment
          and d.result = 'succeeded' and d.finished_at <= ${at}
        order by d.finished_at desc, d.finish_event_id desc limit 1) as running_id,
      (select d.id from deployments d
        where d.account_id = h.account_id and d.service = h.service and d.environment = h.environment
          and d.started_at <= ${at}
        order by d.started_at desc, d.id desc limit 1) as latest_id
    from deployment_heads h where h.account_id = ${accountId}`
}

/**
 * When the account's first deployment started (null when it has none): what the board says to a
 * time before it. A seek per service and environment in deployments_started_idx, as pairsAt does.
 */
export async function firstDeploymentStart(db: Kysely<DB>, accountId: number): Promise<number | null> {
  const { rows } = await sql<{ first: number | string | null }>`
    select min((select d.started_at from deployments d
        where d.account_id = h.account_id and d.service = h.service and d.environment = h.environment
        order by d.started_at asc, d.id asc limit 1)) as first
    from deployment_heads h where h.account_id = ${accountId}`.execute(db)
  const first = rows[0]?.first
  return first === null || first === undefined ? null : Number(first)
}
