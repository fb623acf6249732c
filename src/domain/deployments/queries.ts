// Reading deployments: a service's timeline, the deployments a metrics window counts, and the
// account's deployments and services page by page. The rules that give them meaning are in rules.ts;
// the board's reads are in ../board/.
import type { Kysely } from 'kysely'
import type { DB, DeploymentRow } from '../../db/schema.js'
import { marksInWindow } from './incident-store.js'
import {
  computeMetrics,
  firstStartKey,
  type IncidentMark,
  type Metrics,
  type MetricsWindow,
} from './metrics.js'
import { cachePerHandle, derivedGeneration } from './read-cache.js'
import type { Deployment, DeploymentOutcome } from './rules.js'
import { rowToDeployment } from './store.js'

/** Recent metrics windows, per database handle and account, for one generation each. */
const metricsCache = cachePerHandle<Metrics>(32)

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
 * The metrics of one window (SPEC §6.2), remembered while the derivation's generation stands
 * (read-cache.ts): they depend on the stored deployments and incident marks only, not on the
 * clock. The window's marks are read on every call (an index walk over the account's few marks)
 * and are part of the key, so a mark made or removed by any instance is seen at once without
 * moving the generation. The result is shared between callers and must not be changed.
 */
export async function metricsForWindow(
  db: Kysely<DB>,
  accountId: number,
  window: MetricsWindow,
): Promise<Metrics> {
  const generation = await derivedGeneration(db)
  const marks = await marksInWindow(db, accountId, window)
  // JSON keeps names with any character apart (no separator can be confused with a name).
  const key = JSON.stringify([
    accountId,
    window.environment,
    window.service,
    window.from,
    window.to,
    ...(marks.size === 0 ? [] : [[...marks.values()].map((m) => [m.deploymentId, m.fixedBy])]),
  ])
  return metricsCache(db).get(key, generation, () => metricsForWindowUncached(db, accountId, window, marks))
}

/**
 * The plain computation metricsForWindow remembers: from the stored deployments, those that
 * finished in the window, the success that restored each failure (which may come after the
 * window, or be the fix a mark names), and where each counted version first started. `marks`:
 * the window's incident marks, read here when not given.
 */
export async function metricsForWindowUncached(
  db: Kysely<DB>,
  accountId: number,
  window: MetricsWindow,
  given?: ReadonlyMap<number, IncidentMark>,
): Promise<Metrics> {
  const marks = given ?? (await marksInWindow(db, accountId, window))
  // Each success comes with where its version first started (lead time): one primary-key lookup
  // per row in the same statement, where a second round of VALUES lists of 500 pairs each cost
  // half as much again as reading the window.
  let inWindow = db
    .selectFrom('deployments as d')
    .leftJoin('version_firsts as f', (join) =>
      join
        .onRef('f.account_id', '=', 'd.account_id')
        .onRef('f.service', '=', 'd.service')
        .onRef('f.version', '=', 'd.version')
        .on('d.result', '=', 'succeeded'),
    )
    .selectAll('d')
    .select(['f.deployment_id as first_id', 'f.started_at as first_started_at'])
    .where('d.account_id', '=', accountId)
    .where('d.environment', '=', window.environment)
    .where('d.finished_at', '>=', window.from)
    .where('d.finished_at', '<', window.to)
  if (window.service !== null) inWindow = inWindow.where('d.service', '=', window.service)
  const rows = await inWindow.orderBy('d.id').execute()
  const counted = rows.map(rowToDeployment)
  const firsts = new Map<string, { startedAt: number; id: number }>()
  for (const r of rows) {
    if (r.first_id === null || r.first_started_at === null) continue
    firsts.set(firstStartKey(r.service, r.version), {
      startedAt: Number(r.first_started_at),
      id: Number(r.first_id),
    })
  }

  // What restored each failure or rolled-back (or marked) deployment: the fix its mark names, or
  // the next success in its service.
  const restorers = new Map<number, Deployment>()
  const inWindowIds = new Set(counted.map((d) => d.id))
  const fixIds = [...marks.values()].flatMap((m) =>
    m.fixedBy === null || inWindowIds.has(m.fixedBy) ? [] : [m.fixedBy],
  )
  if (fixIds.length > 0) {
    const fixes = await db
      .selectFrom('deployments')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('id', 'in', fixIds)
      .execute()
    for (const row of fixes) restorers.set(Number(row.id), rowToDeployment(row))
  }
  const needRestorer = counted.filter(
    (d) => d.result === 'failed' || d.rolledBack || (marks.has(d.id) && d.result === 'succeeded'),
  )
  const successes = counted.filter((d) => d.result === 'succeeded')
  // A success later in the window restores it: only the latest success of each service matters.
  const lastSuccess = new Map<string, number>()
  for (const s of successes) {
    lastSuccess.set(s.service, Math.max(lastSuccess.get(s.service) ?? 0, s.finishEventId ?? 0))
  }
  for (const d of needRestorer) {
    const finished = d.finishEventId ?? 0
    if ((lastSuccess.get(d.service) ?? 0) > finished) continue
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

  return computeMetrics(window, [...counted, ...restorers.values()], firsts, marks)
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

/** The services the account has deployed (to `environment`, when given), sorted by name. */
export async function seenServices(
  db: Kysely<DB>,
  accountId: number,
  environment?: string,
): Promise<string[]> {
  let query = db
    .selectFrom('deployment_heads')
    .select('service')
    .distinct()
    .where('account_id', '=', accountId)
  if (environment !== undefined) query = query.where('environment', '=', environment)
  const rows = await query.execute()
  return rows.map((r) => r.service).sort((a, b) => a.localeCompare(b))
}
