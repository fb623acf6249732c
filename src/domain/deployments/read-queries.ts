// What the read API needs beside queries.ts: the account's stall time, its environments in board
// order (without hidden ones), the services' teams, and which names a metrics request may use.
import type { Kysely } from 'kysely'
import type { DB } from '../../db/schema.js'
import { environmentListing, serviceExists } from '../services.js'

const MINUTE_MS = 60_000

/** The account's stall time in milliseconds (SPEC §6.1: default 60 minutes). */
export async function stallMsOf(db: Kysely<DB>, accountId: number): Promise<number> {
  const row = await db
    .selectFrom('accounts')
    .select('stall_minutes')
    .where('id', '=', accountId)
    .executeTakeFirst()
  return Number(row?.stall_minutes ?? 60) * MINUTE_MS
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

/** Each service's team, for those that have one (Settings / the board's service details). */
export async function teamsOf(db: Kysely<DB>, accountId: number): Promise<Map<string, string>> {
  const rows = await db
    .selectFrom('services')
    .select(['name', 'team'])
    .where('account_id', '=', accountId)
    .where('team', 'is not', null)
    .execute()
  return new Map(rows.flatMap((r) => (r.team === null ? [] : [[r.name, r.team] as const])))
}

/** Whether the account has any deployment in this service (exact name). */
export const hasService = serviceExists
