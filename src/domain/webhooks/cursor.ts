// Queues webhook deliveries per webhook, off the ingest path: a webhook's cursor moves over the
// events derivation has processed, a window at a time, and the deliveries of the events that match
// are inserted with the cursor's move in one transaction (rules.ts decides what matches).
import { type CompiledQuery, type RawBuilder, sql } from 'kysely'
import type { Database, Rows } from '../../db/connect.js'
import type { DeploymentRow, EventStatus } from '../../db/schema.js'
import {
  type AliasRow,
  aliasKey,
  type NameAliases,
  nameAliases,
  rawNames,
} from '../deployments/name-aliases.js'
import {
  candidateStatuses,
  cursorBound,
  nextCursor,
  type PlannedDelivery,
  plannedDeliveries,
  QUEUE_WINDOW,
  TRIGGER_COLUMN_LIST,
  type TriggerColumns,
  toTrigger,
  type WebhookTrigger,
} from './rules.js'

/** The most events of one webhook the settings page and /metrics count as not yet queued. */
export const BACKLOG_COUNT_CAP = 10_000

/** What one top-up of a webhook did. */
export interface TopUp {
  webhookId: number
  /**
   * False when it did not look: the webhook is disabled or gone, or (PostgreSQL) another
   * instance is topping it up right now.
   */
  ran: boolean
  /** Deliveries planned, and how many of them were new (the unique constraint drops repeats). */
  planned: number
  queued: number
  /** The cursor afterwards (null when it did not run). */
  cursor: number | null
}

type Dialect = Database['dialect']

interface MatchedEvent {
  id: number
  account_id: number
  service: string
  environment: string
  version: string
  status: EventStatus
}

/** `column` is one of `values`: one parameter whatever their number (one statement to prepare). */
function oneOf(dialect: Dialect, column: string, values: readonly string[]): RawBuilder<unknown> {
  return dialect === 'postgres'
    ? sql`${sql.ref(column)} = any(${[...values]}::text[])`
    : sql`${sql.ref(column)} in (select value from json_each(${JSON.stringify(values)}))`
}

/** The events after `after` (and up to `upTo`) that can trigger the webhook, as a WHERE clause. */
function matching(
  dialect: Dialect,
  w: WebhookTrigger,
  after: number,
  upTo: number | null,
  aliases: NameAliases | null = null,
): RawBuilder<unknown> {
  // A name renamed or merged into one the webhook names: its events carry the old name too.
  const raw = (kind: 'service' | 'environment', names: readonly string[]) =>
    aliases === null ? names : names.flatMap((n) => rawNames(aliases, w.accountId, kind, n))
  const parts = [sql`account_id = ${w.accountId}`, sql`id > ${Math.max(after, w.sinceEventId)}`]
  if (upTo !== null) parts.push(sql`id <= ${upTo}`)
  parts.push(oneOf(dialect, 'status', candidateStatuses(w)))
  if (w.environments.length > 0) parts.push(oneOf(dialect, 'environment', raw('environment', w.environments)))
  if (w.services.length > 0) parts.push(oneOf(dialect, 'service', raw('service', w.services)))
  return sql.join(parts, sql` and `)
}

/**
 * One top-up of one webhook, as the statements of one transaction: the same steps run synchronously
 * on SQLite (nothing else may use the connection inside a transaction there) and over one pooled
 * connection on PostgreSQL.
 */
function* topUpSteps(
  database: Database,
  webhookId: number,
  window: number,
  now: number,
): Generator<CompiledQuery, TopUp, Rows> {
  const pg = database.dialect === 'postgres'
  const compile = (query: RawBuilder<unknown>) => query.compile(database.db)
  const skipped: TopUp = { webhookId, ran: false, planned: 0, queued: 0, cursor: null }
  // The webhook's row is the lock: another instance's top-up of the same webhook skips it rather
  // than read the same events (SQLite's immediate transaction serialises them anyway).
  const [hook] = yield compile(sql`select ${sql.raw(TRIGGER_COLUMN_LIST)}, queued_through from webhooks
    where id = ${webhookId} and enabled = 1 ${pg ? sql`for update skip locked` : sql``}`)
  if (!hook) return skipped
  const trigger = toTrigger(hook as unknown as TriggerColumns)
  const cursor = Number(hook.queued_through)
  // Sharing derivation's lock row: no derivation, rebuild or prune commits while this reads, so
  // the deployments read below are those of the events up to `through`.
  const [progress] = yield compile(
    sql`select through from deployments_progress where id = 1 ${pg ? sql`for share` : sql``}`,
  )
  const [gap] = yield compile(sql`select min(from_id) as first from deployment_gaps`)
  const bound = cursorBound(
    Number(progress?.through ?? 0),
    gap?.first === null || gap?.first === undefined ? null : Number(gap.first),
  )
  const ran: TopUp = { webhookId, ran: true, planned: 0, queued: 0, cursor }
  if (bound <= cursor) return ran
  const [fresh] = yield compile(sql`select count(*) as n from (select 1 from webhook_deliveries
    where webhook_id = ${webhookId} and state = 'pending' and attempts = 0 limit ${window}) f`)
  const room = window - Number(fresh?.n ?? 0)
  if (room <= 0) return ran
  const aliases = nameAliases(
    (yield compile(sql`select account_id, kind, from_name, to_name from name_aliases
      where account_id = ${trigger.accountId}`)) as unknown as AliasRow[],
  )
  // Events under the names their deployments were derived by (deployments/name-aliases.ts).
  const alias = (kind: 'service' | 'environment', name: string) =>
    aliases?.[kind].get(aliasKey(trigger.accountId, name)) ?? name
  const events = (
    (yield compile(sql`select id, account_id, service, environment, version, status from events
      where ${matching(database.dialect, trigger, cursor, bound, aliases)} order by id limit ${room}`)) as unknown as MatchedEvent[]
  ).map((e) => ({
    ...e,
    id: Number(e.id),
    account_id: Number(e.account_id),
    service: alias('service', e.service),
    environment: alias('environment', e.environment),
  }))

  // Each event belongs to one deployment of its service, environment and version: the last one
  // that started at or before it (a version's deployments follow one another, each closed by an
  // end event before the next opens). An event that ended it names it as its finishing event.
  const deployments: DeploymentRow[] = []
  if (events.length > 0 && pg) {
    deployments.push(
      ...((yield compile(sql`select d.* from unnest(${events.map((e) => e.id)}::bigint[],
        ${events.map((e) => e.service)}::text[], ${events.map((e) => e.environment)}::text[],
        ${events.map((e) => e.version)}::text[]) as e(id, service, environment, version)
      cross join lateral (select * from deployments d where d.account_id = ${trigger.accountId}
        and d.service = e.service and d.environment = e.environment and d.version = e.version
        and d.id <= e.id order by d.id desc limit 1) d`)) as unknown as DeploymentRow[]),
    )
  } else {
    for (const e of events) {
      deployments.push(
        ...((yield compile(sql`select * from deployments where account_id = ${e.account_id}
          and service = ${e.service} and environment = ${e.environment} and version = ${e.version}
          and id <= ${e.id} order by id desc limit 1`)) as unknown as DeploymentRow[]),
      )
    }
  }
  const planned = plannedDeliveries(
    events.map((e) => ({
      id: e.id,
      accountId: e.account_id,
      service: e.service,
      environment: e.environment,
      status: e.status,
    })),
    deployments,
    [trigger],
    now,
  )
  let queued = 0
  if (planned.length > 0 && pg) {
    const column = <K extends keyof PlannedDelivery>(key: K) => planned.map((p) => p[key])
    const inserted = yield compile(sql`insert into webhook_deliveries (webhook_id, account_id, event_id,
        deployment_id, kind, delivery_id, state, next_attempt_at, created_at)
      select w, a, e, d, k, i, 'pending', n, c from unnest(${column('webhook_id')}::bigint[],
        ${column('account_id')}::bigint[], ${column('event_id')}::bigint[], ${column('deployment_id')}::bigint[],
        ${column('kind')}::text[], ${column('delivery_id')}::text[], ${column('next_attempt_at')}::bigint[],
        ${column('created_at')}::bigint[]) with ordinality as t(w, a, e, d, k, i, n, c, o)
      order by o
      on conflict (webhook_id, event_id, kind) do nothing returning id`)
    queued = inserted.length
  } else {
    for (const d of planned) {
      const inserted = yield compile(sql`insert into webhook_deliveries (webhook_id, account_id, event_id,
          deployment_id, kind, delivery_id, state, next_attempt_at, created_at)
        values (${d.webhook_id}, ${d.account_id}, ${d.event_id}, ${d.deployment_id}, ${d.kind},
          ${d.delivery_id}, 'pending', ${d.next_attempt_at}, ${d.created_at})
        on conflict (webhook_id, event_id, kind) do nothing returning id`)
      queued += inserted.length
    }
  }
  const moved = nextCursor(cursor, bound, events, room)
  yield compile(sql`update webhooks set queued_through = ${moved} where id = ${webhookId}`)
  return { webhookId, ran: true, planned: planned.length, queued, cursor: moved }
}

/** The top-up as a unit of the write connection's queue: one transaction, on disk before it resolves. */
function runSqlite(
  database: Extract<Database, { dialect: 'sqlite' }>,
  steps: Generator<CompiledQuery, TopUp, Rows>,
): Promise<TopUp> {
  return database.write((sql) => {
    let next = steps.next([])
    while (!next.done) next = steps.next(sql.execute(next.value.sql, next.value.parameters))
    return next.value
  })
}

async function runPostgres(
  database: Extract<Database, { dialect: 'postgres' }>,
  steps: Generator<CompiledQuery, TopUp, Rows>,
): Promise<TopUp> {
  const client = await database.pool.connect()
  let broken: Error | undefined
  try {
    await client.query('BEGIN')
    try {
      let next = steps.next([])
      while (!next.done) {
        const { rows } = await client.query(next.value.sql, next.value.parameters as unknown[])
        next = steps.next(rows as Rows)
      }
      await client.query('COMMIT')
      return next.value
    } catch (err) {
      await client.query('ROLLBACK').catch((rollback: Error) => {
        // The connection itself failed: do not hand it back to the pool.
        broken = rollback
      })
      throw err
    }
  } finally {
    client.release(broken)
  }
}

/** Tops up one webhook: queues the deliveries of its next matching events, if its window has room. */
export function topUpWebhook(
  database: Database,
  webhookId: number,
  options: { window?: number; now?: number } = {},
): Promise<TopUp> {
  const steps = topUpSteps(database, webhookId, options.window ?? QUEUE_WINDOW, options.now ?? Date.now())
  if (database.dialect === 'postgres') return runPostgres(database, steps)
  return runSqlite(database, steps)
}

/** Tops up every enabled webhook whose cursor is behind derivation, one transaction each. */
export async function topUpWebhooks(
  database: Database,
  options: { window?: number; now?: number } = {},
): Promise<TopUp[]> {
  const { rows } = await sql<{ id: number }>`select id from webhooks where enabled = 1
    and queued_through < coalesce((select through from deployments_progress where id = 1), 0)
    order by id`.execute(database.db)
  const done: TopUp[] = []
  for (const { id } of rows) done.push(await topUpWebhook(database, Number(id), options))
  return done
}

/** The trigger columns and cursor of a webhooks row. */
export type BacklogColumns = TriggerColumns & { queued_through: number; enabled: number }

/**
 * How many events each webhook has not queued yet (each will be one or two deliveries), counted up
 * to BACKLOG_COUNT_CAP: the events after its cursor that match it, derived or not. Disabled webhooks
 * queue nothing and count 0.
 */
export async function webhookBacklogs(
  database: Database,
  webhooks: readonly BacklogColumns[],
): Promise<Map<number, number>> {
  const counts = new Map<number, number>()
  for (const w of webhooks) {
    if (Number(w.enabled) !== 1) {
      counts.set(Number(w.id), 0)
      continue
    }
    const trigger = toTrigger(w)
    const { rows } = await sql<{ n: number | string }>`select count(*) as n from (select 1 from events
      where ${matching(database.dialect, trigger, Number(w.queued_through), null)}
      limit ${BACKLOG_COUNT_CAP}) b`.execute(database.db)
    counts.set(trigger.id, Number(rows[0]?.n ?? 0))
  }
  return counts
}

/** The events not yet queued, summed over every enabled webhook of every account (for /metrics). */
export async function totalBacklog(database: Database): Promise<number> {
  const webhooks = await sql<BacklogColumns>`select ${sql.raw(TRIGGER_COLUMN_LIST)}, queued_through, enabled
    from webhooks where enabled = 1`.execute(database.db)
  let total = 0
  for (const n of (await webhookBacklogs(database, webhooks.rows)).values()) total += n
  return total
}
