// Failure links for the DORA figures (issue 27): a deployment marked as having caused an incident
// (with a link and a note) and the deployment that fixed it. The marks as read for the figures and
// pages, the input read from a form or an API body, and the audited commands that change them.
import type { Kysely } from 'kysely'
import type { DB } from '../../db/schema.js'
import { characterCount, textProblem } from '../../text-rules.js'
import { type AuditSource, recordAudit } from '../audit/log.js'
import type { FieldError } from '../events/event.js'
import { isWebAddress } from '../services.js'
import type { IncidentMark, MetricsWindow } from './metrics.js'
import type { Deployment } from './rules.js'
import { rowToDeployment } from './store.js'

export const NOTE_MAX = 500
export const LINK_MAX = 2000

/** A mark as people see it: what the figures use, with the link and note and who made it. */
export interface Incident extends IncidentMark {
  link: string | null
  note: string | null
  createdBy: string
  createdAt: number
}

/** What a form or an API body asks to set; a field left undefined keeps its stored value. */
export interface IncidentInput {
  link?: string | null
  note?: string | null
  fixedBy?: number | null
}

/** A command's answer: the mark as stored, or why nothing was (404: no such deployment). */
export type IncidentResult =
  | { ok: true; value: Incident | null }
  | { ok: false; status: 404 | 422; errors: FieldError[] }

type Row = DB['deployment_incidents']

function toIncident(row: {
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
 * Reads `link`, `note` and `fixed_by` from a form or a JSON body. Absent: unchanged; null or empty
 * text: cleared. A link is an absolute http(s) address; a note at most NOTE_MAX characters; neither
 * may hold control characters; fixed_by is a deployment id (a whole number).
 */
export function readIncidentInput(raw: Readonly<Record<string, unknown>>): {
  input: IncidentInput
  errors: FieldError[]
} {
  const errors: FieldError[] = []
  const input: IncidentInput = {}
  const text = (field: 'link' | 'note', max: number): string | null | undefined => {
    const value = raw[field]
    if (value === undefined) return undefined
    if (value === null) return null
    if (typeof value !== 'string') {
      errors.push({ field, message: `${field} must be text` })
      return undefined
    }
    const trimmed = value.trim()
    if (trimmed === '') return null
    const problem = textProblem(trimmed)
    if (problem) {
      errors.push({ field, message: `${field} ${problem}` })
      return undefined
    }
    if (characterCount(trimmed) > max) {
      errors.push({ field, message: `${field} must be at most ${max} characters` })
      return undefined
    }
    return trimmed
  }
  const link = text('link', LINK_MAX)
  if (typeof link === 'string' && !isWebAddress(link)) {
    errors.push({ field: 'link', message: 'link must be an absolute http(s) address, such as https://…' })
  } else if (link !== undefined) input.link = link
  const note = text('note', NOTE_MAX)
  if (note !== undefined) input.note = note
  const fixed = raw.fixed_by
  if (fixed === null || fixed === '') input.fixedBy = null
  else if (fixed !== undefined) {
    const id =
      typeof fixed === 'number'
        ? fixed
        : typeof fixed === 'string' && /^\s*#?\d{1,15}\s*$/.test(fixed)
          ? Number(fixed.trim().replace('#', ''))
          : Number.NaN
    if (!Number.isSafeInteger(id) || id <= 0) {
      errors.push({ field: 'fixed_by', message: 'fixed_by must be the id of a deployment (a whole number)' })
    } else input.fixedBy = id
  }
  return { input, errors }
}

/** Why `fix` cannot be what fixed `marked`, or null when it can. */
function fixProblem(marked: Deployment, fix: Deployment | undefined, fixId: number): string | null {
  if (!fix) return `fixed_by: this account has no deployment #${fixId}`
  if (fix.id === marked.id) return 'fixed_by: a deployment cannot fix itself'
  if (fix.service !== marked.service || fix.environment !== marked.environment) {
    return `fixed_by: #${fix.id} is ${fix.service} in ${fix.environment}; the fix must be a deployment of ${marked.service} in ${marked.environment}`
  }
  if (fix.result !== 'succeeded' || fix.finishedAt === null) {
    return `fixed_by: #${fix.id} did not succeed; the fix must be a succeeded deployment`
  }
  const after =
    marked.finishedAt !== null &&
    (fix.finishedAt > marked.finishedAt ||
      (fix.finishedAt === marked.finishedAt && (fix.finishEventId ?? 0) > (marked.finishEventId ?? 0)))
  if (!after) return `fixed_by: #${fix.id} finished before #${marked.id}; the fix must finish after it`
  return null
}

/** "api 1.4 in prod (#120)": how an audit entry names a deployment. */
function named(d: Deployment): string {
  return `${d.service} ${d.version} in ${d.environment} (#${d.id})`
}

/**
 * Marks a finished deployment as having caused an incident, or changes its mark: the fields given
 * are set (null clears), the others kept. Refused (nothing stored) for an unknown deployment (404),
 * one still open, or a fix that is not a later success of the same service and environment.
 */
export function markIncident(
  db: Kysely<DB>,
  accountId: number,
  deploymentId: number,
  input: IncidentInput,
  who: AuditSource,
  now = Date.now(),
): Promise<IncidentResult> {
  return db.transaction().execute(async (trx): Promise<IncidentResult> => {
    const marked = await deploymentById(trx, accountId, deploymentId)
    if (!marked) {
      return {
        ok: false,
        status: 404,
        errors: [{ field: 'id', message: `this account has no deployment #${deploymentId}` }],
      }
    }
    const errors: FieldError[] = []
    if (marked.result === null) {
      errors.push({
        field: 'id',
        message: `#${deploymentId} has not finished; only a succeeded or failed deployment can be marked`,
      })
    }
    if (input.fixedBy !== undefined && input.fixedBy !== null) {
      const problem = fixProblem(marked, await deploymentById(trx, accountId, input.fixedBy), input.fixedBy)
      if (problem) errors.push({ field: 'fixed_by', message: problem })
    }
    if (errors.length > 0) return { ok: false, status: 422, errors }
    const before = await trx
      .selectFrom('deployment_incidents')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('deployment_id', '=', deploymentId)
      .executeTakeFirst()
    const values: Pick<Row, 'link' | 'note' | 'fixed_by'> = {
      link: input.link === undefined ? (before?.link ?? null) : input.link,
      note: input.note === undefined ? (before?.note ?? null) : input.note,
      fixed_by: input.fixedBy === undefined ? (before?.fixed_by ?? null) : input.fixedBy,
    }
    if (before) {
      await trx
        .updateTable('deployment_incidents')
        .set(values)
        .where('account_id', '=', accountId)
        .where('deployment_id', '=', deploymentId)
        .execute()
    } else {
      await trx
        .insertInto('deployment_incidents')
        .values({
          account_id: accountId,
          deployment_id: deploymentId,
          ...values,
          created_by: who.actor.name,
          created_at: now,
        })
        .execute()
    }
    await recordAudit(trx, {
      accountId,
      ...who,
      action: 'deployment.incident_marked',
      target: named(marked),
      details: {
        change: before ? 'updated' : 'marked',
        link: values.link,
        note: values.note,
        fixed_by: values.fixed_by === null ? null : Number(values.fixed_by),
      },
      at: now,
    })
    return {
      ok: true,
      value: toIncident({
        deployment_id: deploymentId,
        ...values,
        created_by: before?.created_by ?? who.actor.name,
        created_at: before ? Number(before.created_at) : now,
      }),
    }
  })
}

/**
 * Names the deployment that fixed `deploymentId` (null: none), marking it as having caused an
 * incident if it was not marked yet: what "this fixed #N" on the fixing deployment's page does.
 */
export function markFixed(
  db: Kysely<DB>,
  accountId: number,
  deploymentId: number,
  fixedById: number | null,
  who: AuditSource,
  now = Date.now(),
): Promise<IncidentResult> {
  return markIncident(db, accountId, deploymentId, { fixedBy: fixedById }, who, now)
}

/** Removes a deployment's mark; 404 when the deployment is unknown or not marked. */
export function unmarkIncident(
  db: Kysely<DB>,
  accountId: number,
  deploymentId: number,
  who: AuditSource,
  now = Date.now(),
): Promise<IncidentResult> {
  return db.transaction().execute(async (trx): Promise<IncidentResult> => {
    const marked = await deploymentById(trx, accountId, deploymentId)
    if (!marked) {
      return {
        ok: false,
        status: 404,
        errors: [{ field: 'id', message: `this account has no deployment #${deploymentId}` }],
      }
    }
    const removed = await trx
      .deleteFrom('deployment_incidents')
      .where('account_id', '=', accountId)
      .where('deployment_id', '=', deploymentId)
      .returning(['link', 'note', 'fixed_by'])
      .executeTakeFirst()
    if (!removed) {
      return {
        ok: false,
        status: 404,
        errors: [{ field: 'id', message: `#${deploymentId} is not marked as having caused an incident` }],
      }
    }
    await recordAudit(trx, {
      accountId,
      ...who,
      action: 'deployment.incident_unmarked',
      target: named(marked),
      details: {
        link: removed.link,
        note: removed.note,
        fixed_by: removed.fixed_by === null ? null : Number(removed.fixed_by),
      },
      at: now,
    })
    return { ok: true, value: null }
  })
}
