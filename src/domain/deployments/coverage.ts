// Which part of a metrics window the account's data covers (issue 28, point 11): a 30-day window
// on the first day of use, or with retention keeping 3 days, holds a day or three of history, and
// dividing what it counted by 30 would understate deployment frequency thirtyfold. The data starts
// at the account's earliest kept event (by its own time, occurred_at), or at the retention cut-off when that is later (retention
// keeps a few older rows, the running deployment of each cell); it ends now.
import type { Kysely } from 'kysely'
import type { DB } from '../../db/schema.js'
import { DAY_MS } from './metrics.js'

/** A window's days: [start, end) each, in order (local days on the page, 24-hour slices in the API). */
export interface Slice {
  start: number
  end: number
}

export interface DataCoverage {
  /** Where the data starts: the earliest kept event, or the retention cut-off; null: no events. */
  dataFrom: number | null
  /** The part of the window the data covers, or null when it covers none of it. */
  covered: { from: number; to: number } | null
  /** The window's days that the covered part touches (a day begun counts). */
  daysCovered: number
  daysInWindow: number
}

/** Where an account's data starts at `now` (see the file comment); null when it has no events. */
export async function dataStart(db: Kysely<DB>, accountId: number, now: number): Promise<number | null> {
  const [first, account] = await Promise.all([
    db
      .selectFrom('events')
      .select('occurred_at')
      .where('account_id', '=', accountId)
      .orderBy('occurred_at')
      .limit(1)
      .executeTakeFirst(),
    db.selectFrom('accounts').select('retention_days').where('id', '=', accountId).executeTakeFirst(),
  ])
  if (!first) return null
  const days =
    account?.retention_days === null || account === undefined ? null : Number(account.retention_days)
  const cutoff = days === null ? Number.NEGATIVE_INFINITY : now - days * DAY_MS
  return Math.max(Number(first.occurred_at), cutoff)
}

/** The coverage of a window split into `days`, given where the data starts, at `now`. */
export function coverageOf(days: readonly Slice[], dataFrom: number | null, now: number): DataCoverage {
  const windowFrom = days[0]?.start ?? 0
  const windowTo = days.at(-1)?.end ?? 0
  const none = { dataFrom, covered: null, daysCovered: 0, daysInWindow: days.length }
  if (dataFrom === null) return none
  const from = Math.max(windowFrom, dataFrom)
  const to = Math.min(windowTo, now)
  if (from >= to) return none
  const daysCovered = days.filter((d) => d.start < to && d.end > from).length
  return { dataFrom, covered: { from, to }, daysCovered, daysInWindow: days.length }
}

/** [from, to) as 24-hour slices from `from` (the last may be shorter): the API's days. */
export function daySlices(from: number, to: number): Slice[] {
  const out: Slice[] = []
  for (let start = from; start < to; start += DAY_MS) out.push({ start, end: Math.min(to, start + DAY_MS) })
  return out
}

/** Deployment frequency over the days the data covers; 0 when it covers none. */
export function frequencyPerDay(succeeded: number, coverage: DataCoverage): number {
  return coverage.daysCovered > 0 ? succeeded / coverage.daysCovered : 0
}
