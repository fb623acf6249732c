// Time zones, one set of rules for every page that reads or shows local times: which zone names
// exist, the wall clock of an instant, and the instant a wall-clock time names.

/** Formatters are costly to build and zones few (names are checked first), so each is kept. */
const wallFormats = new Map<string, Intl.DateTimeFormat>()

function wallFormat(zone: string): Intl.DateTimeFormat {
  let format = wallFormats.get(zone)
  if (!format) {
    format = new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    })
    if (wallFormats.size < 1000) wallFormats.set(zone, format)
  }
  return format
}

/** The IANA zone name if this runtime knows it (in its canonical spelling), else undefined. */
export function knownZone(name: string): string | undefined {
  if (name.length === 0 || name.length > 64) return undefined
  try {
    return new Intl.DateTimeFormat('en-US', { timeZone: name }).resolvedOptions().timeZone
  } catch {
    return undefined
  }
}

/** The wall-clock time of an instant in a zone, written as if it were a UTC instant. */
export function wallClock(zone: string, at: number): number {
  const parts = wallFormat(zone).formatToParts(at)
  const n = (type: Intl.DateTimeFormatPartTypes) => Number(parts.find((p) => p.type === type)?.value ?? 0)
  return (
    Date.UTC(n('year'), n('month') - 1, n('day'), n('hour'), n('minute'), n('second')) +
    (((at % 1000) + 1000) % 1000)
  )
}

/** The zone's offset from UTC at an instant, in milliseconds (positive east of Greenwich). */
function zoneOffset(zone: string, at: number): number {
  const whole = at - (((at % 1000) + 1000) % 1000)
  return wallClock(zone, whole) - whole
}

/**
 * The instant a wall-clock time (written as if UTC) names in a zone. Across a change of offset a
 * wall time can be missing (spring forward: taken with the offset before the change, so it lands
 * after the gap, as Temporal's "compatible" does) or twice (fall back: the earlier one).
 */
export function zonedToInstant(zone: string, wall: number): number {
  const before = zoneOffset(zone, wall - 86_400_000)
  const after = zoneOffset(zone, wall + 86_400_000)
  const candidates = [wall - before, wall - after].filter((at) => wallClock(zone, at) === wall)
  if (candidates.length > 0) return Math.min(...candidates)
  return wall - before
}

/** The calendar date (YYYY-MM-DD) of an instant in a zone. */
export function localDate(at: number, zone: string): string {
  return new Date(wallClock(zone, at)).toISOString().slice(0, 10)
}
