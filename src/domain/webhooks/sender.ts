// Sends webhook deliveries in the background: tops up each webhook's queue from its cursor
// (cursor.ts), claims due deliveries under a lease (SKIP LOCKED on PostgreSQL, so instances never
// send the same one), sends a few at a time, records each attempt, retries with backoff, and
// disables a webhook that has only failed for a day.
import { request as httpRequest, type IncomingMessage } from 'node:http'
import { request as httpsRequest } from 'node:https'
import { sql } from 'kysely'
import type { Database } from '../../db/connect.js'
import type { DeliveryRow, WebhookRow } from '../../db/schema.js'
import { recordAudit, SYSTEM_ACTOR, webhookLabel } from '../audit/log.js'
import { WEBHOOK_INTERVAL_MS } from '../pacing.js'
import type { Task } from '../tasks.js'
import { topUpWebhooks } from './cursor.js'
import { payloadInput } from './payload-input.js'
import {
  DISABLE_AFTER_MS,
  grafanaRequest,
  jsonPayload,
  nextAttemptDelay,
  signatureHeader,
  slackPayload,
} from './rules.js'
import { openSecret, UNSEALABLE, webhookOpens } from './secrets.js'
import { checkWebhookUrl, guardedLookup } from './ssrf.js'

/** The most of an answer that is read; the rest is cut off. */
export const MAX_RESPONSE_BYTES = 64 * 1024
/** What the delivery log keeps of an answer. */
export const RESPONSE_HEAD_BYTES = 512
const CONCURRENCY = 4
const CLAIM_BATCH = 16
const MIN_LEASE_MS = 30_000

export interface SenderOptions {
  appSecret: string
  allowPrivate: boolean
  timeoutMs: number
  retryBaseMs: number
  publicUrl: string | null
  version: string
  intervalMs?: number
  /**
   * Told the outcome of each attempt (metrics): delivered, failed (to be retried), abandoned (given
   * up) or refused by the address guard.
   */
  onAttempt?: (outcome: 'delivered' | 'failed' | 'abandoned' | 'refused') => void
  /** Where a webhook that starts failing, recovers or is disabled is said, once each time. */
  log?: SenderLog
}

/** The part of the app's logger the sender uses. */
export interface SenderLog {
  warn(fields: Record<string, unknown>, message: string): void
  info(fields: Record<string, unknown>, message: string): void
}

/**
 * Where a webhook points, for logs: scheme, host and port only. The path of a Slack incoming
 * webhook, and any query string, is as good as a password.
 */
function targetForLog(url: string): string {
  try {
    return new URL(url).origin
  } catch {
    return '(unreadable URL)'
  }
}

interface Attempt {
  status: number | null
  body: Buffer
  error: string | null
  latencyMs: number
}

/** One HTTP request under the guard: no redirects followed, bounded time and answer size. */
export function sendRequest(
  target: URL,
  method: string,
  headers: Record<string, string>,
  body: string,
  options: { timeoutMs: number; allowPrivate: boolean },
): Promise<Attempt> {
  const started = performance.now()
  const refused = checkWebhookUrl(target.href, options.allowPrivate)
  if (refused)
    return Promise.resolve({
      status: null,
      body: Buffer.alloc(0),
      error: `refused: ${refused}`,
      latencyMs: 0,
    })
  return new Promise((resolve) => {
    let done = false
    const finish = (status: number | null, chunks: Buffer[], error: string | null) => {
      if (done) return
      done = true
      clearTimeout(timer)
      resolve({
        status,
        body: Buffer.concat(chunks),
        error,
        latencyMs: Math.round(performance.now() - started),
      })
    }
    const request = (target.protocol === 'https:' ? httpsRequest : httpRequest)(target, {
      method,
      headers: { ...headers, 'content-length': String(Buffer.byteLength(body)), connection: 'close' },
      lookup: guardedLookup(options.allowPrivate),
      agent: false,
    })
    const timer = setTimeout(() => {
      request.destroy(new Error(`no answer within ${options.timeoutMs} ms`))
    }, options.timeoutMs)
    request.on('error', (err) => finish(null, [], err.message))
    request.on('response', (response: IncomingMessage) => {
      const chunks: Buffer[] = []
      let size = 0
      response.on('data', (chunk: Buffer) => {
        if (size >= MAX_RESPONSE_BYTES) return
        chunks.push(chunk)
        size += chunk.length
        if (size >= MAX_RESPONSE_BYTES) {
          finish(response.statusCode ?? null, chunks, null)
          response.destroy()
          request.destroy()
        }
      })
      response.on('end', () => finish(response.statusCode ?? null, chunks, null))
      response.on('error', (err) => finish(response.statusCode ?? null, chunks, err.message))
      response.on('close', () => finish(response.statusCode ?? null, chunks, null))
    })
    request.end(body)
  })
}

export class WebhookSender {
  /** Webhooks this process has said are failing: said once, until one of their deliveries succeeds. */
  readonly #failing = new Set<number>()

  constructor(
    private readonly database: Database,
    private readonly options: SenderOptions,
  ) {}

  task(): Task {
    const interval = this.options.intervalMs ?? WEBHOOK_INTERVAL_MS
    return {
      name: 'webhook-delivery',
      intervalMs: interval,
      run: async () => ((await this.runOnce()) >= CLAIM_BATCH ? 0 : interval),
    }
  }

  /**
   * Deliveries queued and waiting to be sent (for the first time or again), by every instance; the
   * partial index of pending ones answers it. Events a webhook has not queued yet (its cursor lags
   * a slow receiver) are not deliveries yet: cursor.ts's totalBacklog counts those.
   */
  async queueDepth(): Promise<number> {
    const row = await this.database.db
      .selectFrom('webhook_deliveries')
      .select((eb) => eb.fn.countAll<number | string>().as('n'))
      .where('state', '=', 'pending')
      .executeTakeFirstOrThrow()
    return Number(row.n)
  }

  /** Queues what each webhook has room for, then claims and sends the deliveries due now; returns how many it claimed. */
  async runOnce(now = Date.now()): Promise<number> {
    await topUpWebhooks(this.database, { now })
    const claimed = await this.#claim(now)
    const queue = [...claimed]
    const webhooks = new Map<number, Promise<WebhookRow | undefined>>()
    const webhookOf = (id: number) => {
      let w = webhooks.get(id)
      if (!w) {
        w = this.database.db.selectFrom('webhooks').selectAll().where('id', '=', id).executeTakeFirst()
        webhooks.set(id, w)
      }
      return w
    }
    const worker = async () => {
      for (let d = queue.shift(); d; d = queue.shift()) {
        const webhook = await webhookOf(Number(d.webhook_id))
        if (webhook) await this.#deliver(webhook, d)
      }
    }
    await Promise.all(Array.from({ length: Math.min(CONCURRENCY, claimed.length) }, worker))
    return claimed.length
  }

  async #claim(now: number): Promise<DeliveryRow[]> {
    // Long enough for every claimed delivery to time out in turn, and one more timeout (at least
    // MIN_LEASE_MS) to record them even on a busy machine; a sender that died holding the lease
    // frees them once it is over.
    const leaseUntil =
      now + Math.max(MIN_LEASE_MS, this.options.timeoutMs * (Math.ceil(CLAIM_BATCH / CONCURRENCY) + 1))
    const lock = this.database.dialect === 'postgres' ? sql`for update of d skip locked` : sql``
    const { rows } = await sql<DeliveryRow>`update webhook_deliveries set lease_until = ${leaseUntil}
      where id in (select d.id from webhook_deliveries d join webhooks w on w.id = d.webhook_id
        where d.state = 'pending' and d.next_attempt_at <= ${now} and (d.lease_until is null or d.lease_until < ${now})
          and w.enabled = 1
        order by d.next_attempt_at, d.id limit ${CLAIM_BATCH} ${lock})
      returning *`.execute(this.database.db)
    return rows.sort((a, b) => Number(a.id) - Number(b.id))
  }

  async #deliver(webhook: WebhookRow, d: DeliveryRow): Promise<void> {
    const db = this.database.db
    const input = await payloadInput(this.database.db, d, this.options.publicUrl)
    if (!input) {
      await this.#record(
        webhook,
        d,
        { status: null, body: Buffer.alloc(0), error: 'the event no longer exists', latencyMs: 0 },
        true,
      )
      return
    }
    // Sealed under another secret (data moved without it): a failed attempt that says so plainly,
    // retried like any other, so the webhook shows as failing rather than queued for ever.
    if (!webhookOpens(this.options.appSecret, webhook)) {
      const error = `not sent: ${UNSEALABLE}`
      return this.#record(webhook, d, { status: null, body: Buffer.alloc(0), error, latencyMs: 0 }, false)
    }
    let method = 'POST'
    let target = new URL(webhook.url)
    let payload: Record<string, unknown>
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'user-agent': `Shiplog/${this.options.version}`,
      'shiplog-delivery': d.delivery_id,
      'shiplog-event': String(d.event_id),
    }
    if (webhook.format === 'grafana') {
      let start: string | null = null
      if (d.kind === 'outcome' && d.deployment_id !== null) {
        const starts = await db
          .selectFrom('webhook_deliveries')
          .select(['state', 'remote_id'])
          .where('webhook_id', '=', Number(webhook.id))
          .where('deployment_id', '=', Number(d.deployment_id))
          .where('kind', '=', 'status')
          .where('id', '<', Number(d.id))
          .execute()
        // Wait for the start's point to be posted, so that it becomes the region.
        if (starts.some((s) => s.state === 'pending')) {
          await db
            .updateTable('webhook_deliveries')
            .set({ lease_until: null, next_attempt_at: Date.now() + 1000 })
            .where('id', '=', Number(d.id))
            .execute()
          return
        }
        start = starts.find((s) => s.remote_id !== null)?.remote_id ?? null
      }
      const g = grafanaRequest(input, start)
      method = g.method
      payload = g.body
      const base = webhook.url.replace(/\/+$/, '')
      target = new URL(`${base}${g.path}`)
      if (webhook.grafana_token) {
        headers.authorization = `Bearer ${openSecret(this.options.appSecret, webhook.grafana_token)}`
      }
    } else {
      payload = webhook.format === 'slack' ? slackPayload(input) : jsonPayload(input)
    }
    const body = JSON.stringify(payload)
    headers['shiplog-signature'] = signatureHeader(
      openSecret(this.options.appSecret, webhook.secret),
      body,
      Date.now(),
    )
    const attempt = await sendRequest(target, method, headers, body, {
      timeoutMs: this.options.timeoutMs,
      allowPrivate: this.options.allowPrivate,
    })
    await this.#record(webhook, d, attempt, false)
  }

  async #record(webhook: WebhookRow, d: DeliveryRow, attempt: Attempt, giveUp: boolean): Promise<void> {
    const db = this.database.db
    const now = Date.now()
    const ok = attempt.status !== null && attempt.status >= 200 && attempt.status < 300
    const attempts = Number(d.attempts) + 1
    const firstAttemptAt = d.first_attempt_at === null ? now : Number(d.first_attempt_at)
    const head = attempt.body.subarray(0, RESPONSE_HEAD_BYTES).toString('utf8')
    const error =
      attempt.error ??
      (ok
        ? null
        : attempt.status !== null && attempt.status >= 300 && attempt.status < 400
          ? `redirect (${attempt.status}) not followed`
          : `HTTP ${attempt.status}`)
    let remoteId: string | null = d.remote_id
    if (ok && webhook.format === 'grafana') {
      try {
        const parsed = JSON.parse(attempt.body.toString('utf8')) as { id?: unknown }
        if (typeof parsed.id === 'number' || typeof parsed.id === 'string') remoteId = String(parsed.id)
      } catch {
        // An answer that is not JSON names no annotation: the end posts a region of its own.
      }
    }
    const delay =
      ok || giveUp ? null : nextAttemptDelay(attempts, firstAttemptAt, now, this.options.retryBaseMs)
    const state = ok ? 'succeeded' : delay === null ? 'failed' : 'pending'
    this.options.onAttempt?.(
      ok
        ? 'delivered'
        : error?.startsWith('refused:')
          ? 'refused'
          : state === 'failed'
            ? 'abandoned'
            : 'failed',
    )
    await db
      .updateTable('webhook_deliveries')
      .set({
        state,
        attempts,
        next_attempt_at: delay === null ? now : now + delay,
        lease_until: null,
        last_status: attempt.status,
        last_error: error,
        response_head: head,
        latency_ms: attempt.latencyMs,
        remote_id: remoteId,
        first_attempt_at: firstAttemptAt,
        last_attempt_at: now,
        finished_at: state === 'pending' ? null : now,
      })
      .where('id', '=', Number(d.id))
      .execute()
    const id = Number(webhook.id)
    const fields = { webhook: id, account: Number(webhook.account_id), target: targetForLog(webhook.url) }
    if (ok) {
      await db.updateTable('webhooks').set({ failing_since: null }).where('id', '=', id).execute()
      if (this.#failing.delete(id)) this.options.log?.info(fields, `webhook ${id} delivers again`)
      return
    }
    if (!this.#failing.has(id)) {
      this.#failing.add(id)
      this.options.log?.warn(
        { ...fields, error },
        `webhook ${id} is failing (${error}); deliveries are retried with backoff for up to 24 hours, ` +
          'and Settings → Webhooks lists every attempt',
      )
    }
    await db
      .updateTable('webhooks')
      .set({ failing_since: sql<number>`coalesce(failing_since, ${now})` })
      .where('id', '=', Number(webhook.id))
      .execute()
    // Disabled and audited together: the audit log says who turned a webhook off, Shiplog included.
    const disabled = await db.transaction().execute(async (trx) => {
      const done = await trx
        .updateTable('webhooks')
        .set({ enabled: 0, disabled_at: now })
        .where('id', '=', id)
        .where('enabled', '=', 1)
        .where('failing_since', '<=', now - DISABLE_AFTER_MS)
        .executeTakeFirst()
      if (Number(done.numUpdatedRows) === 0) return false
      await recordAudit(trx, {
        accountId: Number(webhook.account_id),
        actor: SYSTEM_ACTOR,
        address: null,
        action: 'webhook.disabled',
        target: webhookLabel(webhook.url),
        details: { id, reason: 'every delivery failed for 24 hours', error },
        at: now,
      })
      return true
    })
    if (disabled) {
      this.options.log?.warn(
        fields,
        `webhook ${id} is disabled: its deliveries failed for 24 hours (re-enable it in Settings → Webhooks)`,
      )
    }
  }
}
