// What a service or environment filter that names nothing gets instead of a bare empty list (issue
// 28 point 6). The filter itself matches whole names, ignoring letter case (account-names.ts, sameName),
// on /logs/, its exports and /api/v1/events alike: it stays an index seek, and `service=api` never
// means billing-api too. When the typed name is no name of the account, the page suggests the names
// that contain it, or are a slip of a key or two away from it.
import type { AccountNames } from './account-names.js'
import { byName, sameName } from './account-names.js'
import type { EventFilter } from './logs-query.js'

/** Suggestions per field at most. */
const MAX_SUGGESTIONS = 5

export interface NameHint {
  field: 'service' | 'environment'
  /** The name as typed. */
  typed: string
  /** Names of the account it may have meant, best first (possibly none). */
  suggestions: string[]
}

/** Edits (insert, delete, replace) from a to b, giving up above `max`. */
function withinEdits(a: string, b: string, max: number): boolean {
  if (Math.abs(a.length - b.length) > max) return false
  let previous = Array.from({ length: b.length + 1 }, (_, i) => i)
  for (let i = 1; i <= a.length; i++) {
    const row = [i]
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      row.push(Math.min((previous[j] ?? 0) + 1, (row[j - 1] ?? 0) + 1, (previous[j - 1] ?? 0) + cost))
    }
    previous = row
  }
  return (previous[b.length] ?? max + 1) <= max
}

/** The names `typed` may have meant: those containing it first, then near misses. */
export function suggestNames(typed: string, names: readonly string[]): string[] {
  const needle = typed.toLowerCase()
  const containing = names.filter((n) => n.toLowerCase().includes(needle)).sort(byName)
  const near = names
    .filter((n) => !containing.includes(n) && withinEdits(n.toLowerCase(), needle, needle.length > 4 ? 2 : 1))
    .sort(byName)
  // Spellings that differ only in case are one name to the filter: one suggestion for them.
  const seen = new Set<string>()
  return [...containing, ...near]
    .filter((n) => !seen.has(n.toLowerCase()) && seen.add(n.toLowerCase()))
    .slice(0, MAX_SUGGESTIONS)
}

/** A hint for each name filter that matches no name of the account (none while the list is cut short). */
export function nameHints(filter: EventFilter, names: AccountNames): NameHint[] {
  const hints: NameHint[] = []
  for (const field of ['service', 'environment'] as const) {
    const typed = filter[field]
    if (!typed || !names.complete[field]) continue
    if (names[field].some((n) => sameName(n, typed))) continue
    hints.push({ field, typed, suggestions: suggestNames(typed, names[field]) })
  }
  return hints
}
