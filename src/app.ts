// Builds the Fastify application from its plugins and routes; server.ts listens, tests inject.
//
// The shape (fastify/demo's): buildApp lists features, it does not wire their insides. Each feature
// in src/features/ is a plugin (fastify-plugin, so what it decorates is the whole app's) that makes
// its parts, decorates the app with those others use (`app.events`, `app.deployments`,
// `app.webhooks`, `app.live`, ...), adds its background tasks to `app.tasks`, registers its routes
// and closes what it opened in an onClose hook. Order matters, and is this list's:
// - before any route: problem handlers, compression (not for ingest and the live stream), the
//   OpenAPI generator and the request guards (forwarded scheme, security headers, text guard);
// - a feature after those whose decorations it uses; routes in the order the OpenAPI document
//   lists them; background tasks in the order /metrics lists them;
// - runTasks last: Fastify runs onClose hooks last-registered first, so the tasks stop first, then
//   live updates, the event writer and the key-usage recorder; server.ts closes the database after.
// A route that reads derived deployments says `...FRESH` in its options (read-your-writes: one hook
// derives what was acknowledged before its handler runs; http/plugins/fresh-deployments.ts).

import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify'
import type { Config } from './config.js'
import type { Database } from './db/connect.js'
import { resolveAppSecret } from './domain/app-secret.js'
import { deployments } from './features/deployments.js'
import { events } from './features/events.js'
import { guardrails } from './features/guardrails.js'
import { history } from './features/history.js'
import { keys } from './features/keys.js'
import { live } from './features/live.js'
import { metrics, metricsEndpoint } from './features/metrics.js'
import { packageVersion, platform, runTasks } from './features/platform.js'
import { readApi } from './features/read-api.js'
import { sessions } from './features/sessions.js'
import { webUi } from './features/web-ui.js'
import { webhooks } from './features/webhooks.js'
import { INGEST_PATHS } from './http/api/ingest.js'
import { openApiRoute, registerOpenApi } from './http/api/openapi.js'
import { STREAM_PATH } from './http/api/stream-routes.js'
import { registerCompression } from './http/compression.js'
import { loggerOptions, RequestLog } from './http/logging.js'
import { requestGuards } from './http/plugins/request-guards.js'
import { answerClientError, answerFrameworkError, registerProblemHandlers } from './http/problem.js'
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
    // Node would answer a missing Host itself, with an empty 400; the guards answer it instead.
    http: { requireHostHeader: false },
  }).withTypeProvider<TypeBoxTypeProvider>()

  registerProblemHandlers(app)
  // gzip and Brotli for every route added from here on (Swagger UI's too), but the ingest paths
  // (tiny answers; no work added per request) and the live stream (each message must leave at once).
  await registerCompression(app, { uncompressed: new Set([...INGEST_PATHS, STREAM_PATH]) })
  // Before any route, so the OpenAPI document sees them all.
  await registerOpenApi(app, { version: packageVersion(), publicUrl: config.publicUrl })
  await app.register(requestGuards, { trustProxy: config.trustProxy })

  await app.register(platform, { config, database, resources }) // and /healthz, /readyz
  await app.register(metrics)
  await app.register(keys)
  await app.register(guardrails)
  await app.register(events) // and POST /put, /deploy
  await app.register(sessions)
  await app.register(deployments)
  await app.register(readApi) // /api/v1/events, /deployments, /services, /metrics; /get, /get/logs
  await app.register(webhooks)
  await app.register(history)
  await app.register(live) // and GET /api/v1/stream
  await app.register(openApiRoute)
  await app.register(metricsEndpoint)
  await app.register(webUi)
  await app.register(runTasks)

  return app
}
