// What the insights pages read beyond the metrics themselves: the account's environments in board
// order, its services, deployments by id, the window a query names, and the per-day buckets of a
// window's metrics in the viewer's time zone (pure functions, tested without a database).
import type { Kysely } from 'kysely'
import type { DB } from '../../db/schema.js'
import { GUARDRAIL_RULES, type GuardrailRule } from '../../text-rules.js'
import { environmentListing } from '../board/environments.js'
import { daysFrom, isDate, parseDate } from '../instants.js'
import { localDate } from '../time-zones.js'
import { type Day, localDays, startOfLocalDate } from './calendar.js'
import { type Measured, type Metrics, spreadOf } from './metrics.js'
import { seenServices } from './queries.js'
import type { Deployment } from './rules.js'
import { rowToDeployment } from './store.js'

/** Rows per `id in (…)` lookup, well under either database's limit on bound values. */
const IDS_PER_STATEMENT = 500

/**
 * The account's environments in board order (SPEC §6.3): `visible` leaves hidden ones out, `all`
 * keeps them (a hidden one may still be asked for by name).
 */
export async function accountEnvironments(
  db: Kysely<DB>,
  accountId: number,
): Promise<{ visible: string[]; all: string[] }> {
  const listing = await environmentListing(db, accountId)
  return { visible: listing.visible, all: listing.all.map((e) => e.name) }
}

/** The services of an account (that have deployed to `environment`, when one is given), by name. */
export function accountServices(db: Kysely<DB>, accountId: number, environment?: string): Promise<string[]> {
  return seenServices(db, accountId, environment)
}

/** Deployments of one account by id (those of other accounts are never returned). */
export async function deploymentsWithIds(
  db: Kysely<DB>,
  accountId: number,
  ids: readonly number[],
): Promise<Map<number, Deployment>> {
  const found = new Map<number, Deployment>()
  const unique = [...new Set(ids)]
  for (let i = 0; i < unique.length; i += IDS_PER_STATEMENT) {
    const rows = await db
      .selectFrom('deployments')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('id', 'in', unique.slice(i, i + IDS_PER_STATEMENT))
      .execute()
    for (const row of rows) found.set(row.id, rowToDeployment(row))
  }
  return found
}

export const RANGES = ['7', '30', '90'] as const
export type RangeName = (typeof RANGES)[number]

/** The longest custom window a person may ask for: five years of days. */
export const MAX_WINDOW_DAYS = 5 * 366

export interface InsightsWindow {
  /** The first local date in the window and the first one after it (YYYY-MM-DD). */
  fromDate: string
  toDate: string
  from: number
  to: number
  days: Day[]
  /** 7, 30 or 90 for a named range; null for a custom one. */
  range: RangeName | null
}

function addDays(date: string, n: number): string {
  const [y, m, d] = date.split('-').map(Number) as [number, number, number]
  return new Date(Date.UTC(y, m - 1, d + n)).toISOString().slice(0, 10)
}

/** Whether `text` is a real calendar date written YYYY-MM-DD (2026-02-30 is not): instants.ts. */
export function isIsoDate(text: string): boolean {
  return isDate(text)
}

/** The last `range` local days up to and including today, in `zone`. */
export function namedWindow(range: RangeName, now: number, zone: string): InsightsWindow {
  const today = localDate(now, zone)
  const toDate = addDays(today, 1)
  const fromDate = addDays(toDate, -Number(range))
  return windowOf(fromDate, toDate, zone, range)
}

/** The local days from `fromDate` up to (not including) `toDate`, in `zone`. */
export function windowOf(
  fromDate: string,
  toDate: string,
  zone: string,
  range: RangeName | null = null,
): InsightsWindow {
  const from = startOfLocalDate(fromDate, zone)
  const to = startOfLocalDate(toDate, zone)
  return { fromDate, toDate, from, to, days: localDays(from, to, zone), range }
}

/** The whole days between two dates (to − from), for checking a custom window's length. */
export function daysBetween(fromDate: string, toDate: string): number {
  const from = parseDate(fromDate)
  const to = parseDate(toDate)
  return from === undefined || to === undefined ? Number.NaN : daysFrom(from, to)
}

/** One local day of a window: what finished in it, by outcome, and its durations. */
export interface DayBucket {
  day: Day
  /** Succeeded and not (yet) rolled back. */
  succeeded: number
  failed: number
  /** Succeeded, later replaced by a rollback. */
  rolledBack: number
  durationMedianMs: number | null
  durationCount: number
}

/**
 * Buckets a window's counted deployments by the local day they finished in. A rolled-back
 * deployment also succeeded; in the chart it is drawn once, as rolled back, so the bar's height is
 * every deployment that finished that day.
 */
export function dayBuckets(metrics: Metrics, days: readonly Day[]): DayBucket[] {
  const buckets = days.map((day) => ({
    day,
    succeeded: 0,
    failed: 0,
    rolledBack: 0,
    durations: [] as number[],
  }))
  const find = (at: number) => {
    // Days are few (≤ 5 years): a binary search keeps a long window quick all the same.
    let lo = 0
    let hi = buckets.length - 1
    while (lo <= hi) {
      const mid = (lo + hi) >> 1
      const b = buckets[mid] as (typeof buckets)[number]
      if (at < b.day.start) hi = mid - 1
      else if (at >= b.day.end) lo = mid + 1
      else return b
    }
    return undefined
  }
  for (const d of metrics.succeeded) {
    const b = d.finishedAt === null ? undefined : find(d.finishedAt)
    if (!b) continue
    if (d.rolledBack) b.rolledBack++
    else b.succeeded++
  }
  for (const d of metrics.failed) {
    const b = d.finishedAt === null ? undefined : find(d.finishedAt)
    if (b) b.failed++
  }
  const finishedAt = new Map([...metrics.succeeded, ...metrics.failed].map((d) => [d.id, d.finishedAt]))
  for (const v of metrics.duration.values) {
    const at = finishedAt.get(v.deploymentId)
    const b = at === undefined || at === null ? undefined : find(at)
    if (b) b.durations.push(v.valueMs)
  }
  return buckets.map(({ durations, ...rest }) => {
    const spread = spreadOf(durations)
    return { ...rest, durationMedianMs: spread?.median ?? null, durationCount: durations.length }
  })
}

/** The guardrail lists: deployments whose events broke a rule (SPEC §11), or were sent with --force. */
export const FLAG_KINDS = ['freeze', 'lock', 'bad_version', 'promotion', 'override'] as const
export type FlagKind = (typeof FLAG_KINDS)[number]

/** The lists a figure links to (SPEC §6.2: every figure links to what it counted). */
export const LIST_KINDS = [
  'finished',
  'succeeded',
  'failed',
  'rolled_back',
  'restore',
  'duration',
  'lead_time',
  'incident',
  ...FLAG_KINDS,
] as const
export type ListKind = (typeof LIST_KINDS)[number]

/** What a deployment's events carried (SPEC §11): the rules they broke, and whether one overrode the check. */
export interface GuardrailFlags {
  rules: Set<GuardrailRule>
  overridden: boolean
}

/** How many counted deployments carry each flag. */
export type FlagCounts = Record<FlagKind, number>

function hasFlag(flags: GuardrailFlags | undefined, kind: FlagKind): boolean {
  if (!flags) return false
  return kind === 'override' ? flags.overridden : flags.rules.has(kind)
}

/**
 * The flags of the given deployments, by deployment id (those without any are left out). Flagged
 * events are few: the partial index on them is walked over the span of the deployments' event ids.
 */
export async function guardrailFlagsOf(
  db: Kysely<DB>,
  accountId: number,
  deployments: readonly Deployment[],
): Promise<Map<number, GuardrailFlags>> {
  const out = new Map<number, GuardrailFlags>()
  const owner = new Map<number, number>()
  let low = Number.POSITIVE_INFINITY
  let high = 0
  for (const d of deployments) {
    for (const id of d.eventIds) {
      owner.set(id, d.id)
      if (id < low) low = id
      if (id > high) high = id
    }
  }
  if (owner.size === 0) return out
  const rows = await db
    .selectFrom('events')
    .select(['id', 'guardrails', 'override_reason'])
    .where('account_id', '=', accountId)
    .where((eb) => eb.or([eb('guardrails', 'is not', null), eb('override_reason', 'is not', null)]))
    .where('id', '>=', low)
    .where('id', '<=', high)
    .execute()
  for (const r of rows) {
    const deploymentId = owner.get(Number(r.id))
    if (deploymentId === undefined) continue
    const flags = out.get(deploymentId) ?? { rules: new Set<GuardrailRule>(), overridden: false }
    for (const word of (r.guardrails ?? '').split(',')) {
      const rule = GUARDRAIL_RULES.find((g) => g === word.trim())
      if (rule) flags.rules.add(rule)
    }
    if (r.override_reason !== null) flags.overridden = true
    out.set(deploymentId, flags)
  }
  return out
}

/** How many of a window's finished deployments carry each flag. */
export function flagCounts(metrics: Metrics, flags: ReadonlyMap<number, GuardrailFlags>): FlagCounts {
  const counts: FlagCounts = { freeze: 0, lock: 0, bad_version: 0, promotion: 0, override: 0 }
  for (const d of [...metrics.succeeded, ...metrics.failed]) {
    for (const kind of FLAG_KINDS) if (hasFlag(flags.get(d.id), kind)) counts[kind]++
  }
  return counts
}

/** One row of a list: the deployment and, for measured figures, the value and what it was measured to. */
export interface ListedDeployment {
  deployment: Deployment
  measured: Measured | null
  /** The restoring or first deployment the value was measured to, when found. */
  related: Deployment | null
  /** For time to restore: counted as failed or rolled back, but nothing has restored it yet. */
  unrestored: boolean
}

/**
 * The deployments a figure counted, newest finished first, and the ids of the related ones to load.
 * `flags` (guardrailFlagsOf) is needed for the guardrail lists only.
 */
export function listFor(
  metrics: Metrics,
  kind: ListKind,
  flags: ReadonlyMap<number, GuardrailFlags> = new Map(),
): { rows: ListedDeployment[]; relatedIds: number[] } {
  const plain = (list: readonly Deployment[]) =>
    list.map((deployment) => ({ deployment, measured: null, related: null, unrestored: false }))
  const byId = new Map([...metrics.succeeded, ...metrics.failed].map((d) => [d.id, d]))
  const measured = (values: readonly Measured[]) =>
    values.flatMap((m) => {
      const deployment = byId.get(m.deploymentId)
      return deployment ? [{ deployment, measured: m, related: null, unrestored: false }] : []
    })
  let rows: ListedDeployment[]
  switch (kind) {
    case 'finished':
      rows = plain([...metrics.succeeded, ...metrics.failed])
      break
    case 'succeeded':
      rows = plain(metrics.succeeded)
      break
    case 'failed':
      rows = plain(metrics.failed)
      break
    case 'rolled_back':
      rows = plain(metrics.rolledBack)
      break
    case 'restore':
      rows = [
        ...measured(metrics.timeToRestore.values),
        ...metrics.timeToRestore.unrestored.map((deployment) => ({
          deployment,
          measured: null,
          related: null,
          unrestored: true,
        })),
      ]
      break
    case 'duration':
      rows = measured(metrics.duration.values)
      break
    case 'lead_time':
      rows = measured(metrics.leadTime.values)
      break
    case 'incident':
      rows = plain(metrics.incidents.marked)
      break
    default:
      rows = plain([...metrics.succeeded, ...metrics.failed].filter((d) => hasFlag(flags.get(d.id), kind)))
      break
  }
  rows.sort(
    (a, b) =>
      (b.deployment.finishedAt ?? 0) - (a.deployment.finishedAt ?? 0) || b.deployment.id - a.deployment.id,
  )
  const relatedIds = rows.flatMap((r) => (r.measured?.relatedId == null ? [] : [r.measured.relatedId]))
  return { rows, relatedIds }
}
