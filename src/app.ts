// Builds the Fastify application from its plugins and routes; server.ts listens, tests inject.

import { readFileSync } from 'node:fs'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify'
import type { Config } from './config.js'
import type { Database } from './db/connect.js'
import { announceDerived } from './db/notices.js'
import { resolveAppSecret } from './domain/app-secret.js'
import { chainTask } from './domain/chain/chainer.js'
import { isDatabaseUnavailable, outageLogFor } from './domain/database-errors.js'
import { DEPLOYMENTS_TASK, DeploymentSync } from './domain/deployments/sync.js'
import { eventStoreFor } from './domain/events/store.js'
import { versionIndexTask } from './domain/events/version-index.js'
import { EventWriter } from './domain/events/writer.js'
import { ApiKeyVerifier, KeyUsageRecorder, keyUsageTask } from './domain/keys.js'
import { CredentialWatch } from './domain/live/credentials.js'
import { LiveHub } from './domain/live/hub.js'
import { retentionTask } from './domain/operations/retention.js'
import { LIVE_DERIVE_DELAY_MS } from './domain/pacing.js'
import { deleteExpiredSessions } from './domain/sessions.js'
import { TaskRunner } from './domain/tasks.js'
import { WebhookSender } from './domain/webhooks/sender.js'
import { getRoutes } from './http/api/get-routes.js'
import { healthRoutes } from './http/api/health.js'
import { INGEST_PATHS, ingestRoutes } from './http/api/ingest.js'
import { openApiRoute, registerOpenApi } from './http/api/openapi.js'
import { readRoutes } from './http/api/read-routes.js'
import { STREAM_PATH, streamRoutes } from './http/api/stream-routes.js'
import { registerCompression } from './http/compression.js'
import { loggerOptions, RequestLog } from './http/logging.js'
import { Metrics, metricsRoute } from './http/metrics.js'
import { answerClientError, answerFrameworkError, problems, registerProblemHandlers } from './http/problem.js'
import { MemoryRateLimitStore, type RateLimitStore, RedisRateLimitStore } from './http/rate-limit.js'
import { API_SECURITY_HEADERS, SECURITY_HEADERS } from './http/security-headers.js'
import { guardText } from './http/text-guard.js'
import { BADGE_PATH } from './http/ui/badge-routes.js'
import { uiRoutes } from './http/ui/plugin.js'
import { PACKAGE_JSON } from './paths.js'
import type { AppResources } from './resources.js'

export interface BuildOptions {
  config: Config
  database: Database
  /**
   * What the app uses but does not open (see src/resources.ts; server.ts opens and closes them).
   * Without it: the secret from the configuration (or the database), counters in memory, and no
   * revocation channel.
   */
  resources?: AppResources
  /** Pino options or false; tests pass false or a stream. */
  logger?: boolean | Record<string, unknown>
  /** A logger already made (server.ts makes it before opening anything); wins over `logger`. */
  loggerInstance?: FastifyBaseLogger
}

export type App = FastifyInstance

/** The version the OpenAPI document states: the package's. */
function packageVersion(): string {
  return (JSON.parse(readFileSync(PACKAGE_JSON, 'utf8')) as { version: string }).version
}

export async function buildApp(options: BuildOptions): Promise<App> {
  const { config, database } = options
  const resources = options.resources ?? {
    secret: await resolveAppSecret(config, database.db),
    redis: null,
    revocations: null,
  }
  const app = Fastify({
    ...(options.loggerInstance
      ? { loggerInstance: options.loggerInstance }
      : { logger: options.logger === undefined ? loggerOptions(config.logLevel) : options.logger }),
    // One log line per request, none at info for the health probes (http/logging.ts).
    logController: new RequestLog(),
    trustProxy: config.trustProxy,
    // Slow or stalled clients must not hold connections for ever (see also server.ts).
    requestTimeout: config.requestTimeoutMs,
    connectionTimeout: 60_000,
    keepAliveTimeout: 65_000,
    bodyLimit: 1024 * 1024,
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    routerOptions: { ignoreDuplicateSlashes: false },
    // Requests the HTTP parser refuses get problem+json like every other error.
    clientErrorHandler: answerClientError,
    // Errors Fastify raises before routing (`GET /%ff`) get the same shape and headers.
    frameworkErrors: answerFrameworkError,
    // Node would answer a missing Host itself, with an empty 400; the hook below answers it instead.
    http: { requireHostHeader: false },
  }).withTypeProvider<TypeBoxTypeProvider>()

  registerProblemHandlers(app)
  // gzip and Brotli for every route added from here on (Swagger UI's too), but the ingest paths
  // (tiny answers; no work added per request) and the live stream (each message must leave at once).
  await registerCompression(app, { uncompressed: new Set([...INGEST_PATHS, STREAM_PATH]) })
  // Before any route, so the OpenAPI document sees them all.
  await registerOpenApi(app, { version: packageVersion(), publicUrl: config.publicUrl })

  const rateLimitStore: RateLimitStore = resources.redis
    ? new RedisRateLimitStore(resources.redis.client, resources.redis.health)
    : new MemoryRateLimitStore()

  const writer = new EventWriter(eventStoreFor(database))
  const verifier = new ApiKeyVerifier(database, { ttlMs: config.keyCacheMs })
  // While the database is away these would repeat every few seconds; the outage log says it once.
  const outages = outageLogFor(database)
  const usage = new KeyUsageRecorder(database.db)
  // Background work: one runner, started when the app is ready and stopped when it closes.
  const tasks = new TaskRunner(app.log, (_, err) => {
    if (!isDatabaseUnavailable(err)) return false
    outages.failed(app.log, err)
    return true
  })
  tasks.add(keyUsageTask(usage))
  if (database.dialect === 'sqlite') tasks.add(versionIndexTask(database))
  tasks.add({
    name: 'session-cleanup',
    intervalMs: 60 * 60 * 1000,
    run: async () => void (await deleteExpiredSessions(database.db)),
  })
  // Events this instance stored: the tasks that can wait (deriving deployments, the chain) stand
  // aside while they arrive in a burst (the runner's burst policy, src/domain/ingest-burst.ts).
  writer.onCommit((outcomes) => tasks.burst.stored(outcomes.filter((o) => o.kind === 'stored').length))
  const deployments = new DeploymentSync(database)
  tasks.add(deployments.task())
  const metrics = new Metrics(database, tasks)
  writer.onCommit((outcomes) => metrics.eventsCommitted(outcomes))
  deployments.onDerived((result) => metrics.deploymentsDerived(result))
  metrics.instrument(app)
  const webhooks = new WebhookSender(database, {
    appSecret: resources.secret,
    allowPrivate: config.webhookAllowPrivate,
    timeoutMs: config.webhookTimeoutMs,
    retryBaseMs: config.webhookRetryBaseMs,
    publicUrl: config.publicUrl,
    version: packageVersion(),
    onAttempt: (outcome) => metrics.webhookDelivered(outcome),
    log: app.log,
  })
  metrics.onWebhookQueueDepth(() => webhooks.queueDepth())
  tasks.add(webhooks.task())
  // Tamper evidence: chains events and audit entries off the request path (src/domain/chain/),
  // waiting while a burst of ingest lasts.
  tasks.add(chainTask(database, {}, app.log))
  tasks.add(retentionTask(database, app.log))
  app.addHook('onReady', async () => tasks.start())
  resources.revocations?.subscribe({
    onRevoked: (digest) => verifier.forgetDigest(digest),
    onGap: () => verifier.clear(),
  })
  const live = wireLiveUpdates(app, { config, database, writer, deployments, resources, tasks })
  metrics.onStreamClients(() => live.hub.clients())
  app.decorate('shiplog', {
    writer,
    verifier,
    usage,
    tasks,
    database,
    config,
    deployments,
    metrics,
    live,
    webhooks,
  })
  app.addHook('onClose', async () => {
    await tasks.stop()
    await live.stopped()
    await writer.close()
    await usage.flush().catch((err) => app.log.warn({ err }, 'could not record API key last-used times'))
  })

  if (config.trustProxy) {
    // Behind a proxy, the scheme the client used comes from X-Forwarded-Proto, and it ends up in
    // links, snippets and cookie flags: anything but http or https (`javascript`) is dropped, so
    // the connection's own scheme counts instead.
    app.addHook('onRequest', (request, _reply, done) => {
      const forwarded = request.raw.headers['x-forwarded-proto']
      if (forwarded !== undefined) {
        const last = String(forwarded).split(',').at(-1)?.trim().toLowerCase()
        if (last === 'http' || last === 'https') request.raw.headers['x-forwarded-proto'] = last
        else delete request.raw.headers['x-forwarded-proto']
      }
      done()
    })
  }

  app.addHook('onRequest', (request, reply, done) => {
    reply.headers(INGEST_PATHS.has(request.routeOptions.url ?? '') ? API_SECURITY_HEADERS : SECURITY_HEADERS)
    if (request.headers.host === undefined && request.raw.httpVersion === '1.1') {
      done(problems.missingHost())
      return
    }
    done()
  })

  // Before any route: text no route could store (U+0000 on PostgreSQL) never reaches a handler.
  guardText(app, new Set([...INGEST_PATHS, BADGE_PATH]))

  await app.register(healthRoutes, { database })
  await app.register(ingestRoutes, {
    writer,
    outages,
    verifier,
    usage,
    rateLimitPerMinute: config.rateLimitPerMinute,
    rateLimitStore,
    maxEventAgeDays: config.maxEventAgeDays,
  })
  const readOptions = {
    config,
    secret: resources.secret,
    database,
    verifier,
    usage,
    rateLimitStore,
    rateLimitPerMinute: config.rateLimitPerMinute,
  }
  await app.register(readRoutes, readOptions)
  await app.register(getRoutes, readOptions)
  await app.register(streamRoutes, { ...readOptions, hub: live.hub, credentials: live.credentials })
  await app.register(openApiRoute)
  await app.register(metricsRoute, { metrics, token: config.metricsToken })
  await app.register(uiRoutes, {
    config: { ...config, secret: resources.secret },
    database,
    verifier,
    rateLimitStore,
    onAuditDropped: (action) => metrics.auditEntryDropped(action),
  })

  return app
}

/**
 * Live updates: a local commit asks the runner for a prompt run of the deployments task (within
 * LIVE_DERIVE_DELAY_MS; left to its turn during a burst), each committed run wakes the hub and, on
 * PostgreSQL, tells the other instances, whose notices wake this hub in turn.
 */
function wireLiveUpdates(
  app: FastifyInstance,
  parts: {
    config: Config
    database: Database
    writer: EventWriter
    deployments: DeploymentSync
    resources: AppResources
    tasks: TaskRunner
  },
): { hub: LiveHub; credentials: CredentialWatch; stopped(): Promise<void> } {
  const { config, database, writer, deployments, resources, tasks } = parts
  const hub = new LiveHub(database, {
    onError: (err) => {
      if (!isDatabaseUnavailable(err)) app.log.warn({ err }, 'live updates: could not read new events')
    },
  })
  // Streams end with their key or session: re-checked every 2 s (a change made by another process,
  // e.g. `shiplog keys revoke` beside a SQLite server), and at once when another instance announces
  // a revoked key.
  const credentials = new CredentialWatch(database.db, {
    intervalMs: 2000,
    onError: (err) => {
      if (!isDatabaseUnavailable(err)) app.log.warn({ err }, 'live updates: could not re-check credentials')
    },
  })
  tasks.add(hub.pollTask(config.streamPollMs))
  writer.onCommit((outcomes) => {
    if (!outcomes.some((o) => o.kind === 'stored')) return
    // On SQLite only this process streams: with nobody listening the background task suffices.
    if (database.dialect === 'sqlite' && hub.clients() === 0) return
    tasks.runSoon(DEPLOYMENTS_TASK, LIVE_DERIVE_DELAY_MS)
  })
  deployments.onDerived((result) => {
    hub.wake()
    if (result.through !== null)
      announceDerived(database, result.through).catch((err: unknown) => {
        if (!isDatabaseUnavailable(err))
          app.log.warn({ err }, 'live updates: could not notify other instances')
      })
  })
  resources.revocations?.subscribe({
    onDerived: () => hub.wake(),
    onRevoked: () => void credentials.check(),
    onGap: () => {
      hub.wake()
      void credentials.check()
    },
  })
  return {
    hub,
    credentials,
    async stopped() {
      hub.close()
      credentials.close()
    },
  }
}

declare module 'fastify' {
  interface FastifyInstance {
    shiplog: {
      writer: EventWriter
      verifier: ApiKeyVerifier
      usage: KeyUsageRecorder
      tasks: TaskRunner
      database: Database
      config: Config
      /** Call `current()` before reading deployments (read-your-writes). */
      deployments: DeploymentSync
      /** Prometheus instruments; webhooks and live updates feed theirs through its methods. */
      metrics: Metrics
      /** Live streams: `clients()` counts the connected ones. */
      live: { hub: LiveHub; credentials: CredentialWatch }
      /** Sends queued webhook deliveries (a background task; tests call `runOnce`). */
      webhooks: WebhookSender
    }
  }
}
