// The audit log (SPEC §10): one entry for each security-relevant action, written by the caller in
// the same transaction as the change it records, so an entry exists exactly when the change does.
import { userInfo } from 'node:os'
import type { Kysely } from 'kysely'
import type { AuditActorKind, DB } from '../../db/schema.js'

/** Who did it: a signed-in user, an API key, the operator's command line, Shiplog itself, or nobody known. */
export interface AuditActor {
  readonly kind: AuditActorKind
  /** The user's or key's id; null for the command line, the system and anonymous callers. */
  readonly id: number | null
  /** What a reader recognises: the user's email, the key's name, `cli (user@host)`, `shiplog`. */
  readonly name: string
}

/**
 * The actions the log knows, in dotted `subject.verb` form. A reader filters on these, so they are
 * stable: add new ones, never rename.
 */
export const AUDIT_ACTIONS = [
  'login.succeeded',
  'login.failed',
  'logout',
  'password.changed',
  'key.created',
  'key.revoked',
  'user.added',
  'user.removed',
  'user.role_changed',
  'settings.changed',
  'webhook.created',
  'webhook.deleted',
  'webhook.changed',
  'export.downloaded',
  'webhook.enabled',
  'webhook.redelivered',
  'webhook.disabled',
  'service.renamed',
  'environment.renamed',
  'service.history_deleted',
  'environment.locked',
  'environment.unlocked',
  'freeze.added',
  'freeze.removed',
  'version.marked_bad',
  'version.marked_good',
  'promotion_rule.set',
  'promotion_rule.removed',
  'guardrail.overridden',
  'deployment.incident_marked',
  'deployment.incident_unmarked',
] as const
export type AuditAction = (typeof AUDIT_ACTIONS)[number]

export function isAuditAction(value: string): value is AuditAction {
  return (AUDIT_ACTIONS as readonly string[]).includes(value)
}

/** A value in `details`: plain data only. Secrets never go here (keys, passwords, tokens, hashes). */
export type AuditDetail = string | number | boolean | null | readonly string[]

/** Who makes a change and from where: what an audited domain command takes from its caller. */
export interface AuditSource {
  readonly actor: AuditActor
  /** The client's address as the server saw it (request.ip), null from the command line. */
  readonly address: string | null
}

/**
 * Who a new key or webhook is credited to in its own row (created_by): a user by email and id,
 * anyone else by the actor's kind (`cli` from the command line).
 */
export function createdByOf(actor: AuditActor): { createdBy: string; createdByUserId: number | null } {
  return actor.kind === 'user'
    ? { createdBy: actor.name, createdByUserId: actor.id }
    : { createdBy: actor.kind, createdByUserId: null }
}

export interface AuditEntryInput {
  /** The account the action belongs to; null when there is none (a failed login for no account). */
  readonly accountId: number | null
  readonly actor: AuditActor
  /** The client's address as the server saw it (request.ip), null from the command line. */
  readonly address: string | null
  readonly action: AuditAction
  /** What it was done to, in words: the key's name, the user's email, the webhook's origin. */
  readonly target?: string | null
  readonly details?: Readonly<Record<string, AuditDetail>>
  /** Defaults to now; tests and imports may pin it. */
  readonly at?: number
}

/** Field names that must never appear in details, whatever a caller passes. */
const SECRET_NAMES = /pass|secret|token|digest|hash|key$|^key|cookie|session|authorization/i

/**
 * Appends one entry. Pass the transaction that makes the change so the two commit together; pass
 * the plain handle only for actions that change nothing else (a failed login, a download).
 */
export async function recordAudit(db: Kysely<DB>, entry: AuditEntryInput): Promise<void> {
  const details: Record<string, AuditDetail> = {}
  for (const [name, value] of Object.entries(entry.details ?? {})) {
    if (SECRET_NAMES.test(name)) throw new Error(`audit details must not hold a secret (field "${name}")`)
    details[name] = value
  }
  await db
    .insertInto('audit_entries')
    .values({
      account_id: entry.accountId,
      at: entry.at ?? Date.now(),
      actor_kind: entry.actor.kind,
      actor_id: entry.actor.id,
      actor: entry.actor.name.slice(0, 320),
      address: entry.address,
      action: entry.action,
      target: entry.target === undefined || entry.target === null ? null : entry.target.slice(0, 500),
      details: JSON.stringify(details),
    })
    .execute()
}

/**
 * The actor for commands run by an operator on the server's machine: the operating-system user
 * (the one who ran sudo, under sudo), read from the system, since USER and LOGNAME are often unset
 * in containers and under supervisors; those two only when the system has no name for the uid.
 */
export function cliActor(): AuditActor {
  return { kind: 'cli', id: null, name: `cli (${operatingSystemUser()})` }
}

/** cliActor() as an audited domain command takes it: the command line has no address. */
export function cliSource(): AuditSource {
  return { actor: cliActor(), address: null }
}

function operatingSystemUser(): string {
  const sudo = process.env.SUDO_USER
  if (sudo) return sudo
  try {
    const { username } = userInfo()
    if (username) return username
  } catch {
    // A uid with no entry in the user database (a container run with --user 1234): no name.
  }
  return process.env.USER || process.env.LOGNAME || `uid ${process.getuid?.() ?? 'unknown'}`
}

export const SYSTEM_ACTOR: AuditActor = { kind: 'system', id: null, name: 'shiplog' }

/** How the log names an API key: its name and the first characters shown in Settings, never more. */
export function keyLabel(key: { name: string; prefix: string }): string {
  return `${key.name} (${key.prefix}…)`
}

/** How the log names a webhook: the origin of its URL (the path may hold a token, so it is left out). */
export function webhookLabel(url: string): string {
  try {
    return new URL(url).origin
  } catch {
    return '(unreadable URL)'
  }
}

/** What a webhook sends and for what, for its audit entries: no URL path, no secret, no token. */
export function webhookDetails(w: {
  format: string
  statuses: string
  outcomes: string
  environments: string
  services: string
}): Record<string, AuditDetail> {
  const list = (json: string): string[] => JSON.parse(json) as string[]
  return {
    format: w.format,
    statuses: list(w.statuses),
    outcomes: list(w.outcomes),
    environments: list(w.environments),
    services: list(w.services),
  }
}
