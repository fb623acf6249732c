// Recording events: the batching writer, the version index (SQLite), the stored events counted
// for the runner's burst policy, and the ingest routes (POST /put, POST /deploy).
import fp from 'fastify-plugin'
import { outageLogFor } from '../domain/database-errors.js'
import { eventStoreFor } from '../domain/events/store.js'
import { versionIndexTask } from '../domain/events/version-index.js'
import { EventWriter } from '../domain/events/writer.js'
import { ingestRoutes } from '../http/api/ingest.js'

declare module 'fastify' {
  interface FastifyInstance {
    events: {
      writer: EventWriter
    }
  }
}

export const events = fp(
  async (app) => {
    const { config, database } = app
    const writer = new EventWriter(eventStoreFor(database))
    if (database.dialect === 'sqlite') app.tasks.add(versionIndexTask(database))
    // Events this instance stored: the tasks that can wait (deriving deployments, the chain) stand
    // aside while they arrive in a burst (the runner's burst policy, src/domain/ingest-burst.ts).
    writer.onCommit((outcomes) => app.tasks.burst.stored(outcomes.filter((o) => o.kind === 'stored').length))
    writer.onCommit((outcomes) => app.metrics.eventsCommitted(outcomes))
    app.decorate('events', { writer })
    app.addHook('onClose', async () => {
      await writer.close()
    })
    await app.register(ingestRoutes, {
      writer,
      guardrails: app.guardrails,
      outages: outageLogFor(database),
      verifier: app.keyVerifier,
      usage: app.keyUsage,
      rateLimitPerMinute: config.rateLimitPerMinute,
      rateLimitStore: app.rateLimits,
      maxEventAgeDays: config.maxEventAgeDays,
    })
  },
  { name: 'events', dependencies: ['platform', 'metrics', 'keys', 'guardrails'] },
)
