// An event's own times (SPEC §1.2 "Event time"): `occurred_at`, when it happened, and `commit_time`,
// when the change it ships was committed. Both are read by the one grammar for instants
// (instants.ts): ISO 8601 with a zone, or a date-time without one read as UTC. Ingest and
// `shiplog import` check them here, against the same bounds.
import { parseInstant } from '../instants.js'

/** How far past the server's clock an event time may lie: clocks of senders drift. */
export const FUTURE_SLACK_MS = 5 * 60_000
export const DAY_MS = 86_400_000
/** SHIPLOG_MAX_EVENT_AGE_DAYS when unset: ten years of history may be backfilled. */
export const DEFAULT_MAX_EVENT_AGE_DAYS = 3650

/** The window an event time must fall in, relative to `now` (the server's clock at arrival). */
export interface EventTimeBounds {
  /** How far into the past an event time may lie, in milliseconds. */
  maxAgeMs: number
}

export function boundsOfDays(days: number): EventTimeBounds {
  return { maxAgeMs: days * DAY_MS }
}

export type TimeCheck = { value: number | null; error?: string }

/**
 * Reads one optional event time. Absent (undefined, null or empty) is null; otherwise the text must
 * follow the grammar and lie within `bounds` of `now`. `error` completes "<field> …".
 */
export function checkEventTime(raw: unknown, now: number, bounds: EventTimeBounds): TimeCheck {
  if (raw === undefined || raw === null) return { value: null }
  if (Array.isArray(raw))
    return { value: null, error: 'must be a single string, not a list or a repeated field' }
  if (typeof raw !== 'string') return { value: null, error: 'must be a string (ISO 8601)' }
  const text = raw.trim()
  if (text === '') return { value: null }
  const at = parseInstant(text)
  if (at === undefined) {
    return {
      value: null,
      error: `must be an ISO 8601 time such as 2026-11-21T22:40:00Z (a time without zone is read as UTC), got "${text.slice(0, 40)}"`,
    }
  }
  if (at > now + FUTURE_SLACK_MS) {
    return { value: null, error: 'must not be more than 5 minutes in the future' }
  }
  if (at < now - bounds.maxAgeMs) {
    const days = Math.round(bounds.maxAgeMs / DAY_MS)
    return {
      value: null,
      error: `must not be more than ${days} days in the past (SHIPLOG_MAX_EVENT_AGE_DAYS)`,
    }
  }
  return { value: at }
}
