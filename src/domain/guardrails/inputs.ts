// What an admin asks for, read from the fields of a form, a command line or an API body, with
// every problem named by its field (SPEC §11 "Bad input"). Checks that need the database (known
// names, overlaps, cycles) are the commands' (commands.ts).
import { characterCount, textProblem } from '../../text-rules.js'
import type { FieldError, Validation } from '../events/event.js'
import { parseInstant } from '../instants.js'
import { parseWeeklyRange, validateRecurring } from './freeze-calendar.js'
import type { FreezeSchedule } from './rules.js'

export const REASON_MAX = 500
export const NAME_FIELD_MAX = 200
/** A promotion wait of at most a year: longer is a typo, not a rule. */
export const MAX_PROMOTION_MINUTES = 525_600

export type RawFields = Readonly<Record<string, unknown>>

class Fields {
  readonly errors: FieldError[] = []
  constructor(private readonly raw: RawFields) {}

  text(field: string, options: { required: boolean; max: number }): string | null {
    const value = this.raw[field]
    if (value === undefined || value === null || (typeof value === 'string' && value.trim() === '')) {
      if (options.required) this.errors.push({ field, message: `${field} is required` })
      return null
    }
    if (typeof value !== 'string') {
      this.errors.push({ field, message: `${field} must be a single string` })
      return null
    }
    const trimmed = value.trim()
    const problem = textProblem(trimmed)
    if (problem) {
      this.errors.push({ field, message: `${field} ${problem}` })
      return null
    }
    if (characterCount(trimmed) > options.max) {
      this.errors.push({ field, message: `${field} must be at most ${options.max} characters` })
      return null
    }
    return trimmed
  }

  /** An instant in ISO 8601 (a zone-less text is UTC), or a span from now such as `2h`, `30m`, `1d`. */
  instant(field: string, now: number, options: { required: boolean; spans: boolean }): number | null {
    const text = this.text(field, { required: options.required, max: 100 })
    if (text === null) return null
    if (options.spans) {
      const span = /^(\d{1,6})\s*(m|min|minutes?|h|hours?|d|days?)$/i.exec(text)
      if (span) {
        const n = Number(span[1])
        const unit = (span[2] ?? 'm').toLowerCase()
        const ms = unit.startsWith('d') ? 86_400_000 : unit.startsWith('h') ? 3_600_000 : 60_000
        if (n > 0) return now + n * ms
      }
    }
    const at = parseInstant(text)
    if (at === undefined) {
      this.errors.push({
        field,
        message:
          `${field} must be an ISO 8601 date-time such as 2026-12-24T18:00:00Z` +
          (options.spans ? ', or a time from now such as 30m, 2h or 3d' : ''),
      })
      return null
    }
    return at
  }

  wholeNumber(field: string, options: { min: number; max: number; fallback?: number }): number | null {
    const value = this.raw[field]
    if (value === undefined || value === null || value === '') {
      if (options.fallback !== undefined) return options.fallback
      this.errors.push({ field, message: `${field} is required` })
      return null
    }
    const n =
      typeof value === 'number'
        ? value
        : typeof value === 'string' && /^\s*\d+\s*$/.test(value)
          ? Number(value)
          : Number.NaN
    if (!Number.isInteger(n) || n < options.min || n > options.max) {
      this.errors.push({
        field,
        message: `${field} must be a whole number from ${options.min} to ${options.max}`,
      })
      return null
    }
    return n
  }

  flag(field: string): boolean {
    const value = this.raw[field]
    return value === true || value === 'true' || value === 'on' || value === '1' || value === 1
  }
}

function done<T>(fields: Fields, value: () => T): Validation<T> {
  return fields.errors.length > 0 ? { ok: false, errors: fields.errors } : { ok: true, value: value() }
}

export interface LockInput {
  environment: string
  service: string | null
  reason: string
  endsAt: number | null
}

/** Fields: environment, service (optional: all services), reason, until (optional). */
export function readLockInput(raw: RawFields, now: number): Validation<LockInput> {
  const f = new Fields(raw)
  const environment = f.text('environment', { required: true, max: NAME_FIELD_MAX })
  const service = f.text('service', { required: false, max: NAME_FIELD_MAX })
  const reason = f.text('reason', { required: true, max: REASON_MAX })
  const endsAt = f.instant('until', now, { required: false, spans: true })
  if (endsAt !== null && endsAt <= now)
    f.errors.push({ field: 'until', message: 'until must lie in the future' })
  return done(f, () => ({ environment: environment ?? '', service, reason: reason ?? '', endsAt }))
}

export interface FreezeInput {
  environment: string
  reason: string
  schedule: FreezeSchedule
}

/**
 * Fields: environment, reason, and one of: `from` and `to` (one-off); `weekly` ("Fri 16:00-Mon
 * 08:00") or `cron` with `duration_minutes` (recurring), each with `time_zone`.
 */
export function readFreezeInput(raw: RawFields, now: number): Validation<FreezeInput> {
  const f = new Fields(raw)
  const environment = f.text('environment', { required: true, max: NAME_FIELD_MAX })
  const reason = f.text('reason', { required: true, max: REASON_MAX })
  const given = (name: string) =>
    raw[name] !== undefined && raw[name] !== null && String(raw[name]).trim() !== ''
  const recurring = given('cron') || given('weekly')
  const once = given('from') || given('to')
  let schedule: FreezeSchedule | null = null
  if (recurring && once) {
    f.errors.push({
      field: 'from',
      message: 'a window is either recurring (cron or weekly) or one-off (from and to), not both',
    })
  } else if (once) {
    const startsAt = f.instant('from', now, { required: true, spans: false })
    const endsAt = f.instant('to', now, { required: true, spans: true })
    if (startsAt !== null && endsAt !== null) {
      if (endsAt <= startsAt)
        f.errors.push({ field: 'to', message: 'to must be later than from (the window is empty)' })
      else if (endsAt <= now) f.errors.push({ field: 'to', message: 'to must lie in the future' })
      else schedule = { kind: 'once', startsAt, endsAt }
    }
  } else if (recurring) {
    const timeZone = f.text('time_zone', { required: true, max: 64 })
    let cron: string | null = null
    let durationMinutes: number | null = null
    if (given('weekly') && given('cron')) {
      f.errors.push({ field: 'weekly', message: 'give either weekly or cron, not both' })
    } else if (given('weekly')) {
      const weekly = f.text('weekly', { required: true, max: 100 })
      if (weekly !== null) {
        const range = parseWeeklyRange(weekly)
        if (range.ok) ({ cron, durationMinutes } = range.value)
        else
          for (const message of range.errors)
            f.errors.push({ field: 'weekly', message: `weekly: ${message}` })
      }
    } else {
      cron = f.text('cron', { required: true, max: 100 })
      durationMinutes = f.wholeNumber('duration_minutes', { min: 1, max: 7 * 24 * 60 })
    }
    if (cron !== null && durationMinutes !== null && timeZone !== null) {
      const spec = { cron, durationMinutes, timeZone }
      const problems = validateRecurring(spec)
      const cronField = given('weekly') ? 'weekly' : 'cron'
      for (const message of problems) {
        // Each message starts with what it is about: the zone, the length, or the cron (or one of its fields).
        const field = message.startsWith('timeZone')
          ? 'time_zone'
          : message.startsWith('durationMinutes')
            ? given('weekly')
              ? 'weekly'
              : 'duration_minutes'
            : cronField
        f.errors.push({ field, message: recurringMessage(field, message) })
      }
      if (problems.length === 0) schedule = { kind: 'recurring', cron, durationMinutes, timeZone }
    }
  } else {
    f.errors.push({
      field: 'from',
      message: 'a window needs from and to (one-off), or weekly or cron with time_zone (recurring)',
    })
  }
  return done(f, () => ({
    environment: environment ?? '',
    reason: reason ?? '',
    schedule: schedule as FreezeSchedule, // set whenever there is no error (done() checks)
  }))
}

/** A calendar message in the form's words: `time_zone: …` for `timeZone: …`, and so on. */
function recurringMessage(field: string, message: string): string {
  const rest = message.replace(/^(timeZone|durationMinutes|cron):\s*/, '')
  return `${field}: ${rest}`
}

export interface BadVersionInput {
  service: string
  version: string
  reason: string
}

/** Fields: service, version, reason. */
export function readBadVersionInput(raw: RawFields): Validation<BadVersionInput> {
  const f = new Fields(raw)
  const service = f.text('service', { required: true, max: NAME_FIELD_MAX })
  const version = f.text('version', { required: true, max: NAME_FIELD_MAX })
  const reason = f.text('reason', { required: true, max: REASON_MAX })
  return done(f, () => ({ service: service ?? '', version: version ?? '', reason: reason ?? '' }))
}

export interface PromotionInput {
  environment: string
  afterEnvironment: string
  minMinutes: number
  requireGood: boolean
}

/** Fields: environment, after_environment, min_minutes (default 0), require_good (a flag). */
export function readPromotionInput(raw: RawFields): Validation<PromotionInput> {
  const f = new Fields(raw)
  const environment = f.text('environment', { required: true, max: NAME_FIELD_MAX })
  const after = f.text('after_environment', { required: true, max: NAME_FIELD_MAX })
  const minMinutes = f.wholeNumber('min_minutes', { min: 0, max: MAX_PROMOTION_MINUTES, fallback: 0 })
  if (environment !== null && after !== null && environment === after) {
    f.errors.push({
      field: 'after_environment',
      message: `after_environment must name another environment than ${environment} itself`,
    })
  }
  return done(f, () => ({
    environment: environment ?? '',
    afterEnvironment: after ?? '',
    minMinutes: minMinutes ?? 0,
    requireGood: f.flag('require_good'),
  }))
}

export type { FieldError }
