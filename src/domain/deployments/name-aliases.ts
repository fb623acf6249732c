// The mapping step of derivation: names an admin renamed or merged (name_aliases, written by
// src/domain/names/) applied to each event as a run reads it, so deployments are derived under the
// new name while the events keep their original text.
import type { StoredEvent } from './derivation.js'

/**
 * Names an admin renamed or merged (name_aliases; src/domain/names/): by account and name as events
 * carry it, the name deployments are derived under. Null when there are none (the usual case).
 */
export interface NameAliases {
  service: ReadonlyMap<string, string>
  environment: ReadonlyMap<string, string>
}

export interface AliasRow {
  account_id: number
  kind: string
  from_name: string
  to_name: string
}

/** Keys as aliasKey makes them: U+001F cannot occur in a name (see groupIdKey). */
export function aliasKey(accountId: number, name: string): string {
  return `${Number(accountId)}\u001f${name}`
}

export function nameAliases(rows: readonly AliasRow[]): NameAliases | null {
  if (rows.length === 0) return null
  const service = new Map<string, string>()
  const environment = new Map<string, string>()
  for (const r of rows)
    (r.kind === 'service' ? service : environment).set(aliasKey(r.account_id, r.from_name), r.to_name)
  return { service, environment }
}

/**
 * The mapping step: each event's service and environment as deployments know them, in place (the
 * events are the run's own objects). Events themselves keep their original text.
 */
export function applyNameAliases(events: StoredEvent[], aliases: NameAliases | null): void {
  if (aliases === null) return
  for (const e of events) {
    const service = aliases.service.get(aliasKey(e.accountId, e.service))
    if (service !== undefined) e.service = service
    const environment = aliases.environment.get(aliasKey(e.accountId, e.environment))
    if (environment !== undefined) e.environment = environment
  }
}

/** Every name events may carry for a name deployments know: itself and what was renamed into it. */
export function rawNames(
  aliases: NameAliases | null,
  accountId: number,
  kind: 'service' | 'environment',
  name: string,
): string[] {
  const names = [name]
  if (aliases === null) return names
  const prefix = aliasKey(accountId, '')
  for (const [key, to] of aliases[kind])
    if (to === name && key.startsWith(prefix)) names.push(key.slice(prefix.length))
  return names
}
