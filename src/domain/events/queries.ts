// Reading an account's events: filters, query plans over the indexes, and keyset pages for the log.
import { type Kysely, type RawBuilder, sql } from 'kysely'
import type { DialectName } from '../../config.js'
import type { DB, EventRow, EventStatus } from '../../db/schema.js'
import {
  canonicalStatus,
  characterCount,
  hasControlCharacter,
  isWellFormedText,
  STATUS_CHOICES,
} from '../../text-rules.js'
import { instantOf, precisionMs, readInstant } from '../instants.js'
import { knownZone, zonedToInstant } from '../time-zones.js'
import { MAX_ID, parseWholeNumber } from '../whole-numbers.js'
import { type FieldError, LIMITS } from './event.js'

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

/**
 * Reads a time bound by the one grammar of instants (instants.ts): a text without a zone (as an
 * HTML datetime-local field sends it) is taken in `zone` (UTC when none). An upper bound without
 * zone, written to the day, minute or second, covers that whole day, minute or second.
 */
export function parseTimeBound(text: string, upper: boolean, zone?: string): number | undefined {
  const read = readInstant(text)
  if (read === undefined) return undefined
  const local = (wall: number) => (zone === undefined ? wall : zonedToInstant(zone, wall))
  if (!upper || read.offsetMinutes !== undefined || read.precision === 'fraction') {
    return instantOf(read, local)
  }
  return local(read.wall + precisionMs(read)) - 1
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
  known?: AccountNames,
): Promise<EventQueryPlan> {
  const where: RawBuilder<unknown>[] = [sql`events.account_id = ${accountId}`]
  for (const column of NAME_COLUMNS) {
    const needle = filter[column]
    if (needle) where.push(nameIn(column, await namesLike(db, accountId, column, needle, known)))
  }
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
  known?: AccountNames,
): Promise<EventPage> {
  const plan = await planEventQuery(db, dialect, accountId, filter, known)
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

/**
 * One rule for names everywhere: two service (or environment) names are the same to a filter when
 * they are equal after lower-casing with the Unicode default mapping, exactly as JavaScript's
 * toLowerCase() does (so "ÄPP" finds "äpp", and "İ" finds "i̇", i with a dot above, but not "i").
 * It is applied here, in one place, to the account's distinct names, rather than by each database:
 * PostgreSQL's lower() follows the database's locale (ASCII only under C, "İ" to "i" under libc),
 * and an index on SQLite's casefold() would make every write to events need that function, which
 * only Shiplog's own connections register (the bench seeder, the sqlite3 shell, a backup restored
 * elsewhere would fail to insert or delete).
 */
export function sameName(a: string, b: string): boolean {
  return a === b || casefold(a) === casefold(b)
}

const NAME_COLUMNS = ['service', 'environment'] as const
type NameColumn = (typeof NAME_COLUMNS)[number]

/**
 * Every distinct name of the account in a column, in binary order, read by a loose index scan: one
 * seek on the (account_id, column, id) index per name, so the cost follows the number of names, not
 * of events.
 */
export async function distinctNames(
  db: Kysely<DB>,
  accountId: number,
  column: NameColumn,
): Promise<string[]> {
  const col = sql.ref(`events.${column}`)
  const { rows } = await sql<{ name: string }>`with recursive names(name) as (
      select min(${col}) from events where events.account_id = ${accountId}
      union all
      select (select min(${col}) from events where events.account_id = ${accountId} and ${col} > names.name)
        from names where names.name is not null
    ) select name from names where name is not null`.execute(db)
  return rows.map((r) => r.name)
}

/**
 * The account's names in this column that a filter for `needle` matches (sameName), from the names
 * the page already read when that list was whole.
 */
async function namesLike(
  db: Kysely<DB>,
  accountId: number,
  column: NameColumn,
  needle: string,
  known?: AccountNames,
): Promise<string[]> {
  const names = known?.complete[column] ? known[column] : await distinctNames(db, accountId, column)
  return names.filter((name) => sameName(name, needle))
}

/**
 * The condition for one name column. Nearly always one name matches, and equality keeps the
 * (account_id, column, id) index serving order and keyset; several spellings of one name (App1 and
 * APP1) become an IN list.
 */
function nameIn(column: NameColumn, names: string[]): RawBuilder<unknown> {
  const col = sql.ref(`events.${column}`)
  const [only] = names
  if (only === undefined) return sql`1 = 0`
  if (names.length === 1) return sql`${col} = ${only}`
  return sql`${col} in (${sql.join(names)})`
}

/** How many names of each kind the filter fields suggest (a <datalist> of every known name). */
const SUGGESTED_NAMES = 500

/** The account's services and environments (at most SUGGESTED_NAMES each), in binary order. */
export interface AccountNames {
  service: string[]
  environment: string[]
  /** Whether the list holds every name of the account, so a filter can be resolved from it. */
  complete: Record<NameColumn, boolean>
}

/**
 * Both lists of names in one statement (one round trip, one plan): the page suggests them, and its
 * filter resolves from them (listEventPage's `known`) instead of reading them again.
 */
export async function accountNames(db: Kysely<DB>, accountId: number): Promise<AccountNames> {
  const scan = (column: NameColumn, cte: string) => {
    const col = sql.ref(`events.${column}`)
    const self = sql.table(cte)
    return sql`${self}(name) as (
      select min(${col}) from events where events.account_id = ${accountId}
      union all
      select (select min(${col}) from events where events.account_id = ${accountId} and ${col} > ${self}.name)
        from ${self} where ${self}.name is not null)`
  }
  const { rows } = await sql<{ kind: NameColumn; name: string }>`with recursive
      ${scan('service', 'service_names')}, ${scan('environment', 'environment_names')}
    select 'service' as kind, name from (
      select name from service_names where name is not null limit ${SUGGESTED_NAMES + 1}) as s
    union all
    select 'environment' as kind, name from (
      select name from environment_names where name is not null limit ${SUGGESTED_NAMES + 1}) as e`.execute(
    db,
  )
  const names: AccountNames = { service: [], environment: [], complete: { service: true, environment: true } }
  for (const row of rows) names[row.kind].push(row.name)
  for (const column of NAME_COLUMNS) {
    if (names[column].length > SUGGESTED_NAMES) {
      names[column] = names[column].slice(0, SUGGESTED_NAMES)
      names.complete[column] = false
    }
  }
  return names
}

/** Names as people read them, for the suggestions. */
export function byName(a: string, b: string): number {
  return a.localeCompare(b)
}

/** Whether the account has any event at all (an empty log then shows how to send the first one). */
export async function anyEvent(db: Kysely<DB>, accountId: number): Promise<boolean> {
  const row = await db
    .selectFrom('events')
    .select('id')
    .where('account_id', '=', accountId)
    .limit(1)
    .executeTakeFirst()
  return row !== undefined
}
