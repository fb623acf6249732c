// What a deployment's events said about it beyond the fields that fold into deployments: the
// commit, the link to its CI run and the description. Read for the rows a page shows, from the
// events table by id (the derived deployments keep only the event ids).
import type { Kysely } from 'kysely'
import type { DB } from '../../db/schema.js'
import type { Deployment } from './rules.js'

export interface DeploymentDetails {
  commit: string | null
  url: string | null
  description: string | null
}

/** Ids per statement: far below both databases' limits on bound parameters. */
const CHUNK = 1000

/**
 * The details of each given deployment, by deployment id: per field, the newest of its events that
 * carries one (a finishing event often links the CI run that finished it). Deployments whose events
 * carry none, or whose events retention removed, are left out of the map.
 */
export async function deploymentDetails(
  db: Kysely<DB>,
  accountId: number,
  deployments: readonly Pick<Deployment, 'id' | 'eventIds'>[],
): Promise<Map<number, DeploymentDetails>> {
  const ids = [...new Set(deployments.flatMap((d) => d.eventIds))]
  const byEvent = new Map<number, DeploymentDetails>()
  for (let start = 0; start < ids.length; start += CHUNK) {
    const rows = await db
      .selectFrom('events')
      .select(['id', 'url', 'commit_sha', 'description'])
      .where('account_id', '=', accountId)
      .where('id', 'in', ids.slice(start, start + CHUNK))
      .where((eb) =>
        eb.or([
          eb('url', 'is not', null),
          eb('commit_sha', 'is not', null),
          eb('description', 'is not', null),
        ]),
      )
      .execute()
    for (const r of rows) {
      byEvent.set(Number(r.id), { commit: r.commit_sha, url: r.url, description: r.description })
    }
  }
  const out = new Map<number, DeploymentDetails>()
  if (byEvent.size === 0) return out
  for (const d of deployments) {
    const found: DeploymentDetails = { commit: null, url: null, description: null }
    for (let i = d.eventIds.length - 1; i >= 0; i--) {
      const e = byEvent.get(d.eventIds[i] ?? -1)
      if (!e) continue
      found.commit ??= e.commit
      found.url ??= e.url
      found.description ??= e.description
    }
    if (found.commit !== null || found.url !== null || found.description !== null) out.set(d.id, found)
  }
  return out
}
