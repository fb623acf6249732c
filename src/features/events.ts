// Recording events: the batching writer, the version index (SQLite), the count of events stored
// here that burst-aware tasks watch, and the ingest routes (POST /put, POST /deploy).
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
      /**
       * Events this instance stored: background work that can wait (deriving deployments, the
       * chain) stands aside while they arrive in a burst (src/domain/ingest-burst.ts).
       */
      storedEvents(): number
    }
  }
}

export const events = fp(
  async (app) => {
    const { config, database } = app
    const writer = new EventWriter(eventStoreFor(database))
    if (database.dialect === 'sqlite') app.tasks.add(versionIndexTask(database))
    let stored = 0
    writer.onCommit((outcomes) => {
      for (const outcome of outcomes) if (outcome.kind === 'stored') stored++
    })
    writer.onCommit((outcomes) => app.metrics.eventsCommitted(outcomes))
    app.decorate('events', { writer, storedEvents: () => stored })
    app.addHook('onClose', async () => {
      await writer.close()
    })
    await app.register(ingestRoutes, {
      writer,
      outages: outageLogFor(database),
      verifier: app.keyVerifier,
      usage: app.keyUsage,
      rateLimitPerMinute: config.rateLimitPerMinute,
      rateLimitStore: app.rateLimits,
      maxEventAgeDays: config.maxEventAgeDays,
    })
  },
  { name: 'events', dependencies: ['platform', 'metrics', 'keys'] },
)
