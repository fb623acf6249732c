// Failure links for the DORA figures (issue 27): a deployment marked as having caused an incident
// (with a link and a note) and the deployment that fixed it: the input read from a form or an API
// body, and the audited commands that change the marks (incident-store.ts reads them).
import type { Kysely } from 'kysely'
import type { DB } from '../../db/schema.js'
import { characterCount, textProblem } from '../../text-rules.js'
import { type AuditSource, recordAudit } from '../audit/log.js'
import type { FieldError } from '../events/event.js'
import { deploymentById, type Incident, toIncident } from './incident-store.js'
import type { Deployment } from './rules.js'

export const NOTE_MAX = 500
export const LINK_MAX = 2000

/**
 * An absolute http(s) address with a host: services.ts' rule for a service's links, written again
 * here because deployments/ and services.ts must not import each other (architecture test).
 */
function isWebAddress(value: string): boolean {
  if (!/^https?:\/\//i.test(value)) return false
  try {
    const url = new URL(value)
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== ''
  } catch {
    return false
  }
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
