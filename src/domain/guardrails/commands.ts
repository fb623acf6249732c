// Guardrails as audited commands (SPEC §11): lock and unlock, add and remove freeze windows, mark
// versions bad and good, set and remove promotion rules. Settings, `shiplog` and the API call the
// same functions; each checks what needs the database (names the account knows, overlapping
// windows, cycles of rules), owns its transaction and writes its audit entry with the change.
import type { Kysely } from 'kysely'
import type { DB } from '../../db/schema.js'
import { type AuditSource, recordAudit } from '../audit/log.js'
import { environmentListing } from '../board/environments.js'
import type { FieldError, Validation } from '../events/event.js'
import { serviceExists } from '../services.js'
import { windowsOverlap } from './freeze-calendar.js'
import type { BadVersionInput, FreezeInput, LockInput, PromotionInput } from './inputs.js'
import type { FreezeSchedule } from './rules.js'
import { loadFreezes, loadPromotionRules } from './store.js'

/** How far ahead two windows are compared for overlap. */
const OVERLAP_HORIZON_DAYS = 400

const iso = (ms: number) => new Date(ms).toISOString()

function refused<T>(errors: FieldError[]): Validation<T> {
  return { ok: false, errors }
}

async function unknownEnvironment(
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

/** A schedule in words, for audit entries and lists. */
export function scheduleText(s: FreezeSchedule): string {
  return s.kind === 'once'
    ? `${iso(s.startsAt)} to ${iso(s.endsAt)}`
    : `cron "${s.cron}" for ${s.durationMinutes} min (${s.timeZone})`
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

export function addFreezeWindow(
  db: Kysely<DB>,
  accountId: number,
  input: FreezeInput,
  who: AuditSource,
  now = Date.now(),
): Promise<Validation<{ id: number }>> {
  return db.transaction().execute(async (trx) => {
    const errors = await unknownEnvironment(trx, accountId, { environment: input.environment })
    if (errors.length > 0) return refused(errors)
    const schedule = input.schedule
    const field = schedule.kind === 'once' ? 'from' : 'cron'
    for (const other of await loadFreezes(trx, accountId)) {
      if (other.environment !== input.environment) continue
      const clash = windowsOverlap(asWindow(schedule), asWindow(other.schedule), now, OVERLAP_HORIZON_DAYS)
      if (clash) {
        return refused([
          {
            field,
            message: `the window overlaps freeze window ${other.id} of ${input.environment} (${scheduleText(other.schedule)}) at ${iso(Math.max(clash.a.start, clash.b.start))}`,
          },
        ])
      }
    }
    const row = await trx
      .insertInto('freeze_windows')
      .values({
        account_id: accountId,
        environment: input.environment,
        reason: input.reason,
        cron: schedule.kind === 'recurring' ? schedule.cron : null,
        duration_minutes: schedule.kind === 'recurring' ? schedule.durationMinutes : null,
        time_zone: schedule.kind === 'recurring' ? schedule.timeZone : null,
        starts_at: schedule.kind === 'once' ? schedule.startsAt : null,
        ends_at: schedule.kind === 'once' ? schedule.endsAt : null,
        created_by: who.actor.name,
        created_at: now,
      })
      .returning('id')
      .executeTakeFirstOrThrow()
    await recordAudit(trx, {
      accountId,
      ...who,
      action: 'freeze.added',
      target: `environment ${input.environment}`,
      details: { window: scheduleText(schedule), reason: input.reason },
      at: now,
    })
    return { ok: true, value: { id: Number(row.id) } }
  })
}

/** A schedule as freeze-calendar.ts compares windows. */
function asWindow(s: FreezeSchedule) {
  return s.kind === 'once'
    ? { startsAt: s.startsAt, endsAt: s.endsAt }
    : { cron: s.cron, durationMinutes: s.durationMinutes, timeZone: s.timeZone }
}

export function removeFreezeWindow(
  db: Kysely<DB>,
  accountId: number,
  id: number,
  who: AuditSource,
  now = Date.now(),
): Promise<Validation<{ removed: number }>> {
  return db.transaction().execute(async (trx) => {
    const windows = await loadFreezes(trx, accountId)
    const window = windows.find((w) => w.id === id)
    if (!window) return refused([{ field: 'id', message: `there is no freeze window ${id}` }])
    await trx.deleteFrom('freeze_windows').where('account_id', '=', accountId).where('id', '=', id).execute()
    await recordAudit(trx, {
      accountId,
      ...who,
      action: 'freeze.removed',
      target: `environment ${window.environment}`,
      details: { window: scheduleText(window.schedule), reason: window.reason },
      at: now,
    })
    return { ok: true, value: { removed: 1 } }
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

/**
 * Sets "deploying to environment needs success in after_environment at least N minutes before"
 * (replacing the rule for the same pair). Refused when it would close a cycle: the chain it would
 * make is named.
 */
export function setPromotionRule(
  db: Kysely<DB>,
  accountId: number,
  input: PromotionInput,
  who: AuditSource,
  now = Date.now(),
): Promise<Validation<{ replaced: boolean }>> {
  return db.transaction().execute(async (trx) => {
    const errors = await unknownEnvironment(trx, accountId, {
      environment: input.environment,
      after_environment: input.afterEnvironment,
    })
    if (errors.length > 0) return refused(errors)
    const rules = await loadPromotionRules(trx, accountId)
    const cycle = cycleThrough(
      rules.filter(
        (r) => !(r.environment === input.environment && r.afterEnvironment === input.afterEnvironment),
      ),
      input.environment,
      input.afterEnvironment,
    )
    if (cycle) {
      return refused([
        {
          field: 'after_environment',
          message: `the rule would make a cycle: ${cycle.join(' → ')} (each needs the next first)`,
        },
      ])
    }
    const before = rules.find(
      (r) => r.environment === input.environment && r.afterEnvironment === input.afterEnvironment,
    )
    if (before) {
      await trx
        .deleteFrom('promotion_rules')
        .where('account_id', '=', accountId)
        .where('environment', '=', input.environment)
        .where('after_environment', '=', input.afterEnvironment)
        .execute()
    }
    await trx
      .insertInto('promotion_rules')
      .values({
        account_id: accountId,
        environment: input.environment,
        after_environment: input.afterEnvironment,
        min_minutes: input.minMinutes,
        require_good: input.requireGood ? 1 : 0,
        created_by: who.actor.name,
        created_at: now,
      })
      .execute()
    await recordAudit(trx, {
      accountId,
      ...who,
      action: 'promotion_rule.set',
      target: `environment ${input.environment}`,
      details: {
        after: input.afterEnvironment,
        min_minutes: input.minMinutes,
        require_good: input.requireGood,
        ...(before ? { before: `${before.minMinutes} min${before.requireGood ? ', not bad' : ''}` } : {}),
      },
      at: now,
    })
    return { ok: true, value: { replaced: before !== undefined } }
  })
}

/**
 * With the rule environment ← after added, a path after → … → environment among the rules (each
 * rule an arrow from an environment to the one it needs first) would close a cycle: that path, from
 * environment round to itself, or null.
 */
export function cycleThrough(
  rules: readonly { environment: string; afterEnvironment: string }[],
  environment: string,
  after: string,
): string[] | null {
  const needs = new Map<string, string[]>()
  for (const r of rules) needs.set(r.environment, [...(needs.get(r.environment) ?? []), r.afterEnvironment])
  const seen = new Set<string>()
  const walk = (from: string, path: string[]): string[] | null => {
    if (from === environment) return path
    if (seen.has(from)) return null
    seen.add(from)
    for (const next of (needs.get(from) ?? []).sort()) {
      const found = walk(next, [...path, next])
      if (found) return found
    }
    return null
  }
  return walk(after, [environment, after])
}

export function removePromotionRule(
  db: Kysely<DB>,
  accountId: number,
  target: { environment: string; afterEnvironment: string },
  who: AuditSource,
  now = Date.now(),
): Promise<Validation<{ removed: number }>> {
  return db.transaction().execute(async (trx) => {
    const deleted = await trx
      .deleteFrom('promotion_rules')
      .where('account_id', '=', accountId)
      .where('environment', '=', target.environment)
      .where('after_environment', '=', target.afterEnvironment)
      .returning('min_minutes')
      .execute()
    if (deleted.length === 0) {
      return refused([
        {
          field: 'after_environment',
          message: `${target.environment} has no promotion rule naming ${target.afterEnvironment}`,
        },
      ])
    }
    await recordAudit(trx, {
      accountId,
      ...who,
      action: 'promotion_rule.removed',
      target: `environment ${target.environment}`,
      details: { after: target.afterEnvironment },
      at: now,
    })
    return { ok: true, value: { removed: deleted.length } }
  })
}
