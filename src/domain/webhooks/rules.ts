// What a webhook is sent and how: which events trigger it, the delivery rows a top-up queues, how
// far its cursor may go, the signature, the retry schedule and the three payload formats. Pure
// functions over plain values.
import { createHmac, randomUUID } from 'node:crypto'
import type { DeliveryKind, DeploymentRow, EventStatus, WebhookFormat } from '../../db/schema.js'

export const STATUSES: readonly EventStatus[] = ['Deploying', 'Deployed', 'Failed']
export const OUTCOMES = ['succeeded', 'failed'] as const
export type Outcome = (typeof OUTCOMES)[number]
export const FORMATS: readonly WebhookFormat[] = ['json', 'slack', 'grafana']

/** Deliveries are retried for this long after their first attempt, then given up. */
export const RETRY_WINDOW_MS = 24 * 60 * 60 * 1000
/** A webhook whose deliveries have all failed this long is disabled. */
export const DISABLE_AFTER_MS = 24 * 60 * 60 * 1000
const MAX_RETRY_DELAY_MS = 60 * 60 * 1000

/**
 * A webhook is topped up while fewer than this many of its deliveries wait for their first attempt:
 * a slow receiver leaves its cursor behind rather than rows in the queue.
 */
export const QUEUE_WINDOW = 32

/** What a top-up needs of a webhook to decide whether an event triggers it. */
export interface WebhookTrigger {
  id: number
  accountId: number
  statuses: readonly string[]
  outcomes: readonly string[]
  environments: readonly string[]
  services: readonly string[]
  sinceEventId: number
}

/** The trigger columns of a webhooks row, as both databases return them. */
export interface TriggerColumns {
  id: number
  account_id: number
  statuses: string
  outcomes: string
  environments: string
  services: string
  since_event_id: number
}

export const TRIGGER_COLUMN_LIST =
  'id, account_id, statuses, outcomes, environments, services, since_event_id'

function names(json: string): string[] {
  const value: unknown = JSON.parse(json)
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : []
}

export function toTrigger(row: TriggerColumns): WebhookTrigger {
  return {
    id: Number(row.id),
    accountId: Number(row.account_id),
    statuses: names(row.statuses),
    outcomes: names(row.outcomes),
    environments: names(row.environments),
    services: names(row.services),
    sinceEventId: Number(row.since_event_id),
  }
}

/** The event fields deciding a trigger. */
export interface TriggeringEvent {
  id: number
  accountId: number
  service: string
  environment: string
  status: EventStatus
}

export interface PlannedDelivery {
  webhook_id: number
  account_id: number
  event_id: number
  deployment_id: number | null
  kind: DeliveryKind
  delivery_id: string
  next_attempt_at: number
  created_at: number
}

/**
 * The statuses of the events that can trigger a webhook: those it is sent for, and the end events
 * of the outcomes it is sent for (every Deployed or Failed event ends a deployment, with that
 * outcome). Events of other statuses never trigger it, so a top-up need not read them.
 */
export function candidateStatuses(w: WebhookTrigger): EventStatus[] {
  return STATUSES.filter(
    (s) =>
      w.statuses.includes(s) ||
      (s === 'Deployed' && w.outcomes.includes('succeeded')) ||
      (s === 'Failed' && w.outcomes.includes('failed')),
  )
}

/**
 * How far a webhook's cursor may go: up to the events derivation has processed, and short of the
 * first gap it still waits on (an id handed out on PostgreSQL whose event has not committed yet:
 * once it does, it is derived late and must still be matched).
 */
export function cursorBound(through: number, firstGap: number | null): number {
  return firstGap === null ? through : Math.min(through, firstGap - 1)
}

/**
 * Where the cursor stands after a top-up that read `read` events (in id order) of the `limit` it
 * asked for, below `bound`: past the last one read when the limit cut the read short (more may
 * match beyond it), else at the bound (nothing else up to it matches).
 */
export function nextCursor(
  cursor: number,
  bound: number,
  read: readonly { id: number }[],
  limit: number,
): number {
  const last = read.at(-1)
  const next = read.length >= limit && last ? last.id : bound
  return Math.max(cursor, next)
}

/**
 * The deliveries a top-up queues for the events it read: for each event, a `status` delivery to
 * each webhook its status triggers, and an `outcome` delivery to each webhook the outcome of the
 * deployment it ended triggers. `deployments` must hold the deployment each event belongs to (the
 * one an event ended names it as its finishing event).
 */
export function plannedDeliveries(
  batch: readonly TriggeringEvent[],
  deployments: readonly DeploymentRow[],
  webhooks: readonly WebhookTrigger[],
  now: number,
): PlannedDelivery[] {
  if (webhooks.length === 0) return []
  const accounts = new Set(webhooks.map((w) => w.accountId))
  const relevant = batch.filter((e) => accounts.has(e.accountId))
  if (relevant.length === 0) return []
  const ended = new Map<number, DeploymentRow>()
  const containing = new Map<number, number>()
  const wanted = new Set(relevant.map((e) => e.id))
  for (const d of deployments) {
    if (!accounts.has(Number(d.account_id))) continue
    if (d.finish_event_id !== null && d.result !== null) ended.set(Number(d.finish_event_id), d)
    for (const id of d.event_ids.split(',')) {
      const n = Number(id)
      if (wanted.has(n)) containing.set(n, Number(d.id))
    }
  }
  const planned: PlannedDelivery[] = []
  for (const event of relevant) {
    for (const w of webhooks) {
      if (w.accountId !== event.accountId || event.id <= w.sinceEventId) continue
      if (w.environments.length > 0 && !w.environments.includes(event.environment)) continue
      if (w.services.length > 0 && !w.services.includes(event.service)) continue
      const base = {
        webhook_id: w.id,
        account_id: event.accountId,
        event_id: event.id,
        delivery_id: randomUUID(),
        next_attempt_at: now,
        created_at: now,
      }
      if (w.statuses.includes(event.status)) {
        planned.push({ ...base, deployment_id: containing.get(event.id) ?? null, kind: 'status' })
      }
      const d = ended.get(event.id)
      if (d?.result && w.outcomes.includes(d.result)) {
        planned.push({ ...base, delivery_id: randomUUID(), deployment_id: Number(d.id), kind: 'outcome' })
      }
    }
  }
  return planned
}

/** `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`. */
export function signatureHeader(secret: string, body: string, nowMs: number): string {
  const t = Math.floor(nowMs / 1000)
  const v1 = createHmac('sha256', secret).update(`${t}.${body}`).digest('hex')
  return `t=${t},v1=${v1}`
}

/**
 * The wait before the next attempt: exponential backoff with full jitter (a random wait between
 * zero and the cap), or null once the retry window since the first attempt is over.
 */
export function nextAttemptDelay(
  attempts: number,
  firstAttemptAt: number,
  now: number,
  baseMs: number,
  random: () => number = Math.random,
): number | null {
  if (now - firstAttemptAt >= RETRY_WINDOW_MS) return null
  const cap = Math.min(MAX_RETRY_DELAY_MS, baseMs * 2 ** Math.min(attempts, 30))
  const delay = Math.floor(random() * cap)
  return Math.min(delay, firstAttemptAt + RETRY_WINDOW_MS - now)
}

/** The event as payloads show it. */
export interface PayloadEvent {
  id: number
  service: string
  environment: string
  version: string
  status: EventStatus
  receivedAt: string
  deployer: string | null
  url: string | null
  commit: string | null
  description: string | null
  /** The guardrails it broke when it was recorded (SPEC §11), in lock, freeze, bad_version, promotion order. */
  guardrails: string[]
  /** Why the sender recorded it anyway (`shiplog-deploy --force --reason`), or null. */
  overrideReason: string | null
}

export interface PayloadDeployment {
  id: number
  service: string
  environment: string
  version: string
  startedAt: string
  finishedAt: string | null
  result: Outcome | null
  durationSeconds: number | null
  rollback: boolean
}

export interface PayloadInput {
  deliveryId: string
  kind: DeliveryKind
  event: PayloadEvent
  deployment: PayloadDeployment | null
  /** A link to the service page, when SHIPLOG_PUBLIC_URL is set. */
  serviceUrl: string | null
}

/** The `json` format (documented in the README). */
export function jsonPayload(input: PayloadInput): Record<string, unknown> {
  return {
    type: input.kind === 'outcome' ? 'deployment.finished' : 'event',
    deliveryId: input.deliveryId,
    event: input.event,
    deployment: input.kind === 'outcome' ? input.deployment : null,
    serviceUrl: input.serviceUrl,
  }
}

function durationText(seconds: number): string {
  if (seconds < 60) return `${seconds}s`
  const m = Math.floor(seconds / 60)
  return m < 60 ? `${m}m ${seconds % 60}s` : `${Math.floor(m / 60)}h ${m % 60}m`
}

/** A broken guardrail as the messages put it: "App1 deployed 1.0.3 to Prod during a freeze". */
const GUARDRAIL_WORDS: Readonly<Record<string, string>> = {
  lock: 'while locked',
  freeze: 'during a freeze',
  bad_version: 'though marked bad',
  promotion: 'ahead of its promotion rule',
}

/** What the messages add for the guardrails an event broke and its override: '' when neither. */
function guardrailText(event: PayloadEvent): string {
  const broke = event.guardrails.map((g) => GUARDRAIL_WORDS[g] ?? g).join(', ')
  const override = event.overrideReason === null ? '' : `override: ${event.overrideReason}`
  return [broke, override ? `(${override})` : ''].filter((t) => t !== '').join(' ')
}

/** Slack's `<url|text>` link syntax needs &, < and > escaped. */
function slackEscape(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
}

/** An incoming-webhook message: a `text` fallback and one attachment coloured by outcome. */
export function slackPayload(input: PayloadInput): Record<string, unknown> {
  const { event, deployment } = input
  const outcome = input.kind === 'outcome' ? deployment?.result : null
  const what =
    outcome === 'succeeded'
      ? 'deployed'
      : outcome === 'failed'
        ? 'failed to deploy'
        : event.status === 'Deploying'
          ? 'is deploying'
          : event.status === 'Deployed'
            ? 'deployed'
            : 'failed to deploy'
  const color =
    outcome === 'succeeded' || (!outcome && event.status === 'Deployed')
      ? 'good'
      : outcome === 'failed' || event.status === 'Failed'
        ? 'danger'
        : '#439FE0'
  const guarded = guardrailText(event)
  const text = `${event.service} ${what} ${event.version} to ${event.environment}${guarded ? ` ${guarded}` : ''}`
  const fields = [
    { title: 'Service', value: slackEscape(event.service), short: true },
    { title: 'Environment', value: slackEscape(event.environment), short: true },
    { title: 'Version', value: slackEscape(event.version), short: true },
  ]
  if (input.kind === 'outcome' && deployment?.durationSeconds != null) {
    fields.push({ title: 'Duration', value: durationText(deployment.durationSeconds), short: true })
  }
  if (event.guardrails.length > 0) {
    fields.push({ title: 'Guardrails', value: event.guardrails.join(', '), short: true })
  }
  if (event.overrideReason !== null) {
    fields.push({ title: 'Override', value: slackEscape(event.overrideReason), short: false })
  }
  const attachment: Record<string, unknown> = {
    fallback: slackEscape(text),
    color,
    title: slackEscape(text),
    fields,
    ts: Math.floor(Date.parse(event.receivedAt) / 1000),
  }
  if (input.serviceUrl) attachment.title_link = input.serviceUrl
  return { text: slackEscape(text), attachments: [attachment] }
}

/** Tags of a Grafana annotation. */
export function grafanaTags(input: PayloadInput): string[] {
  const tags = [
    'shiplog',
    'deployment',
    `service:${input.event.service}`,
    `environment:${input.event.environment}`,
  ]
  if (input.kind === 'outcome' && input.deployment?.result) tags.push(`outcome:${input.deployment.result}`)
  for (const g of input.event.guardrails) tags.push(`guardrail:${g}`)
  if (input.event.overrideReason !== null) tags.push('override')
  return tags
}

/** Grafana renders an annotation's text as HTML: event values go in as text, never as markup. */
function htmlEscape(text: string): string {
  return text
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;')
}

function grafanaText(input: PayloadInput): string {
  const { event, deployment } = input
  const end = input.kind === 'outcome' && deployment?.result ? ` (${deployment.result})` : ''
  const link = input.serviceUrl ? ` <a href="${htmlEscape(input.serviceUrl)}">Shiplog</a>` : ''
  const guarded = guardrailText(event)
  return `${htmlEscape(event.service)} ${htmlEscape(event.version)} to ${htmlEscape(event.environment)}${end}${guarded ? ` ${htmlEscape(guarded)}` : ''}${link}`
}

/**
 * Grafana's annotations API: a point when a deployment starts (POST /api/annotations); when it
 * ends, the point becomes a region (PATCH /api/annotations/<id> with timeEnd), or a region is
 * posted whole if the start was never annotated.
 */
export function grafanaRequest(
  input: PayloadInput,
  startAnnotationId: string | null,
): { method: 'POST' | 'PATCH'; path: string; body: Record<string, unknown> } {
  const tags = grafanaTags(input)
  const text = grafanaText(input)
  const d = input.deployment
  if (input.kind === 'outcome' && d) {
    const time = Date.parse(d.startedAt)
    // Never before its start: an end received "earlier" means two instances' clocks disagree.
    const timeEnd = Math.max(
      time,
      d.finishedAt ? Date.parse(d.finishedAt) : Date.parse(input.event.receivedAt),
    )
    if (startAnnotationId !== null) {
      return {
        method: 'PATCH',
        path: `/api/annotations/${encodeURIComponent(startAnnotationId)}`,
        body: { time, timeEnd, tags, text },
      }
    }
    return { method: 'POST', path: '/api/annotations', body: { time, timeEnd, tags, text } }
  }
  return {
    method: 'POST',
    path: '/api/annotations',
    body: { time: Date.parse(input.event.receivedAt), tags, text },
  }
}
