// Reading an account's events: filters, query plans over the indexes, and keyset pages for the log.
import { type Kysely, type RawBuilder, sql } from 'kysely'
import type { DialectName } from '../../config.js'
import type { DB, EventRow, EventStatus } from '../../db/schema.js'
import { canonicalStatus, characterCount, STATUS_CHOICES } from '../text-rules.js'
import type { FieldError } from './event.js'

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
    const canonical = canonicalStatus(status)
    if (canonical) filter.status = canonical
    else errors.push({ field: 'status', message: STATUS_CHOICES })
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

/** What the casefold() SQL function (connect.ts) and the version index (migration 0003) compute. */
function casefold(text: string): string {
  return text.toLowerCase()
}

/**
 * The version text search, exactly as it has always matched: PostgreSQL's ILIKE (served by the
 * pg_trgm index of migration 0003 when the planner finds that cheaper). SQLite: LIKE already
 * ignores ASCII case; for other letters both sides go through casefold() (registered in
 * connect.ts), which costs a call per row, so only then. SQLite has no default escape character,
 * so one is named for both.
 */
function versionMatches(dialect: DialectName, needle: string): RawBuilder<unknown> {
  const pattern = `%${escapeLike(needle)}%`
  if (dialect === 'postgres') return sql`events.version ilike ${pattern} escape '\\'`
  if (isAscii(pattern)) return sql`events.version like ${pattern} escape '\\'`
  return sql`casefold(events.version) like casefold(${pattern}) escape '\\'`
}

/**
 * The FTS5 query for a SQLite version search, or null when the index cannot narrow it. The index
 * holds casefold(version) in trigrams (case-sensitive), and a quoted FTS5 string is a phrase of the
 * needle's trigrams: it matches exactly the rows whose casefold(version) contains casefold(needle).
 * Every row the search above matches is among them (an ASCII needle matched by LIKE is the same
 * letters up to ASCII case, so its casefold is there too), so the index only ever narrows the
 * candidates and the search itself still decides. Needles under three characters have no trigram.
 */
function versionIndexQuery(needle: string): string | null {
  const folded = casefold(needle)
  if (characterCount(folded) < 3) return null
  return `"${folded.replaceAll('"', '""')}"`
}

/**
 * With a time range, the version index is used only when the needle is rare, below this many
 * events (those indexed that match, plus those not indexed yet): then reading every one and
 * sorting them by time costs a few milliseconds, while the range scan could read the whole range to
 * find them. A common needle is found within the first rows of the range anyway.
 */
const RARE_VERSION_HITS = 2000

/** One slice of a listing: where it reads from and what it keeps. */
export interface EventQueryPart {
  /** The FROM clause; the events table is always called `events`. */
  from: RawBuilder<unknown>
  /** Conditions, all of which hold for a listed event. */
  where: RawBuilder<unknown>[]
  /**
   * The event id as the order and the keyset see it: `events.id`, or the FTS5 rowid (the same
   * value) when the version index drives the scan, so FTS5 itself walks its hits in id order and
   * resumes after a cursor instead of producing every hit first.
   */
  idColumn: RawBuilder<unknown>
}

/** How a listing finds its events. */
export interface EventQueryPlan {
  /**
   * Disjoint slices, newest first: every event of a slice is newer than those of the next one, so
   * reading them one after the other keeps the order. One slice, except when the SQLite version
   * index drives a search: the newest events, which it has not indexed yet, are scanned first.
   */
  parts: EventQueryPart[]
  /**
   * Normally the order is by id, which follows arrival, on the (account_id, …, id) indexes. With a
   * time range the order is (received_at, id) instead: ordering such a range by id made both
   * databases read or sort the whole range for every page (and every export chunk), while
   * (account_id, received_at, id) serves range and order together.
   */
  byTime: boolean
}

const EVENTS_ID = sql.ref('events.id')

/** How to find the account's events matching the filter, as cheaply as the indexes allow. */
export async function planEventQuery(
  db: Kysely<DB>,
  dialect: DialectName,
  accountId: number,
  filter: EventFilter,
): Promise<EventQueryPlan> {
  const where: RawBuilder<unknown>[] = [sql`events.account_id = ${accountId}`]
  if (filter.service) where.push(sql`events.service = ${filter.service}`)
  if (filter.environment) where.push(sql`events.environment = ${filter.environment}`)
  if (filter.status) where.push(sql`events.status = ${filter.status}`)
  if (filter.from !== undefined) where.push(sql`events.received_at >= ${filter.from}`)
  if (filter.to !== undefined) where.push(sql`events.received_at <= ${filter.to}`)
  const byTime = filter.from !== undefined || filter.to !== undefined
  const scan: EventQueryPlan = { parts: [{ from: sql`events`, where, idColumn: EVENTS_ID }], byTime }
  if (!filter.version) return scan
  where.push(versionMatches(dialect, filter.version))
  const match = dialect === 'sqlite' ? versionIndexQuery(filter.version) : null
  if (match === null) return scan

  // The index holds the events up to this id (version-index.ts); the newer ones are scanned.
  const through = await indexedThrough(db)
  if (!byTime) {
    return {
      parts: [
        { from: sql`events`, where: [sql`events.id > ${through}`, ...where], idColumn: EVENTS_ID },
        {
          // CROSS JOIN keeps the index as the outer loop: SQLite never reorders it.
          from: sql`events_version_fts cross join events on events.id = events_version_fts.rowid`,
          where: [
            sql`events_version_fts match ${match}`,
            sql`events_version_fts.rowid <= ${through}`,
            ...where,
          ],
          idColumn: sql.ref('events_version_fts.rowid'),
        },
      ],
      byTime,
    }
  }
  const { rows } = await sql<{ hits: number }>`select (select count(*) from (
      select 1 from events_version_fts where events_version_fts match ${match} limit ${RARE_VERSION_HITS}))
    + (select count(*) from (select 1 from events where id > ${through} limit ${RARE_VERSION_HITS})) as hits`.execute(
    db,
  )
  if ((rows[0]?.hits ?? RARE_VERSION_HITS) >= RARE_VERSION_HITS) return scan
  return {
    parts: [
      {
        from: sql`(select rowid as id from events_version_fts where events_version_fts match ${match}
            union all select id from events where id > ${through}) as version_hits
          cross join events on events.id = version_hits.id`,
        where,
        idColumn: EVENTS_ID,
      },
    ],
    byTime,
  }
}

async function indexedThrough(db: Kysely<DB>): Promise<number> {
  const { rows } = await sql<{ through: number }>`select through from events_version_index`.execute(db)
  return rows[0]?.through ?? 0
}

/**
 * planEventQuery for an export. One case is cheaper still: on SQLite, an unfiltered export of an
 * account that owns every event in the table reads the table itself in rowid (id) order rather than
 * walking the (account_id, id) index and looking each row up, about a sixth of the cost of a row.
 * The account condition stays (unindexed), so the rows are the same whatever arrives meanwhile.
 */
export async function planEventExport(
  db: Kysely<DB>,
  dialect: DialectName,
  accountId: number,
  filter: EventFilter,
): Promise<EventQueryPlan> {
  const plan = await planEventQuery(db, dialect, accountId, filter)
  if (dialect !== 'sqlite' || FILTER_FIELDS.some((field) => filter[field] !== undefined)) return plan
  const { rows } = await sql<{
    others: number
  }>`select exists (select 1 from events where account_id < ${accountId})
    or exists (select 1 from events where account_id > ${accountId}) as others`.execute(db)
  if (rows[0]?.others !== 0) return plan
  return {
    ...plan,
    parts: [{ from: sql`events`, where: [sql`+events.account_id = ${accountId}`], idColumn: EVENTS_ID }],
  }
}

export interface Position {
  id: number
  receivedAt: number
}

function orderBy(plan: EventQueryPlan, part: EventQueryPart, direction: 'asc' | 'desc'): RawBuilder<unknown> {
  const dir = sql.raw(direction)
  return plan.byTime ? sql`events.received_at ${dir}, ${part.idColumn} ${dir}` : sql`${part.idColumn} ${dir}`
}

/** Rows strictly older (or newer) than `from` in the listing order. */
function past(
  plan: EventQueryPlan,
  part: EventQueryPart,
  from: Position,
  towards: 'older' | 'newer',
): RawBuilder<unknown> {
  const op = sql.raw(towards === 'older' ? '<' : '>')
  return plan.byTime
    ? sql`(events.received_at, ${part.idColumn}) ${op} (${from.receivedAt}, ${from.id})`
    : sql`${part.idColumn} ${op} ${from.id}`
}

export interface EventSelection {
  /** The select list, over `events`. */
  columns: RawBuilder<unknown>
  /** Only rows past this position, in the listing order. */
  after?: Position
  towards?: 'older' | 'newer'
  limit: number
}

/**
 * One keyset step through one slice of a listing: `limit` rows after `after` (newest first, or
 * oldest first towards newer).
 */
export function selectEvents(
  plan: EventQueryPlan,
  part: EventQueryPart,
  selection: EventSelection,
): RawBuilder<unknown> {
  const towards = selection.towards ?? 'older'
  const where = selection.after ? [...part.where, past(plan, part, selection.after, towards)] : part.where
  return sql`select ${selection.columns} from ${part.from} where ${sql.join(where, sql` and `)}
    order by ${orderBy(plan, part, towards === 'older' ? 'desc' : 'asc')} limit ${selection.limit}`
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

export interface EventPage {
  rows: EventRow[]
  /** Id to pass as `before` for the next (older) page, when there is one. */
  olderCursor: number | null
  /** Id to pass as `after` for the previous (newer) page, when there is one. */
  newerCursor: number | null
}

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
  const plan = await planEventQuery(db, dialect, accountId, filter)
  const read = async (after: Position | undefined, towards: 'older' | 'newer', n: number) => {
    const rows: EventRow[] = []
    for (const part of towards === 'older' ? plan.parts : [...plan.parts].reverse()) {
      if (rows.length >= n) break
      const step = selectEvents(plan, part, {
        columns: sql`events.*`,
        after,
        towards,
        limit: n - rows.length,
      })
      rows.push(...(await step.$castTo<EventRow>().execute(db)).rows)
    }
    return rows
  }
  const exists = async (from: Position, towards: 'older' | 'newer') =>
    (await read(from, towards, 1)).length > 0

  const after = cursor.after === undefined ? undefined : await positionOf(db, accountId, cursor.after)
  if (after) {
    // Going back towards newer events: read upwards from the cursor, then show newest first.
    let rows = (await read(after, 'newer', limit + 1)).reverse()
    const hasNewer = rows.length > limit
    if (hasNewer) rows = rows.slice(1)
    const first = rows[0]
    const last = rows.at(-1)
    return {
      rows,
      newerCursor: hasNewer && first ? first.id : null,
      olderCursor: last && (await exists(positionOfRow(last), 'older')) ? last.id : null,
    }
  }

  const before = cursor.before === undefined ? undefined : await positionOf(db, accountId, cursor.before)
  let rows = await read(before, 'older', limit + 1)
  const hasOlder = rows.length > limit
  if (hasOlder) rows = rows.slice(0, limit)
  const first = rows[0]
  return {
    rows,
    olderCursor: hasOlder ? (rows.at(-1)?.id ?? null) : null,
    newerCursor: before && first && (await exists(positionOfRow(first), 'newer')) ? first.id : null,
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
