// Prometheus metrics: the instruments, the hook that times every request and GET /metrics. Other
// features feed their instruments through `app.metrics`.
import fp from 'fastify-plugin'
import { Metrics, metricsRoute } from '../http/metrics.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** Prometheus instruments; webhooks and live updates feed theirs through its methods. */
    metrics: Metrics
  }
}

export const metrics = fp(
  async (app) => {
    const metrics = new Metrics(app.database, app.tasks)
    metrics.instrument(app)
    app.decorate('metrics', metrics)
  },
  { name: 'metrics', dependencies: ['platform'] },
)

/** GET /metrics, for a scraper (with SHIPLOG_METRICS_TOKEN when set). */
export const metricsEndpoint = fp(
  async (app) => {
    await app.register(metricsRoute, { metrics: app.metrics, token: app.config.metricsToken })
  },
  { name: 'metrics-endpoint', dependencies: ['metrics'] },
)
