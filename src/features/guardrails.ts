// Guardrails (SPEC §11): the per-account cache recording consults, so an event that breaks a lock,
// a freeze window, a bad version or a promotion rule is stored with what it broke. Registered before
// the ingest routes that use it; the routes that change guardrails invalidate it.
import fp from 'fastify-plugin'
import { GuardrailCache } from '../domain/guardrails/check.js'

declare module 'fastify' {
  interface FastifyInstance {
    guardrails: GuardrailCache
  }
}

export const guardrails = fp(
  async (app) => {
    const cache = new GuardrailCache(app.database.db, {
      // The deployments feature is registered after the ingest routes; it exists by the first request.
      deriveFirst: () => app.deployments.current(),
    })
    app.decorate('guardrails', cache)
  },
  { name: 'guardrails', dependencies: ['platform'] },
)
