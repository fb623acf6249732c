// The delivery metrics of SPEC §6.2, each with the deployments it counted, so every figure can show
// its numerator, its denominator and the list behind them; incident marks (issue 27) add failures
// and name what restored them. Pure functions over deployments.
import { type Deployment, durationMs } from './rules.js'

export const DAY_MS = 86_400_000

export interface MetricsWindow {
  environment: string
  /** Null: every service in the environment. */
  service: string | null
  from: number
  /** Exclusive. */
  to: number
}

export interface Spread {
  median: number
  p90: number
  /** How many values the median and p90 are taken over. */
  count: number
}

/** A per-deployment value behind a spread: the deployment, the value, and what it was measured to. */
export interface Measured {
  deploymentId: number
  valueMs: number
  /** For time to restore: the deployment that restored; for lead time: the first deployment of the version. */
  relatedId: number | null
  /**
   * Lead time only: where it was measured from. `commit`: the commit time its events gave (DORA's
   * definition); `first_deployment`: the start of the version's first deployment (without one).
   */
  from?: LeadTimeFrom
}

export type LeadTimeFrom = 'commit' | 'first_deployment'

/**
 * A deployment marked as having caused an incident (deployment_incidents), and the deployment that
 * fixed it, when one is named. Only the ids matter to the figures; link and note are for people.
 */
export interface IncidentMark {
  deploymentId: number
  fixedBy: number | null
}

/** No marks: the figures are SPEC §6.2's plain definition. */
export const NO_MARKS: ReadonlyMap<number, IncidentMark> = new Map()

export interface Metrics {
  window: MetricsWindow
  days: number
  succeeded: Deployment[]
  failed: Deployment[]
  rolledBack: Deployment[]
  deploymentFrequencyPerDay: number
  /** (failed + rolled back) ÷ (succeeded + failed); null when nothing finished. */
  changeFailureRate: number | null
  /**
   * Each spread is over `values`. `skewed`: deployments whose value would be negative because the
   * clocks of two instances disagree (an end received "before" its start); left out, never counted.
   */
  timeToRestore: { values: Measured[]; unrestored: Deployment[]; skewed: Deployment[]; spread: Spread | null }
  duration: { values: Measured[]; skewed: Deployment[]; spread: Spread | null }
  leadTime: {
    values: Measured[]
    skewed: Deployment[]
    spread: Spread | null
    /** How many values were measured from each start (see Measured.from). */
    from: Record<LeadTimeFrom, number>
  }
  /** What incident marks added (all empty or zero when no counted deployment is marked). */
  incidents: {
    /** Counted deployments marked as having caused an incident, whatever their outcome. */
    marked: Deployment[]
    /** Marked successes that count as failures by their mark alone (neither failed nor rolled back). */
    failures: Deployment[]
    /** Time-to-restore values measured to the fix a mark names (fixed_by) rather than the next success. */
    restoredByFix: number
  }
}

/**
 * Median and 90th percentile. The median of an even count is the mean of the two middle values;
 * the p90 is the nearest rank (the value at position ⌈0.9·n⌉), so it is always a measured value.
 */
export function spreadOf(values: readonly number[]): Spread | null {
  if (values.length === 0) return null
  const sorted = [...values].sort((a, b) => a - b)
  const n = sorted.length
  const middle = Math.floor(n / 2)
  const median =
    n % 2 === 1
      ? (sorted[middle] as number)
      : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2
  const p90 = sorted[Math.max(0, Math.ceil(0.9 * n) - 1)] as number
  return { median, p90, count: n }
}

/**
 * Computes the metrics of one window. `history` holds the deployments of the window's environment
 * (and service, when one is chosen) from before, in and after the window — time to restore looks
 * past the window's end for the next success, or to the fix a mark names. `firstStarts` gives, for
 * lead time, the start of the first deployment of each (service, version) in any environment (see
 * firstStartKey). `marks`, by deployment id: a marked success counts as a failure (change failure
 * rate's numerator; the denominator is unchanged) and is restored like one; a mark's fixed_by, when
 * it names a success in `history`, is what restored the marked deployment. Without marks the
 * figures are SPEC §6.2's, unchanged.
 */
export function computeMetrics(
  window: MetricsWindow,
  history: readonly Deployment[],
  firstStarts: ReadonlyMap<string, { startedAt: number; id: number }>,
  marks: ReadonlyMap<number, IncidentMark> = NO_MARKS,
): Metrics {
  const inScope = history.filter(
    (d) => d.environment === window.environment && (window.service === null || d.service === window.service),
  )
  const counted = inScope.filter(
    (d) =>
      d.result !== null && d.finishedAt !== null && d.finishedAt >= window.from && d.finishedAt < window.to,
  )
  const succeeded = counted.filter((d) => d.result === 'succeeded')
  const failed = counted.filter((d) => d.result === 'failed')
  const rolledBack = succeeded.filter((d) => d.rolledBack)
  const marked = marks.size === 0 ? [] : counted.filter((d) => marks.has(d.id))
  const markedFailures = marked.filter((d) => d.result === 'succeeded' && !d.rolledBack)
  const days = (window.to - window.from) / DAY_MS
  const finished = succeeded.length + failed.length

  // Successes of each service, in the order they finished, to find what restored a failure.
  const successes = new Map<string, Deployment[]>()
  for (const d of inScope) {
    if (d.result !== 'succeeded') continue
    const list = successes.get(d.service) ?? []
    list.push(d)
    successes.set(d.service, list)
  }
  for (const list of successes.values()) list.sort((a, b) => (a.finishEventId ?? 0) - (b.finishEventId ?? 0))

  const restoreValues: Measured[] = []
  const unrestored: Deployment[] = []
  const restoreSkewed: Deployment[] = []
  let restoredByFix = 0
  for (const d of [...failed, ...rolledBack, ...markedFailures].sort((a, b) => a.id - b.id)) {
    const fix = markedFix(inScope, marks.get(d.id))
    const restoredBy = fix ?? nextSuccess(successes.get(d.service) ?? [], d)
    if (!restoredBy || restoredBy.finishedAt === null || d.finishedAt === null) {
      unrestored.push(d)
      continue
    }
    // The next success by arrival, received "before" the failure: the clocks disagree.
    if (restoredBy.finishedAt < d.finishedAt) {
      restoreSkewed.push(d)
      continue
    }
    if (fix) restoredByFix++
    restoreValues.push({
      deploymentId: d.id,
      valueMs: restoredBy.finishedAt - d.finishedAt,
      relatedId: restoredBy.id,
    })
  }

  const durationValues: Measured[] = []
  const durationSkewed: Deployment[] = []
  for (const d of counted) {
    if (d.instant || d.finishedAt === null) continue
    const valueMs = durationMs(d)
    if (valueMs === null) durationSkewed.push(d)
    else durationValues.push({ deploymentId: d.id, valueMs, relatedId: null })
  }

  const leadValues: Measured[] = []
  const leadSkewed: Deployment[] = []
  const leadFrom: Record<LeadTimeFrom, number> = { commit: 0, first_deployment: 0 }
  for (const d of succeeded) {
    if (d.finishedAt === null) continue
    // DORA's lead time runs from the commit: when the events said when it was, from there.
    if (d.commitTime !== null) {
      if (d.finishedAt < d.commitTime) {
        leadSkewed.push(d)
        continue
      }
      leadValues.push({
        deploymentId: d.id,
        valueMs: d.finishedAt - d.commitTime,
        relatedId: null,
        from: 'commit',
      })
      leadFrom.commit++
      continue
    }
    const first = firstStarts.get(firstStartKey(d.service, d.version))
    if (!first) continue
    // The first start of the version received "after" this success: the clocks disagree.
    if (d.finishedAt < first.startedAt) {
      leadSkewed.push(d)
      continue
    }
    leadValues.push({
      deploymentId: d.id,
      valueMs: d.finishedAt - first.startedAt,
      relatedId: first.id,
      from: 'first_deployment',
    })
    leadFrom.first_deployment++
  }

  return {
    window,
    days,
    succeeded,
    failed,
    rolledBack,
    deploymentFrequencyPerDay: days > 0 ? succeeded.length / days : 0,
    changeFailureRate:
      finished === 0 ? null : (failed.length + rolledBack.length + markedFailures.length) / finished,
    timeToRestore: {
      values: restoreValues,
      unrestored,
      skewed: restoreSkewed,
      spread: spreadOf(restoreValues.map((v) => v.valueMs)),
    },
    duration: {
      values: durationValues,
      skewed: durationSkewed,
      spread: spreadOf(durationValues.map((v) => v.valueMs)),
    },
    leadTime: {
      values: leadValues,
      skewed: leadSkewed,
      spread: spreadOf(leadValues.map((v) => v.valueMs)),
      from: leadFrom,
    },
    incidents: { marked, failures: markedFailures, restoredByFix },
  }
}

/** The fix a mark names, when it is a success among the deployments at hand (else: the next success). */
function markedFix(inScope: readonly Deployment[], mark: IncidentMark | undefined): Deployment | null {
  if (mark === undefined || mark.fixedBy === null) return null
  const fix = inScope.find((d) => d.id === mark.fixedBy)
  return fix !== undefined && fix.result === 'succeeded' && fix.finishedAt !== null ? fix : null
}

/**
 * What restored a failed or rolled-back deployment: the next success after it in its service and
 * environment. For a rolled-back one that is the rollback itself, the success that replaced it.
 */
function nextSuccess(successes: readonly Deployment[], after: Deployment): Deployment | null {
  const finishedBy = after.finishEventId ?? 0
  for (const s of successes) {
    if ((s.finishEventId ?? 0) > finishedBy) return s
  }
  return null
}

/** A map key for a service's version; U+001F cannot occur in a name (ingest refuses control characters). */
export function firstStartKey(service: string, version: string): string {
  return `${service}\u001f${version}`
}

/** The first deployment of each (service, version) in any environment, from a set of deployments. */
export function firstStartsOf(
  deployments: readonly Deployment[],
): Map<string, { startedAt: number; id: number }> {
  const firsts = new Map<string, { startedAt: number; id: number }>()
  for (const d of deployments) {
    const key = firstStartKey(d.service, d.version)
    const known = firsts.get(key)
    if (!known || d.id < known.id) firsts.set(key, { startedAt: d.startedAt, id: d.id })
  }
  return firsts
}
