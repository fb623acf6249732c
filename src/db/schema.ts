// Table interfaces for Kysely: the one description of what the database holds.
import type { Generated, Insertable, Selectable } from 'kysely'
import type { EventStatus, UserRole } from '../text-rules.js'
import type { EVENT_COLUMNS, EVENT_SOURCES, EventColumnName, StoredValue } from './event-columns.js'

export type { EventStatus, UserRole }

/** Milliseconds since the Unix epoch, UTC. Both databases store times this way (BIGINT). */
export type EpochMs = number

export interface AccountsTable {
  id: Generated<number>
  name: string
  created_at: EpochMs
  /** Minutes after which an open deployment counts as stalled. */
  stall_minutes: Generated<number>
  /** The token in badge URLs (SPEC §6.3); null until one is made in Settings. */
  badge_token: string | null
  /** 1: the account's users may sign in with a password; 0: only with single sign-on. */
  password_login: Generated<number>
  /** Events older than this many days are pruned (domain/operations/retention.ts); null keeps them. */
  retention_days: number | null
}

export interface UsersTable {
  id: Generated<number>
  account_id: number
  /** Lower-cased; unique within an account (the same person may belong to several accounts). */
  email: string
  password_hash: string
  role: UserRole
  created_at: EpochMs
  /** 1 while the user still has a password someone else chose (a one-time password). */
  must_change_password: Generated<number>
}

export interface SessionsTable {
  /** SHA-256 (hex) of the token in the session cookie. */
  id: string
  user_id: number
  created_at: EpochMs
  last_seen_at: EpochMs
  expires_at: EpochMs
  /** The result of the last form (notice, new secret) until the next page view, sealed (AES-GCM) with a key from the cookie's token. */
  flash: string | null
  /**
   * The ID token of a single sign-on session, sent back to the provider at logout; null for a
   * session a password opened (what turning password login off ends).
   */
  id_token: Generated<string | null>
}

export interface ApiKeysTable {
  id: Generated<number>
  account_id: number
  name: string
  /** First characters of the key, shown so people can tell keys apart. */
  prefix: string
  /** Hex SHA-256 of the whole key; the plaintext is never stored. */
  digest: string
  created_at: EpochMs
  /** Who created it, as shown in the UI: a user's email, or "cli". */
  created_by: string
  created_by_user_id: number | null
  last_used_at: EpochMs | null
  revoked_at: EpochMs | null
  /** "ingest", "read" or "ingest,read". */
  scopes: Generated<string>
}

export type EventSource = (typeof EVENT_SOURCES)[number]

/** The events table, as event-columns.ts describes it (each column's meaning is told there). */
export type EventsTable = {
  -readonly [K in EventColumnName]: (typeof EVENT_COLUMNS)[K] extends { type: 'serial' }
    ? Generated<number>
    : StoredValue<(typeof EVENT_COLUMNS)[K]>
}

export interface IdempotencyKeysTable {
  account_id: number
  idem_key: string
  /** Null only inside the transaction that claims the key, before its event exists. */
  event_id: number | null
  created_at: EpochMs
}

export interface SettingsTable {
  name: string
  value: string
}

export interface DeploymentsTable {
  /** The id of the event that opened it. */
  id: number
  account_id: number
  service: string
  environment: string
  version: string
  started_at: EpochMs
  finished_at: EpochMs | null
  result: 'succeeded' | 'failed' | null
  instant: number
  finish_event_id: number | null
  rollback: number
  rolled_back: number
  deployer: string | null
  api_key_name: string | null
  /** The commit time the first of its events to carry one gave (lead time from the commit). */
  commit_time: EpochMs | null
  /** Comma-separated event ids in arrival order. */
  event_ids: string
}

export interface DeploymentHeadsTable {
  account_id: number
  service: string
  environment: string
  running_id: number | null
  latest_id: number
}

export interface VersionFirstsTable {
  account_id: number
  service: string
  version: string
  deployment_id: number
  started_at: EpochMs
}

export interface DeploymentsProgressTable {
  id: number
  through: number
  generation: number
}

export interface DeploymentGapsTable {
  from_id: number
  to_id: number
  seen_at: EpochMs
}

export interface EnvironmentSettingsTable {
  account_id: number
  name: string
  position: number
  hidden: Generated<number>
}

export interface ServicesTable {
  account_id: number
  name: string
  team: string | null
  description: string | null
  repository_url: string | null
  runbook_url: string | null
  dashboard_url: string | null
  updated_at: EpochMs
}

export type WebhookFormat = 'json' | 'slack' | 'grafana'

export interface WebhooksTable {
  id: Generated<number>
  account_id: number
  url: string
  format: WebhookFormat
  /** JSON arrays of names; empty means all. */
  statuses: string
  outcomes: string
  environments: string
  services: string
  /** Sealed with a key derived from the app secret (domain/webhooks/secrets.ts). */
  secret: string
  grafana_token: string | null
  /** Events up to this id existed before the webhook and never trigger it. */
  since_event_id: number
  /**
   * The cursor: events up to this id have been matched against the webhook and their deliveries
   * queued (never beyond what deployment derivation has processed). The sender moves it.
   */
  queued_through: Generated<number>
  enabled: Generated<number>
  disabled_at: EpochMs | null
  failing_since: EpochMs | null
  created_by: string
  created_at: EpochMs
}

export type DeliveryKind = 'status' | 'outcome'
export type DeliveryState = 'pending' | 'succeeded' | 'failed'

export interface WebhookDeliveriesTable {
  id: Generated<number>
  webhook_id: number
  account_id: number
  event_id: number
  deployment_id: number | null
  kind: DeliveryKind
  delivery_id: string
  state: DeliveryState
  attempts: Generated<number>
  next_attempt_at: EpochMs
  lease_until: EpochMs | null
  last_status: number | null
  last_error: string | null
  response_head: string | null
  latency_ms: number | null
  remote_id: string | null
  created_at: EpochMs
  first_attempt_at: EpochMs | null
  last_attempt_at: EpochMs | null
  finished_at: EpochMs | null
}

export type AuditActorKind = 'user' | 'key' | 'cli' | 'system' | 'anonymous'

export interface AuditEntriesTable {
  id: Generated<number>
  account_id: number | null
  at: EpochMs
  actor_kind: AuditActorKind
  actor_id: number | null
  actor: string
  address: string | null
  action: string
  target: string | null
  /** A JSON object of what changed; never a secret. */
  details: string
}

/** One link of the tamper-evidence chain (src/domain/chain/). */
export interface ChainLinksTable {
  stream: 'events' | 'audit'
  row_id: number
  digest: string
  link: string
  account_id: number | null
  at: EpochMs | null
}

export interface ChainHeadsTable {
  stream: 'events' | 'audit'
  through: number
  link: string
  updated_at: EpochMs
  hole_from: number | null
  hole_seen_at: EpochMs | null
  hole_writers: string | null
}

/** A user's identity at an OpenID Connect provider (issuer, subject), linked at single sign-on. */
export interface UserIdentitiesTable {
  id: Generated<number>
  user_id: number
  issuer: string
  subject: string
  /** The verified email the provider gave at the last login. */
  email: string
  created_at: EpochMs
  last_login_at: EpochMs
}

/** A single sign-on started at the provider and not yet back (single use, short-lived). */
export interface OidcLoginsTable {
  state_digest: string
  browser_digest: string
  code_verifier: string
  nonce: string
  next: string | null
  created_at: EpochMs
  expires_at: EpochMs
}

/** A service or environment name renamed or merged into another (src/domain/names/). */
export interface NameAliasesTable {
  account_id: number
  kind: 'service' | 'environment'
  from_name: string
  to_name: string
  created_at: EpochMs
}

/** A chained row an admin deleted with its service's history (the audit entry at `audit_at` says so). */
export interface ChainErasuresTable {
  stream: 'events' | 'audit'
  row_id: number
  account_id: number
  audit_at: EpochMs
  reason: string
}

/** An environment (or one service in it) locked by an admin (SPEC §11). */
export interface EnvironmentLocksTable {
  id: Generated<number>
  account_id: number
  environment: string
  /** Null: every service in the environment. */
  service: string | null
  reason: string
  /** Null: until someone unlocks it. */
  ends_at: EpochMs | null
  created_by: string
  created_at: EpochMs
}

/** A freeze window: recurring (cron, duration, zone) or one-off (starts_at, ends_at). */
export interface FreezeWindowsTable {
  id: Generated<number>
  account_id: number
  environment: string
  reason: string
  cron: string | null
  duration_minutes: number | null
  time_zone: string | null
  starts_at: EpochMs | null
  ends_at: EpochMs | null
  created_by: string
  created_at: EpochMs
}

/** A version of a service marked bad (SPEC §11). */
export interface BadVersionsTable {
  account_id: number
  service: string
  version: string
  reason: string
  created_by: string
  created_at: EpochMs
}

/** "Deploying to `environment` requires success in `after_environment` at least min_minutes before." */
export interface PromotionRulesTable {
  account_id: number
  environment: string
  after_environment: string
  min_minutes: number
  /** 1: the version must also not be marked bad. */
  require_good: number
  created_by: string
  created_at: EpochMs
}

/** A deployment marked as the cause of an incident, and the one that fixed it (DORA figures). */
export interface DeploymentIncidentsTable {
  account_id: number
  deployment_id: number
  link: string | null
  note: string | null
  fixed_by: number | null
  created_by: string
  created_at: EpochMs
}

export interface DB {
  accounts: AccountsTable
  users: UsersTable
  api_keys: ApiKeysTable
  events: EventsTable
  idempotency_keys: IdempotencyKeysTable
  settings: SettingsTable
  sessions: SessionsTable
  deployments: DeploymentsTable
  deployment_heads: DeploymentHeadsTable
  version_firsts: VersionFirstsTable
  deployments_progress: DeploymentsProgressTable
  deployment_gaps: DeploymentGapsTable
  environment_settings: EnvironmentSettingsTable
  services: ServicesTable
  webhooks: WebhooksTable
  webhook_deliveries: WebhookDeliveriesTable
  audit_entries: AuditEntriesTable
  name_aliases: NameAliasesTable
  chain_erasures: ChainErasuresTable
  environment_locks: EnvironmentLocksTable
  freeze_windows: FreezeWindowsTable
  bad_versions: BadVersionsTable
  promotion_rules: PromotionRulesTable
  deployment_incidents: DeploymentIncidentsTable
  chain_links: ChainLinksTable
  chain_heads: ChainHeadsTable
  user_identities: UserIdentitiesTable
  oidc_logins: OidcLoginsTable
}

export type Account = Selectable<AccountsTable>
export type User = Selectable<UsersTable>
export type ApiKeyRow = Selectable<ApiKeysTable>
export type EventRow = Selectable<EventsTable>
export type NewEvent = Insertable<EventsTable>
export type DeploymentRow = Selectable<DeploymentsTable>
export type WebhookRow = Selectable<WebhooksTable>
export type DeliveryRow = Selectable<WebhookDeliveriesTable>
export type AuditEntryRow = Selectable<AuditEntriesTable>
