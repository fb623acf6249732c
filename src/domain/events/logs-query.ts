// The query string of /logs/ and its exports, read: the filter, the page position and the viewer's
// zone, every bad parameter named. What it means for the rows is query-plan.ts's business.
import type { EventStatus } from '../../db/schema.js'
import {
  canonicalStatus,
  characterCount,
  hasControlCharacter,
  isWellFormedText,
  STATUS_CHOICES,
} from '../../text-rules.js'
import { knownZone } from '../time-zones.js'
import { MAX_ID, parseWholeNumber } from '../whole-numbers.js'
import { type FieldError, LIMITS } from './event.js'
import { parseTimeBound } from './time-bounds.js'

export interface EventFilter {
  /** Service name, matched ignoring case (see sameName). */
  service?: string
  /** Environment name, matched ignoring case (see sameName). */
  environment?: string
  status?: EventStatus
  /** Case-insensitive substring of the version. */
  version?: string
  /** Inclusive bounds on received_at, epoch milliseconds. */
  from?: number
  to?: number
}

export const FILTER_FIELDS = ['service', 'environment', 'status', 'version', 'from', 'to'] as const
/** The log page's own parameters: where it starts and how many events it shows. */
export const PAGE_FIELDS = ['before', 'after', 'limit'] as const
/** The viewer's IANA time zone, in which From and To without a zone are read (the page's script sends it). */
export const ZONE_FIELD = 'tz'

export type LogsParameter = (typeof FILTER_FIELDS)[number] | (typeof PAGE_FIELDS)[number] | typeof ZONE_FIELD

/** The query string as parsed: every value a string, or a list of them when repeated. */
export type QueryValues = Readonly<Record<string, string | readonly string[] | undefined>>

const PAGE_SIZE = 50
const MAX_PAGE_SIZE = 500

/** A time bound, a cursor or a zone name is never longer than this; longer text is refused. */
const SHORT_TEXT = 64

/**
 * One parameter as text: trimmed, undefined when absent or empty, or the reason it is refused.
 * Every filter obeys the same rules as the values it is compared with (SPEC §1.1): no control
 * characters, well-formed Unicode, no longer than the longest value that can be stored. A repeated
 * parameter is refused rather than one copy picked: the page and its links would disagree on which.
 */
function textParameter(
  query: QueryValues,
  name: LogsParameter,
  maxCharacters: number,
): { value?: string; error?: FieldError } {
  const raw = Object.hasOwn(query, name) ? query[name] : undefined
  if (raw === undefined) return {}
  if (typeof raw !== 'string') {
    return { error: { field: name, message: `${name} must be given once, not repeated` } }
  }
  const value = raw.trim()
  if (value === '') return {}
  if (hasControlCharacter(value)) {
    return { error: { field: name, message: `${name} must not contain control characters` } }
  }
  if (!isWellFormedText(value))
    return { error: { field: name, message: `${name} must be valid Unicode text` } }
  if (characterCount(value) > maxCharacters) {
    return { error: { field: name, message: `${name} must be at most ${maxCharacters} characters` } }
  }
  return { value }
}

export interface LogsQuery {
  filter: EventFilter
  /** The cursor ids and page length of the log page (the exports read every page). */
  page: { before?: number; after?: number; limit: number; limitGiven: boolean }
  /** The viewer's zone, when the page's script sent one. */
  zone?: string
  /** Every refused parameter, each named; nothing is listed or downloaded while there are any. */
  errors: FieldError[]
}

/**
 * Turns the query string of /logs/ or an export into a filter and a page position, listing every
 * bad parameter. Unknown parameters are ignored (and for an export, the page's own ones too).
 */
export function parseLogsQuery(query: QueryValues, what: 'page' | 'export' = 'page'): LogsQuery {
  const filter: EventFilter = {}
  const errors: FieldError[] = []
  const text = (name: LogsParameter, max: number): string | undefined => {
    const { value, error } = textParameter(query, name, max)
    if (error) errors.push(error)
    return value
  }
  const service = text('service', LIMITS.service)
  if (service) filter.service = service
  const environment = text('environment', LIMITS.environment)
  if (environment) filter.environment = environment
  const status = text('status', SHORT_TEXT)
  if (status) {
    const canonical = canonicalStatus(status)
    if (canonical) filter.status = canonical
    else errors.push({ field: 'status', message: STATUS_CHOICES })
  }
  const version = text('version', LIMITS.version)
  if (version) filter.version = version

  const zoneName = text(ZONE_FIELD, SHORT_TEXT)
  const zone = zoneName === undefined ? undefined : knownZone(zoneName)
  if (zoneName !== undefined && zone === undefined) {
    errors.push({
      field: ZONE_FIELD,
      message: `${ZONE_FIELD} must be a time zone name such as Europe/Berlin`,
    })
  }
  for (const bound of ['from', 'to'] as const) {
    const value = text(bound, SHORT_TEXT)
    if (!value) continue
    const at = parseTimeBound(value, bound === 'to', zone)
    if (at === undefined) {
      errors.push({ field: bound, message: `${bound} must be a date and time, e.g. 2026-11-21T14:30` })
    } else filter[bound] = at
  }
  if (filter.from !== undefined && filter.to !== undefined && filter.from > filter.to) {
    errors.push({ field: 'to', message: 'to must not be before from' })
  }

  const page: LogsQuery['page'] = { limit: PAGE_SIZE, limitGiven: false }
  // An export reads every page: these mean nothing to it and are ignored there, like unknown ones.
  if (what === 'export') return { filter, page, ...(zone === undefined ? {} : { zone }), errors }
  // Whole numbers by the one grammar (whole-numbers.ts): untrimmed, so " 5" is refused like "+5".
  const whole = (name: LogsParameter, min: number, max: number, what: string): number | undefined => {
    const raw = Object.hasOwn(query, name) ? query[name] : undefined
    if (raw === undefined || raw === '') return undefined
    const n = typeof raw === 'string' ? parseWholeNumber(raw, min, max) : undefined
    if (n === undefined) errors.push({ field: name, message: `${name} must be ${what}` })
    return n
  }
  for (const name of ['before', 'after'] as const) {
    const id = whole(name, 0, MAX_ID, 'an event id (a whole number in decimal digits)')
    if (id !== undefined) page[name] = id
  }
  const limit = whole('limit', 1, MAX_PAGE_SIZE, `a whole number from 1 to ${MAX_PAGE_SIZE}`)
  if (limit !== undefined) {
    page.limit = limit
    page.limitGiven = true
  }
  return { filter, page, ...(zone === undefined ? {} : { zone }), errors }
}

/** The filter as query-string pairs, so links (pages, downloads) carry it along. */
export function filterToQuery(filter: EventFilter): Record<string, string> {
  const q: Record<string, string> = {}
  if (filter.service) q.service = filter.service
  if (filter.environment) q.environment = filter.environment
  if (filter.status) q.status = filter.status
  if (filter.version) q.version = filter.version
  if (filter.from !== undefined) q.from = new Date(filter.from).toISOString()
  if (filter.to !== undefined) q.to = new Date(filter.to).toISOString()
  return q
}
