// Environment order on the board and days in the viewer's time zone: the two orderings the
// insights pages need, as pure functions.
import { knownZone, localDate, zonedToInstant } from '../time-zones.js'

/** Where environments go when an account has not ordered them (SPEC §6.3). */
export const BUILT_IN_ORDER = [
  'dev',
  'development',
  'test',
  'testing',
  'qa',
  'staging',
  'stage',
  'preprod',
  'prod',
  'production',
]

export interface EnvironmentSetting {
  name: string
  position: number
  hidden: boolean
}

/**
 * The environments in board order: those the account placed, by their position; then the rest, the
 * built-in names first (compared without letter case) and then by first sight. Hidden ones are
 * left out unless asked for.
 */
export function orderEnvironments(
  seen: readonly { name: string; firstSeenId: number }[],
  settings: readonly EnvironmentSetting[],
  options: { includeHidden?: boolean } = {},
): string[] {
  const placed = new Map(settings.map((s) => [s.name, s]))
  const builtIn = (name: string) => {
    const i = BUILT_IN_ORDER.indexOf(name.toLowerCase())
    return i === -1 ? BUILT_IN_ORDER.length : i
  }
  const names = new Map<string, number>()
  for (const s of seen)
    names.set(s.name, Math.min(s.firstSeenId, names.get(s.name) ?? Number.POSITIVE_INFINITY))
  for (const s of settings) if (!names.has(s.name)) names.set(s.name, Number.POSITIVE_INFINITY)
  return [...names.entries()]
    .filter(([name]) => options.includeHidden || !placed.get(name)?.hidden)
    .sort(([a, aSeen], [b, bSeen]) => {
      const pa = placed.get(a)
      const pb = placed.get(b)
      if (pa && pb) return pa.position - pb.position || a.localeCompare(b)
      if (pa) return -1
      if (pb) return 1
      return builtIn(a) - builtIn(b) || aSeen - bSeen || a.localeCompare(b)
    })
    .map(([name]) => name)
}

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
