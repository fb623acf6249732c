// Keeps the deployments table in step with the events, off the ingest path: each run derives the
// events that arrived since the last one (rules.ts decides what they mean) in one transaction.
import { type Kysely, type RawBuilder, sql, type Transaction } from 'kysely'
import type { DB, DeploymentRow, EventStatus } from '../../db/schema.js'
import {
  applyEvent,
  type Deployment,
  type DeploymentEvent,
  deriveDeployments,
  emptyGroupState,
  type GroupState,
  groupKey,
} from './rules.js'

/** Events derived per transaction: a few milliseconds of the write lock. */
export const CATCH_UP_BATCH = 1000

/**
 * How long an id PostgreSQL handed out may stay missing before it is taken for a rolled-back
 * insert. Ingest transactions are bounded by statement_timeout (15 s), so a missing id older than
 * this will never commit.
 */
export const GAP_PATIENCE_MS = 5 * 60_000

/** Rows per multi-row statement: well under either database's limit on parameters. */
const ROWS_PER_STATEMENT = 200

export interface CatchUpResult {
  /** Events derived by this run. */
  events: number
  /** Services and environments derived again from all their events (an event arrived late). */
  regrouped: number
  /** True when more events wait beyond this run's batch. */
  more: boolean
}

export function rowToDeployment(row: DeploymentRow): Deployment {
  return {
    id: row.id,
    service: row.service,
    environment: row.environment,
    version: row.version,
    startedAt: row.started_at,
    finishedAt: row.finished_at,
    result: row.result,
    instant: row.instant === 1,
    finishEventId: row.finish_event_id,
    rollback: row.rollback === 1,
    rolledBack: row.rolled_back === 1,
    deployer: row.deployer,
    apiKeyName: row.api_key_name,
    eventIds: row.event_ids.split(',').map(Number),
  }
}

interface StoredEvent extends DeploymentEvent {
  accountId: number
}

interface Group {
  accountId: number
  service: string
  environment: string
  events: StoredEvent[]
}

/**
 * Whether events wait to be derived, without taking the lock: the usual answer to a read is "no",
 * and it costs two index lookups.
 */
export async function deploymentsBehind(db: Kysely<DB>): Promise<boolean> {
  const progress = await db
    .selectFrom('deployments_progress')
    .select('through')
    .where('id', '=', 1)
    .executeTakeFirst()
  const newest = await db.selectFrom('events').select('id').orderBy('id', 'desc').limit(1).executeTakeFirst()
  const gap = await db.selectFrom('deployment_gaps').select('from_id').limit(1).executeTakeFirst()
  return gap !== undefined || (newest?.id ?? 0) > (progress?.through ?? 0)
}

/** Derives the next batch of events in one transaction (waiting for another run to finish first). */
export async function catchUpDeployments(
  db: Kysely<DB>,
  options: { limit?: number; now?: number } = {},
): Promise<CatchUpResult> {
  return db.transaction().execute(async (trx) => {
    await takeDerivationLock(trx)
    return deriveNextBatch(trx, options.limit ?? CATCH_UP_BATCH, options.now ?? Date.now())
  })
}

/**
 * Forgets every deployment and derives them all again from the events, in batches of their own
 * transactions so ingest goes on meanwhile. Reads that wait for the deployments to catch up wait
 * until it is done.
 */
export async function rebuildDeployments(
  db: Kysely<DB>,
  onProgress: (derived: number) => void = () => {},
): Promise<number> {
  await db.transaction().execute(async (trx) => {
    await takeDerivationLock(trx)
    await trx.deleteFrom('deployments').execute()
    await trx.deleteFrom('deployment_heads').execute()
    await trx.deleteFrom('deployment_gaps').execute()
    await trx.deleteFrom('version_firsts').execute()
    await trx.updateTable('deployments_progress').set({ through: 0 }).where('id', '=', 1).execute()
  })
  let derived = 0
  for (;;) {
    const result = await catchUpDeployments(db)
    derived += result.events
    onProgress(derived)
    if (!result.more && result.events === 0) return derived
  }
}

/**
 * The progress row's update is the lock: on PostgreSQL it holds the row until commit, on SQLite
 * it takes the write lock. A second run waits here, then sees what the first one committed.
 */
async function takeDerivationLock(trx: Transaction<DB>): Promise<void> {
  await trx
    .updateTable('deployments_progress')
    .set((eb) => ({ generation: eb('generation', '+', 1) }))
    .where('id', '=', 1)
    .execute()
}

const EVENT_COLUMNS = [
  'id',
  'account_id',
  'service',
  'environment',
  'version',
  'status',
  'received_at',
  'deployer',
  'api_key_name',
] as const

interface EventColumns {
  id: number
  account_id: number
  service: string
  environment: string
  version: string
  status: EventStatus
  received_at: number
  deployer: string | null
  api_key_name: string | null
}

function toStoredEvent(row: EventColumns): StoredEvent {
  return {
    id: row.id,
    accountId: row.account_id,
    service: row.service,
    environment: row.environment,
    version: row.version,
    status: row.status,
    receivedAt: row.received_at,
    deployer: row.deployer,
    apiKeyName: row.api_key_name,
  }
}

async function deriveNextBatch(trx: Transaction<DB>, limit: number, now: number): Promise<CatchUpResult> {
  const progress = await trx
    .selectFrom('deployments_progress')
    .select('through')
    .where('id', '=', 1)
    .executeTakeFirstOrThrow()
  const batch = (
    await trx
      .selectFrom('events')
      .select(EVENT_COLUMNS)
      .where('id', '>', progress.through)
      .orderBy('id')
      .limit(limit)
      .execute()
  ).map(toStoredEvent)

  // Events that committed after later ids were derived (PostgreSQL hands out ids before commit):
  // their whole service and environment is derived again, in id order.
  const late = await lateEvents(trx, batch, progress.through, now)
  const regroup = new Map<string, Group>()
  for (const event of late) {
    const key = accountGroupKey(event.accountId, event.service, event.environment)
    if (!regroup.has(key)) regroup.set(key, { ...groupOf(event), events: [] })
  }
  for (const group of regroup.values()) await deriveGroupAgain(trx, group)

  const groups = new Map<string, Group>()
  for (const event of batch) {
    const key = accountGroupKey(event.accountId, event.service, event.environment)
    if (regroup.has(key)) continue
    let group = groups.get(key)
    if (!group) {
      group = { ...groupOf(event), events: [] }
      groups.set(key, group)
    }
    group.events.push(event)
  }
  if (groups.size > 0) await deriveIncrementally(trx, [...groups.values()])

  const last = batch.at(-1)
  if (last)
    await trx.updateTable('deployments_progress').set({ through: last.id }).where('id', '=', 1).execute()
  return { events: batch.length + late.length, regrouped: regroup.size, more: batch.length === limit }
}

function groupOf(event: StoredEvent): Omit<Group, 'events'> {
  return { accountId: event.accountId, service: event.service, environment: event.environment }
}

function accountGroupKey(accountId: number, service: string, environment: string): string {
  return `${accountId}:${groupKey(service, environment)}`
}

/**
 * Finds events that arrived in earlier gaps, records the gaps this batch leaves (ids below its last
 * one that are not there yet), and forgets gaps older than GAP_PATIENCE_MS.
 */
async function lateEvents(
  trx: Transaction<DB>,
  batch: readonly StoredEvent[],
  through: number,
  now: number,
): Promise<StoredEvent[]> {
  const gaps = await trx.selectFrom('deployment_gaps').selectAll().orderBy('from_id').execute()
  const late: StoredEvent[] = []
  const keep: { from_id: number; to_id: number; seen_at: number }[] = []
  for (const gap of gaps) {
    const found = (
      await trx
        .selectFrom('events')
        .select(EVENT_COLUMNS)
        .where('id', '>=', gap.from_id)
        .where('id', '<=', gap.to_id)
        .orderBy('id')
        .execute()
    ).map(toStoredEvent)
    late.push(...found)
    if (now - gap.seen_at > GAP_PATIENCE_MS) continue
    keep.push(...missingRanges(gap.from_id, gap.to_id, found, gap.seen_at))
  }
  const last = batch.at(-1)
  if (last) keep.push(...missingRanges(through + 1, last.id, batch, now))
  if (gaps.length > 0) await trx.deleteFrom('deployment_gaps').execute()
  for (let i = 0; i < keep.length; i += ROWS_PER_STATEMENT) {
    await trx
      .insertInto('deployment_gaps')
      .values(keep.slice(i, i + ROWS_PER_STATEMENT))
      .execute()
  }
  return late
}

/** The id ranges in [from, to] that none of `present` (sorted by id) has. */
function missingRanges(
  from: number,
  to: number,
  present: readonly { id: number }[],
  seenAt: number,
): { from_id: number; to_id: number; seen_at: number }[] {
  const ranges: { from_id: number; to_id: number; seen_at: number }[] = []
  let next = from
  for (const { id } of present) {
    if (id < from || id > to) continue
    if (id > next) ranges.push({ from_id: next, to_id: id - 1, seen_at: seenAt })
    next = id + 1
  }
  if (next <= to) ranges.push({ from_id: next, to_id: to, seen_at: seenAt })
  return ranges
}

/** Derives one service and environment from all its events, replacing what was there. */
async function deriveGroupAgain(trx: Transaction<DB>, group: Omit<Group, 'events'>): Promise<void> {
  const where = {
    account_id: group.accountId,
    service: group.service,
    environment: group.environment,
  }
  await trx
    .deleteFrom('deployments')
    .where('account_id', '=', where.account_id)
    .where('service', '=', where.service)
    .where('environment', '=', where.environment)
    .execute()
  const events = (
    await trx
      .selectFrom('events')
      .select(EVENT_COLUMNS)
      .where('account_id', '=', where.account_id)
      .where('service', '=', where.service)
      .where('environment', '=', where.environment)
      .orderBy('id')
      .execute()
  ).map(toStoredEvent)
  const deployments = deriveDeployments(events)
  await writeDeployments(trx, group.accountId, deployments)
  const state = emptyGroupState()
  for (const event of events) applyEvent(state, event)
  const latest = deployments.at(-1)
  if (latest) {
    await writeHeads(trx, [{ ...where, running_id: state.running?.id ?? null, latest_id: latest.id }])
  } else {
    await trx
      .deleteFrom('deployment_heads')
      .where('account_id', '=', where.account_id)
      .where('service', '=', where.service)
      .where('environment', '=', where.environment)
      .execute()
  }
}

/**
 * Applies each group's new events to the state it was left in: its open deployments, the one
 * running, and which of the batch's versions succeeded there before. Three reads and two writes a
 * batch, however many groups it touches.
 */
async function deriveIncrementally(trx: Transaction<DB>, groups: readonly Group[]): Promise<void> {
  const heads = await selectIn(
    trx,
    'select account_id, service, environment, running_id, latest_id from deployment_heads',
    '(account_id, service, environment)',
    groups.map((g) => [g.accountId, g.service, g.environment]),
  )
  const headByGroup = new Map<string, HeadRow>()
  for (const h of heads as HeadRow[]) {
    headByGroup.set(accountGroupKey(Number(h.account_id), h.service, h.environment), h)
  }

  const versionKeys: [number, string, string, string][] = []
  for (const g of groups) {
    for (const v of new Set(g.events.map((e) => e.version)))
      versionKeys.push([g.accountId, g.service, g.environment, v])
  }
  const runningIds = [...headByGroup.values()].flatMap((h) => (h.running_id === null ? [] : [h.running_id]))
  const known = (await selectIn(
    trx,
    "select * from deployments where (result is null or result = 'succeeded')",
    '(account_id, service, environment, version)',
    versionKeys,
    runningIds,
  )) as DeploymentRow[]

  const states = new Map<string, GroupState>()
  for (const g of groups)
    states.set(accountGroupKey(g.accountId, g.service, g.environment), emptyGroupState())
  const running = new Set(runningIds)
  for (const row of known) {
    const state = states.get(accountGroupKey(Number(row.account_id), row.service, row.environment))
    if (!state) continue
    const d = rowToDeployment({ ...row, id: Number(row.id) })
    if (running.has(d.id)) state.running = d
    if (d.result === null) state.open.set(d.version, d)
    else state.succeededVersions.add(d.version)
  }

  const changed = new Map<number, { accountId: number; deployment: Deployment }>()
  const newHeads: HeadRow[] = []
  for (const g of groups) {
    const key = accountGroupKey(g.accountId, g.service, g.environment)
    const state = states.get(key) ?? emptyGroupState()
    let latest = headByGroup.get(key)?.latest_id ?? 0
    for (const event of g.events) {
      for (const d of applyEvent(state, event)) {
        changed.set(d.id, { accountId: g.accountId, deployment: d })
        if (d.id > latest) latest = d.id
      }
    }
    newHeads.push({
      account_id: g.accountId,
      service: g.service,
      environment: g.environment,
      running_id: state.running?.id ?? null,
      latest_id: latest,
    })
  }
  const byAccount = new Map<number, Deployment[]>()
  for (const { accountId, deployment } of changed.values()) {
    const list = byAccount.get(accountId) ?? []
    list.push(deployment)
    byAccount.set(accountId, list)
  }
  for (const [accountId, list] of byAccount) await writeDeployments(trx, accountId, list)
  await writeHeads(trx, newHeads)
}

/**
 * Runs `select` with a row-value IN list (and, optionally, `or id in (…)`): one statement for a
 * whole batch. Values are bound as parameters; the first column is cast, because PostgreSQL
 * cannot infer a type for a parameter inside VALUES.
 */
async function selectIn(
  trx: Transaction<DB>,
  select: string,
  columns: string,
  tuples: readonly (readonly (string | number)[])[],
  ids: readonly number[] = [],
): Promise<unknown[]> {
  const rows: unknown[] = []
  const chunk = Math.max(1, Math.floor(ROWS_PER_STATEMENT / 2))
  const joiner = select.includes(' where ') ? ' and ' : ' where '
  for (let i = 0; i < Math.max(tuples.length, ids.length); i += chunk) {
    const part = tuples.slice(i, i + chunk)
    const idPart = ids.slice(i, i + chunk)
    const conditions: RawBuilder<unknown>[] = []
    if (part.length > 0) {
      const values = sql.join(
        part.map(
          ([first, ...rest]) => sql`(cast(${first} as bigint), ${sql.join(rest.map((v) => sql`${v}`))})`,
        ),
      )
      conditions.push(sql`${sql.raw(columns)} in (values ${values})`)
    }
    if (idPart.length > 0) conditions.push(sql`id in (${sql.join(idPart.map((id) => sql`${id}`))})`)
    const where = conditions.length === 1 ? conditions[0] : sql`(${sql.join(conditions, sql` or `)})`
    const result = await sql`${sql.raw(select)}${sql.raw(joiner)}${where}`.execute(trx)
    rows.push(...result.rows)
  }
  return rows
}

async function writeDeployments(
  trx: Transaction<DB>,
  accountId: number,
  deployments: readonly Deployment[],
): Promise<void> {
  await writeVersionFirsts(trx, accountId, deployments)
  for (let i = 0; i < deployments.length; i += ROWS_PER_STATEMENT) {
    const rows = deployments.slice(i, i + ROWS_PER_STATEMENT).map((d) => ({
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
      event_ids: d.eventIds.join(','),
    }))
    await trx
      .insertInto('deployments')
      .values(rows)
      .onConflict((oc) =>
        oc.column('id').doUpdateSet((eb) => ({
          finished_at: eb.ref('excluded.finished_at'),
          result: eb.ref('excluded.result'),
          instant: eb.ref('excluded.instant'),
          finish_event_id: eb.ref('excluded.finish_event_id'),
          rollback: eb.ref('excluded.rollback'),
          rolled_back: eb.ref('excluded.rolled_back'),
          deployer: eb.ref('excluded.deployer'),
          api_key_name: eb.ref('excluded.api_key_name'),
          event_ids: eb.ref('excluded.event_ids'),
        })),
      )
      .execute()
  }
}

/** Keeps, for each (service, version), the deployment with the lowest id seen so far. */
async function writeVersionFirsts(
  trx: Transaction<DB>,
  accountId: number,
  deployments: readonly Deployment[],
): Promise<void> {
  const firsts = new Map<string, Deployment>()
  for (const d of deployments) {
    const key = JSON.stringify([d.service, d.version])
    const known = firsts.get(key)
    if (!known || d.id < known.id) firsts.set(key, d)
  }
  const rows = [...firsts.values()].map((d) => ({
    account_id: accountId,
    service: d.service,
    version: d.version,
    deployment_id: d.id,
    started_at: d.startedAt,
  }))
  for (let i = 0; i < rows.length; i += ROWS_PER_STATEMENT) {
    await trx
      .insertInto('version_firsts')
      .values(rows.slice(i, i + ROWS_PER_STATEMENT))
      .onConflict((oc) =>
        oc
          .columns(['account_id', 'service', 'version'])
          .doUpdateSet((eb) => ({
            deployment_id: eb.ref('excluded.deployment_id'),
            started_at: eb.ref('excluded.started_at'),
          }))
          .whereRef('excluded.deployment_id', '<', 'version_firsts.deployment_id'),
      )
      .execute()
  }
}

interface HeadRow {
  account_id: number
  service: string
  environment: string
  running_id: number | null
  latest_id: number
}

async function writeHeads(trx: Transaction<DB>, heads: readonly HeadRow[]): Promise<void> {
  for (let i = 0; i < heads.length; i += ROWS_PER_STATEMENT) {
    const rows = heads.slice(i, i + ROWS_PER_STATEMENT)
    await trx
      .insertInto('deployment_heads')
      .values(rows)
      .onConflict((oc) =>
        oc.columns(['account_id', 'service', 'environment']).doUpdateSet((eb) => ({
          running_id: eb.ref('excluded.running_id'),
          latest_id: eb.ref('excluded.latest_id'),
        })),
      )
      .execute()
  }
}
