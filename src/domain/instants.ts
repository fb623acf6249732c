// The one grammar for instants that people and programs send (query parameters, form fields, later
// event fields): ISO 8601 text to milliseconds, documented in docs/API.md ("Instants").
//
// Pure, and depends on nothing: every route and the domain read instants through here, so
// `/services/?at=`, `/api/v1/services?at=`, `/api/v1/events?from=` and `/logs/?from=` accept and
// refuse exactly the same text. A page that reads a time without zone in the viewer's zone does
// that on top (see `wallOf` and events/time-bounds.ts), never by parsing the text itself.

/** A date as written, once it is known to exist on the calendar. */
export interface CalendarDate {
  year: number
  month: number
  day: number
}

/** What one instant's text says, before a zone is chosen for a text that gave none. */
export interface InstantText {
  /** The date and time as written, counted as if they were UTC (milliseconds since 1970). */
  wall: number
  /** Minutes east of UTC the text gave (`Z` is 0); undefined when it gave no zone. */
  offsetMinutes?: number
  /** The last unit written, so an upper bound written to the day or minute can cover all of it. */
  precision: 'day' | 'minute' | 'second' | 'fraction'
}

export const FIRST_YEAR = 1970
export const LAST_YEAR = 9999
/** The largest offset from UTC any zone has used (Kiribati, UTC+14). */
const MAX_OFFSET_HOURS = 14

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/
// date [ ("T" | "t") hh:mm [ :ss [ .fraction ] ] [ zone ] ], zone = Z | ±hh:mm | ±hhmm. No space
// between date and time: in a URL a `+` is a space, and "2026-11-21+10:00" must not become 10:00 UTC.
const INSTANT =
  /^(\d{4}-\d{2}-\d{2})(?:[Tt](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?([Zz]|[+-]\d{2}:?\d{2})?)?$/

/** A real calendar date written YYYY-MM-DD, years 1970–9999 (2026-02-30 is not one). */
export function parseDate(text: string): CalendarDate | undefined {
  const m = DATE.exec(text)
  if (!m) return undefined
  const year = Number(m[1])
  const month = Number(m[2])
  const day = Number(m[3])
  if (year < FIRST_YEAR || year > LAST_YEAR || month < 1 || month > 12 || day < 1) return undefined
  if (day > daysInMonth(year, month)) return undefined
  return { year, month, day }
}

/** Whether `text` is a real calendar date written YYYY-MM-DD. */
export function isDate(text: string): boolean {
  return parseDate(text) !== undefined
}

/** The whole days from one date to another (negative when `to` is earlier). */
export function daysFrom(from: CalendarDate, to: CalendarDate): number {
  return (utcMidnight(to) - utcMidnight(from)) / 86_400_000
}

/**
 * Reads an instant's text by the grammar; undefined when it does not follow it. Hours 00–23,
 * minutes and seconds 00–59 (no 24:00, no leap second), a fraction of 1 to 9 digits cut (not
 * rounded) to milliseconds, offsets up to ±14:00.
 */
export function readInstant(text: string): InstantText | undefined {
  const m = INSTANT.exec(text)
  if (!m) return undefined
  const [, dateText = '', hh, mm, ss, fraction, zone] = m
  const date = parseDate(dateText)
  if (!date) return undefined
  const hour = hh === undefined ? 0 : Number(hh)
  const minute = mm === undefined ? 0 : Number(mm)
  const second = ss === undefined ? 0 : Number(ss)
  if (hour > 23 || minute > 59 || second > 59) return undefined
  const ms = fraction === undefined ? 0 : Number(fraction.slice(0, 3).padEnd(3, '0'))
  const wall = utcMidnight(date) + ((hour * 60 + minute) * 60 + second) * 1000 + ms
  const precision =
    hh === undefined ? 'day' : ss === undefined ? 'minute' : fraction === undefined ? 'second' : 'fraction'
  if (zone === undefined) return { wall, precision }
  if (zone === 'Z' || zone === 'z') return { wall, offsetMinutes: 0, precision }
  const oh = Number(zone.slice(1, 3))
  const om = Number(zone.slice(-2))
  if (oh > MAX_OFFSET_HOURS || om > 59 || (oh === MAX_OFFSET_HOURS && om > 0)) return undefined
  return { wall, offsetMinutes: (zone.startsWith('-') ? -1 : 1) * (oh * 60 + om), precision }
}

/**
 * An instant in milliseconds: the text's own zone when it gives one, and UTC when it does not
 * (a date alone is 00:00 UTC). This is how the API reads every instant.
 */
export function parseInstant(text: string): number | undefined {
  const read = readInstant(text)
  return read === undefined ? undefined : instantOf(read, (wall) => wall)
}

/**
 * The instant a read text names; `zoneless` turns a wall-clock time into an instant for a text
 * that gave no zone (identity for UTC, the viewer's zone on a page that knows it).
 */
export function instantOf(read: InstantText, zoneless: (wall: number) => number): number {
  return read.offsetMinutes === undefined ? zoneless(read.wall) : read.wall - read.offsetMinutes * 60_000
}

/** The length of the unit the text was written to: an upper bound to the day covers the day. */
export function precisionMs(read: InstantText): number {
  return { day: 86_400_000, minute: 60_000, second: 1000, fraction: 1 }[read.precision]
}

function utcMidnight(date: CalendarDate): number {
  return Date.UTC(date.year, date.month - 1, date.day)
}

function daysInMonth(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28
  return [4, 6, 9, 11].includes(month) ? 30 : 31
}
