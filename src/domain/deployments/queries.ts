// Reading deployments: the board (now, or as it was at an instant), a service's timeline, and the
// deployments a metrics window counts. The rules that give them meaning are in rules.ts.
import { type Kysely, sql } from 'kysely'
import type { DB, DeploymentRow } from '../../db/schema.js'
import { computeMetrics, firstStartKey, type Metrics, type MetricsWindow } from './metrics.js'
import { cachePerHandle, derivedGeneration } from './read-cache.js'
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
/** Recent metrics windows, likewise. */
const metricsCache = cachePerHandle<Metrics>(32)

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
 * (read-cache.ts): they depend on the stored deployments only, not on the clock. The result is
 * shared between callers and must not be changed.
 */
export async function metricsForWindow(
  db: Kysely<DB>,
  accountId: number,
  window: MetricsWindow,
): Promise<Metrics> {
  const generation = await derivedGeneration(db)
  // JSON keeps names with any character apart (no separator can be confused with a name).
  const key = JSON.stringify([accountId, window.environment, window.service, window.from, window.to])
  return metricsCache(db).get(key, generation, () => metricsForWindowUncached(db, accountId, window))
}

/**
 * The plain computation metricsForWindow remembers: from the stored deployments, those that
 * finished in the window, the success that restored each failure (which may come after the
 * window), and where each counted version first started.
 */
export async function metricsForWindowUncached(
  db: Kysely<DB>,
  accountId: number,
  window: MetricsWindow,
): Promise<Metrics> {
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

  // What restored each failure or rolled-back deployment: the next success in its service.
  const restorers = new Map<number, Deployment>()
  const needRestorer = counted.filter((d) => d.result === 'failed' || d.rolledBack)
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

/**
 * Every environment the account has deployed to, with the id of its first event (the built-in
 * order's tie-break, SPEC §6.3). The names come from the heads (one row per service and
 * environment), the first event from the events' environment index: a seek per environment, where
 * grouping the deployments would read them all.
 */
export async function seenEnvironments(
  db: Kysely<DB>,
  accountId: number,
): Promise<{ name: string; firstSeenId: number }[]> {
  const { rows } = await sql<{ name: string; first: number | string | null }>`
    select e.environment as name,
      (select min(v.id) from events v where v.account_id = ${accountId} and v.environment = e.environment) as first
    from (select distinct environment from deployment_heads where account_id = ${accountId}) e`.execute(db)
  return rows.map((r) => ({ name: r.name, firstSeenId: Number(r.first ?? 0) }))
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

/** The environments one service has deployed to (unordered). */
export async function environmentsOfService(
  db: Kysely<DB>,
  accountId: number,
  service: string,
): Promise<string[]> {
  const rows = await db
    .selectFrom('deployment_heads')
    .select('environment')
    .where('account_id', '=', accountId)
    .where('service', '=', service)
    .execute()
  return rows.map((r) => r.environment)
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
