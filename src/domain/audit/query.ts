// Reading the audit log: Settings → Audit log and its downloads, always within one account, newest
// first, paged by id (keyset) so a page costs the same however long the log grows.
import { type Kysely, sql } from 'kysely'
import type { AuditActorKind, DB } from '../../db/schema.js'
import { hasControlCharacter } from '../../text-rules.js'
import { csvCell } from '../events/export/format.js'
import { parseTimeBound } from '../events/time-bounds.js'
import { knownZone } from '../time-zones.js'
import { MAX_ID, parseWholeNumber } from '../whole-numbers.js'
import { type AuditAction, type AuditDetail, isAuditAction } from './log.js'

export const AUDIT_PAGE_SIZE = 50
/** Rows read per query while a download streams. */
const EXPORT_CHUNK = 500

export interface AuditFilter {
  action?: AuditAction
  /** Part of the actor's name (an email, a key's name, `cli (…)`), any case. */
  actor?: string
  from?: number
  to?: number
}

export interface AuditEntry {
  id: number
  at: number
  actorKind: AuditActorKind
  actorId: number | null
  actor: string
  address: string | null
  action: string
  target: string | null
  details: Record<string, AuditDetail>
}

export interface AuditQuery {
  filter: AuditFilter
  before?: number
  zone?: string
  /** Each refused parameter, in words; nothing is listed or downloaded while there are any. */
  errors: { field: string; message: string }[]
}

const FIELDS = ['action', 'actor', 'from', 'to', 'tz', 'before'] as const
const MAX_TEXT = 200

/**
 * Reads the page's or a download's query string. Unknown parameters are ignored; a repeated one,
 * a date that is not one, a `to` before `from` or an unknown action is named in the errors.
 */
export function parseAuditQuery(query: Record<string, unknown>): AuditQuery {
  const errors: AuditQuery['errors'] = []
  const values: Partial<Record<(typeof FIELDS)[number], string>> = {}
  for (const name of FIELDS) {
    const raw = query[name]
    if (raw === undefined) continue
    if (typeof raw !== 'string') {
      errors.push({ field: name, message: `${name} may be given once` })
      continue
    }
    const value = raw.trim()
    if (value === '') continue
    if (value.length > MAX_TEXT || hasControlCharacter(value)) {
      errors.push({ field: name, message: `${name} must be at most ${MAX_TEXT} characters of plain text` })
      continue
    }
    values[name] = value
  }
  const filter: AuditFilter = {}
  if (values.action !== undefined) {
    if (isAuditAction(values.action)) filter.action = values.action
    else errors.push({ field: 'action', message: 'action must be one of the actions in the list' })
  }
  if (values.actor !== undefined) filter.actor = values.actor
  const zone = values.tz === undefined ? undefined : knownZone(values.tz)
  if (values.tz !== undefined && zone === undefined) {
    errors.push({ field: 'tz', message: 'tz must be a time zone name such as Europe/Berlin' })
  }
  for (const bound of ['from', 'to'] as const) {
    const value = values[bound]
    if (value === undefined) continue
    const at = parseTimeBound(value, bound === 'to', zone)
    if (at === undefined) {
      errors.push({ field: bound, message: `${bound} must be a date and time, e.g. 2026-11-21T14:30` })
    } else filter[bound] = at
  }
  if (filter.from !== undefined && filter.to !== undefined && filter.from > filter.to) {
    errors.push({ field: 'to', message: 'to must not be before from' })
  }
  const out: AuditQuery = { filter, errors }
  // The number untrimmed, by the one grammar (whole-numbers.ts): " 5" is refused like "+5".
  if (values.before !== undefined) {
    const before = parseWholeNumber(query.before as string, 0, MAX_ID)
    if (before !== undefined) out.before = before
    else errors.push({ field: 'before', message: 'before must be an entry number (decimal digits only)' })
  }
  if (zone !== undefined) out.zone = zone
  return out
}

/** The filter as query parameters (times in UTC), for links that keep it. */
export function auditFilterToQuery(filter: AuditFilter): Record<string, string> {
  const q: Record<string, string> = {}
  if (filter.action) q.action = filter.action
  if (filter.actor) q.actor = filter.actor
  if (filter.from !== undefined) q.from = new Date(filter.from).toISOString()
  if (filter.to !== undefined) q.to = new Date(filter.to).toISOString()
  return q
}

function toEntry(row: {
  id: number | string
  at: number | string
  actor_kind: AuditActorKind
  actor_id: number | string | null
  actor: string
  address: string | null
  action: string
  target: string | null
  details: string
}): AuditEntry {
  let details: Record<string, AuditDetail> = {}
  try {
    const parsed: unknown = JSON.parse(row.details)
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) details = parsed as typeof details
  } catch {
    details = {}
  }
  return {
    id: Number(row.id),
    at: Number(row.at),
    actorKind: row.actor_kind,
    actorId: row.actor_id === null ? null : Number(row.actor_id),
    actor: row.actor,
    address: row.address,
    action: row.action,
    target: row.target,
    details,
  }
}

function escapeLike(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`)
}

async function readEntries(
  db: Kysely<DB>,
  accountId: number,
  filter: AuditFilter,
  before: number | undefined,
  limit: number,
): Promise<AuditEntry[]> {
  let query = db
    .selectFrom('audit_entries')
    .select(['id', 'at', 'actor_kind', 'actor_id', 'actor', 'address', 'action', 'target', 'details'])
    .where('account_id', '=', accountId)
  if (before !== undefined) query = query.where('id', '<', before)
  if (filter.action) query = query.where('action', '=', filter.action)
  if (filter.actor) {
    const pattern = `%${escapeLike(filter.actor.toLowerCase())}%`
    query = query.where(sql<boolean>`lower(actor) like ${pattern} escape '\\'`)
  }
  if (filter.from !== undefined) query = query.where('at', '>=', filter.from)
  if (filter.to !== undefined) query = query.where('at', '<=', filter.to)
  const rows = await query.orderBy('id', 'desc').limit(limit).execute()
  return rows.map(toEntry)
}

/** One page, newest first, and the cursor of the next older page (null on the last). */
export async function listAuditPage(
  db: Kysely<DB>,
  accountId: number,
  filter: AuditFilter,
  before: number | undefined,
  limit = AUDIT_PAGE_SIZE,
): Promise<{ entries: AuditEntry[]; olderCursor: number | null }> {
  const rows = await readEntries(db, accountId, filter, before, limit + 1)
  const entries = rows.slice(0, limit)
  const last = entries[entries.length - 1]
  return { entries, olderCursor: rows.length > limit && last ? last.id : null }
}

/** Every matching entry, newest first, read a chunk at a time. */
export async function* auditEntries(
  db: Kysely<DB>,
  accountId: number,
  filter: AuditFilter,
): AsyncGenerator<AuditEntry> {
  let before: number | undefined
  for (;;) {
    const rows = await readEntries(db, accountId, filter, before, EXPORT_CHUNK)
    yield* rows
    const last = rows[rows.length - 1]
    if (rows.length < EXPORT_CHUNK || !last) return
    before = last.id
  }
}

/** The names that acted in the account, for the filter's suggestions (the most recent first). */
export async function auditActorNames(db: Kysely<DB>, accountId: number): Promise<string[]> {
  const rows = await db
    .selectFrom('audit_entries')
    .select('actor')
    .where('account_id', '=', accountId)
    .groupBy('actor')
    .orderBy(sql`max(id)`, 'desc')
    .limit(100)
    .execute()
  return rows.map((r) => r.actor)
}

export const AUDIT_CSV_COLUMNS = [
  'id',
  'time',
  'actor_kind',
  'actor',
  'address',
  'action',
  'target',
  'details',
] as const

/** One CSV record; every cell through the event export's csvCell (quotes, formula guard). */
export function auditCsvLine(entry: AuditEntry): string {
  const cells = [
    entry.id,
    new Date(entry.at).toISOString(),
    entry.actorKind,
    entry.actor,
    entry.address,
    entry.action,
    entry.target,
    JSON.stringify(entry.details),
  ]
  return `${cells.map((c) => csvCell(c)).join(',')}\r\n`
}

export const AUDIT_CSV_HEADER = `${AUDIT_CSV_COLUMNS.join(',')}\r\n`

/** One JSON record of the download. */
export function auditJson(entry: AuditEntry): string {
  return JSON.stringify({
    id: entry.id,
    time: new Date(entry.at).toISOString(),
    actor_kind: entry.actorKind,
    actor: entry.actor,
    address: entry.address,
    action: entry.action,
    target: entry.target,
    details: entry.details,
  })
}
