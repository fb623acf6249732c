// The web UI (src/http/ui/plugin.ts): sessions, CSRF, static assets and every page.
import fp from 'fastify-plugin'
import { uiRoutes } from '../http/ui/plugin.js'

export const webUi = fp(
  async (app) => {
    const { metrics } = app
    await app.register(uiRoutes, {
      config: { ...app.config, secret: app.appSecret },
      database: app.database,
      verifier: app.keyVerifier,
      rateLimitStore: app.rateLimits,
      onAuditDropped: (action) => metrics.auditEntryDropped(action),
    })
  },
  { name: 'web-ui', dependencies: ['platform', 'metrics', 'keys', 'deployments'] },
)
