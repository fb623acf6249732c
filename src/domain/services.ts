// What people know about a service: team, description and links (the board's service details and
// the service page), and whether the account has deployed it. The board's own settings (environment
// order, stall time, badge token) are in board/.
import type { Kysely } from 'kysely'
import type { DB } from '../db/schema.js'
import { textProblem } from '../text-rules.js'

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

/** Whether the account has any deployment in this service (exact name). */
export const hasService = serviceExists

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
