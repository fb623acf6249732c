// What a status badge reads (SPEC §6.3): the account its token belongs to, and how one service
// stands in one environment. The token itself is a board setting (settings.ts).
import type { Kysely } from 'kysely'
import type { DB } from '../../db/schema.js'
import { type DeploymentOutcome, outcomeAt } from '../deployments/rules.js'
import { rowToDeployment } from '../deployments/store.js'

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
