// Reading an account's events a page at a time, newest first, by keyset (the log, the read API).
import { type Kysely, sql } from 'kysely'
import type { DialectName } from '../../config.js'
import type { DB, EventRow } from '../../db/schema.js'
import type { AccountNames } from './account-names.js'
import type { EventFilter } from './logs-query.js'
import { type Position, planEventQuery, selectEvents } from './query-plan.js'

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
