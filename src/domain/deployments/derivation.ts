// One derivation run as a pure step: given what the database holds for the next batch of events
// (read by store-sqlite.ts or store-postgres.ts), decide every row to write. rules.ts says what the
// events mean; this says how a batch of them changes the stored deployments.
import type { DeploymentRow, EventStatus } from '../../db/schema.js'
import {
  applyEvent,
  type Deployment,
  type DeploymentEvent,
  emptyGroupState,
  type GroupState,
} from './rules.js'

/** Events derived per run: a few milliseconds of the write lock. */
export const CATCH_UP_BATCH = 1000

/**
 * Events derived per run while a backlog remains (a rebuild, or catching up after a burst). Most of
 * a run's cost is writing each index page it dirtied, and with services at random nearly every run
 * dirties one page per service and environment in each index ordered by them, whatever its size:
 * at 1000 events a run that is most of the cost, at 20,000 a small part (docs/PERFORMANCE.md).
 */
export const BACKLOG_BATCH = 20_000

/**
 * How long an id PostgreSQL handed out may stay missing before it is taken for a rolled-back
 * insert. Ingest transactions are bounded by statement_timeout (15 s), so a missing id older than
 * this will never commit.
 */
export const GAP_PATIENCE_MS = 5 * 60_000

export interface StoredEvent extends DeploymentEvent {
  accountId: number
}

/** The columns of an event that derivation reads, as both databases return them. */
export interface EventColumns {
  id: number
  account_id: number
  service: string
  environment: string
  version: string
  status: EventStatus
  occurred_at: number
  commit_time: number | null
  deployer: string | null
  api_key_name: string | null
}

export const EVENT_COLUMN_LIST =
  'id, account_id, service, environment, version, status, occurred_at, commit_time, deployer, api_key_name'

export function toStoredEvent(row: EventColumns): StoredEvent {
  return {
    id: Number(row.id),
    accountId: Number(row.account_id),
    service: row.service,
    environment: row.environment,
    version: row.version,
    status: row.status,
    occurredAt: Number(row.occurred_at),
    commitTime: row.commit_time === null ? null : Number(row.commit_time),
    deployer: row.deployer,
    apiKeyName: row.api_key_name,
  }
}

export function rowToDeployment(row: DeploymentRow): Deployment {
  return {
    id: Number(row.id),
    service: row.service,
    environment: row.environment,
    version: row.version,
    startedAt: Number(row.started_at),
    finishedAt: row.finished_at === null ? null : Number(row.finished_at),
    result: row.result,
    instant: Number(row.instant) === 1,
    finishEventId: row.finish_event_id === null ? null : Number(row.finish_event_id),
    rollback: Number(row.rollback) === 1,
    rolledBack: Number(row.rolled_back) === 1,
    deployer: row.deployer,
    apiKeyName: row.api_key_name,
    commitTime: row.commit_time === null || row.commit_time === undefined ? null : Number(row.commit_time),
    eventIds: row.event_ids.split(',').map(Number),
  }
}

export function deploymentToRow(accountId: number, d: Deployment): DeploymentRow {
  return {
    id: d.id,
    account_id: accountId,
    service: d.service,
    environment: d.environment,
    version: d.version,
    started_at: d.startedAt,
    finished_at: d.finishedAt,
    result: d.result,
    instant: d.instant ? 1 : 0,
    finish_event_id: d.finishEventId,
    rollback: d.rollback ? 1 : 0,
    rolled_back: d.rolledBack ? 1 : 0,
    deployer: d.deployer,
    api_key_name: d.apiKeyName,
    commit_time: d.commitTime,
    event_ids: d.eventIds.join(','),
  }
}

/** A service and environment of one account. */
export interface GroupId {
  accountId: number
  service: string
  environment: string
}

/**
 * A map key for a group. U+001F cannot occur in a name (ingest refuses control characters), so
 * joining by it is unambiguous, and it costs far less than JSON on every event.
 */
export function groupIdKey(g: GroupId): string {
  return `${g.accountId}\u001f${g.service}\u001f${g.environment}`
}

/** A map key for a service's version in an account (the same reasoning as groupIdKey). */
export function versionKey(accountId: number, service: string, version: string): string {
  return `${accountId}\u001f${service}\u001f${version}`
}

export interface GapRow {
  from_id: number
  to_id: number
  seen_at: number
}

/**
 * A group's row in deployment_heads: it exists once the group has a deployment, and names the one
 * running. `latest_id` is only what it was when the row was last written (the board reads the
 * latest deployment from the deployments themselves).
 */
export interface HeadRow {
  account_id: number
  service: string
  environment: string
  running_id: number | null
  latest_id: number
}

export interface FirstRow {
  account_id: number
  service: string
  version: string
  deployment_id: number
  started_at: number
}

/** Where a group stands before the batch: what its events need to be applied. */
export interface LoadedGroup {
  state: GroupState
  latestId: number
  /**
   * The running deployment the stored head names; undefined when the group has no head row yet.
   * A head is written only when this changes: about one success in two events, not every event.
   */
  headRunningId: number | null | undefined
}

/** The first reads of a run: where derivation stands and what arrived. */
export interface BatchStart {
  through: number
  batch: StoredEvent[]
  gaps: GapRow[]
  /** Events found inside the gaps: they arrived after later ids were derived. */
  gapEvents: StoredEvent[]
}

export interface BatchWrites {
  /** Groups derived again from all their events: their deployments are deleted first. */
  deleteGroups: GroupId[]
  deployments: DeploymentRow[]
  firsts: FirstRow[]
  heads: HeadRow[]
  /** Every gap still open after this run (the table is replaced). */
  gaps: GapRow[]
  /** The new `through`, or null when it does not move. */
  through: number | null
  derived: number
  /** Events of the batch proper (late ones not counted): a full batch means more may wait. */
  batchSize: number
  /** Where each group the run touched stands after it, by groupIdKey (what a cache keeps). */
  states: Map<string, LoadedGroup>
}

export function groupOf(event: StoredEvent): GroupId {
  return { accountId: event.accountId, service: event.service, environment: event.environment }
}

/** The groups whose events arrived late: each is derived again from all its events. */
export function lateGroups(start: BatchStart): GroupId[] {
  const groups = new Map<string, GroupId>()
  for (const event of start.gapEvents) groups.set(groupIdKey(groupOf(event)), groupOf(event))
  return [...groups.values()]
}

/**
 * The last id a late group is derived again up to: where this run leaves `through`. Its events past
 * that are not derived yet, and later runs apply them to the state this run leaves, once each; taken
 * here too, they were applied twice.
 */
export function regroupBound(start: BatchStart): number {
  return start.batch.at(-1)?.id ?? start.through
}

/** A group the batch touches that is derived on from where it stood, and its events of the batch. */
export interface IncrementalGroup {
  /** groupIdKey(group) */
  key: string
  group: GroupId
  events: StoredEvent[]
}

/** The batch's other events by group, in id order. */
export function incrementalGroups(start: BatchStart, late: readonly GroupId[]): IncrementalGroup[] {
  const skip = late.length > 0 ? new Set(late.map(groupIdKey)) : null
  const groups = new Map<string, IncrementalGroup>()
  for (const event of start.batch) {
    const key = groupIdKey(event)
    let entry = groups.get(key)
    if (!entry) {
      if (skip?.has(key)) continue
      entry = { key, group: groupOf(event), events: [] }
      groups.set(key, entry)
    }
    entry.events.push(event)
  }
  return [...groups.values()]
}

/**
 * Decides the writes of one run. `regrouped` holds all events of each late group; `loaded` the
 * state of each other group the batch touches (by groupIdKey).
 */
export function planBatch(
  start: BatchStart,
  regrouped: ReadonlyMap<string, { group: GroupId; events: StoredEvent[] }>,
  loaded: ReadonlyMap<string, LoadedGroup>,
  now: number,
  incremental: readonly IncrementalGroup[] = incrementalGroups(
    start,
    [...regrouped.values()].map((r) => r.group),
  ),
): BatchWrites {
  const writes: BatchWrites = {
    deleteGroups: [],
    deployments: [],
    firsts: [],
    heads: [],
    gaps: [],
    through: start.batch.at(-1)?.id ?? null,
    derived: start.batch.length + start.gapEvents.length,
    batchSize: start.batch.length,
    states: new Map(),
  }
  // The deployments objects change in place as later events apply; each is turned into a row once,
  // at the end, as it stands after the whole batch.
  const changed = new Map<number, { accountId: number; deployment: Deployment }>()

  for (const { group, events } of regrouped.values()) {
    writes.deleteGroups.push(group)
    const state = emptyGroupState()
    let latest = 0
    for (const event of events) {
      for (const d of applyEvent(state, event)) {
        if (!changed.has(d.id)) changed.set(d.id, { accountId: group.accountId, deployment: d })
        latest = Math.max(latest, d.id)
      }
    }
    writes.heads.push(headRow(group, state, latest))
    writes.states.set(groupIdKey(group), {
      state,
      latestId: latest,
      headRunningId: state.running?.id ?? null,
    })
  }

  for (const { key, group, events } of incremental) {
    const entry: LoadedGroup = loaded.get(key) ?? {
      state: emptyGroupState(),
      latestId: 0,
      headRunningId: undefined,
    }
    let latest = entry.latestId
    for (const event of events) {
      for (const d of applyEvent(entry.state, event)) {
        if (!changed.has(d.id)) changed.set(d.id, { accountId: group.accountId, deployment: d })
        latest = Math.max(latest, d.id)
      }
    }
    const runningId = entry.state.running?.id ?? null
    if (entry.headRunningId !== runningId) {
      writes.heads.push(headRow(group, entry.state, latest))
      entry.headRunningId = runningId
    }
    entry.latestId = latest
    writes.states.set(key, entry)
  }
  writes.deployments = [...changed.values()]
    .map((c) => deploymentToRow(c.accountId, c.deployment))
    .sort((a, b) => a.id - b.id)

  // Lead time starts at the first deployment of a (service, version): keep the lowest id seen.
  const firsts = new Map<string, FirstRow>()
  for (const d of writes.deployments) {
    const key = versionKey(d.account_id, d.service, d.version)
    const known = firsts.get(key)
    if (!known || d.id < known.deployment_id) {
      firsts.set(key, {
        account_id: d.account_id,
        service: d.service,
        version: d.version,
        deployment_id: d.id,
        started_at: d.started_at,
      })
    }
  }
  writes.firsts = [...firsts.values()]

  // Gaps: what is still missing of the old ones (unless they waited too long), and what this batch
  // skipped over.
  for (const gap of start.gaps) {
    if (now - gap.seen_at > GAP_PATIENCE_MS) continue
    writes.gaps.push(...missingRanges(gap.from_id, gap.to_id, start.gapEvents, gap.seen_at))
  }
  const last = start.batch.at(-1)
  if (last) writes.gaps.push(...missingRanges(start.through + 1, last.id, start.batch, now))
  return writes
}

function headRow(group: GroupId, state: GroupState, latest: number): HeadRow {
  return {
    account_id: group.accountId,
    service: group.service,
    environment: group.environment,
    running_id: state.running?.id ?? null,
    latest_id: latest,
  }
}

/** The id ranges in [from, to] that none of `present` (sorted by id) has. */
export function missingRanges(
  from: number,
  to: number,
  present: readonly { id: number }[],
  seenAt: number,
): GapRow[] {
  const ranges: GapRow[] = []
  let next = from
  for (const { id } of present) {
    if (id < from || id > to) continue
    if (id > next) ranges.push({ from_id: next, to_id: id - 1, seen_at: seenAt })
    next = id + 1
  }
  if (next <= to) ranges.push({ from_id: next, to_id: to, seen_at: seenAt })
  return ranges
}

/** A group's state from its stored rows: its head, the running one, the open ones, earlier successes. */
export function loadedGroup(
  head: { running_id: number | null; latest_id: number } | undefined,
  running: DeploymentRow | undefined,
  open: readonly DeploymentRow[],
  succeededVersions: Iterable<string>,
): LoadedGroup {
  const state = emptyGroupState()
  if (running) state.running = rowToDeployment(running)
  for (const row of open) {
    const d = rowToDeployment(row)
    state.open.set(d.version, d)
  }
  for (const version of succeededVersions) state.succeededVersions.add(version)
  return {
    state,
    latestId: head ? Number(head.latest_id) : 0,
    headRunningId: head === undefined ? undefined : head.running_id === null ? null : Number(head.running_id),
  }
}
