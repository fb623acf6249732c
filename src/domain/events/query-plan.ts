// How a listing finds an account's events as cheaply as the indexes allow (the log's pages, the
// read API, the exports), and one keyset step through it.
import { type Kysely, type RawBuilder, sql } from 'kysely'
import type { DialectName } from '../../config.js'
import type { DB } from '../../db/schema.js'
import { type AccountNames, NAME_COLUMNS, nameIn, namesLike } from './account-names.js'
import { type EventFilter, FILTER_FIELDS } from './logs-query.js'
import { indexedThrough, isRareVersion, versionIndexQuery, versionMatches } from './version-search.js'

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
  // With a time range the range scan is the rule; the index serves only a rare needle.
  if (!(await isRareVersion(db, match, through))) return scan
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
