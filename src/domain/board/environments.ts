// The board's environment order (SPEC §6.3): the built-in order, what an account placed or hid in
// Settings, and the environments it has deployed to. The insights pages and the read API use the
// same order, so this module reads nothing of deployments/ (which reads it).
import { type Kysely, sql } from 'kysely'
import type { DB } from '../../db/schema.js'
import { withTransaction } from '../audit/transaction.js'

/** Where environments go when an account has not ordered them (SPEC §6.3). */
export const BUILT_IN_ORDER = [
  'dev',
  'development',
  'test',
  'testing',
  'qa',
  'staging',
  'stage',
  'preprod',
  'prod',
  'production',
]

export interface EnvironmentSetting {
  name: string
  position: number
  hidden: boolean
}

/**
 * The environments in board order: those the account placed, by their position; then the rest, the
 * built-in names first (compared without letter case) and then by first sight. Hidden ones are
 * left out unless asked for.
 */
export function orderEnvironments(
  seen: readonly { name: string; firstSeenId: number }[],
  settings: readonly EnvironmentSetting[],
  options: { includeHidden?: boolean } = {},
): string[] {
  const placed = new Map(settings.map((s) => [s.name, s]))
  const builtIn = (name: string) => {
    const i = BUILT_IN_ORDER.indexOf(name.toLowerCase())
    return i === -1 ? BUILT_IN_ORDER.length : i
  }
  const names = new Map<string, number>()
  for (const s of seen)
    names.set(s.name, Math.min(s.firstSeenId, names.get(s.name) ?? Number.POSITIVE_INFINITY))
  for (const s of settings) if (!names.has(s.name)) names.set(s.name, Number.POSITIVE_INFINITY)
  return [...names.entries()]
    .filter(([name]) => options.includeHidden || !placed.get(name)?.hidden)
    .sort(([a, aSeen], [b, bSeen]) => {
      const pa = placed.get(a)
      const pb = placed.get(b)
      if (pa && pb) return pa.position - pb.position || a.localeCompare(b)
      if (pa) return -1
      if (pb) return 1
      return builtIn(a) - builtIn(b) || aSeen - bSeen || a.localeCompare(b)
    })
    .map(([name]) => name)
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

export async function environmentSettings(db: Kysely<DB>, accountId: number): Promise<EnvironmentSetting[]> {
  const rows = await db
    .selectFrom('environment_settings')
    .select(['name', 'position', 'hidden'])
    .where('account_id', '=', accountId)
    .execute()
  return rows.map((r) => ({ name: r.name, position: Number(r.position), hidden: Number(r.hidden) === 1 }))
}

export interface EnvironmentListing {
  /** Every environment in board order, hidden ones included, each marked. */
  all: { name: string; hidden: boolean }[]
  /** The ones the board shows, in order. */
  visible: string[]
}

export async function environmentListing(db: Kysely<DB>, accountId: number): Promise<EnvironmentListing> {
  const [seen, settings] = await Promise.all([
    seenEnvironments(db, accountId),
    environmentSettings(db, accountId),
  ])
  const hidden = new Set(settings.filter((s) => s.hidden).map((s) => s.name))
  const all = orderEnvironments(seen, settings, { includeHidden: true })
  return {
    all: all.map((name) => ({ name, hidden: hidden.has(name) })),
    visible: all.filter((name) => !hidden.has(name)),
  }
}

/**
 * The account's environments in board order (Settings first, then the built-in order, then first
 * seen). Hidden ones are left out unless asked for.
 */
export async function environmentsInOrder(
  db: Kysely<DB>,
  accountId: number,
  options: { includeHidden?: boolean } = {},
): Promise<string[]> {
  const listing = await environmentListing(db, accountId)
  return options.includeHidden ? listing.all.map((e) => e.name) : listing.visible
}

/** The environments a service has deployed to, in the account's order (hidden ones last, kept). */
export async function serviceEnvironments(
  db: Kysely<DB>,
  accountId: number,
  service: string,
): Promise<string[]> {
  const [rows, { all }] = await Promise.all([
    environmentsOfService(db, accountId, service),
    environmentListing(db, accountId),
  ])
  const mine = new Set(rows)
  const ordered = all.filter((e) => mine.has(e.name))
  return [...ordered.filter((e) => !e.hidden), ...ordered.filter((e) => e.hidden)].map((e) => e.name)
}

export type EnvironmentMove = 'up' | 'down' | 'hide' | 'show'

export function isEnvironmentMove(value: string): value is EnvironmentMove {
  return value === 'up' || value === 'down' || value === 'hide' || value === 'show'
}

/**
 * Moves or hides one environment. The whole current order is written down as positions, so that
 * from then on the account's order is explicit. False when the account has no such environment.
 */
export async function changeEnvironment(
  db: Kysely<DB>,
  accountId: number,
  name: string,
  move: EnvironmentMove,
): Promise<boolean> {
  const { all } = await environmentListing(db, accountId)
  const index = all.findIndex((e) => e.name === name)
  if (index === -1) return false
  const order = all.map((e) => ({ ...e }))
  const target = order[index]
  if (!target) return false
  if (move === 'hide') target.hidden = true
  else if (move === 'show') target.hidden = false
  else {
    const other = move === 'up' ? index - 1 : index + 1
    const neighbour = order[other]
    if (neighbour) {
      order[other] = target
      order[index] = neighbour
    }
  }
  await withTransaction(db, async (trx) => {
    await trx.deleteFrom('environment_settings').where('account_id', '=', accountId).execute()
    await trx
      .insertInto('environment_settings')
      .values(
        order.map((e, position) => ({
          account_id: accountId,
          name: e.name,
          position,
          hidden: e.hidden ? 1 : 0,
        })),
      )
      .execute()
  })
  return true
}
