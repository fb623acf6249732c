// The read API (SPEC §7): /api/v1/events, /api/v1/deployments, /api/v1/services, /api/v1/metrics
// and the guardrail check /api/v1/check (SPEC §11), for a key with the read scope or a logged-in
// browser session. One scope holds them (one reader check, one cookie parser); each resource's
// route is in a file of its own.
import type { FastifyInstance } from 'fastify'
import { methodNotAllowed } from '../problem.js'
import { checkRoute } from './check-route.js'
import { type ReadOptions, requireReader } from './read-auth.js'
import { boardRoute } from './read-board.js'
import { deploymentsRoute } from './read-deployments.js'
import { eventsRoute } from './read-events.js'
import { deliveryMetricsRoute } from './read-metrics.js'
import { CursorCodec, keepFieldsAsSent } from './read-params.js'

export async function readRoutes(app: FastifyInstance, options: ReadOptions): Promise<void> {
  const resource = { database: options.database, cursors: new CursorCodec(options.secret) }
  for (const path of [
    '/api/v1/events',
    '/api/v1/deployments',
    '/api/v1/services',
    '/api/v1/metrics',
    '/api/v1/check',
  ]) {
    methodNotAllowed(app, path, ['GET', 'HEAD'])
  }

  await app.register(async (scope) => {
    await requireReader(scope, options, { sessions: true })
    keepFieldsAsSent(scope)
    // In this order: the OpenAPI document lists the paths as they are registered.
    eventsRoute(scope, resource)
    deploymentsRoute(scope, resource)
    boardRoute(scope, resource)
    deliveryMetricsRoute(scope, resource)
    checkRoute(scope, resource)
  })
}
