// The board's per-account settings and what people know about a service: environment order and
// visibility, stall time, badge token, and service metadata (team, description, links).
import { randomBytes } from 'node:crypto'
import type { Kysely } from 'kysely'
import type { DB } from '../db/schema.js'
import { textProblem } from '../text-rules.js'
import { withTransaction } from './audit/transaction.js'
import { type EnvironmentSetting, orderEnvironments } from './deployments/calendar.js'
import { environmentsOfService, seenEnvironments } from './deployments/queries.js'
import { type DeploymentOutcome, outcomeAt } from './deployments/rules.js'
import { rowToDeployment } from './deployments/store.js'
import { parseWholeNumber } from './whole-numbers.js'

/** Bounds of the stall time setting, in minutes: a minute to a week. */
export const STALL_MINUTES_MIN = 1
export const STALL_MINUTES_MAX = 10_080

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

/**
 * The account a badge token belongs to. One lookup by a unique index whatever the service asked
 * for, so the time it takes says nothing about which services exist.
 */
export async function accountByBadgeToken(
  db: Kysely<DB>,
  token: string,
): Promise<{ id: number; stallMinutes: number } | undefined> {
  // Tokens are 43 URL-safe characters; anything else cannot match and need not reach the database.
  if (!/^[A-Za-z0-9_-]{20,100}$/.test(token)) return undefined
  const row = await db
    .selectFrom('accounts')
    .select(['id', 'stall_minutes'])
    .where('badge_token', '=', token)
    .executeTakeFirst()
  return row ? { id: Number(row.id), stallMinutes: Number(row.stall_minutes) } : undefined
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

export interface ServiceMeta {
  name: string
  team: string | null
  description: string | null
  repositoryUrl: string | null
  runbookUrl: string | null
  dashboardUrl: string | null
}

export async function listServiceMeta(db: Kysely<DB>, accountId: number): Promise<ServiceMeta[]> {
  const rows = await db.selectFrom('services').selectAll().where('account_id', '=', accountId).execute()
  return rows.map((r) => ({
    name: r.name,
    team: r.team,
    description: r.description,
    repositoryUrl: r.repository_url,
    runbookUrl: r.runbook_url,
    dashboardUrl: r.dashboard_url,
  }))
}

export async function serviceMeta(db: Kysely<DB>, accountId: number, name: string): Promise<ServiceMeta> {
  const row = await db
    .selectFrom('services')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('name', '=', name)
    .executeTakeFirst()
  return {
    name,
    team: row?.team ?? null,
    description: row?.description ?? null,
    repositoryUrl: row?.repository_url ?? null,
    runbookUrl: row?.runbook_url ?? null,
    dashboardUrl: row?.dashboard_url ?? null,
  }
}

/** Whether the account has deployed this service (a page exists for it). */
export async function serviceExists(db: Kysely<DB>, accountId: number, name: string): Promise<boolean> {
  const row = await db
    .selectFrom('deployment_heads')
    .select('service')
    .where('account_id', '=', accountId)
    .where('service', '=', name)
    .limit(1)
    .executeTakeFirst()
  return row !== undefined
}

/** Only web addresses become links: javascript:, data: and the like are refused. */
export function isWebAddress(value: string): boolean {
  if (!/^https?:\/\//i.test(value)) return false
  try {
    const url = new URL(value)
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== ''
  } catch {
    return false
  }
}

export interface ServiceMetaInput {
  team: string
  description: string
  repositoryUrl: string
  runbookUrl: string
  dashboardUrl: string
}

/** The metadata form's values, trimmed (empty means none), or every reason it is refused. */
export function checkServiceMeta(
  input: ServiceMetaInput,
): { meta: Omit<ServiceMeta, 'name'> } | { errors: string[] } {
  const errors: string[] = []
  const team = input.team.trim()
  const description = input.description.trim()
  if ([...team].length > 100) errors.push('Team must be at most 100 characters.')
  const teamProblem = textProblem(team)
  if (teamProblem) errors.push(`Team ${teamProblem}.`)
  if ([...description].length > 500) errors.push('Description must be at most 500 characters.')
  // A textarea: its line breaks are kept, every other control character is refused.
  const descriptionProblem = textProblem(description, { multiline: true })
  if (descriptionProblem) errors.push(`Description ${descriptionProblem}.`)
  const urls = {
    repositoryUrl: ['Repository', input.repositoryUrl.trim()],
    runbookUrl: ['Runbook', input.runbookUrl.trim()],
    dashboardUrl: ['Dashboard', input.dashboardUrl.trim()],
  } as const
  for (const [label, value] of Object.values(urls)) {
    if (value === '') continue
    const linkProblem = textProblem(value)
    if (value.length > 2000) errors.push(`${label} link must be at most 2000 characters.`)
    else if (linkProblem) errors.push(`${label} link ${linkProblem}.`)
    else if (!isWebAddress(value)) errors.push(`${label} link must be an http:// or https:// address.`)
  }
  if (errors.length > 0) return { errors }
  const orNull = (v: string) => (v === '' ? null : v)
  return {
    meta: {
      team: orNull(team),
      description: orNull(description),
      repositoryUrl: orNull(urls.repositoryUrl[1]),
      runbookUrl: orNull(urls.runbookUrl[1]),
      dashboardUrl: orNull(urls.dashboardUrl[1]),
    },
  }
}

export async function saveServiceMeta(
  db: Kysely<DB>,
  accountId: number,
  name: string,
  meta: Omit<ServiceMeta, 'name'>,
  now = Date.now(),
): Promise<void> {
  const values = {
    team: meta.team,
    description: meta.description,
    repository_url: meta.repositoryUrl,
    runbook_url: meta.runbookUrl,
    dashboard_url: meta.dashboardUrl,
    updated_at: now,
  }
  await db
    .insertInto('services')
    .values({ account_id: accountId, name, ...values })
    .onConflict((oc) => oc.columns(['account_id', 'name']).doUpdateSet(values))
    .execute()
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

export interface BadgeState {
  /** The version running there now; null when nothing has succeeded there. */
  version: string | null
  /** How the latest deployment there stands; null when there is none. */
  latest: DeploymentOutcome | null
  /** The version of that latest deployment; null when there is none. */
  latestVersion: string | null
}

/**
 * What a badge shows for one service and environment: two index seeks (the success that finished
 * last, the deployment that started last; as on the board), the same whether or not the pair exists.
 */
export async function badgeState(
  db: Kysely<DB>,
  accountId: number,
  service: string,
  environment: string,
  clock: { now: number; stallMs: number },
): Promise<BadgeState> {
  const pair = db
    .selectFrom('deployments')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('service', '=', service)
    .where('environment', '=', environment)
  const [running, latest] = await Promise.all([
    pair
      .where('result', '=', 'succeeded')
      .orderBy('finished_at', 'desc')
      .orderBy('finish_event_id', 'desc')
      .limit(1)
      .executeTakeFirst(),
    pair.orderBy('started_at', 'desc').orderBy('id', 'desc').limit(1).executeTakeFirst(),
  ])
  return {
    version: running?.version ?? null,
    latest: latest ? outcomeAt(rowToDeployment(latest), clock.now, clock.stallMs) : null,
    latestVersion: latest?.version ?? null,
  }
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
