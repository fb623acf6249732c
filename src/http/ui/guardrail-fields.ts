// What the guardrails page's forms send, made ready for the domain's readers: times typed in the
// viewer's zone, the one kind of freeze window chosen, a refused form's values to fill back in; and
// what the calendar says of each window for the list.
import type { FieldError } from '../../domain/events/event.js'
import { nextOccurrence } from '../../domain/guardrails/freeze-calendar.js'
import { type Freeze, freezeOccurrence } from '../../domain/guardrails/rules.js'
import { instantOf, readInstant } from '../../domain/instants.js'
import { knownZone, zonedToInstant } from '../../domain/time-zones.js'
import { textProblem } from '../../text-rules.js'
import type { FreezeRow } from '../../views/guardrails-page.js'

/**
 * The body's text fields (the CSRF token left out), to fill a refused form back in; a value the
 * domain refuses as text (control characters, direction overrides) is not echoed: its field says why.
 */
export function formValues(body: Readonly<Record<string, unknown>>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(body)
      .filter((e): e is [string, string] => e[0] !== '_csrf' && typeof e[1] === 'string')
      .map(([field, value]) => [field, textProblem(value) === null ? value : '']),
  )
}

/** The viewer's zone the page's script sent (`tz`): undefined for none (then UTC), or an error. */
export function viewerZone(tz: string | undefined, errors: FieldError[]): string | undefined {
  const name = (tz ?? '').trim()
  if (name === '') return undefined
  const zone = knownZone(name)
  if (zone === undefined)
    errors.push({ field: 'tz', message: 'tz must be a time zone name such as Europe/Berlin' })
  return zone
}

/**
 * A date-time typed without zone (what a datetime-local field sends) as the instant it names in the
 * viewer's zone, written with Z for the domain; any other text (a span, a zoned instant, a typo) as
 * it came, for the domain to read or refuse.
 */
export function inZone(value: string | undefined, zone: string | undefined): string | undefined {
  if (value === undefined || zone === undefined) return value
  const read = readInstant(value.trim())
  if (read === undefined || read.offsetMinutes !== undefined) return value
  return new Date(instantOf(read, (wall) => zonedToInstant(zone, wall))).toISOString()
}

export const utcText = (at: number) => `${new Date(at).toISOString().slice(0, 16).replace('T', ' ')} UTC`

export interface FreezeForm {
  kind?: string | undefined
  from?: string | undefined
  to?: string | undefined
  weekly?: string | undefined
  cron?: string | undefined
  duration_minutes?: string | undefined
  time_zone?: string | undefined
}

/**
 * The fields of the kind of window chosen (weekly, cron or once), for readFreezeInput. Without
 * scripts every fieldset is on the page, and what is left in another one must not count; with no
 * kind at all, every field goes and the reader sorts them out. A recurring window's zone is the one
 * chosen, else the viewer's, else UTC.
 */
export function freezeFields(
  b: FreezeForm,
  zone: string | undefined,
  errors: FieldError[],
): { kind: string; fields: Record<string, string | undefined> } {
  const kind = (b.kind ?? '').trim()
  const once = { from: inZone(b.from, zone), to: inZone(b.to, zone) }
  const time_zone = (b.time_zone ?? '').trim() || zone || 'UTC'
  const weekly = { weekly: b.weekly, time_zone }
  const cron = { cron: b.cron, duration_minutes: b.duration_minutes, time_zone }
  if (kind === 'once') return { kind, fields: once }
  if (kind === 'weekly') return { kind, fields: weekly }
  if (kind === 'cron') return { kind, fields: cron }
  if (kind !== '') errors.push({ field: 'kind', message: 'kind must be weekly, cron or once' })
  return { kind, fields: { ...once, ...weekly, ...cron } }
}

/** What the calendar says of a window now: the occurrence holding and the next one to begin. */
export function freezeRow(freeze: Freeze, now: number): FreezeRow {
  const s = freeze.schedule
  const active = freezeOccurrence(freeze, now)
  const upcoming =
    s.kind === 'once'
      ? { start: s.startsAt, end: s.endsAt }
      : nextOccurrence({ cron: s.cron, durationMinutes: s.durationMinutes, timeZone: s.timeZone }, now)
  return { freeze, active, next: upcoming !== null && upcoming.start > now ? upcoming : null }
}
