// Guardrails as audited commands (SPEC §11): lock and unlock, mark versions bad and good (freeze
// windows: freeze-commands.ts; promotion rules: promotion-commands.ts). Settings, `shiplog` and the
// API call the same functions; each checks what needs the database (names the account knows),
// owns its transaction and writes its audit entry with the change.
import type { Kysely } from 'kysely'
import type { DB } from '../../db/schema.js'
import { type AuditSource, recordAudit } from '../audit/log.js'
import { environmentListing } from '../board/environments.js'
import type { FieldError, Validation } from '../events/event.js'
import { serviceExists } from '../services.js'
import type { BadVersionInput, LockInput } from './inputs.js'

export const iso = (ms: number) => new Date(ms).toISOString()

export function refused<T>(errors: FieldError[]): Validation<T> {
  return { ok: false, errors }
}

/** A field error for each name the account has no environment by. */
export async function unknownEnvironment(
  db: Kysely<DB>,
  accountId: number,
  fields: Readonly<Record<string, string>>,
): Promise<FieldError[]> {
  const known = (await environmentListing(db, accountId)).all.map((e) => e.name)
  const list = known.length === 0 ? 'none yet' : known.join(', ')
  return Object.entries(fields)
    .filter(([, name]) => !known.includes(name))
    .map(([field, name]) => ({
      field,
      message: `${field}: this account has no environment "${name}" (known: ${list})`,
    }))
}

async function unknownService(db: Kysely<DB>, accountId: number, service: string): Promise<FieldError[]> {
  if (await serviceExists(db, accountId, service)) return []
  return [{ field: 'service', message: `service: this account has no service "${service}"` }]
}

export function lockEnvironment(
  db: Kysely<DB>,
  accountId: number,
  input: LockInput,
  who: AuditSource,
  now = Date.now(),
): Promise<Validation<{ id: number }>> {
  return db.transaction().execute(async (trx) => {
    const errors = await unknownEnvironment(trx, accountId, { environment: input.environment })
    if (input.service !== null) errors.push(...(await unknownService(trx, accountId, input.service)))
    if (errors.length > 0) return refused(errors)
    const row = await trx
      .insertInto('environment_locks')
      .values({
        account_id: accountId,
        environment: input.environment,
        service: input.service,
        reason: input.reason,
        ends_at: input.endsAt,
        created_by: who.actor.name,
        created_at: now,
      })
      .returning('id')
      .executeTakeFirstOrThrow()
    await recordAudit(trx, {
      accountId,
      ...who,
      action: 'environment.locked',
      target:
        input.service === null
          ? `environment ${input.environment}`
          : `${input.service} in ${input.environment}`,
      details: { reason: input.reason, until: input.endsAt === null ? null : iso(input.endsAt) },
      at: now,
    })
    return { ok: true, value: { id: Number(row.id) } }
  })
}

/**
 * Lifts the locks on an environment (service null: the environment-wide ones; a name: that
 * service's), ended ones included. Refused when there is none to lift.
 */
export function unlockEnvironment(
  db: Kysely<DB>,
  accountId: number,
  target: { environment: string; service: string | null },
  who: AuditSource,
  now = Date.now(),
): Promise<Validation<{ lifted: number }>> {
  return db.transaction().execute(async (trx) => {
    let query = trx
      .deleteFrom('environment_locks')
      .where('account_id', '=', accountId)
      .where('environment', '=', target.environment)
    query =
      target.service === null
        ? query.where('service', 'is', null)
        : query.where('service', '=', target.service)
    const deleted = await query.returning(['reason']).execute()
    if (deleted.length === 0) {
      const what = target.service === null ? target.environment : `${target.service} in ${target.environment}`
      return refused([
        { field: target.service === null ? 'environment' : 'service', message: `${what} is not locked` },
      ])
    }
    await recordAudit(trx, {
      accountId,
      ...who,
      action: 'environment.unlocked',
      target:
        target.service === null
          ? `environment ${target.environment}`
          : `${target.service} in ${target.environment}`,
      details: { locks: deleted.map((d) => d.reason) },
      at: now,
    })
    return { ok: true, value: { lifted: deleted.length } }
  })
}

/** Lifts one lock by its id (the Settings list's button). */
export function unlockById(
  db: Kysely<DB>,
  accountId: number,
  id: number,
  who: AuditSource,
  now = Date.now(),
): Promise<Validation<{ lifted: number }>> {
  return db.transaction().execute(async (trx) => {
    const row = await trx
      .deleteFrom('environment_locks')
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .returning(['environment', 'service', 'reason'])
      .executeTakeFirst()
    if (!row) return refused([{ field: 'id', message: `there is no lock ${id}` }])
    await recordAudit(trx, {
      accountId,
      ...who,
      action: 'environment.unlocked',
      target:
        row.service === null ? `environment ${row.environment}` : `${row.service} in ${row.environment}`,
      details: { locks: [row.reason] },
      at: now,
    })
    return { ok: true, value: { lifted: 1 } }
  })
}

/** Marks a version bad; marking it again replaces the reason. */
export function markVersionBad(
  db: Kysely<DB>,
  accountId: number,
  input: BadVersionInput,
  who: AuditSource,
  now = Date.now(),
): Promise<Validation<{ replaced: boolean }>> {
  return db.transaction().execute(async (trx) => {
    const errors = await unknownService(trx, accountId, input.service)
    if (errors.length > 0) return refused(errors)
    const deleted = await trx
      .deleteFrom('bad_versions')
      .where('account_id', '=', accountId)
      .where('service', '=', input.service)
      .where('version', '=', input.version)
      .returning('reason')
      .execute()
    await trx
      .insertInto('bad_versions')
      .values({
        account_id: accountId,
        service: input.service,
        version: input.version,
        reason: input.reason,
        created_by: who.actor.name,
        created_at: now,
      })
      .execute()
    await recordAudit(trx, {
      accountId,
      ...who,
      action: 'version.marked_bad',
      target: `${input.service} ${input.version}`,
      details: { reason: input.reason, ...(deleted[0] ? { before: deleted[0].reason } : {}) },
      at: now,
    })
    return { ok: true, value: { replaced: deleted.length > 0 } }
  })
}

export function markVersionGood(
  db: Kysely<DB>,
  accountId: number,
  target: { service: string; version: string },
  who: AuditSource,
  now = Date.now(),
): Promise<Validation<{ reason: string }>> {
  return db.transaction().execute(async (trx) => {
    const deleted = await trx
      .deleteFrom('bad_versions')
      .where('account_id', '=', accountId)
      .where('service', '=', target.service)
      .where('version', '=', target.version)
      .returning('reason')
      .executeTakeFirst()
    if (!deleted) {
      return refused([{ field: 'version', message: `${target.service} ${target.version} is not marked bad` }])
    }
    await recordAudit(trx, {
      accountId,
      ...who,
      action: 'version.marked_good',
      target: `${target.service} ${target.version}`,
      details: { was: deleted.reason },
      at: now,
    })
    return { ok: true, value: { reason: deleted.reason } }
  })
}
