// Whether one event matches an event filter, as the SQL of query-plan.ts (planEventQuery) selects it:
// the live stream applies it to each new event so that a filtered page is told only of events it
// would list. Keep the two in step: a change to how a filter field matches belongs in both.
import type { EventRow } from '../../db/schema.js'
import { sameName } from './account-names.js'
import type { EventFilter } from './logs-query.js'

export type MatchedEvent = Pick<EventRow, 'service' | 'environment' | 'status' | 'version' | 'received_at'>

/** True when no filter is set: every event matches. */
export function filterIsEmpty(filter: EventFilter): boolean {
  return Object.values(filter).every((v) => v === undefined)
}

export function eventMatches(filter: EventFilter, event: MatchedEvent): boolean {
  // Names: the whole name, ignoring letter case (namesLike in account-names.ts).
  if (filter.service !== undefined && !sameName(event.service, filter.service)) return false
  if (filter.environment !== undefined && !sameName(event.environment, filter.environment)) return false
  if (filter.status !== undefined && event.status !== filter.status) return false
  // Version: text it contains, ignoring letter case (versionMatches in version-search.ts).
  if (filter.version !== undefined && !event.version.toLowerCase().includes(filter.version.toLowerCase())) {
    return false
  }
  const at = Number(event.received_at)
  if (filter.from !== undefined && at < filter.from) return false
  if (filter.to !== undefined && at > filter.to) return false
  return true
}
