// The audit entry of a guardrail override (SPEC §11): an event sent with `override_reason` is
// recorded with an entry `guardrail.overridden` in the same transaction (store.ts writes the row it
// describes here with the batch's own statements, on either database).
import type { AuditAction, AuditDetail } from '../audit/log.js'
import type { EventInput } from './event.js'

const ACTION: AuditAction = 'guardrail.overridden'

/** The audit_entries columns the row names, in the order overrideAuditValues gives them. */
export const OVERRIDE_AUDIT_COLUMNS = [
  'account_id',
  'at',
  'actor_kind',
  'actor_id',
  'actor',
  'address',
  'action',
  'target',
  'details',
] as const

/** What the entry is made of: a pending event (store.ts's PendingEvent) as stored. */
export interface OverriddenEvent {
  readonly accountId: number
  readonly apiKeyId: number | null
  readonly apiKeyName: string | null
  readonly clientAddress?: string | null
  readonly receivedAt: number
  readonly guardrails?: readonly string[]
  readonly input: Pick<EventInput, 'service' | 'environment' | 'version' | 'overrideReason'>
}

/** Whether storing `item` writes an override entry beside it. */
export function isOverride(item: OverriddenEvent): boolean {
  return item.input.overrideReason !== undefined && item.input.overrideReason !== null
}

/**
 * The entry's values, in OVERRIDE_AUDIT_COLUMNS order: by the key that sent it (as recordAudit
 * names a key: kind, id and name), to "<service> <version> in <environment>", with the reason,
 * the guardrails the event broke (none when the check was asked but nothing applied by the time it
 * arrived) and the event's id.
 */
export function overrideAuditValues(item: OverriddenEvent, eventId: number): (string | number | null)[] {
  const { input } = item
  const details: Record<string, AuditDetail> = {
    reason: input.overrideReason ?? null,
    guardrails: [...(item.guardrails ?? [])],
    event_id: eventId,
  }
  return [
    item.accountId,
    item.receivedAt,
    item.apiKeyId === null ? 'anonymous' : 'key',
    item.apiKeyId,
    (item.apiKeyName ?? 'anonymous').slice(0, 320),
    item.clientAddress ?? null,
    ACTION,
    `${input.service} ${input.version} in ${input.environment}`.slice(0, 500),
    JSON.stringify(details),
  ]
}
