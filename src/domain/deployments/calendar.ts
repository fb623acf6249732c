// Environment order on the board and days in the viewer's time zone: the two orderings the
// insights pages need, as pure functions.

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
  if (zone.length === 0 || zone.length > 64) return false
  try {
    new Intl.DateTimeFormat('en', { timeZone: zone })
    return true
  } catch {
    return false
  }
}

const dateFormats = new Map<string, Intl.DateTimeFormat>()
const wallFormats = new Map<string, Intl.DateTimeFormat>()

function cached(map: Map<string, Intl.DateTimeFormat>, zone: string, make: () => Intl.DateTimeFormat) {
  let format = map.get(zone)
  if (!format) {
    format = make()
    // Zones are few (what viewers send is checked by isTimeZone), so this stays small.
    if (map.size < 1000) map.set(zone, format)
  }
  return format
}

/** The calendar date (YYYY-MM-DD) of an instant in a time zone. */
export function localDate(at: number, zone: string): string {
  const format = cached(
    dateFormats,
    zone,
    () =>
      new Intl.DateTimeFormat('en-CA', { timeZone: zone, year: 'numeric', month: '2-digit', day: '2-digit' }),
  )
  const parts = format.formatToParts(new Date(at))
  const part = (type: string) => parts.find((p) => p.type === type)?.value ?? ''
  return `${part('year')}-${part('month')}-${part('day')}`
}

/** Offset of `zone` from UTC at an instant, in milliseconds (Berlin in summer: +7,200,000). */
function offsetAt(at: number, zone: string): number {
  const format = cached(
    wallFormats,
    zone,
    () =>
      new Intl.DateTimeFormat('en-US', {
        timeZone: zone,
        hourCycle: 'h23',
        year: 'numeric',
        month: 'numeric',
        day: 'numeric',
        hour: 'numeric',
        minute: 'numeric',
        second: 'numeric',
      }),
  )
  const parts = format.formatToParts(new Date(at))
  const n = (type: string) => Number(parts.find((p) => p.type === type)?.value ?? 0)
  const wall = Date.UTC(n('year'), n('month') - 1, n('day'), n('hour'), n('minute'), n('second'))
  return wall - Math.floor(at / 1000) * 1000
}

/**
 * The instant a calendar date begins in a time zone: its local midnight, or where the clocks jump
 * over midnight, the first instant that has that date.
 */
export function startOfLocalDate(date: string, zone: string): number {
  const [y, m, d] = date.split('-').map(Number) as [number, number, number]
  const utcMidnight = Date.UTC(y, m - 1, d)
  // Midnight UTC minus the zone's offset there, corrected once with the offset at that guess: right
  // on every day but those whose midnight a clock change skips or repeats.
  let guess = utcMidnight - offsetAt(utcMidnight, zone)
  guess = utcMidnight - offsetAt(guess, zone)
  if (localDate(guess, zone) === date && localDate(guess - 1, zone) < date) return guess
  // Otherwise search, a minute at a time, for the first instant of the date within a day either side.
  let low = Math.floor((utcMidnight - 30 * 3_600_000) / 60_000)
  let high = Math.ceil((utcMidnight + 30 * 3_600_000) / 60_000)
  while (low < high) {
    const mid = Math.floor((low + high) / 2)
    if (localDate(mid * 60_000, zone) < date) low = mid + 1
    else high = mid
  }
  return low * 60_000
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
