// Reading an account's events: filters, keyset pages for the log, and chunked scans for exports.
import { type Kysely, type SelectQueryBuilder, sql } from 'kysely'
import type { DialectName } from '../config.js'
import type { DB, EventRow, EventStatus } from '../db/schema.js'
import { EVENT_STATUSES, type FieldError } from './events.js'

export interface EventFilter {
  service?: string
  environment?: string
  status?: EventStatus
  /** Case-insensitive substring of the version. */
  version?: string
  /** Inclusive bounds on received_at, epoch milliseconds. */
  from?: number
  to?: number
}

export const FILTER_FIELDS = ['service', 'environment', 'status', 'version', 'from', 'to'] as const

function single(value: unknown): string | undefined {
  const v = Array.isArray(value) ? value[0] : value
  if (typeof v !== 'string') return undefined
  const trimmed = v.trim()
  return trimmed === '' ? undefined : trimmed
}

/**
 * Reads a time bound: ISO 8601 with a zone, or a date/date-time without one (as an HTML
 * datetime-local field sends it), taken as UTC. An upper bound given to the minute or day covers
 * that whole minute or day.
 */
export function parseTimeBound(text: string, upper: boolean): number | undefined {
  const local = /^(\d{4}-\d{2}-\d{2})(?:[T ](\d{2}:\d{2})(?::(\d{2})(?:\.(\d{1,3}))?)?)?$/.exec(text)
  if (local) {
    const [, date, hm, sec, ms] = local
    const iso = `${date}T${hm ?? '00:00'}:${sec ?? '00'}.${(ms ?? '0').padEnd(3, '0')}Z`
    const at = Date.parse(iso)
    if (Number.isNaN(at)) return undefined
    if (!upper || ms !== undefined) return at
    if (sec !== undefined) return at + 999
    return at + (hm !== undefined ? 60_000 : 86_400_000) - 1
  }
  if (!/^\d{4}-\d{2}-\d{2}T/.test(text)) return undefined
  const at = Date.parse(text)
  return Number.isNaN(at) ? undefined : at
}

/** Turns query-string values into a filter; unknown parameters are ignored. */
export function parseEventFilter(query: Record<string, unknown>): {
  filter: EventFilter
  errors: FieldError[]
} {
  const filter: EventFilter = {}
  const errors: FieldError[] = []
  const service = single(query.service)
  if (service) filter.service = service
  const environment = single(query.environment)
  if (environment) filter.environment = environment
  const version = single(query.version)
  if (version) filter.version = version
  const status = single(query.status)
  if (status) {
    const canonical = EVENT_STATUSES.find((s) => s.toLowerCase() === status.toLowerCase())
    if (canonical) filter.status = canonical
    else errors.push({ field: 'status', message: `status must be one of ${EVENT_STATUSES.join(', ')}` })
  }
  for (const bound of ['from', 'to'] as const) {
    const text = single(query[bound])
    if (!text) continue
    const at = parseTimeBound(text, bound === 'to')
    if (at === undefined)
      errors.push({ field: bound, message: `${bound} must be a date and time, e.g. 2026-11-21T14:30` })
    else filter[bound] = at
  }
  return { filter, errors }
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

function isAscii(text: string): boolean {
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) > 0x7f) return false
  return true
}

function escapeLike(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`)
}

type EventQuery = SelectQueryBuilder<DB, 'events', object>

function applyFilter(
  query: EventQuery,
  dialect: DialectName,
  accountId: number,
  filter: EventFilter,
): EventQuery {
  let q = query.where('events.account_id', '=', accountId)
  if (filter.service) q = q.where('events.service', '=', filter.service)
  if (filter.environment) q = q.where('events.environment', '=', filter.environment)
  if (filter.status) q = q.where('events.status', '=', filter.status)
  if (filter.from !== undefined) q = q.where('events.received_at', '>=', filter.from)
  if (filter.to !== undefined) q = q.where('events.received_at', '<=', filter.to)
  if (filter.version) {
    const pattern = `%${escapeLike(filter.version)}%`
    // PostgreSQL: ILIKE. SQLite: LIKE already ignores ASCII case; for other letters both sides go
    // through casefold() (registered in connect.ts), which costs a call per row, so only then.
    // SQLite has no default escape character, so one is named for both.
    const version = sql.ref('events.version')
    if (dialect === 'postgres') {
      q = q.where(sql<boolean>`${version} ilike ${pattern} escape '\\'`)
    } else if (isAscii(pattern)) {
      q = q.where(sql<boolean>`${version} like ${pattern} escape '\\'`)
    } else {
      q = q.where(sql<boolean>`casefold(${version}) like casefold(${pattern}) escape '\\'`)
    }
  }
  return q
}

export interface EventPage {
  rows: EventRow[]
  /** Id to pass as `before` for the next (older) page, when there is one. */
  olderCursor: number | null
  /** Id to pass as `after` for the previous (newer) page, when there is one. */
  newerCursor: number | null
}

/**
 * Listing order, newest first. Normally by id, which follows arrival, on the (account_id, …, id)
 * indexes. With a time range the order is (received_at, id) instead: ordering such a range by id
 * made both databases read or sort the whole range for every page (and every export chunk),
 * while (account_id, received_at, id) serves range and order together.
 */
interface Order {
  byTime: boolean
}

interface Position {
  id: number
  receivedAt: number
}

function orderFor(filter: EventFilter): Order {
  return { byTime: filter.from !== undefined || filter.to !== undefined }
}

function sorted(q: EventQuery, order: Order, direction: 'asc' | 'desc'): EventQuery {
  return order.byTime
    ? q.orderBy('events.received_at', direction).orderBy('events.id', direction)
    : q.orderBy('events.id', direction)
}

/** Rows strictly older (or newer) than `from` in the listing order. */
function past(q: EventQuery, order: Order, from: Position, towards: 'older' | 'newer'): EventQuery {
  if (!order.byTime) return q.where('events.id', towards === 'older' ? '<' : '>', from.id)
  const op = sql.raw(towards === 'older' ? '<' : '>')
  return q.where(
    sql<boolean>`(${sql.ref('events.received_at')}, ${sql.ref('events.id')}) ${op} (${from.receivedAt}, ${from.id})`,
  )
}

/** The position of a cursor id within the account, or undefined for an id it does not have. */
async function positionOf(db: Kysely<DB>, accountId: number, id: number): Promise<Position | undefined> {
  const row = await db
    .selectFrom('events')
    .select(['id', 'received_at'])
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .executeTakeFirst()
  return row ? { id: row.id, receivedAt: row.received_at } : undefined
}

const positionOfRow = (row: EventRow): Position => ({ id: row.id, receivedAt: row.received_at })

/**
 * One page of events, newest first, by keyset: the cost of a page does not depend on how deep it
 * is. A cursor is the id of the row the page starts after (`before`) or ends before (`after`).
 */
export async function listEventPage(
  db: Kysely<DB>,
  dialect: DialectName,
  accountId: number,
  filter: EventFilter,
  cursor: { before?: number; after?: number },
  limit: number,
): Promise<EventPage> {
  const base = applyFilter(db.selectFrom('events'), dialect, accountId, filter)
  const order = orderFor(filter)
  const exists = async (q: EventQuery) =>
    (await q.select('events.id').limit(1).executeTakeFirst()) !== undefined

  const after = cursor.after === undefined ? undefined : await positionOf(db, accountId, cursor.after)
  if (after) {
    // Going back towards newer events: read upwards from the cursor, then show newest first.
    let rows = (
      await sorted(past(base, order, after, 'newer'), order, 'asc')
        .selectAll()
        .limit(limit + 1)
        .execute()
    ).reverse()
    const hasNewer = rows.length > limit
    if (hasNewer) rows = rows.slice(1)
    const first = rows[0]
    const last = rows.at(-1)
    return {
      rows,
      newerCursor: hasNewer && first ? first.id : null,
      olderCursor: last && (await exists(past(base, order, positionOfRow(last), 'older'))) ? last.id : null,
    }
  }

  const before = cursor.before === undefined ? undefined : await positionOf(db, accountId, cursor.before)
  let rows = await sorted(before ? past(base, order, before, 'older') : base, order, 'desc')
    .selectAll()
    .limit(limit + 1)
    .execute()
  const hasOlder = rows.length > limit
  if (hasOlder) rows = rows.slice(0, limit)
  const first = rows[0]
  return {
    rows,
    olderCursor: hasOlder ? (rows.at(-1)?.id ?? null) : null,
    newerCursor:
      before && first && (await exists(past(base, order, positionOfRow(first), 'newer'))) ? first.id : null,
  }
}

/**
 * Every matching event, newest first, in chunks read one after the other by keyset: no query holds
 * more than `chunkSize` rows, so memory stays flat however many events match.
 */
export async function* scanEvents(
  db: Kysely<DB>,
  dialect: DialectName,
  accountId: number,
  filter: EventFilter,
  chunkSize = 1000,
): AsyncGenerator<EventRow[]> {
  const base = applyFilter(db.selectFrom('events'), dialect, accountId, filter)
  const order = orderFor(filter)
  let last: Position | undefined
  for (;;) {
    const q = sorted(last ? past(base, order, last, 'older') : base, order, 'desc')
      .selectAll()
      .limit(chunkSize)
    const rows = await q.execute()
    if (rows.length === 0) return
    yield rows
    const tail = rows.at(-1)
    if (rows.length < chunkSize || !tail) return
    last = positionOfRow(tail)
  }
}

/** Distinct recent services and environments, to suggest in the filter fields. */
export async function recentNames(
  db: Kysely<DB>,
  accountId: number,
): Promise<{ services: string[]; environments: string[] }> {
  const recent = await db
    .selectFrom('events')
    .select(['service', 'environment'])
    .where('account_id', '=', accountId)
    .orderBy('id', 'desc')
    .limit(1000)
    .execute()
  const services = [...new Set(recent.map((r) => r.service))].sort((a, b) => a.localeCompare(b))
  const environments = [...new Set(recent.map((r) => r.environment))].sort((a, b) => a.localeCompare(b))
  return { services, environments }
}
