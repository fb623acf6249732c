// Reading deployments: the board (now, or as it was at an instant), a service's timeline, and the
// deployments a metrics window counts. The rules that give them meaning are in rules.ts.
import { type Kysely, sql } from 'kysely'
import type { DB, DeploymentRow } from '../../db/schema.js'
import { computeMetrics, firstStartKey, type Metrics, type MetricsWindow } from './metrics.js'
import { type Deployment, type DeploymentOutcome, outcomeAt } from './rules.js'
import { rowToDeployment } from './store.js'

export interface BoardCell {
  service: string
  environment: string
  /** What ran there at the board's instant; null when nothing had succeeded there yet. */
  running: Deployment | null
  /** The latest deployment that had started by then, and its outcome as it stood then. */
  latest: { deployment: Deployment; outcome: DeploymentOutcome } | null
}

/** Rows per `id in (…)` lookup. */
const IDS_PER_STATEMENT = 500

async function deploymentsById(db: Kysely<DB>, ids: readonly number[]): Promise<Map<number, Deployment>> {
  const found = new Map<number, Deployment>()
  for (let i = 0; i < ids.length; i += IDS_PER_STATEMENT) {
    const rows = await db
      .selectFrom('deployments')
      .selectAll()
      .where('id', 'in', ids.slice(i, i + IDS_PER_STATEMENT))
      .execute()
    for (const row of rows) found.set(row.id, rowToDeployment(row))
  }
  return found
}

/**
 * Every service and environment of an account with what ran there at `at` (null: now). `now` and
 * `stallMs` decide whether an open deployment is stalled.
 */
export async function boardCells(
  db: Kysely<DB>,
  accountId: number,
  at: number | null,
  options: { now: number; stallMs: number },
): Promise<BoardCell[]> {
  const heads =
    at === null
      ? await db
          .selectFrom('deployment_heads')
          .select(['service', 'environment', 'running_id', 'latest_id'])
          .where('account_id', '=', accountId)
          .execute()
      : await headsAt(db, accountId, at)
  const ids = heads.flatMap((h) => [h.running_id, h.latest_id].filter((id): id is number => id !== null))
  const byId = await deploymentsById(db, [...new Set(ids)])
  const instant = at ?? options.now
  const cells: BoardCell[] = []
  for (const h of heads) {
    const running = h.running_id === null ? null : (byId.get(h.running_id) ?? null)
    const latest = h.latest_id === null ? undefined : byId.get(h.latest_id)
    if (!running && !latest) continue
    cells.push({
      service: h.service,
      environment: h.environment,
      running,
      latest: latest ? { deployment: latest, outcome: outcomeThen(latest, instant, options.stallMs) } : null,
    })
  }
  return cells
}

/** A deployment's outcome as it stood at `at`: one that finished later was still open then. */
function outcomeThen(d: Deployment, at: number, stallMs: number): DeploymentOutcome {
  if (d.finishedAt !== null && d.finishedAt <= at) return outcomeAt(d, at, stallMs)
  return at - d.startedAt > stallMs ? 'stalled' : 'in_progress'
}

/**
 * Each service and environment's running and latest deployment at a past instant: one correlated
 * lookup per pair, each a short walk back along an index.
 */
async function headsAt(
  db: Kysely<DB>,
  accountId: number,
  at: number,
): Promise<{ service: string; environment: string; running_id: number | null; latest_id: number | null }[]> {
  const { rows } = await sql<{
    service: string
    environment: string
    running_id: number | string | null
    latest_id: number | string | null
  }>`select h.service, h.environment,
      (select d.id from deployments d
        where d.account_id = h.account_id and d.service = h.service and d.environment = h.environment
          and d.result = 'succeeded' and d.finished_at <= ${at}
        order by d.finish_event_id desc limit 1) as running_id,
      (select d.id from deployments d
        where d.account_id = h.account_id and d.service = h.service and d.environment = h.environment
          and d.started_at <= ${at}
        order by d.id desc limit 1) as latest_id
    from deployment_heads h where h.account_id = ${accountId}`.execute(db)
  return rows.map((r) => ({
    service: r.service,
    environment: r.environment,
    running_id: r.running_id === null ? null : Number(r.running_id),
    latest_id: r.latest_id === null ? null : Number(r.latest_id),
  }))
}

/** One page of a service's deployments, newest first, optionally in one environment. */
export async function serviceTimeline(
  db: Kysely<DB>,
  accountId: number,
  service: string,
  options: { environment?: string; beforeId?: number; limit: number },
): Promise<Deployment[]> {
  let query = db
    .selectFrom('deployments')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('service', '=', service)
  if (options.environment !== undefined) query = query.where('environment', '=', options.environment)
  if (options.beforeId !== undefined) query = query.where('id', '<', options.beforeId)
  const rows: DeploymentRow[] = await query.orderBy('id', 'desc').limit(options.limit).execute()
  return rows.map(rowToDeployment)
}

/**
 * The metrics of one window (SPEC §6.2) from the stored deployments: those that finished in the
 * window, the success that restored each failure (which may come after the window), and where each
 * counted version first started.
 */
export async function metricsForWindow(
  db: Kysely<DB>,
  accountId: number,
  window: MetricsWindow,
): Promise<Metrics> {
  let inWindow = db
    .selectFrom('deployments')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('environment', '=', window.environment)
    .where('finished_at', '>=', window.from)
    .where('finished_at', '<', window.to)
  if (window.service !== null) inWindow = inWindow.where('service', '=', window.service)
  const counted = (await inWindow.orderBy('id').execute()).map(rowToDeployment)

  // What restored each failure or rolled-back deployment: the next success in its service.
  const restorers = new Map<number, Deployment>()
  const needRestorer = counted.filter((d) => d.result === 'failed' || d.rolledBack)
  const successes = counted.filter((d) => d.result === 'succeeded')
  for (const d of needRestorer) {
    const finished = d.finishEventId ?? 0
    const inside = successes.find((s) => s.service === d.service && (s.finishEventId ?? 0) > finished)
    if (inside) continue
    const next = await db
      .selectFrom('deployments')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('service', '=', d.service)
      .where('environment', '=', d.environment)
      .where('result', '=', 'succeeded')
      .where('finish_event_id', '>', finished)
      .orderBy('finish_event_id')
      .limit(1)
      .executeTakeFirst()
    if (next) restorers.set(next.id, rowToDeployment(next))
  }

  const firsts = new Map<string, { startedAt: number; id: number }>()
  const wanted = [...new Map(successes.map((d) => [firstStartKey(d.service, d.version), d])).values()]
  for (let i = 0; i < wanted.length; i += IDS_PER_STATEMENT) {
    const part = wanted.slice(i, i + IDS_PER_STATEMENT)
    const rows = await db
      .selectFrom('version_firsts')
      .select(['service', 'version', 'deployment_id', 'started_at'])
      .where('account_id', '=', accountId)
      .where((eb) =>
        eb.or(part.map((d) => eb.and([eb('service', '=', d.service), eb('version', '=', d.version)]))),
      )
      .execute()
    for (const r of rows)
      firsts.set(firstStartKey(r.service, r.version), { startedAt: r.started_at, id: r.deployment_id })
  }
  return computeMetrics(window, [...counted, ...restorers.values()], firsts)
}

export interface DeploymentFilter {
  service?: string
  environment?: string
  outcome?: DeploymentOutcome
  /** Bounds on started_at: from inclusive, to exclusive. */
  from?: number
  to?: number
}

/**
 * One page of an account's deployments, newest first (by id), after the deployment `beforeId`.
 * Outcomes in progress and stalled are told apart by `stallMs` at `now`.
 */
export async function listDeployments(
  db: Kysely<DB>,
  accountId: number,
  filter: DeploymentFilter,
  page: { beforeId?: number; limit: number },
  clock: { now: number; stallMs: number },
): Promise<Deployment[]> {
  let query = db.selectFrom('deployments').selectAll().where('account_id', '=', accountId)
  if (filter.service !== undefined) query = query.where('service', '=', filter.service)
  if (filter.environment !== undefined) query = query.where('environment', '=', filter.environment)
  if (filter.from !== undefined) query = query.where('started_at', '>=', filter.from)
  if (filter.to !== undefined) query = query.where('started_at', '<', filter.to)
  const stalledBefore = clock.now - clock.stallMs
  switch (filter.outcome) {
    case 'succeeded':
    case 'failed':
      query = query.where('result', '=', filter.outcome)
      break
    case 'in_progress':
      query = query.where('result', 'is', null).where('started_at', '>=', stalledBefore)
      break
    case 'stalled':
      query = query.where('result', 'is', null).where('started_at', '<', stalledBefore)
      break
    default:
      break
  }
  if (page.beforeId !== undefined) query = query.where('id', '<', page.beforeId)
  const rows = await query.orderBy('id', 'desc').limit(page.limit).execute()
  return rows.map(rowToDeployment)
}
