// Prometheus metrics: the instruments (one registry per app), the hooks that feed them and GET /metrics.
import { createHash, timingSafeEqual } from 'node:crypto'
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify'
import { Counter, Gauge, Histogram, Registry } from 'prom-client'
import type { Database } from '../db/connect.js'
import type { EventSource, EventStatus } from '../db/schema.js'
import type { CatchUpResult } from '../domain/deployments/store.js'
import type { RecordOutcome } from '../domain/events/store.js'
import type { TaskRunner } from '../domain/tasks.js'
import { BACKLOG_COUNT_CAP, totalBacklog } from '../domain/webhooks/cursor.js'
import { countDeploymentsByOutcome, DEPLOYMENT_OUTCOMES, type DeploymentOutcome } from './metrics-counts.js'
import { processMetrics } from './metrics-process.js'
import { HttpProblem, methodNotAllowed, sendProblem } from './problem.js'

/** How long the deployments-by-outcome figures are reused between scrapes (one grouped query each). */
export const DEPLOYMENT_COUNTS_TTL_MS = 30_000

/** The route label of requests that matched no route: one value, whatever the path was. */
export const UNMATCHED_ROUTE = 'unmatched'

const SOURCES: readonly EventSource[] = ['put-get', 'put-post', 'deploy']
const STATUSES: readonly EventStatus[] = ['Deploying', 'Deployed', 'Failed']
// Node's parser accepts some thirty methods; the label keeps the ones routes use and folds the rest.
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'])

/**
 * What became of one webhook delivery attempt: `delivered` (a 2xx answer), `failed` (no or a bad
 * answer; it will be retried), `abandoned` (retries given up: 24 h passed or the webhook was
 * disabled), `refused` (the target resolved to an address the SSRF guard forbids).
 */
export const WEBHOOK_OUTCOMES = ['delivered', 'failed', 'abandoned', 'refused'] as const
export type WebhookOutcome = (typeof WEBHOOK_OUTCOMES)[number]

/** Routes whose responses stay open (server-sent events): counted, but left out of the latency histogram. */
const LONG_LIVED_ROUTES = new Set(['/api/v1/stream'])

/** The app's instruments. Other parts feed theirs through the methods below. */
export class Metrics {
  readonly registry = new Registry()
  readonly #requests: Counter<'route' | 'method' | 'status_code'>
  readonly #duration: Histogram<'route' | 'method'>
  readonly #events: Counter<'source' | 'status'>
  readonly #repeats: Counter<'result'>
  readonly #batches: Histogram
  readonly #derived: Counter
  readonly #webhooks: Counter<'outcome'>
  readonly #collectFailures: Counter<'collector'>
  readonly #rateLimited: Counter<'route'>
  readonly #auditDropped: Counter<'action'>
  #webhookQueueDepth: (() => Promise<number>) | null = null
  #streamClients: (() => number) | null = null
  #deploymentCounts: { at: number; counts: Promise<Record<DeploymentOutcome, number>> } | null = null
  /** How long the last deployment count took: a slow one is reused for longer (see below). */
  #deploymentCountMs = 0

  constructor(
    private readonly database: Database,
    tasks: TaskRunner,
    private readonly now: () => number = Date.now,
  ) {
    const registers = [this.registry]
    this.#requests = new Counter({
      name: 'shiplog_http_requests_total',
      help: `HTTP requests answered, by route pattern (${UNMATCHED_ROUTE} for no route), method and status code.`,
      labelNames: ['route', 'method', 'status_code'],
      registers,
    })
    this.#duration = new Histogram({
      name: 'shiplog_http_request_duration_seconds',
      help: 'Time from receiving a request to answering it, by route pattern and method.',
      labelNames: ['route', 'method'],
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    })
    this.#events = new Counter({
      name: 'shiplog_events_recorded_total',
      help: 'Events stored, by request form (put-get, put-post, deploy) and status.',
      labelNames: ['source', 'status'],
      registers,
    })
    for (const source of SOURCES) for (const status of STATUSES) this.#events.inc({ source, status }, 0)
    this.#repeats = new Counter({
      name: 'shiplog_events_idempotent_repeats_total',
      help: 'Requests whose Idempotency-Key was already used: replayed (same values, nothing stored) or refused (different values).',
      labelNames: ['result'],
      registers,
    })
    for (const result of ['replayed', 'refused']) this.#repeats.inc({ result }, 0)
    this.#batches = new Histogram({
      name: 'shiplog_event_commit_batch_size_events',
      help: 'Requests written per event transaction (group commit: one fsync for the whole batch).',
      buckets: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000],
      registers,
    })
    this.#derived = new Counter({
      name: 'shiplog_deployment_events_derived_total',
      help: 'Events this process derived into deployments.',
      registers,
    })
    const self = this
    this.#collectFailures = new Counter({
      name: 'shiplog_metrics_collect_failures_total',
      help: 'Scrapes where a figure read at scrape time could not be read (its last value was kept).',
      labelNames: ['collector'],
      registers,
    })
    new Gauge({
      name: 'shiplog_deployments',
      help: `Deployments in the database by outcome (all accounts; refreshed at most every ${DEPLOYMENT_COUNTS_TTL_MS / 1000} s).`,
      labelNames: ['outcome'],
      registers,
      // A database that is away must not fail the whole scrape: the last figures stay.
      async collect() {
        const counts = await self.#deploymentsByOutcome().catch(() => {
          self.#collectFailures.inc({ collector: 'deployments' })
          return null
        })
        if (counts) for (const outcome of DEPLOYMENT_OUTCOMES) this.set({ outcome }, counts[outcome])
      },
    })
    if (this.database.dialect === 'postgres') {
      // SQLite has one connection and no pool: nothing to show there.
      const pool = this.database.pool
      new Gauge({
        name: 'shiplog_db_pool_connections',
        help: 'PostgreSQL pool connections: open (total) and idle among them.',
        labelNames: ['state'],
        registers,
        collect() {
          this.set({ state: 'total' }, pool.totalCount)
          this.set({ state: 'idle' }, pool.idleCount)
        },
      })
      new Gauge({
        name: 'shiplog_db_pool_waiting_queries',
        help: 'Queries waiting for a free PostgreSQL pool connection.',
        registers,
        collect() {
          this.set(pool.waitingCount)
        },
      })
      new Gauge({
        name: 'shiplog_db_pool_max_connections',
        help: 'The size limit of the PostgreSQL pool.',
        registers,
        collect() {
          this.set(pool.options.max ?? 10)
        },
      })
    }
    // The task runner keeps its own counts; they are read at scrape time.
    new Counter({
      name: 'shiplog_background_task_runs_total',
      help: 'Runs of each background task (failed ones included).',
      labelNames: ['task'],
      registers,
      collect() {
        this.reset()
        for (const [task, c] of Object.entries(tasks.counters())) this.inc({ task }, c.runs)
      },
    })
    new Counter({
      name: 'shiplog_background_task_failures_total',
      help: 'Failed runs of each background task.',
      labelNames: ['task'],
      registers,
      collect() {
        this.reset()
        for (const [task, c] of Object.entries(tasks.counters())) this.inc({ task }, c.failures)
      },
    })
    // Refusals over a limit write nothing else (no audit entry for a sign-in attempt over the
    // limit), so this is where a flood shows.
    this.#rateLimited = new Counter({
      name: 'shiplog_rate_limited_requests_total',
      help: 'Requests refused with 429 over a rate limit (API keys, sign-in, single sign-on), by route pattern.',
      labelNames: ['route'],
      registers,
    })
    this.#auditDropped = new Counter({
      name: 'shiplog_audit_entries_dropped_total',
      help:
        'Audit entries of no account (sign-ins for unknown addresses, broken single sign-on answers) not written ' +
        'because the installation-wide budget for them was spent, by action.',
      labelNames: ['action'],
      registers,
    })
    this.#webhooks = new Counter({
      name: 'shiplog_webhook_deliveries_total',
      help: 'Webhook delivery attempts by outcome: delivered, failed (will retry), abandoned, refused (SSRF guard).',
      labelNames: ['outcome'],
      registers,
    })
    for (const outcome of WEBHOOK_OUTCOMES) this.#webhooks.inc({ outcome }, 0)
    new Gauge({
      name: 'shiplog_webhook_queue_depth_deliveries',
      help:
        'Webhook deliveries queued and waiting to be sent, first time or again (all instances: read from the ' +
        'database). Events a webhook has not queued yet are shiplog_webhook_backlog_events.',
      registers,
      async collect() {
        const read = self.#webhookQueueDepth
        if (!read) return this.set(0)
        // As above: a failing read keeps the last figure rather than failing the scrape.
        const depth = await read().catch(() => {
          self.#collectFailures.inc({ collector: 'webhook_queue_depth' })
          return null
        })
        if (depth !== null) this.set(depth)
      },
    })
    new Gauge({
      name: 'shiplog_webhook_backlog_events',
      help:
        'Events that will trigger an enabled webhook but are not queued as deliveries yet (its cursor lags a ' +
        `slow receiver), summed over webhooks, each counted up to ${BACKLOG_COUNT_CAP}.`,
      registers,
      async collect() {
        const backlog = await totalBacklog(self.database).catch(() => {
          self.#collectFailures.inc({ collector: 'webhook_backlog' })
          return null
        })
        if (backlog !== null) this.set(backlog)
      },
    })
    new Gauge({
      name: 'shiplog_stream_clients',
      help: 'Server-sent event clients connected to this process (GET /api/v1/stream).',
      registers,
      collect() {
        const clients = self.#streamClients
        this.set(clients ? clients() : 0)
      },
    })
  }

  /** Counts every answered request by its route pattern: bounded label values, whatever the path. */
  instrument(app: FastifyInstance): void {
    app.addHook('onResponse', (request, reply, done) => {
      const route = request.routeOptions.url ?? UNMATCHED_ROUTE
      const method = METHODS.has(request.method) ? request.method : 'OTHER'
      this.#requests.inc({ route, method, status_code: String(reply.statusCode) })
      if (reply.statusCode === 429) this.#rateLimited.inc({ route })
      // A live stream lasts as long as its client stays: its "latency" would only fill the top bucket.
      if (!LONG_LIVED_ROUTES.has(route)) this.#duration.observe({ route, method }, reply.elapsedTime / 1000)
      done()
    })
  }

  /** EventWriter.onCommit: one call per committed transaction. */
  eventsCommitted(outcomes: readonly RecordOutcome[]): void {
    this.#batches.observe(outcomes.length)
    for (const { kind, event } of outcomes) {
      if (kind === 'stored') this.#events.inc({ source: event.source, status: event.status })
      else this.#repeats.inc({ result: kind === 'replayed' ? 'replayed' : 'refused' })
    }
  }

  /** DeploymentSync.onDerived: one call per run that derived something. */
  deploymentsDerived(result: CatchUpResult): void {
    this.#derived.inc(result.events)
  }

  /** For the UI: an audit entry of no account that the budget left unwritten. */
  auditEntryDropped(action: string): void {
    this.#auditDropped.inc({ action })
  }

  /** For the webhook worker: one call per delivery attempt. */
  webhookDelivered(outcome: WebhookOutcome): void {
    this.#webhooks.inc({ outcome })
  }

  /** For the webhook part: how many deliveries wait, asked at each scrape (keep it one cheap query). */
  onWebhookQueueDepth(read: () => Promise<number>): void {
    this.#webhookQueueDepth = read
  }

  /** For the live-updates part: how many stream clients this process holds, asked at each scrape. */
  onStreamClients(read: () => number): void {
    this.#streamClients = read
  }

  /** The scrape: this app's metrics, then the process's. */
  async scrape(): Promise<string> {
    const [own, process] = await Promise.all([this.registry.metrics(), processMetrics().metrics()])
    return `${own}\n${process}`
  }

  get contentType(): string {
    return this.registry.contentType
  }

  /**
   * The deployment counts, reused for DEPLOYMENT_COUNTS_TTL_MS: a scrape every few seconds must not
   * count a million rows each time. When counting takes long (SQLite runs it on the event loop), the
   * figures are reused for 100 times as long as it took, so it never takes more than about 1 % of
   * the server's time. Concurrent scrapes share the query in flight; a failed one is not kept, so
   * the next scrape asks again.
   */
  #deploymentsByOutcome(): Promise<Record<DeploymentOutcome, number>> {
    const now = this.now()
    const cached = this.#deploymentCounts
    const ttl = Math.max(DEPLOYMENT_COUNTS_TTL_MS, 100 * this.#deploymentCountMs)
    if (cached && now - cached.at < ttl) return cached.counts
    const started = performance.now()
    const counts = countDeploymentsByOutcome(this.database, now).then((result) => {
      this.#deploymentCountMs = performance.now() - started
      return result
    })
    const entry = { at: now, counts }
    this.#deploymentCounts = entry
    counts.catch(() => {
      if (this.#deploymentCounts === entry) this.#deploymentCounts = null
    })
    return counts
  }
}

/** Compares without revealing, through timing, how much of the token matched (or its length). */
function sameToken(given: string, expected: string): boolean {
  const digest = (text: string) => createHash('sha256').update(text).digest()
  return timingSafeEqual(digest(given), digest(expected))
}

const metricsTokenRequired = () =>
  new HttpProblem(
    401,
    'metrics-token-required',
    'Metrics token required',
    'Send the metrics token as Authorization: Bearer <SHIPLOG_METRICS_TOKEN>.',
    { headers: { 'www-authenticate': 'Bearer realm="shiplog-metrics"' } },
  )

/**
 * GET /metrics (SPEC §8): open unless SHIPLOG_METRICS_TOKEN is set, then only with that bearer
 * token. Outside the API key budget, outside OpenAPI (not part of the API), and logged at warn:
 * a scrape every 15 s would otherwise write two info lines each time.
 */
export const metricsRoute: FastifyPluginAsync<{ metrics: Metrics; token: string | null }> = async (
  app,
  { metrics, token },
) => {
  methodNotAllowed(app, '/metrics', ['GET', 'HEAD'])
  app.get(
    '/metrics',
    { logLevel: 'warn', schema: { hide: true } },
    async (request: FastifyRequest, reply: FastifyReply) => {
      if (token !== null) {
        const match = /^Bearer +(\S+) *$/i.exec(request.headers.authorization ?? '')
        if (!match?.[1] || !sameToken(match[1], token)) return sendProblem(reply, metricsTokenRequired())
      }
      const text = await metrics.scrape()
      return reply.header('cache-control', 'no-store').type(metrics.contentType).send(text)
    },
  )
}
