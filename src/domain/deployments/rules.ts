// What a deployment is (SPEC §6.1): how events of one service and environment fold into
// deployments, what counts as a rollback, and what ran where at a given time. Pure functions over
// plain values; the SQL that feeds them lives in queries.ts beside this file.
import type { EventStatus } from '../../db/schema.js'

/** What the rules need of an event. */
export interface DeploymentEvent {
  id: number
  service: string
  environment: string
  version: string
  status: EventStatus
  /** When it happened (occurred_at, SPEC §1.2): deployments' times are the events' own. */
  occurredAt: number
  /** When its change was committed (commit_time), or null. */
  commitTime: number | null
  deployer: string | null
  apiKeyName: string | null
}

/** How a deployment ended; null while it is open (in progress or stalled, decided at read time). */
export type DeploymentResult = 'succeeded' | 'failed' | null

export type DeploymentOutcome = 'in_progress' | 'succeeded' | 'failed' | 'stalled'

export interface Deployment {
  /** The id of the event that opened it: unique, stable, and in arrival order. */
  id: number
  service: string
  environment: string
  version: string
  startedAt: number
  finishedAt: number | null
  result: DeploymentResult
  /** A Deployed or Failed event with no open deployment: started and finished at once. */
  instant: boolean
  /** The id of the event that finished it, which orders successes; null while open. */
  finishEventId: number | null
  rollback: boolean
  rolledBack: boolean
  /** Who sent it: the first of its events that names a deployer (and key). */
  deployer: string | null
  apiKeyName: string | null
  /** The commit time the first of its events to carry one gave; lead time runs from it. */
  commitTime: number | null
  eventIds: number[]
}

/**
 * Where one service and environment stands after some of its events: the open deployment of each
 * version, the deployment running now, and every version that has succeeded there. Enough to apply
 * the next event without reading the history again.
 */
export interface GroupState {
  open: Map<string, Deployment>
  running: Deployment | null
  succeededVersions: Set<string>
}

export function emptyGroupState(): GroupState {
  return { open: new Map(), running: null, succeededVersions: new Set() }
}

/** The key that groups events into a board cell and a rollback history. */
export function groupKey(service: string, environment: string): string {
  return JSON.stringify([service, environment])
}

/**
 * Applies one event (the next by id in its service and environment) to the group's state. Returns
 * every deployment it created or changed: the event's own, and a deployment it marked rolled back.
 */
export function applyEvent(state: GroupState, event: DeploymentEvent): Deployment[] {
  const open = state.open.get(event.version)
  if (event.status === 'Deploying') {
    if (open) {
      // A retry: folded into the deployment already open.
      open.eventIds.push(event.id)
      fillSender(open, event)
      return [open]
    }
    const opened = newDeployment(event, false)
    state.open.set(event.version, opened)
    return [opened]
  }
  let deployment: Deployment
  if (open) {
    state.open.delete(event.version)
    deployment = open
    deployment.eventIds.push(event.id)
    fillSender(deployment, event)
  } else {
    deployment = newDeployment(event, true)
  }
  deployment.finishedAt = event.occurredAt
  deployment.finishEventId = event.id
  deployment.result = event.status === 'Deployed' ? 'succeeded' : 'failed'
  const changed = [deployment]
  // What runs is the success that finished last in time. Events come in arrival order, so this is
  // almost always the newest; only instances whose clocks disagree can deliver one that finished
  // earlier than the one running, and that one does not replace it.
  if (deployment.result === 'succeeded' && (!state.running || !finishedBefore(deployment, state.running))) {
    const replaced = state.running
    // 1.0 → 1.1 → 1.0: the third brings back a version that succeeded before but was not the one
    // running just before it. 1.1 → 1.1 is a redeploy, not a rollback.
    if (
      replaced &&
      replaced.version !== deployment.version &&
      state.succeededVersions.has(deployment.version)
    ) {
      deployment.rollback = true
      if (!replaced.rolledBack) {
        replaced.rolledBack = true
        changed.push(replaced)
      }
    }
    state.running = deployment
  }
  if (deployment.result === 'succeeded') state.succeededVersions.add(deployment.version)
  return changed
}

function newDeployment(event: DeploymentEvent, instant: boolean): Deployment {
  return {
    id: event.id,
    service: event.service,
    environment: event.environment,
    version: event.version,
    startedAt: event.occurredAt,
    finishedAt: null,
    result: null,
    instant,
    finishEventId: null,
    rollback: false,
    rolledBack: false,
    deployer: event.deployer,
    apiKeyName: event.apiKeyName,
    commitTime: event.commitTime,
    eventIds: [event.id],
  }
}

function fillSender(deployment: Deployment, event: DeploymentEvent): void {
  deployment.deployer ??= event.deployer
  deployment.apiKeyName ??= event.apiKeyName
  deployment.commitTime ??= event.commitTime
}

/**
 * The plain definition: every deployment of a set of events, from nothing. Events may come from
 * several services and environments, in any order; each group is taken in id order. The result is
 * ordered by deployment id.
 */
export function deriveDeployments(events: readonly DeploymentEvent[]): Deployment[] {
  const states = new Map<string, GroupState>()
  const all = new Map<number, Deployment>()
  for (const event of [...events].sort((a, b) => a.id - b.id)) {
    const key = groupKey(event.service, event.environment)
    let state = states.get(key)
    if (!state) {
      state = emptyGroupState()
      states.set(key, state)
    }
    for (const d of applyEvent(state, event)) all.set(d.id, d)
  }
  return [...all.values()].sort((a, b) => a.id - b.id)
}

/** Outcome as the API and pages show it: an open deployment is stalled once older than `stallMs`. */
export function outcomeAt(deployment: Deployment, now: number, stallMs: number): DeploymentOutcome {
  if (deployment.result !== null) return deployment.result
  return now - deployment.startedAt > stallMs ? 'stalled' : 'in_progress'
}

/**
 * Whether a deployment's end carries an earlier time than its start. Times are the receiving
 * instance's clock: when two instances' clocks disagree, the end can arrive "before" the start.
 * Such a deployment has no duration (never a negative one), and is shown as "clock skew".
 */
export function clockSkewed(deployment: Pick<Deployment, 'startedAt' | 'finishedAt'>): boolean {
  return deployment.finishedAt !== null && deployment.finishedAt < deployment.startedAt
}

/**
 * Duration in milliseconds of a finished deployment that was not instant; null otherwise, and null
 * when its clocks disagree (clockSkewed).
 */
export function durationMs(deployment: Deployment): number | null {
  if (deployment.finishedAt === null || deployment.instant || clockSkewed(deployment)) return null
  return deployment.finishedAt - deployment.startedAt
}

/**
 * Whether `a` finished before `b`: by finish time, and for the same millisecond by finishing event.
 * Both must have finished.
 */
export function finishedBefore(a: Deployment, b: Deployment): boolean {
  const at = a.finishedAt ?? 0
  const bt = b.finishedAt ?? 0
  return at < bt || (at === bt && (a.finishEventId ?? 0) < (b.finishEventId ?? 0))
}

/**
 * The deployment running in one service and environment at time `at`: of the given deployments
 * that succeeded at or before `at`, the one that finished last (by time, then by finishing event).
 */
export function runningAt(deployments: readonly Deployment[], at: number): Deployment | null {
  let running: Deployment | null = null
  for (const d of deployments) {
    if (d.result !== 'succeeded' || d.finishedAt === null || d.finishedAt > at) continue
    if (!running || finishedBefore(running, d)) running = d
  }
  return running
}

/**
 * The latest deployment in one service and environment that had started by `at` (by start time,
 * then by id), and its outcome as it stood then (one that finished after `at` was still open).
 */
export function latestAt(
  deployments: readonly Deployment[],
  at: number,
  stallMs: number,
): { deployment: Deployment; outcome: DeploymentOutcome } | null {
  let latest: Deployment | null = null
  for (const d of deployments) {
    if (d.startedAt > at) continue
    if (!latest || d.startedAt > latest.startedAt || (d.startedAt === latest.startedAt && d.id > latest.id))
      latest = d
  }
  if (!latest) return null
  const finishedBy = latest.finishedAt !== null && latest.finishedAt <= at
  const outcome: DeploymentOutcome =
    finishedBy && latest.result !== null
      ? latest.result
      : at - latest.startedAt > stallMs
        ? 'stalled'
        : 'in_progress'
  return { deployment: latest, outcome }
}
