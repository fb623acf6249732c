// Live updates (GET /api/v1/stream): a local commit asks the runner for a prompt run of the
// deployments task (within LIVE_DERIVE_DELAY_MS; left to its turn during a burst), each committed
// run wakes the hub and, on PostgreSQL, tells the other instances, whose
// notices wake this hub in turn. Streams end with their key or session.
import fp from 'fastify-plugin'
import { announceDerived } from '../db/notices.js'
import { isDatabaseUnavailable } from '../domain/database-errors.js'
import { DEPLOYMENTS_TASK } from '../domain/deployments/sync.js'
import { CredentialWatch } from '../domain/live/credentials.js'
import { LiveHub } from '../domain/live/hub.js'
import { LIVE_DERIVE_DELAY_MS } from '../domain/pacing.js'
import { streamRoutes } from '../http/api/stream-routes.js'
import { readOptionsOf } from './read-api.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** Live streams: `hub.clients()` counts the connected ones. */
    live: { hub: LiveHub; credentials: CredentialWatch }
  }
}

export const live = fp(
  async (app) => {
    const { config, database, events, deployments } = app
    const hub = new LiveHub(database, {
      onError: (err) => {
        if (!isDatabaseUnavailable(err)) app.log.warn({ err }, 'live updates: could not read new events')
      },
    })
    // Streams end with their key or session: re-checked every 2 s (a change made by another
    // process, e.g. `shiplog keys revoke` beside a SQLite server), and at once when another
    // instance announces a revoked key.
    const credentials = new CredentialWatch(database.db, {
      intervalMs: 2000,
      onError: (err) => {
        if (!isDatabaseUnavailable(err)) app.log.warn({ err }, 'live updates: could not re-check credentials')
      },
    })
    app.tasks.add(hub.pollTask(config.streamPollMs))
    events.writer.onCommit((outcomes) => {
      if (!outcomes.some((o) => o.kind === 'stored')) return
      // On SQLite only this process streams: with nobody listening the background task suffices.
      if (database.dialect === 'sqlite' && hub.clients() === 0) return
      app.tasks.runSoon(DEPLOYMENTS_TASK, LIVE_DERIVE_DELAY_MS)
    })
    deployments.onDerived((result) => {
      hub.wake()
      if (result.through !== null)
        announceDerived(database, result.through).catch((err: unknown) => {
          if (!isDatabaseUnavailable(err))
            app.log.warn({ err }, 'live updates: could not notify other instances')
        })
    })
    app.revocations?.subscribe({
      onDerived: () => hub.wake(),
      onRevoked: () => void credentials.check(),
      onGap: () => {
        hub.wake()
        void credentials.check()
      },
    })
    app.metrics.onStreamClients(() => hub.clients())
    app.decorate('live', { hub, credentials })
    // After the tasks stop (runTasks closes first): the runner takes no more runSoon requests.
    app.addHook('onClose', async () => {
      hub.close()
      credentials.close()
    })
    await app.register(streamRoutes, { ...readOptionsOf(app), hub, credentials })
  },
  { name: 'live', dependencies: ['platform', 'metrics', 'keys', 'events', 'deployments'] },
)
