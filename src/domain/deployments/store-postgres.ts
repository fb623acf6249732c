// One derivation run on PostgreSQL: batched reads in one transaction, planned by derivation.ts.
import { type RawBuilder, sql, type Transaction } from 'kysely'
import type { PostgresHandle } from '../../db/connect.js'
import type { DB, DeploymentRow } from '../../db/schema.js'
import {
  type BatchStart,
  type BatchWrites,
  EVENT_COLUMN_LIST,
  type EventColumns,
  type GapRow,
  type GroupId,
  groupIdKey,
  type HeadRow,
  incrementalGroups,
  type LoadedGroup,
  lateGroups,
  loadedGroup,
  planBatch,
  regroupBound,
  type StoredEvent,
  toStoredEvent,
} from './derivation.js'
import { type AliasRow, applyNameAliases, nameAliases, rawNames } from './name-aliases.js'
import type { DerivationCache } from './state-cache.js'

/** Rows per multi-row statement: well under PostgreSQL's 65,535 parameters. */
const ROWS_PER_STATEMENT = 500

/**
 * The progress row's update is the lock: PostgreSQL holds the row until commit, so a second run
 * (another instance, or `shiplog deployments rebuild`) waits here, then sees what the first wrote.
 */
async function lock(trx: Transaction<DB>): Promise<number> {
  const { rows } = await sql<{
    generation: string | number
  }>`update deployments_progress set generation = generation + 1 where id = 1 returning generation`.execute(
    trx,
  )
  return Number(rows[0]?.generation ?? 0)
}

async function selectEvents(trx: Transaction<DB>, where: RawBuilder<unknown>): Promise<StoredEvent[]> {
  const { rows } =
    await sql<EventColumns>`select ${sql.raw(EVENT_COLUMN_LIST)} from events where ${where} order by id`.execute(
      trx,
    )
  return rows.map(toStoredEvent)
}

/** Derives the next batch in one transaction; the cache holds only if it commits. */
export async function catchUpPostgres(
  database: PostgresHandle,
  limit: number,
  now: number,
  cache: DerivationCache,
): Promise<BatchWrites> {
  try {
    const { writes, generation } = await database.db
      .transaction()
      .execute((trx) => deriveBatch(trx, limit, now, cache))
    cache.committed(generation, writes.states, writes.firsts)
    return writes
  } catch (err) {
    cache.clear()
    throw err
  }
}

async function deriveBatch(
  trx: Transaction<DB>,
  limit: number,
  now: number,
  cache: DerivationCache,
): Promise<{ writes: BatchWrites; generation: number }> {
  const generation = await lock(trx)
  cache.beginRun(generation)
  const { rows } = await sql<{
    through: number
  }>`select through from deployments_progress where id = 1`.execute(trx)
  const through = Number(rows[0]?.through ?? 0)
  const { rows: batchRows } = await sql<EventColumns>`select ${sql.raw(EVENT_COLUMN_LIST)} from events
    where id > ${through} order by id limit ${limit}`.execute(trx)
  const batch = batchRows.map(toStoredEvent)
  const gaps = (
    await sql<GapRow>`select from_id, to_id, seen_at from deployment_gaps order by from_id`.execute(trx)
  ).rows.map((g) => ({ from_id: Number(g.from_id), to_id: Number(g.to_id), seen_at: Number(g.seen_at) }))
  const gapEvents: StoredEvent[] = []
  for (const gap of gaps)
    gapEvents.push(...(await selectEvents(trx, sql`id between ${gap.from_id} and ${gap.to_id}`)))
  const aliases = nameAliases(
    (await sql<AliasRow>`select account_id, kind, from_name, to_name from name_aliases`.execute(trx)).rows,
  )
  applyNameAliases(batch, aliases)
  applyNameAliases(gapEvents, aliases)
  const start: BatchStart = { through, batch, gaps, gapEvents }

  const late = lateGroups(start)
  const regrouped = new Map<string, { group: GroupId; events: StoredEvent[] }>()
  const bound = regroupBound(start)
  for (const group of late) {
    // A group whose names were renamed or merged into it (name_aliases): every name its events carry.
    const services = rawNames(aliases, group.accountId, 'service', group.service)
    const environments = rawNames(aliases, group.accountId, 'environment', group.environment)
    const events = await selectEvents(
      trx,
      sql`account_id = ${group.accountId} and service = any(${services}::text[])
        and environment = any(${environments}::text[]) and id <= ${bound}`,
    )
    applyNameAliases(events, aliases)
    regrouped.set(groupIdKey(group), { group, events })
  }
  const loaded = new Map<string, LoadedGroup>()
  const unknown: GroupId[] = []
  const incremental = incrementalGroups(start, late)
  for (const { key, group } of incremental) {
    const cached = cache.group(key)
    if (cached) loaded.set(key, cached)
    else unknown.push(group)
  }
  for (const [key, group] of await loadGroups(trx, unknown)) loaded.set(key, group)
  const writes = planBatch(start, regrouped, loaded, now, incremental)
  await write(trx, writes, gaps.length > 0, cache)
  // Webhooks are not derivation's business: each webhook's sender queues its deliveries from a
  // cursor bounded by `through` and the gaps written here (webhooks/cursor.ts).
  return { writes, generation }
}

/**
 * The whole state of each group given, in four statements whatever their number: heads, running
 * rows, open deployments, and the versions that have succeeded there.
 */
async function loadGroups(
  trx: Transaction<DB>,
  groups: readonly GroupId[],
): Promise<Map<string, LoadedGroup>> {
  const loaded = new Map<string, LoadedGroup>()
  if (groups.length === 0) return loaded
  const accounts = groups.map((g) => g.accountId)
  const services = groups.map((g) => g.service)
  const environments = groups.map((g) => g.environment)
  const { rows: heads } =
    await sql<HeadRow>`select h.account_id, h.service, h.environment, h.running_id, h.latest_id
    from deployment_heads h
    join unnest(${accounts}::bigint[], ${services}::text[], ${environments}::text[]) as g(account_id, service, environment)
      on h.account_id = g.account_id and h.service = g.service and h.environment = g.environment`.execute(trx)
  const headOf = new Map(
    heads.map((h) => [
      groupIdKey({ accountId: Number(h.account_id), service: h.service, environment: h.environment }),
      h,
    ]),
  )
  const runningIds = heads.flatMap((h) => (h.running_id === null ? [] : [Number(h.running_id)]))
  const { rows: runningRows } =
    await sql<DeploymentRow>`select * from deployments where id = any(${runningIds}::bigint[])`.execute(trx)
  const runningById = new Map(runningRows.map((r) => [Number(r.id), r]))

  const keys = sql`unnest(${accounts}::bigint[], ${services}::text[], ${environments}::text[])
    as k(account_id, service, environment)`
  const { rows: open } = await sql<DeploymentRow>`select d.* from deployments d join ${keys}
    on d.account_id = k.account_id and d.service = k.service and d.environment = k.environment
    where d.result is null`.execute(trx)
  const { rows: succeeded } = await sql<{
    account_id: number
    service: string
    environment: string
    version: string
  }>`
    select distinct d.account_id, d.service, d.environment, d.version from deployments d join ${keys}
    on d.account_id = k.account_id and d.service = k.service and d.environment = k.environment
    where d.result = 'succeeded'`.execute(trx)

  const openBy = new Map<string, DeploymentRow[]>()
  for (const row of open) {
    const key = groupIdKey({
      accountId: Number(row.account_id),
      service: row.service,
      environment: row.environment,
    })
    openBy.set(key, [...(openBy.get(key) ?? []), row])
  }
  const succeededBy = new Map<string, string[]>()
  for (const row of succeeded) {
    const key = groupIdKey({
      accountId: Number(row.account_id),
      service: row.service,
      environment: row.environment,
    })
    succeededBy.set(key, [...(succeededBy.get(key) ?? []), row.version])
  }
  for (const group of groups) {
    const key = groupIdKey(group)
    const head = headOf.get(key)
    const running = head?.running_id == null ? undefined : runningById.get(Number(head.running_id))
    loaded.set(key, loadedGroup(head, running, openBy.get(key) ?? [], succeededBy.get(key) ?? []))
  }
  return loaded
}

function column<T, K extends keyof T>(rows: readonly T[], key: K): T[K][] {
  return rows.map((r) => r[key])
}

async function write(
  trx: Transaction<DB>,
  writes: BatchWrites,
  hadGaps: boolean,
  cache: DerivationCache,
): Promise<void> {
  for (const g of writes.deleteGroups) {
    await sql`delete from deployments where account_id = ${g.accountId} and service = ${g.service}
      and environment = ${g.environment}`.execute(trx)
  }
  for (let i = 0; i < writes.deployments.length; i += ROWS_PER_STATEMENT) {
    const rows = writes.deployments.slice(i, i + ROWS_PER_STATEMENT)
    await sql`insert into deployments (id, account_id, service, environment, version, started_at, finished_at, result,
        instant, finish_event_id, rollback, rolled_back, deployer, api_key_name, commit_time, event_ids)
      select * from unnest(${column(rows, 'id')}::bigint[], ${column(rows, 'account_id')}::bigint[],
        ${column(rows, 'service')}::text[], ${column(rows, 'environment')}::text[], ${column(rows, 'version')}::text[],
        ${column(rows, 'started_at')}::bigint[], ${column(rows, 'finished_at')}::bigint[], ${column(rows, 'result')}::text[],
        ${column(rows, 'instant')}::integer[], ${column(rows, 'finish_event_id')}::bigint[], ${column(rows, 'rollback')}::integer[],
        ${column(rows, 'rolled_back')}::integer[], ${column(rows, 'deployer')}::text[], ${column(rows, 'api_key_name')}::text[],
        ${column(rows, 'commit_time')}::bigint[], ${column(rows, 'event_ids')}::text[])
      on conflict (id) do update set finished_at = excluded.finished_at, result = excluded.result,
        instant = excluded.instant, finish_event_id = excluded.finish_event_id, rollback = excluded.rollback,
        rolled_back = excluded.rolled_back, deployer = excluded.deployer, api_key_name = excluded.api_key_name,
        commit_time = excluded.commit_time, event_ids = excluded.event_ids`.execute(trx)
  }
  const firsts = writes.firsts.filter((f) => !cache.knowsFirst(f))
  for (let i = 0; i < firsts.length; i += ROWS_PER_STATEMENT) {
    const rows = firsts.slice(i, i + ROWS_PER_STATEMENT)
    await sql`insert into version_firsts (account_id, service, version, deployment_id, started_at)
      select * from unnest(${column(rows, 'account_id')}::bigint[], ${column(rows, 'service')}::text[],
        ${column(rows, 'version')}::text[], ${column(rows, 'deployment_id')}::bigint[], ${column(rows, 'started_at')}::bigint[])
      on conflict (account_id, service, version) do update set deployment_id = excluded.deployment_id,
        started_at = excluded.started_at where excluded.deployment_id < version_firsts.deployment_id`.execute(
      trx,
    )
  }
  for (let i = 0; i < writes.heads.length; i += ROWS_PER_STATEMENT) {
    const rows = writes.heads.slice(i, i + ROWS_PER_STATEMENT)
    await sql`insert into deployment_heads (account_id, service, environment, running_id, latest_id)
      select * from unnest(${column(rows, 'account_id')}::bigint[], ${column(rows, 'service')}::text[],
        ${column(rows, 'environment')}::text[], ${column(rows, 'running_id')}::bigint[], ${column(rows, 'latest_id')}::bigint[])
      on conflict (account_id, service, environment) do update set running_id = excluded.running_id,
        latest_id = excluded.latest_id`.execute(trx)
  }
  if (hadGaps || writes.gaps.length > 0) {
    await sql`delete from deployment_gaps`.execute(trx)
    if (writes.gaps.length > 0) {
      await sql`insert into deployment_gaps (from_id, to_id, seen_at)
        select * from unnest(${column(writes.gaps, 'from_id')}::bigint[], ${column(writes.gaps, 'to_id')}::bigint[],
          ${column(writes.gaps, 'seen_at')}::bigint[])`.execute(trx)
    }
  }
  if (writes.through !== null)
    await sql`update deployments_progress set through = ${writes.through} where id = 1`.execute(trx)
}

/** Empties the derived tables, so the next runs derive everything again. */
export async function resetPostgres(trx: Transaction<DB>): Promise<void> {
  await lock(trx)
  for (const table of ['deployments', 'deployment_heads', 'deployment_gaps', 'version_firsts']) {
    await sql`delete from ${sql.table(table)}`.execute(trx)
  }
  await sql`update deployments_progress set through = 0 where id = 1`.execute(trx)
}
