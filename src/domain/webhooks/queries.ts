// Webhooks and their delivery log in the database: create, list, delete, re-enable, redeliver.
import { randomBytes } from 'node:crypto'
import { type Kysely, sql } from 'kysely'
import type { DB, DeliveryRow, EventStatus, WebhookFormat, WebhookRow } from '../../db/schema.js'
import { textProblem } from '../../text-rules.js'
import { FORMATS, OUTCOMES, STATUSES } from './rules.js'
import { sealSecret } from './secrets.js'
import { checkWebhookUrl } from './ssrf.js'

/** Input a person or script got wrong: the message says what, and nothing was changed. */
export class WebhookInputError extends Error {
  override readonly name = 'WebhookInputError'
}

export interface NewWebhook {
  accountId: number
  url: string
  format: string
  statuses: readonly string[]
  outcomes: readonly string[]
  environments: readonly string[]
  services: readonly string[]
  grafanaToken: string | null
  createdBy: string
}

const MAX_NAMES = 50
const MAX_NAME_LENGTH = 200

function cleanNames(label: string, values: readonly string[]): string[] {
  const out = [...new Set(values.map((v) => v.trim()).filter((v) => v !== ''))]
  if (out.length > MAX_NAMES) throw new WebhookInputError(`at most ${MAX_NAMES} ${label} may be given`)
  for (const v of out) {
    const problem =
      v.length > MAX_NAME_LENGTH ? `must be at most ${MAX_NAME_LENGTH} characters` : textProblem(v)
    if (problem) throw new WebhookInputError(`a ${label.replace(/s$/, '')} name ${problem}`)
  }
  return out
}

/** Validates and stores a webhook; returns it with its signing secret, which is shown only now. */
export async function createWebhook(
  db: Kysely<DB>,
  appSecret: string,
  input: NewWebhook,
  options: { allowPrivate: boolean; now?: number },
): Promise<{ webhook: WebhookRow; secret: string }> {
  const url = input.url.trim()
  const textual = textProblem(url)
  if (textual) throw new WebhookInputError(`URL refused: the URL ${textual}`)
  const urlProblem = checkWebhookUrl(url, options.allowPrivate)
  if (urlProblem) throw new WebhookInputError(`URL refused: ${urlProblem}`)
  if (!FORMATS.includes(input.format as WebhookFormat)) {
    throw new WebhookInputError(`format must be one of ${FORMATS.join(', ')}`)
  }
  const format = input.format as WebhookFormat
  let statuses = cleanNames('statuses', input.statuses)
  let outcomes = cleanNames('outcomes', input.outcomes)
  for (const s of statuses) {
    if (!STATUSES.includes(s as EventStatus))
      throw new WebhookInputError(`status must be one of ${STATUSES.join(', ')}`)
  }
  for (const o of outcomes) {
    if (!(OUTCOMES as readonly string[]).includes(o))
      throw new WebhookInputError(`outcome must be one of ${OUTCOMES.join(', ')}`)
  }
  const grafanaToken = input.grafanaToken?.trim() || null
  if (format === 'grafana') {
    if (!grafanaToken) throw new WebhookInputError('a Grafana webhook needs a Grafana service account token')
    if (grafanaToken.length > 1000 || /\s/.test(grafanaToken))
      throw new WebhookInputError('the Grafana token is not valid')
    // A point when a deployment starts, turned into a region when it ends.
    if (statuses.length === 0 && outcomes.length === 0) {
      statuses = ['Deploying']
      outcomes = [...OUTCOMES]
    }
  } else if (grafanaToken) {
    throw new WebhookInputError('a Grafana token is only for the grafana format')
  }
  if (statuses.length === 0 && outcomes.length === 0) {
    throw new WebhookInputError('choose at least one status or deployment outcome that triggers the webhook')
  }
  const environments = cleanNames('environments', input.environments)
  const services = cleanNames('services', input.services)
  const secret = `whsec_${randomBytes(24).toString('base64url')}`
  const newest = await db.selectFrom('events').select('id').orderBy('id', 'desc').limit(1).executeTakeFirst()
  const webhook = await db
    .insertInto('webhooks')
    .values({
      account_id: input.accountId,
      url,
      format,
      statuses: JSON.stringify(statuses),
      outcomes: JSON.stringify(outcomes),
      environments: JSON.stringify(environments),
      services: JSON.stringify(services),
      secret: sealSecret(appSecret, secret),
      grafana_token: grafanaToken ? sealSecret(appSecret, grafanaToken) : null,
      since_event_id: Number(newest?.id ?? 0),
      // Matched from the next event on: history is never replayed to a new webhook.
      queued_through: Number(newest?.id ?? 0),
      created_by: input.createdBy,
      created_at: options.now ?? Date.now(),
    })
    .returningAll()
    .executeTakeFirstOrThrow()
  return { webhook: normalizeWebhook(webhook), secret }
}

function normalizeWebhook(w: WebhookRow): WebhookRow {
  return {
    ...w,
    id: Number(w.id),
    account_id: Number(w.account_id),
    since_event_id: Number(w.since_event_id),
    queued_through: Number(w.queued_through),
    enabled: Number(w.enabled),
    disabled_at: w.disabled_at === null ? null : Number(w.disabled_at),
    failing_since: w.failing_since === null ? null : Number(w.failing_since),
    created_at: Number(w.created_at),
  }
}

export async function listWebhooks(db: Kysely<DB>, accountId: number): Promise<WebhookRow[]> {
  const rows = await db
    .selectFrom('webhooks')
    .selectAll()
    .where('account_id', '=', accountId)
    .orderBy('id')
    .execute()
  return rows.map(normalizeWebhook)
}

export async function getWebhook(
  db: Kysely<DB>,
  accountId: number,
  id: number,
): Promise<WebhookRow | undefined> {
  const row = await db
    .selectFrom('webhooks')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .executeTakeFirst()
  return row && normalizeWebhook(row)
}

/** Deletes a webhook and its delivery log; false when the account has no such webhook. */
export async function deleteWebhook(db: Kysely<DB>, accountId: number, id: number): Promise<boolean> {
  const result = await db
    .deleteFrom('webhooks')
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .executeTakeFirst()
  return Number(result.numDeletedRows) > 0
}

/**
 * Turns a disabled webhook back on; its failed deliveries stay failed (redeliver them one by one).
 * Like a new webhook, it is sent the events that arrive from now on: its cursor skips those that
 * arrived while it was off (an enabled webhook keeps its cursor).
 */
export async function enableWebhook(db: Kysely<DB>, accountId: number, id: number): Promise<boolean> {
  const newest = await db.selectFrom('events').select('id').orderBy('id', 'desc').limit(1).executeTakeFirst()
  const now = Number(newest?.id ?? 0)
  const result = await db
    .updateTable('webhooks')
    .set({
      enabled: 1,
      disabled_at: null,
      failing_since: null,
      // SET reads the row as it was: only a webhook that was off moves its cursor.
      queued_through: sql<number>`case when enabled = 0 and queued_through < ${now} then ${now} else queued_through end`,
    })
    .where('account_id', '=', accountId)
    .where('id', '=', id)
    .executeTakeFirst()
  return Number(result.numUpdatedRows) > 0
}

export const DELIVERY_PAGE_SIZE = 50

function normalizeDelivery(d: DeliveryRow): DeliveryRow {
  const n = (v: number | null) => (v === null ? null : Number(v))
  return {
    ...d,
    id: Number(d.id),
    webhook_id: Number(d.webhook_id),
    account_id: Number(d.account_id),
    event_id: Number(d.event_id),
    deployment_id: n(d.deployment_id),
    attempts: Number(d.attempts),
    next_attempt_at: Number(d.next_attempt_at),
    lease_until: n(d.lease_until),
    last_status: n(d.last_status),
    latency_ms: n(d.latency_ms),
    created_at: Number(d.created_at),
    first_attempt_at: n(d.first_attempt_at),
    last_attempt_at: n(d.last_attempt_at),
    finished_at: n(d.finished_at),
  }
}

/** A delivery as its log shows it: with what its event said, unless retention removed the event. */
export type DeliveryLogRow = DeliveryRow & {
  event: { service: string; environment: string; version: string; status: EventStatus } | null
}

/** A page of a webhook's deliveries, newest first; `before` is the last id of the previous page. */
export async function deliveryLog(
  db: Kysely<DB>,
  accountId: number,
  webhookId: number,
  before: number | null,
): Promise<{ deliveries: DeliveryLogRow[]; next: number | null }> {
  let query = db
    .selectFrom('webhook_deliveries as d')
    .leftJoin('events as e', (join) =>
      join.onRef('e.id', '=', 'd.event_id').onRef('e.account_id', '=', 'd.account_id'),
    )
    .selectAll('d')
    .select([
      'e.service as e_service',
      'e.environment as e_environment',
      'e.version as e_version',
      'e.status as e_status',
    ])
    .where('d.account_id', '=', accountId)
    .where('d.webhook_id', '=', webhookId)
  if (before !== null) query = query.where('d.id', '<', before)
  const rows = (
    await query
      .orderBy('d.id', 'desc')
      .limit(DELIVERY_PAGE_SIZE + 1)
      .execute()
  ).map(
    ({ e_service, e_environment, e_version, e_status, ...d }): DeliveryLogRow => ({
      ...normalizeDelivery(d),
      event:
        e_service === null || e_environment === null || e_version === null || e_status === null
          ? null
          : { service: e_service, environment: e_environment, version: e_version, status: e_status },
    }),
  )
  const more = rows.length > DELIVERY_PAGE_SIZE
  const deliveries = rows.slice(0, DELIVERY_PAGE_SIZE)
  return { deliveries, next: more ? (deliveries.at(-1)?.id ?? null) : null }
}

/**
 * Queues a delivery again, now, with the same Shiplog-Delivery id (the receiver can tell it is
 * the same one) and a fresh 24-hour retry window. False when the account has no such delivery.
 */
export async function redeliver(
  db: Kysely<DB>,
  accountId: number,
  deliveryId: number,
  now = Date.now(),
): Promise<boolean> {
  const result = await db
    .updateTable('webhook_deliveries')
    .set({
      state: 'pending',
      next_attempt_at: now,
      lease_until: null,
      first_attempt_at: null,
      finished_at: null,
    })
    .where('account_id', '=', accountId)
    .where('id', '=', deliveryId)
    .executeTakeFirst()
  return Number(result.numUpdatedRows) > 0
}
