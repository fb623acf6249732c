// Freeze windows as audited commands (SPEC §11): add one (refused when it overlaps another window
// of the same environment) and remove one.
import type { Kysely } from 'kysely'
import type { DB } from '../../db/schema.js'
import { type AuditSource, recordAudit } from '../audit/log.js'
import type { Validation } from '../events/event.js'
import { iso, refused, unknownEnvironment } from './commands.js'
import { type Occurrence, windowsOverlap } from './freeze-calendar.js'
import type { FreezeInput } from './inputs.js'
import type { FreezeSchedule } from './rules.js'
import { loadFreezes } from './store.js'

/** How far ahead two recurring windows are compared for overlap. */
const OVERLAP_HORIZON_DAYS = 400
const DAY_MS = 86_400_000
/** A recurring window's occurrence lasts at most a week: one opening this long before still reaches in. */
const LONGEST_OCCURRENCE_MS = 8 * DAY_MS

/**
 * The first overlap of two windows, or null. Two one-off windows are compared exactly; a one-off
 * window with a recurring one over the one-off's own span (wherever it lies); two recurring ones
 * over the next OVERLAP_HORIZON_DAYS.
 */
export function firstOverlap(
  a: FreezeSchedule,
  b: FreezeSchedule,
  now: number,
): { a: Occurrence; b: Occurrence } | null {
  if (a.kind === 'once' && b.kind === 'once') {
    return a.startsAt < b.endsAt && b.startsAt < a.endsAt
      ? { a: { start: a.startsAt, end: a.endsAt }, b: { start: b.startsAt, end: b.endsAt } }
      : null
  }
  const once = a.kind === 'once' ? a : b.kind === 'once' ? b : null
  if (once) {
    const from = once.startsAt - LONGEST_OCCURRENCE_MS
    const days = Math.ceil((once.endsAt - from) / DAY_MS) + 1
    return windowsOverlap(asWindow(a), asWindow(b), from, days)
  }
  return windowsOverlap(asWindow(a), asWindow(b), now, OVERLAP_HORIZON_DAYS)
}

/** A schedule in words, for audit entries and lists. */
export function scheduleText(s: FreezeSchedule): string {
  return s.kind === 'once'
    ? `${iso(s.startsAt)} to ${iso(s.endsAt)}`
    : `cron "${s.cron}" for ${s.durationMinutes} min (${s.timeZone})`
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
      const clash = firstOverlap(schedule, other.schedule, now)
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
