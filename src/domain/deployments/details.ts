// What a deployment's events said about it beyond the fields that fold into deployments: the
// commit, the link to its CI run, the description, and the guardrails it broke when recorded (with
// the override reason). Read for the rows a page shows, from the events table by id (the derived
// deployments keep only the event ids).
import type { Kysely } from 'kysely'
import type { DB } from '../../db/schema.js'
import { type DeploymentFlags, type FlaggedEvent, flagsOf } from '../guardrails/marks.js'
import type { Deployment } from './rules.js'

export interface DeploymentDetails {
  commit: string | null
  url: string | null
  description: string | null
  /** The guardrails its events broke and why it was recorded anyway; null when none did. */
  flags: DeploymentFlags | null
}

/** Ids per statement: far below both databases' limits on bound parameters. */
const CHUNK = 1000

interface EventDetails extends FlaggedEvent {
  commit: string | null
  url: string | null
  description: string | null
}

/**
 * The details of each given deployment, by deployment id: per field, the newest of its events that
 * carries one (a finishing event often links the CI run that finished it); the flags of all its
 * events. Deployments whose events carry none, or whose events retention removed, are left out.
 */
export async function deploymentDetails(
  db: Kysely<DB>,
  accountId: number,
  deployments: readonly Pick<Deployment, 'id' | 'eventIds'>[],
): Promise<Map<number, DeploymentDetails>> {
  const ids = [...new Set(deployments.flatMap((d) => d.eventIds))]
  const byEvent = new Map<number, EventDetails>()
  for (let start = 0; start < ids.length; start += CHUNK) {
    const rows = await db
      .selectFrom('events')
      .select(['id', 'url', 'commit_sha', 'description', 'guardrails', 'override_reason'])
      .where('account_id', '=', accountId)
      .where('id', 'in', ids.slice(start, start + CHUNK))
      .where((eb) =>
        eb.or([
          eb('url', 'is not', null),
          eb('commit_sha', 'is not', null),
          eb('description', 'is not', null),
          eb('guardrails', 'is not', null),
          eb('override_reason', 'is not', null),
        ]),
      )
      .execute()
    for (const r of rows) {
      byEvent.set(Number(r.id), {
        commit: r.commit_sha,
        url: r.url,
        description: r.description,
        guardrails: r.guardrails,
        overrideReason: r.override_reason,
      })
    }
  }
  const out = new Map<number, DeploymentDetails>()
  if (byEvent.size === 0) return out
  for (const d of deployments) {
    const found: DeploymentDetails = { commit: null, url: null, description: null, flags: null }
    const events: EventDetails[] = []
    for (let i = d.eventIds.length - 1; i >= 0; i--) {
      const e = byEvent.get(d.eventIds[i] ?? -1)
      if (!e) continue
      events.unshift(e)
      found.commit ??= e.commit
      found.url ??= e.url
      found.description ??= e.description
    }
    found.flags = flagsOf(events)
    if (found.commit !== null || found.url !== null || found.description !== null || found.flags !== null)
      out.set(d.id, found)
  }
  return out
}
