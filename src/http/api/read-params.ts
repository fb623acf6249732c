// The read API's query parameters (SPEC §7): each read as text, every bad one listed in one 422,
// unknown ones ignored; strict ISO 8601 instants, bounded windows and limits, opaque cursors.
import { createHmac, timingSafeEqual } from 'node:crypto'
import type { FieldError } from '../../domain/events/event.js'
import { characterCount, hasControlCharacter, isWellFormedText } from '../../domain/text-rules.js'
import { HttpProblem } from '../problem.js'

/** The query string as Fastify parsed it (a value it coerced may be a number or boolean). */
export type RawQuery = Readonly<Record<string, unknown>>

export const DEFAULT_LIMIT = 100
export const MAX_LIMIT = 1000
/** The longest window a listing or metrics request may span. */
export const MAX_WINDOW_YEARS = 5
/** A time, a cursor or a limit is never longer than this. */
const SHORT_TEXT = 64

/** Collects the parameters of one request and every problem with them. */
export class ParamReader {
  readonly errors: FieldError[] = []

  constructor(private readonly query: RawQuery) {}

  /** One parameter as trimmed text; undefined when absent or empty (then it filters nothing). */
  text(name: string, maxCharacters = SHORT_TEXT): string | undefined {
    const raw = Object.hasOwn(this.query, name) ? this.query[name] : undefined
    if (raw === undefined || raw === null) return undefined
    if (Array.isArray(raw)) return this.fail(name, `${name} must be given once, not repeated`)
    if (typeof raw !== 'string' && typeof raw !== 'number' && typeof raw !== 'boolean') {
      return this.fail(name, `${name} must be text`)
    }
    const value = String(raw).trim()
    if (value === '') return undefined
    if (hasControlCharacter(value)) return this.fail(name, `${name} must not contain control characters`)
    if (!isWellFormedText(value)) return this.fail(name, `${name} must be valid Unicode text`)
    if (characterCount(value) > maxCharacters) {
      return this.fail(name, `${name} must be at most ${maxCharacters} characters`)
    }
    return value
  }

  /** One of a fixed list of values (compared ignoring case); the canonical spelling. */
  choice<T extends string>(name: string, choices: readonly T[]): T | undefined {
    const value = this.text(name)
    if (value === undefined) return undefined
    const found = choices.find((c) => c.toLowerCase() === value.toLowerCase())
    if (!found) return this.fail(name, `${name} must be one of ${choices.join(', ')}`)
    return found
  }

  /** An instant in ISO 8601 (see parseInstant). */
  instant(name: string): number | undefined {
    const value = this.text(name)
    if (value === undefined) return undefined
    const at = parseInstant(value)
    if (at === undefined) {
      return this.fail(
        name,
        `${name} must be an ISO 8601 date or date-time, e.g. 2026-11-21 or 2026-11-21T14:30:00Z`,
      )
    }
    return at
  }

  /** `from` and `to` as a half-open window [from, to): from before to, at most five years apart. */
  window(): { from?: number; to?: number } {
    const from = this.instant('from')
    const to = this.instant('to')
    if (from !== undefined && to !== undefined) {
      const problem = windowProblem(from, to)
      if (problem) this.fail('to', problem)
    }
    return { ...(from === undefined ? {} : { from }), ...(to === undefined ? {} : { to }) }
  }

  /** `limit`: a whole number from 1 to `max`. */
  limit(max = MAX_LIMIT, fallback = DEFAULT_LIMIT): number {
    const value = this.text('limit')
    if (value === undefined) return fallback
    const n = /^\d{1,7}$/.test(value) ? Number(value) : Number.NaN
    if (n >= 1 && n <= max) return n
    this.fail('limit', `limit must be a whole number from 1 to ${max}`)
    return fallback
  }

  /** `cursor`: one this API handed out for the same kind of listing (see CursorCodec). */
  cursor(kind: CursorKind, codec: CursorCodec): number | undefined {
    const value = this.text('cursor', 200)
    if (value === undefined) return undefined
    const id = codec.decode(kind, value)
    if (id === undefined) {
      return this.fail(
        'cursor',
        'cursor is not one this API gave out; use next_cursor or the Link header as given',
      )
    }
    return id
  }

  fail(field: string, message: string): undefined {
    this.errors.push({ field, message })
    return undefined
  }

  /** Throws the one 422 that lists every bad parameter, if there is any. */
  check(): void {
    if (this.errors.length === 0) return
    throw invalidParameters(this.errors)
  }
}

export function invalidParameters(errors: FieldError[]): HttpProblem {
  return new HttpProblem(
    422,
    'invalid-parameters',
    'Invalid query parameters',
    errors.length === 1
      ? (errors[0]?.message ?? 'A parameter is invalid.')
      : `${errors.length} parameters are invalid.`,
    { errors },
  )
}

/** What is wrong with the window [from, to), if anything. */
export function windowProblem(from: number, to: number): string | undefined {
  if (from >= to) return 'to must be after from'
  if (to > addYears(from, MAX_WINDOW_YEARS))
    return `from and to must be at most ${MAX_WINDOW_YEARS} years apart`
  return undefined
}

function addYears(at: number, years: number): number {
  const d = new Date(at)
  d.setUTCFullYear(d.getUTCFullYear() + years)
  return d.getTime()
}

const ISO_INSTANT =
  /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|[+-]\d{2}:?\d{2})?)?$/i

/**
 * A strict ISO 8601 instant: a date (midnight UTC), or a date and time with `Z` or an offset
 * (`+02:00`, `-0500`); a time without either is read as UTC. Fractions beyond milliseconds are cut.
 * Calendar and clock values must exist (no 2026-02-30, no 24:00, no leap second), years 1970–9999.
 */
export function parseInstant(text: string): number | undefined {
  const m = ISO_INSTANT.exec(text)
  if (!m) return undefined
  const [, y, mo, d, h = '00', mi = '00', s = '00', frac = '', zone] = m
  const year = Number(y)
  const month = Number(mo)
  const day = Number(d)
  const hour = Number(h)
  const minute = Number(mi)
  const second = Number(s)
  if (year < 1970 || month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59) {
    return undefined
  }
  const ms = Number(frac.slice(0, 3).padEnd(3, '0'))
  const wall = Date.UTC(year, month - 1, day, hour, minute, second, ms)
  // Date.UTC rolls 2026-02-30 over into March: only a real calendar date counts.
  if (new Date(wall).getUTCDate() !== day) return undefined
  if (zone === undefined || zone.toUpperCase() === 'Z') return wall
  const offset = /^([+-])(\d{2}):?(\d{2})$/.exec(zone)
  if (!offset) return undefined
  const [, sign, oh, om] = offset
  const minutes = Number(oh) * 60 + Number(om)
  if (Number(oh) > 14 || Number(om) > 59) return undefined
  return wall - (sign === '-' ? -1 : 1) * minutes * 60_000
}

/** Which listing a cursor belongs to, so one listing's cursor is refused by another. */
export type CursorKind = 'events' | 'deployments' | 'get-logs'
const CURSOR_TAG: Record<CursorKind, string> = { events: 'e', deployments: 'd', 'get-logs': 'l' }
const MAC_BYTES = 12

/**
 * Opaque cursors: where the next page starts (the id of the last row given), with an HMAC made
 * with the server's secret, so a cursor that was edited, made up or taken from another listing is
 * refused (422) rather than read as some other position.
 */
export class CursorCodec {
  readonly #key: Buffer

  constructor(secret: string) {
    this.#key = createHmac('sha256', secret).update('shiplog read-api cursors').digest()
  }

  #mac(payload: string): Buffer {
    return createHmac('sha256', this.#key).update(payload).digest().subarray(0, MAC_BYTES)
  }

  encode(kind: CursorKind, lastId: number): string {
    const payload = `${CURSOR_TAG[kind]}1:${lastId}`
    return `${Buffer.from(payload, 'utf8').toString('base64url')}.${this.#mac(payload).toString('base64url')}`
  }

  /** The id inside a cursor of this kind; undefined for anything encode did not make. */
  decode(kind: CursorKind, cursor: string): number | undefined {
    const m = /^([A-Za-z0-9_-]{1,40})\.([A-Za-z0-9_-]{16})$/.exec(cursor)
    if (!m) return undefined
    const payload = Buffer.from(m[1] as string, 'base64url').toString('utf8')
    const given = Buffer.from(m[2] as string, 'base64url')
    const expected = this.#mac(payload)
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined
    const parsed = /^([a-z])1:([1-9]\d{0,14})$/.exec(payload)
    if (!parsed || parsed[1] !== CURSOR_TAG[kind]) return undefined
    return Number(parsed[2])
  }
}

/** An instant as the API writes it: ISO 8601 UTC with milliseconds and Z. */
export function iso(at: number): string {
  return new Date(at).toISOString()
}
