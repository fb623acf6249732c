// The instant the board is shown at (`?at=`), read from the page's form. Pure.
import type { FieldError } from '../events/event.js'
import { instantOf, readInstant } from '../instants.js'
import { knownZone, zonedToInstant } from '../time-zones.js'

/** The instant the board is asked for (`?at=`), read as the log reads From and To. */
export interface BoardInstant {
  /** The instant to show; null for now (also when the text was refused: the board shows now). */
  at: number | null
  /** The zone a time without zone was read in (the viewer's, sent as `tz`); undefined for UTC. */
  zone?: string
  /** Why the text was refused, to show beside the field. */
  error?: FieldError
}

/**
 * Reads `at` by the one grammar of instants (instants.ts). A time without zone, as the page's
 * datetime-local field sends it, is read in the viewer's zone when the form sent one (`tz`, filled in
 * by the page's script), else in UTC, which the field's label then says. The board cannot know the
 * future, so a later instant is refused rather than quietly shown as now.
 */
export function readBoardInstant(atText: string, tzText: string, now: number): BoardInstant {
  const zone = tzText === '' ? undefined : knownZone(tzText)
  const zoned = zone === undefined ? {} : { zone }
  if (tzText !== '' && zone === undefined) {
    return { at: null, error: { field: 'tz', message: 'tz must be a time zone name such as Europe/Berlin' } }
  }
  if (atText === '') return { at: null, ...zoned }
  const read = readInstant(atText)
  if (read === undefined) {
    return {
      at: null,
      ...zoned,
      error: {
        field: 'at',
        message:
          'Enter a date and time, such as 2026-11-20T14:00, or ISO 8601 with a zone, such as 2026-11-20T14:00:00Z',
      },
    }
  }
  const at = instantOf(read, (wall) => (zone === undefined ? wall : zonedToInstant(zone, wall)))
  if (at > now) {
    return {
      at: null,
      ...zoned,
      error: { field: 'at', message: 'That time is in the future: the board shows the present or the past' },
    }
  }
  return { at, ...zoned }
}
