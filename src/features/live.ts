// Live updates (GET /api/v1/stream): a local commit asks for a prompt derivation (at most one every
// 100 ms), each committed run wakes the hub and, on PostgreSQL, tells the other instances, whose
// notices wake this hub in turn. Streams end with their key or session.
import fp from 'fastify-plugin'
import { announceDerived } from '../db/revocations.js'
import { isDatabaseUnavailable } from '../domain/database-errors.js'
import { CredentialWatch } from '../domain/live/credentials.js'
import { LiveHub } from '../domain/live/hub.js'
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
      pollMs: config.streamPollMs,
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
    let timer: NodeJS.Timeout | null = null
    let deriving: Promise<void> | null = null
    let closing = false
    events.writer.onCommit((outcomes) => {
      if (closing || timer || !outcomes.some((o) => o.kind === 'stored')) return
      // On SQLite only this process streams: with nobody listening the background task suffices.
      if (database.dialect === 'sqlite' && hub.clients() === 0) return
      // During a burst of ingest the background task derives it after, in large runs: a run every
      // 100 ms here would take the burst's CPU in small, dear ones (src/domain/ingest-burst.ts).
      if (deployments.inBurst()) return
      timer = setTimeout(() => {
        timer = null
        if (closing) return
        deriving = deployments
          .catchUp(1)
          .then(() => undefined)
          .catch(() => {
            // The background task derives again and reports failures once (TaskRunner).
          })
          .finally(() => {
            deriving = null
          })
      }, 100)
      timer.unref()
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
    // After the tasks stop (runTasks closes first), before the event writer closes: a commit of
    // its last batch asks for no derivation any more.
    app.addHook('onClose', async () => {
      closing = true
      if (timer) clearTimeout(timer)
      hub.close()
      credentials.close()
      await deriving
    })
    await app.register(streamRoutes, { ...readOptionsOf(app), hub, credentials })
  },
  { name: 'live', dependencies: ['platform', 'metrics', 'keys', 'events', 'deployments'] },
)
