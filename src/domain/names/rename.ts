// Renaming and merging a service or an environment (issue 28): X → Y is a rename when Y has no
// history, a merge when it has. Events keep their original text: an alias (name_aliases) maps X to Y
// for derivation (deployments/name-aliases.ts), and the deployments of X and Y are derived again
// under Y in the same transaction, so the board, service pages, insights, the read API, badges and
// webhooks' later deliveries follow at once.
import { type Kysely, sql } from 'kysely'
import type { DB } from '../../db/schema.js'
import { nameProblem } from '../../text-rules.js'
import { withTransaction } from '../audit/transaction.js'
import {
  type BatchStart,
  EVENT_COLUMN_LIST,
  type EventColumns,
  type GroupId,
  groupIdKey,
  planBatch,
  type StoredEvent,
  toStoredEvent,
} from '../deployments/derivation.js'
import {
  type AliasRow,
  applyNameAliases,
  type NameAliases,
  nameAliases,
  rawNames,
} from '../deployments/name-aliases.js'
import { LIMITS } from '../events/event.js'
import { type DroppedPromotionRule, followGuardrails } from './guardrails-follow.js'

export type NameKind = 'service' | 'environment'

export function isNameKind(value: string): value is NameKind {
  return value === 'service' || value === 'environment'
}

/** The column of events and deployments a kind of name lives in. */
const COLUMN = { service: 'service', environment: 'environment' } as const

/** Rows per multi-row insert: well under both databases' limits on parameters. */
const ROWS_PER_INSERT = 400

/** A refused rename: the form field at fault and why, in words that follow its label. */
export interface NameFieldProblem {
  field: 'from' | 'to'
  problem: string
}

export interface CheckedRename {
  kind: NameKind
  from: string
  to: string
  /** Y already has history: the two become one. */
  merge: boolean
}

/** The names of a kind that have deployments in the account (what the board shows). */
export async function knownNames(db: Kysely<DB>, accountId: number, kind: NameKind): Promise<string[]> {
  const rows = await db
    .selectFrom('deployment_heads')
    .select(COLUMN[kind])
    .distinct()
    .where('account_id', '=', accountId)
    .execute()
  return rows.map((r) =>
    kind === 'service' ? (r as { service: string }).service : (r as { environment: string }).environment,
  )
}

/** Checks a rename as typed (trimmed here); call after deployments are current. */
export async function checkRename(
  db: Kysely<DB>,
  accountId: number,
  kind: NameKind,
  fromRaw: string,
  toRaw: string,
): Promise<CheckedRename | NameFieldProblem> {
  const from = fromRaw.trim()
  const to = toRaw.trim()
  const label = kind === 'service' ? 'service' : 'environment'
  const fromProblem = nameProblem(from, LIMITS[kind])
  if (fromProblem) return { field: 'from', problem: `The current name ${fromProblem}.` }
  const known = new Set(await knownNames(db, accountId, kind))
  if (!known.has(from)) return { field: 'from', problem: `This account has no ${label} named "${from}".` }
  const toProblem = nameProblem(to, LIMITS[kind])
  if (toProblem) return { field: 'to', problem: `The new name ${toProblem}.` }
  if (to === from) return { field: 'to', problem: `The new name is the same as the current one.` }
  return { kind, from, to, merge: known.has(to) }
}

export interface RenameResult extends CheckedRename {
  /** Events now derived under the new name. */
  events: number
  deployments: number
  /** Promotion rules a merge of environments dropped (guardrails-follow.ts). */
  droppedPromotionRules: DroppedPromotionRule[]
}

async function loadAliases(trx: Kysely<DB>, accountId: number): Promise<NameAliases | null> {
  const rows = await trx
    .selectFrom('name_aliases')
    .select(['account_id', 'kind', 'from_name', 'to_name'])
    .where('account_id', '=', accountId)
    .execute()
  return nameAliases(rows as AliasRow[])
}

/**
 * Renames or merges, in the caller's transaction if it is one (so its audit entry commits with it).
 * Takes derivation's lock row first: no derivation run, prune or other rename commits meanwhile, and
 * every process's memory of the groups is dropped (the generation moves).
 */
export function renameName(
  db: Kysely<DB>,
  accountId: number,
  rename: CheckedRename,
  now = Date.now(),
): Promise<RenameResult> {
  return withTransaction(db, async (trx) => {
    const { kind, from, to } = rename
    const column = COLUMN[kind]
    const { rows: lock } = await sql<{
      through: number | string
    }>`update deployments_progress set generation = generation + 1 where id = 1 returning through`.execute(
      trx,
    )
    const through = Number(lock[0]?.through ?? 0)

    // The aliases stay flat: Y names itself again, what pointed at X points at Y, and X points at Y.
    const aliases = trx
      .deleteFrom('name_aliases')
      .where('account_id', '=', accountId)
      .where('kind', '=', kind)
    await aliases.where('from_name', '=', to).execute()
    await trx
      .updateTable('name_aliases')
      .set({ to_name: to })
      .where('account_id', '=', accountId)
      .where('kind', '=', kind)
      .where('to_name', '=', from)
      .execute()
    await trx
      .insertInto('name_aliases')
      .values({ account_id: accountId, kind, from_name: from, to_name: to, created_at: now })
      .execute()

    // The services whose first deployments of a version may change.
    const services =
      kind === 'service'
        ? [to]
        : (
            await trx
              .selectFrom('deployment_heads')
              .select('service')
              .distinct()
              .where('account_id', '=', accountId)
              .where('environment', 'in', [from, to])
              .execute()
          ).map((r) => r.service)
    for (const table of ['deployments', 'deployment_heads'] as const) {
      await trx
        .deleteFrom(table)
        .where('account_id', '=', accountId)
        .where(column, 'in', [from, to])
        .execute()
    }
    const firstsOf = kind === 'service' ? [from, to] : services
    if (firstsOf.length > 0) {
      await trx
        .deleteFrom('version_firsts')
        .where('account_id', '=', accountId)
        .where('service', 'in', firstsOf)
        .execute()
    }

    // Every event derived so far that now belongs under Y, derived again from the start.
    const all = await loadAliases(trx, accountId)
    const names = rawNames(all, accountId, kind, to)
    const { rows } = await sql<EventColumns>`select ${sql.raw(EVENT_COLUMN_LIST)} from events
      where account_id = ${accountId} and ${sql.ref(column)} in (${sql.join(names)}) and id <= ${through}
      order by id`.execute(trx)
    const events = rows.map(toStoredEvent)
    applyNameAliases(events, all)
    const regrouped = new Map<string, { group: GroupId; events: StoredEvent[] }>()
    for (const event of events) {
      const group = { accountId, service: event.service, environment: event.environment }
      const key = groupIdKey(group)
      let entry = regrouped.get(key)
      if (!entry) {
        entry = { group, events: [] }
        regrouped.set(key, entry)
      }
      entry.events.push(event)
    }
    const start: BatchStart = { through, batch: [], gaps: [], gapEvents: [] }
    const writes = planBatch(start, regrouped, new Map(), now, [])
    // Heads of groups still holding rows after the delete (an environment renamed: a service's other
    // environments) are not among these: only X and Y groups were deleted.
    for (let i = 0; i < writes.deployments.length; i += ROWS_PER_INSERT) {
      await trx
        .insertInto('deployments')
        .values(writes.deployments.slice(i, i + ROWS_PER_INSERT))
        .execute()
    }
    for (let i = 0; i < writes.heads.length; i += ROWS_PER_INSERT) {
      await trx
        .insertInto('deployment_heads')
        .values(writes.heads.slice(i, i + ROWS_PER_INSERT))
        .execute()
    }
    if (services.length > 0) await recomputeFirsts(trx, accountId, services)
    await moveSettings(trx, accountId, kind, from, to)
    const droppedPromotionRules = await followGuardrails(trx, accountId, kind, from, to)
    return { ...rename, events: events.length, deployments: writes.deployments.length, droppedPromotionRules }
  })
}

/** The first deployment of each version of these services (lead time), from the deployments. */
async function recomputeFirsts(
  trx: Kysely<DB>,
  accountId: number,
  services: readonly string[],
): Promise<void> {
  await trx
    .deleteFrom('version_firsts')
    .where('account_id', '=', accountId)
    .where('service', 'in', services)
    .execute()
  // One grouped pass for the first id of each version, then those rows by primary key. (A correlated
  // "id = (select min(id) …)" per deployment walked the service's deployments once per deployment:
  // minutes for a service of 100,000 events, with derivation's lock held.)
  await sql`insert into version_firsts (account_id, service, version, deployment_id, started_at)
    select d.account_id, d.service, d.version, d.id, d.started_at
    from (select min(id) as id from deployments
      where account_id = ${accountId} and service in (${sql.join(services)})
      group by service, version) f
    join deployments d on d.id = f.id`.execute(trx)
}

/** What people set about X (a service's team and links; an environment's place and visibility) goes to Y unless Y has its own. */
async function moveSettings(
  trx: Kysely<DB>,
  accountId: number,
  kind: NameKind,
  from: string,
  to: string,
): Promise<void> {
  const table = kind === 'service' ? 'services' : 'environment_settings'
  const target = await trx
    .selectFrom(table)
    .select('name')
    .where('account_id', '=', accountId)
    .where('name', '=', to)
    .executeTakeFirst()
  const old = trx.deleteFrom(table).where('account_id', '=', accountId).where('name', '=', from)
  if (target) await old.execute()
  else
    await trx
      .updateTable(table)
      .set({ name: to })
      .where('account_id', '=', accountId)
      .where('name', '=', from)
      .execute()
  // Webhooks that name X trigger on Y (their filters match events by the names they carry, X too).
  const hooks = await trx
    .selectFrom('webhooks')
    .select(['id', 'services', 'environments'])
    .where('account_id', '=', accountId)
    .execute()
  const field = kind === 'service' ? 'services' : 'environments'
  for (const hook of hooks) {
    const list = JSON.parse(hook[field]) as string[]
    if (!list.includes(from)) continue
    const next = [...new Set(list.map((n) => (n === from ? to : n)))]
    await trx
      .updateTable('webhooks')
      .set({ [field]: JSON.stringify(next) })
      .where('id', '=', hook.id)
      .execute()
  }
}

/**
 * The name `name` was renamed or merged into, when it was (the aliases stay flat: one hop). Null
 * for a name never renamed. Links and bookmarks to the old name's page lead to the new one.
 */
export async function renamedTo(
  db: Kysely<DB>,
  accountId: number,
  kind: 'service' | 'environment',
  name: string,
): Promise<string | null> {
  const row = await db
    .selectFrom('name_aliases')
    .select('to_name')
    .where('account_id', '=', accountId)
    .where('kind', '=', kind)
    .where('from_name', '=', name)
    .executeTakeFirst()
  return row?.to_name ?? null
}
