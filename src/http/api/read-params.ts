// The read API's query parameters (SPEC §7): each read as text, every bad one listed in one 422,
// unknown ones ignored; instants and whole numbers by the one grammar of each (domain/instants.ts,
// domain/whole-numbers.ts), bounded windows and limits, opaque cursors.
import { createHmac, timingSafeEqual } from 'node:crypto'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { FieldError } from '../../domain/events/event.js'
import type { EventFilter } from '../../domain/events/logs-query.js'
import { parseInstant } from '../../domain/instants.js'
import { parseWholeNumber } from '../../domain/whole-numbers.js'
import { characterCount, EVENT_STATUSES, hasControlCharacter, isWellFormedText } from '../../text-rules.js'
import { HttpProblem } from '../problem.js'

/** Fields as the client sent them: query text, form text, or JSON values of any type. */
export type RawQuery = Readonly<Record<string, unknown>>

const sent = new WeakMap<FastifyRequest, { query: RawQuery; body: RawQuery }>()

/**
 * Keeps each request's query and body as sent, for the routes of `scope`. Schema validation
 * coerces in place (ajv's coerceTypes: "0x10", "1e1" and "+5" become numbers, ["x"], 123 and true
 * become strings), so the parameters are read from this copy, by the grammars here, instead.
 */
export function keepFieldsAsSent(scope: FastifyInstance): void {
  scope.addHook('preValidation', (request, _reply, done) => {
    const body = request.body
    sent.set(request, {
      query: { ...(request.query as RawQuery) },
      body:
        typeof body === 'object' && body !== null && !Array.isArray(body) ? { ...(body as RawQuery) } : {},
    })
    done()
  })
}

/** The query string as sent (see keepFieldsAsSent). */
export function queryAsSent(request: FastifyRequest): RawQuery {
  return sent.get(request)?.query ?? (request.query as RawQuery)
}

/** The body's fields as sent (see keepFieldsAsSent); none when there is no body. */
export function bodyAsSent(request: FastifyRequest): RawQuery {
  return sent.get(request)?.body ?? {}
}

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
    // A JSON number or boolean is refused like POST /deploy refuses it, not read as its spelling.
    if (typeof raw !== 'string') return this.fail(name, `${name} must be a string`)
    const value = raw.trim()
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
        `${name} must be an ISO 8601 date or date-time, e.g. 2026-11-21 or 2026-11-21T14:30:00Z (docs/API.md, Instants)`,
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

  /**
   * A whole number in [min, max] by the one grammar (domain/whole-numbers.ts): decimal digits, no
   * sign, spaces, exponent or leading zero; a JSON body may give it as a JSON integer instead.
   * Undefined when absent or empty; `what` completes "<label> must be …" when refused.
   */
  wholeNumber(name: string, min: number, max: number, what: string, label = name): number | undefined {
    const raw = Object.hasOwn(this.query, name) ? this.query[name] : undefined
    if (raw === undefined || raw === null || raw === '') return undefined
    if (Array.isArray(raw)) return this.fail(name, `${name} must be given once, not repeated`)
    const n =
      typeof raw === 'number'
        ? Number.isSafeInteger(raw) && raw >= min && raw <= max
          ? raw
          : undefined
        : typeof raw === 'string'
          ? parseWholeNumber(raw, min, max)
          : undefined
    return n ?? this.fail(name, `${label} must be ${what}`)
  }

  /** `limit`: a whole number from 1 to `max`. */
  limit(max = MAX_LIMIT, fallback = DEFAULT_LIMIT): number {
    return (
      this.wholeNumber('limit', 1, max, `a whole number from 1 to ${max}, in decimal digits only`) ?? fallback
    )
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

/**
 * The event filter's names, status and version text, as /api/v1/events and /api/v1/stream read
 * them (each route reads its own time bounds).
 */
export function readEventNames(params: ParamReader): EventFilter {
  const filter: EventFilter = {}
  const service = params.text('service', 100)
  if (service) filter.service = service
  const environment = params.text('environment', 100)
  if (environment) filter.environment = environment
  const status = params.choice('status', EVENT_STATUSES)
  if (status) filter.status = status
  const version = params.text('version', 200)
  if (version) filter.version = version
  return filter
}
