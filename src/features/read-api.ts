// The read API: /api/v1/events, /deployments, /services, /metrics and /check, and the original
// interface's GET|POST /get and /get/logs, for a key with the read scope (or, under /api/v1/, a
// session).
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { badVersionRoutes } from '../http/api/bad-version-routes.js'
import { getRoutes } from '../http/api/get-routes.js'
import { incidentRoutes } from '../http/api/incident-routes.js'
import type { ReadOptions } from '../http/api/read-auth.js'
import { readRoutes } from '../http/api/read-routes.js'

/** What the read routes (and the live stream, which reads alike) are given. */
export function readOptionsOf(app: FastifyInstance): ReadOptions {
  return {
    config: app.config,
    secret: app.appSecret,
    database: app.database,
    verifier: app.keyVerifier,
    usage: app.keyUsage,
    rateLimitStore: app.rateLimits,
    rateLimitPerMinute: app.config.rateLimitPerMinute,
  }
}

export const readApi = fp(
  async (app) => {
    await app.register(readRoutes, readOptionsOf(app))
    await app.register(getRoutes, readOptionsOf(app))
    await app.register(incidentRoutes, readOptionsOf(app))
    await app.register(badVersionRoutes, {
      ...readOptionsOf(app),
      invalidate: (accountId: number) => app.guardrails.invalidate(accountId),
    })
  },
  { name: 'read-api', dependencies: ['platform', 'keys', 'deployments', 'guardrails'] },
)
