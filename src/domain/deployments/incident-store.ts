// The incident marks read (issue 27): those a metrics window counts, those of the deployments a
// page or the read API shows, the deployments a mark may name, one deployment by id. The commands
// that change marks are in incidents.ts.
import type { Kysely } from 'kysely'
import type { DB } from '../../db/schema.js'
import type { IncidentMark, MetricsWindow } from './metrics.js'
import type { Deployment } from './rules.js'
import { rowToDeployment } from './store.js'

/** A mark as people see it: what the figures use, with the link and note and who made it. */
export interface Incident extends IncidentMark {
  link: string | null
  note: string | null
  createdBy: string
  createdAt: number
}

export function toIncident(row: {
  deployment_id: number
  link: string | null
  note: string | null
  fixed_by: number | null
  created_by: string
  created_at: number
}): Incident {
  return {
    deploymentId: Number(row.deployment_id),
    fixedBy: row.fixed_by === null ? null : Number(row.fixed_by),
    link: row.link,
    note: row.note,
    createdBy: row.created_by,
    createdAt: Number(row.created_at),
  }
}

/**
 * The marks of the deployments a metrics window counts (finished in it, in its environment and
 * service): an index walk from the account's few marks to their deployments. Ordered by id, so the
 * same marks always give the same cache key.
 */
export async function marksInWindow(
  db: Kysely<DB>,
  accountId: number,
  window: MetricsWindow,
): Promise<Map<number, IncidentMark>> {
  let query = db
    .selectFrom('deployment_incidents as i')
    .innerJoin('deployments as d', (join) =>
      join.onRef('d.account_id', '=', 'i.account_id').onRef('d.id', '=', 'i.deployment_id'),
    )
    .select(['i.deployment_id', 'i.fixed_by'])
    .where('i.account_id', '=', accountId)
    .where('d.environment', '=', window.environment)
    .where('d.finished_at', '>=', window.from)
    .where('d.finished_at', '<', window.to)
  if (window.service !== null) query = query.where('d.service', '=', window.service)
  const rows = await query.orderBy('i.deployment_id').execute()
  return new Map(
    rows.map((r) => [
      Number(r.deployment_id),
      { deploymentId: Number(r.deployment_id), fixedBy: r.fixed_by === null ? null : Number(r.fixed_by) },
    ]),
  )
}

/** The marks of the given deployments, by deployment id (for pages and the read API). */
export async function incidentsOf(
  db: Kysely<DB>,
  accountId: number,
  deploymentIds: readonly number[],
): Promise<Map<number, Incident>> {
  const out = new Map<number, Incident>()
  const ids = [...new Set(deploymentIds)]
  for (let i = 0; i < ids.length; i += 500) {
    const rows = await db
      .selectFrom('deployment_incidents')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('deployment_id', 'in', ids.slice(i, i + 500))
      .execute()
    for (const r of rows) out.set(Number(r.deployment_id), toIncident(r))
  }
  return out
}

/** The marks that name `fixId` as their fix: what the fixing deployment's page lists. */
export async function incidentsFixedBy(
  db: Kysely<DB>,
  accountId: number,
  fixId: number,
): Promise<Incident[]> {
  const rows = await db
    .selectFrom('deployment_incidents')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('fixed_by', '=', fixId)
    .orderBy('deployment_id')
    .execute()
  return rows.map(toIncident)
}

/** One deployment of the account by id, or undefined. */
export async function deploymentById(
  db: Kysely<DB>,
  accountId: number,
  id: number,
): Promise<Deployment | undefined> {
  if (!Number.isSafeInteger(id) || id <= 0) return undefined
  const row = await db
    .selectFrom('deployments')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .executeTakeFirst()
  return row ? rowToDeployment(row) : undefined
}

/**
 * Deployments of the same service and environment that finished after `d` and succeeded (what may
 * have fixed it), or that finished before it (what it may have fixed), nearest first: the choices
 * the deployment's page offers.
 */
export async function neighbours(
  db: Kysely<DB>,
  accountId: number,
  d: Deployment,
  direction: 'later_successes' | 'earlier',
  limit: number,
): Promise<Deployment[]> {
  if (d.finishEventId === null) return []
  let query = db
    .selectFrom('deployments')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('service', '=', d.service)
    .where('environment', '=', d.environment)
  query =
    direction === 'later_successes'
      ? query
          .where('result', '=', 'succeeded')
          .where('finish_event_id', '>', d.finishEventId)
          .orderBy('finish_event_id', 'asc')
      : query
          .where('result', 'is not', null)
          .where('finish_event_id', '<', d.finishEventId)
          .orderBy('finish_event_id', 'desc')
  const rows = await query.limit(limit).execute()
  return rows.map(rowToDeployment)
}
