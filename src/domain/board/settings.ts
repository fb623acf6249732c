// The board's per-account settings: stall time and badge token, and what the board's Settings
// sections show (with the environment order, environments.ts).
import { randomBytes } from 'node:crypto'
import type { Kysely } from 'kysely'
import type { DB } from '../../db/schema.js'
import { parseWholeNumber } from '../whole-numbers.js'
import { environmentListing } from './environments.js'

/** Bounds of the stall time setting, in minutes: a minute to a week. */
export const STALL_MINUTES_MIN = 1
export const STALL_MINUTES_MAX = 10_080

const MINUTE_MS = 60_000

export interface BoardSettings {
  stallMinutes: number
  badgeToken: string | null
}

export async function boardSettings(db: Kysely<DB>, accountId: number): Promise<BoardSettings> {
  const row = await db
    .selectFrom('accounts')
    .select(['stall_minutes', 'badge_token'])
    .where('id', '=', accountId)
    .executeTakeFirstOrThrow()
  return { stallMinutes: Number(row.stall_minutes), badgeToken: row.badge_token }
}

/** The account's stall time in milliseconds (SPEC §6.1: default 60 minutes). */
export async function stallMsOf(db: Kysely<DB>, accountId: number): Promise<number> {
  const row = await db
    .selectFrom('accounts')
    .select('stall_minutes')
    .where('id', '=', accountId)
    .executeTakeFirst()
  return Number(row?.stall_minutes ?? 60) * MINUTE_MS
}

/** The stall time as typed in the form, or the reason it is refused. */
export function parseStallMinutes(raw: string): { minutes: number } | { error: string } {
  const text = raw.trim()
  // The one grammar of whole numbers (whole-numbers.ts): "1e1", "0x10", "+5" or "010" are refused.
  const minutes = parseWholeNumber(text, 0, Number.MAX_SAFE_INTEGER)
  if (minutes === undefined)
    return { error: 'Stall time must be a whole number of minutes, in decimal digits only.' }
  if (minutes < STALL_MINUTES_MIN || minutes > STALL_MINUTES_MAX) {
    return {
      error: `Stall time must be between ${STALL_MINUTES_MIN} and ${STALL_MINUTES_MAX} minutes (one week).`,
    }
  }
  return { minutes }
}

export async function setStallMinutes(db: Kysely<DB>, accountId: number, minutes: number): Promise<void> {
  await db.updateTable('accounts').set({ stall_minutes: minutes }).where('id', '=', accountId).execute()
}

/** 32 random bytes, URL-safe: long enough that guessing one is hopeless. */
function newBadgeToken(): string {
  return randomBytes(32).toString('base64url')
}

/** The account's badge token, made on first use. */
export async function ensureBadgeToken(db: Kysely<DB>, accountId: number): Promise<string> {
  // Only set when still null, so two first views at once agree on one token.
  await db
    .updateTable('accounts')
    .set({ badge_token: newBadgeToken() })
    .where('id', '=', accountId)
    .where('badge_token', 'is', null)
    .execute()
  const { badgeToken } = await boardSettings(db, accountId)
  if (badgeToken === null) throw new Error('badge token was not stored')
  return badgeToken
}

/** A new badge token; the old one stops working at once (it is looked up, never cached). */
export async function rotateBadgeToken(db: Kysely<DB>, accountId: number): Promise<string> {
  const token = newBadgeToken()
  await db.updateTable('accounts').set({ badge_token: token }).where('id', '=', accountId).execute()
  return token
}

/** What the board's Settings sections show; the badge token (made on first use) for admins only. */
export async function loadBoardSettings(
  db: Kysely<DB>,
  accountId: number,
  isAdmin: boolean,
): Promise<{
  environments: { name: string; hidden: boolean }[]
  stallMinutes: number
  badgeToken: string | null
}> {
  const [{ all }, settings] = await Promise.all([
    environmentListing(db, accountId),
    boardSettings(db, accountId),
  ])
  const badgeToken = isAdmin ? (settings.badgeToken ?? (await ensureBadgeToken(db, accountId))) : null
  return { environments: all, stallMinutes: settings.stallMinutes, badgeToken }
}
