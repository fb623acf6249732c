// The time grammar of a filter's From and To (and the audit log's): instants.ts reads the text,
// this decides which instant a bound without a zone, or written to the day or minute, stands for.
import { instantOf, precisionMs, readInstant } from '../instants.js'
import { zonedToInstant } from '../time-zones.js'

/**
 * Reads a time bound by the one grammar of instants (instants.ts): a text without a zone (as an
 * HTML datetime-local field sends it) is taken in `zone` (UTC when none). An upper bound without
 * zone, written to the day, minute or second, covers that whole day, minute or second.
 */
export function parseTimeBound(text: string, upper: boolean, zone?: string): number | undefined {
  const read = readInstant(text)
  if (read === undefined) return undefined
  const local = (wall: number) => (zone === undefined ? wall : zonedToInstant(zone, wall))
  if (!upper || read.offsetMinutes !== undefined || read.precision === 'fraction') {
    return instantOf(read, local)
  }
  return local(read.wall + precisionMs(read)) - 1
}
