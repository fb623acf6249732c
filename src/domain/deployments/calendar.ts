// Days in the viewer's time zone, as pure functions: the insights pages' buckets, each with its
// true length across clock changes. (The environment order is the board's: board/environments.ts.)
import { knownZone, localDate, zonedToInstant } from '../time-zones.js'

/** Whether `zone` is an IANA time zone this runtime knows. */
export function isTimeZone(zone: string): boolean {
  return knownZone(zone) !== undefined
}

/**
 * The instant a calendar date begins in a time zone: its local midnight or, where the clocks jump
 * over midnight, the first instant that has that date.
 */
export function startOfLocalDate(date: string, zone: string): number {
  const [y, m, d] = date.split('-').map(Number) as [number, number, number]
  return zonedToInstant(zone, Date.UTC(y, m - 1, d))
}

export interface Day {
  date: string
  start: number
  /** Exclusive; 23 or 25 hours after start on the days clocks change. */
  end: number
}

/** The local days that [from, to) touches, in order, each with its true length. */
export function localDays(from: number, to: number, zone: string): Day[] {
  const days: Day[] = []
  let date = localDate(from, zone)
  for (let guard = 0; guard < 2000; guard++) {
    const start = startOfLocalDate(date, zone)
    if (start >= to) break
    const next = nextDate(date)
    const end = startOfLocalDate(next, zone)
    days.push({ date, start, end })
    date = next
  }
  return days
}

function nextDate(date: string): string {
  const [y, m, d] = date.split('-').map(Number) as [number, number, number]
  return new Date(Date.UTC(y, m - 1, d + 1)).toISOString().slice(0, 10)
}
