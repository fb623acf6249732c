// Deploy-freeze windows as pure rules: when a recurring window (cron in a time zone, lasting a span
// of local wall-clock time) or a one-off window is open, what comes next, and which windows collide.
import { knownZone, wallClock } from '../time-zones.js'
import { type CronSchedule, cronMatchesDay, cronWalls, parseCron } from './cron.js'

// People write weekly ranges ("Fri 16:00-Mon 08:00"); they become a cron and a duration there.
export { type Checked, parseWeeklyRange } from './cron.js'

/** Opens at each local time the cron matches; closes `durationMinutes` later on the local wall clock. */
export interface RecurringWindow {
  cron: string
  durationMinutes: number
  timeZone: string
}

/** Instants in milliseconds since the epoch; the end is exclusive. */
export interface OneOffWindow {
  startsAt: number
  endsAt: number
}

export type FreezeWindow = RecurringWindow | OneOffWindow

/** One opening of a window: [start, end) in milliseconds since the epoch. */
export interface Occurrence {
  start: number
  end: number
}

const MINUTE = 60_000
const DAY = 86_400_000
export const MAX_DURATION_MINUTES = 7 * 24 * 60
/** A fixed day to check a window against itself from, so the same window is always judged alike. */
const OVERLAP_REFERENCE = Date.UTC(2026, 0, 1)
const OVERLAP_HORIZON_DAYS = 400
const NEXT_HORIZON = 5 * 366 * DAY
/** More than any zone's distance from UTC (they lie within -12 h and +14 h). */
const WIDEST_OFFSET = 16 * 3_600_000

// --- The zone's offsets, found once per six hours and kept: formatting a date costs microseconds,
// and a dense cron (every minute for a week) needs thousands of conversions. The conversion below
// is time-zones.ts's zonedToInstant rule, read from the kept offsets (the tests hold them equal).

const CELL = 6 * 3_600_000

/** One zone's offsets, per six-hour cell: at its start, at its end, and the second it changes. */
interface ZoneOffsets {
  zone: string
  cells: Map<number, Cell>
  atEdge: Map<number, number>
}

interface Cell {
  before: number
  after: number
  /** The first instant with the `after` offset (the cell's end when it does not change). */
  change: number
}

const zoneOffsets = new Map<string, ZoneOffsets>()

function offsetsOf(zone: string): ZoneOffsets {
  let offsets = zoneOffsets.get(zone)
  if (!offsets) {
    if (zoneOffsets.size > 100) zoneOffsets.clear()
    offsets = { zone, cells: new Map(), atEdge: new Map() }
    zoneOffsets.set(zone, offsets)
  }
  return offsets
}

function measuredOffset(zone: string, at: number): number {
  return wallClock(zone, at) - at
}

function edgeOffset(offsets: ZoneOffsets, cell: number): number {
  let offset = offsets.atEdge.get(cell)
  if (offset === undefined) {
    offset = measuredOffset(offsets.zone, cell * CELL)
    offsets.atEdge.set(cell, offset)
  }
  return offset
}

function cellAt(offsets: ZoneOffsets, cell: number): Cell {
  let found = offsets.cells.get(cell)
  if (found) return found
  if (offsets.cells.size > 20_000) {
    offsets.cells.clear()
    offsets.atEdge.clear()
  }
  const before = edgeOffset(offsets, cell)
  const after = edgeOffset(offsets, cell + 1)
  let low = cell * CELL
  let high = low + CELL
  // Offsets change at whole seconds, at most once in six hours: halve to the second it happens.
  while (before !== after && high - low > 1000) {
    const middle = low + Math.floor((high - low) / 2000) * 1000
    if (measuredOffset(offsets.zone, middle) === before) low = middle
    else high = middle
  }
  found = { before, after, change: high }
  offsets.cells.set(cell, found)
  return found
}

/** The zone's offset at an instant (whole seconds, as zoneOffset reads it). */
function offsetAt(offsets: ZoneOffsets, at: number): number {
  const whole = at - (((at % 1000) + 1000) % 1000)
  const cell = cellAt(offsets, Math.floor(whole / CELL))
  return whole < cell.change ? cell.before : cell.after
}

/** zonedToInstant: a wall time in a gap lands after it, one that comes twice takes the earlier. */
function toInstant(offsets: ZoneOffsets, wall: number): number {
  const before = offsetAt(offsets, wall - DAY)
  const after = offsetAt(offsets, wall + DAY)
  const early = wall - before
  const late = wall - after
  const earlyFits = early + offsetAt(offsets, early) === wall
  if (before === after) return early
  const lateFits = late + offsetAt(offsets, late) === wall
  if (earlyFits && lateFits) return Math.min(early, late)
  return lateFits ? late : early
}

function offsetRange(
  offsets: ZoneOffsets,
  from: number,
  to: number,
): { min: number; max: number; spread: number } {
  let min = Number.POSITIVE_INFINITY
  let max = Number.NEGATIVE_INFINITY
  for (let cell = Math.floor(from / CELL); cell <= Math.floor(to / CELL) + 1; cell++) {
    const { before, after } = cellAt(offsets, cell)
    min = Math.min(min, before, after)
    max = Math.max(max, before, after)
  }
  return { min, max, spread: max - min }
}

// --- Recurring windows.

interface Compiled {
  schedule: CronSchedule
  offsets: ZoneOffsets
  duration: number
}

const schedules = new Map<string, CronSchedule>()
const zones = new Map<string, string>()

function compile(spec: RecurringWindow): Compiled {
  let schedule = schedules.get(spec.cron)
  if (!schedule) {
    const parsed = parseCron(spec.cron)
    if (!parsed.ok) throw new RangeError(`freeze window cron "${spec.cron}": ${parsed.errors.join('; ')}`)
    schedule = parsed.value
    if (schedules.size > 1000) schedules.clear()
    schedules.set(spec.cron, schedule)
  }
  // Resolving a zone name builds a formatter (a tenth of a millisecond), so names are kept too.
  let zone = zones.get(spec.timeZone)
  if (zone === undefined) {
    zone = knownZone(spec.timeZone)
    if (zone !== undefined && zones.size < 1000) zones.set(spec.timeZone, zone)
  }
  if (zone === undefined) throw new RangeError(`freeze window time zone "${spec.timeZone}" is not known`)
  if (!Number.isInteger(spec.durationMinutes) || spec.durationMinutes < 1)
    throw new RangeError(`freeze window duration ${spec.durationMinutes} is not a whole number of minutes`)
  return { schedule, offsets: offsetsOf(zone), duration: spec.durationMinutes * MINUTE }
}

/** The opening at a matching wall time: the end counts the duration on the local wall clock. */
function occurrenceAt(window: Compiled, wall: number): Occurrence {
  const start = toInstant(window.offsets, wall)
  const end = toInstant(window.offsets, start + offsetAt(window.offsets, start) + window.duration)
  // Only a zone that skipped a whole day could give a backward end; never let a window be empty.
  return { start, end: end > start ? end : start + window.duration }
}

function endsLater(a: Occurrence, b: Occurrence): boolean {
  return a.end > b.end || (a.end === b.end && a.start > b.start)
}

/**
 * The opening that contains `at` (start ≤ at < end); of several, the one ending last (then the
 * latest start). Looks only at the wall times that could reach `at`, newest first.
 */
export function activeOccurrence(spec: RecurringWindow, at: number): Occurrence | null {
  const window = compile(spec)
  // Every instant the conversions below consult lies within a day and two offsets of the window.
  const reach = window.duration + DAY + 2 * WIDEST_OFFSET
  const { min, max, spread } = offsetRange(window.offsets, at - reach, at + reach)
  let best: Occurrence | null = null
  // A start at or before `at` has a wall time at most `at + max`; an end after it needs one above
  // `at + min - duration - spread` (a start in a gap moves its wall clock on by at most the spread).
  for (const wall of cronWalls(window.schedule, at + min - window.duration - spread, at + max, 'down')) {
    if (best && wall + spread + window.duration - min < best.end) break
    const occurrence = occurrenceAt(window, wall)
    if (occurrence.start <= at && at < occurrence.end && (!best || endsLater(occurrence, best)))
      best = occurrence
  }
  return best
}

/** The first opening that starts after `after`, or null if none does within five years. */
export function nextOccurrence(spec: RecurringWindow, after: number): Occurrence | null {
  const window = compile(spec)
  const near = offsetRange(window.offsets, after - 3 * DAY, after + 3 * DAY)
  let best: Occurrence | null = null
  let stopAfter = Number.POSITIVE_INFINITY
  for (const wall of cronWalls(window.schedule, after + near.min, after + NEXT_HORIZON, 'up')) {
    if (wall > stopAfter) break
    const occurrence = occurrenceAt(window, wall)
    if (occurrence.start > after && (!best || occurrence.start < best.start)) {
      best = occurrence
      // Later wall times start no earlier than wall - max (clock changes reorder only within hours).
      stopAfter = best.start + offsetRange(window.offsets, best.start - 3 * DAY, best.start + 3 * DAY).max
    }
  }
  return best
}

/** The openings that overlap [from, to), by start, at most `limit`; the same instant counts once. */
export function occurrencesBetween(
  spec: FreezeWindow,
  from: number,
  to: number,
  limit: number,
): Occurrence[] {
  if (limit < 1 || to <= from) return []
  if ('startsAt' in spec)
    return spec.startsAt < to && spec.endsAt > from && spec.startsAt < spec.endsAt
      ? [{ start: spec.startsAt, end: spec.endsAt }]
      : []
  const window = compile(spec)
  const { min, spread } = offsetRange(window.offsets, from - window.duration - 3 * DAY, from + 3 * DAY)
  const found = new Map<number, Occurrence>()
  let stopAfter = Number.POSITIVE_INFINITY
  const low = from + min - window.duration - spread
  for (const wall of cronWalls(window.schedule, low, to + WIDEST_OFFSET, 'up')) {
    if (wall > stopAfter) break
    const occurrence = occurrenceAt(window, wall)
    if (occurrence.start >= to || occurrence.end <= from) continue
    found.set(occurrence.start, occurrence)
    if (found.size === limit) {
      // Later wall times cannot start before the limit-th start once past it by the zone's offset.
      const last = Math.max(...[...found.keys()])
      stopAfter = last + offsetRange(window.offsets, last - 3 * DAY, last + 3 * DAY).max
    }
  }
  return [...found.values()].sort((a, b) => a.start - b.start).slice(0, limit)
}

/**
 * What is wrong with a recurring window, one message each: an unknown zone, a bad cron, a duration
 * outside 1 minute–7 days, a cron that never matches, or a window still open when it opens again
 * (checked over 400 days from a fixed day, so across both clock changes).
 */
export function validateRecurring(spec: RecurringWindow): string[] {
  const errors: string[] = []
  const zone = knownZone(spec.timeZone)
  if (zone === undefined)
    errors.push(`timeZone: "${spec.timeZone}" is not a known time zone (e.g. Europe/Berlin)`)
  const parsed = parseCron(spec.cron)
  if (!parsed.ok) errors.push(...parsed.errors)
  const minutes = spec.durationMinutes
  if (!Number.isInteger(minutes)) errors.push(`durationMinutes: ${minutes} is not a whole number of minutes`)
  else if (minutes < 1)
    errors.push(`durationMinutes: ${minutes} is too short; a window lasts at least 1 minute`)
  else if (minutes > MAX_DURATION_MINUTES)
    errors.push(`durationMinutes: ${minutes} is longer than 7 days (${MAX_DURATION_MINUTES} minutes)`)
  if (errors.length > 0 || zone === undefined || !parsed.ok) return errors
  if (nextOccurrence(spec, OVERLAP_REFERENCE) === null)
    return [`cron: "${spec.cron}" never matches a date (such as 31 February)`]
  const clash = selfOverlap(compile(spec))
  if (clash) {
    const local = (at: number) => new Date(wallClock(zone, at)).toISOString().slice(0, 16).replace('T', ' ')
    errors.push(
      `durationMinutes: a window of ${minutes} minutes is still open when it opens again ` +
        `(${local(clash[0].start)} and ${local(clash[1].start)} ${zone})`,
    )
  }
  return errors
}

/** Two openings of one window that overlap, or null. Bounded even for `* * * * *`. */
function selfOverlap(window: Compiled): [Occurrence, Occurrence] | null {
  const times = window.schedule.timesOfDay
  const first = OVERLAP_REFERENCE
  for (let i = 1; i < times.length; i++)
    if (((times[i] ?? 0) - (times[i - 1] ?? 0)) * MINUTE < window.duration) {
      // On any day without a clock change two starts this close overlap, so one such day shows it.
      const day = nextMatchingDay(window, first, first + OVERLAP_HORIZON_DAYS * DAY)
      const wall = (day ?? first) + (times[i - 1] ?? 0) * MINUTE
      return [
        occurrenceAt(window, wall),
        occurrenceAt(window, wall + ((times[i] ?? 0) - (times[i - 1] ?? 0)) * MINUTE),
      ]
    }
  // Starts on one day are far enough apart; compare across days, and within days near a clock change.
  let open: Occurrence | null = null
  for (let day = first; day < first + OVERLAP_HORIZON_DAYS * DAY; day += DAY) {
    if (!cronMatchesDay(window.schedule, day)) continue
    const { spread } = offsetRange(window.offsets, day - 2 * DAY, day + window.duration + 3 * DAY)
    const walls = spread === 0 ? [times[0] ?? 0, times[times.length - 1] ?? 0] : times
    const openings = [...new Set(walls)]
      .map((time) => occurrenceAt(window, day + time * MINUTE))
      .sort((a, b) => a.start - b.start)
    for (const opening of openings) {
      if (open && open.end > opening.start && open.start !== opening.start) return [open, opening]
      if (!open || opening.end > open.end) open = opening
    }
  }
  return null
}

function nextMatchingDay(window: Compiled, from: number, to: number): number | undefined {
  for (let day = from; day < to; day += DAY) if (cronMatchesDay(window.schedule, day)) return day
  return undefined
}

/**
 * The first pair of openings of `a` and `b` that overlap within [from, from + horizonDays), or
 * null: two windows of one environment must not. Each window is taken not to overlap itself.
 */
export function windowsOverlap(
  a: FreezeWindow,
  b: FreezeWindow,
  from: number,
  horizonDays: number,
): { a: Occurrence; b: Occurrence } | null {
  const until = from + horizonDays * DAY
  let since = from
  // Each round moves `since` past at least one opening, so the rounds are bounded by the openings.
  for (let round = 0; round < 1_000_000; round++) {
    const [x] = occurrencesBetween(a, since, until, 1)
    const [y] = occurrencesBetween(b, since, until, 1)
    if (!x || !y) return null
    if (x.start < y.end && y.start < x.end) return { a: x, b: y }
    since = x.end <= y.start ? y.start : x.start
  }
  return null
}
