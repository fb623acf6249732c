// Read-your-writes as a route option: a route whose answer reads derived deployments says
// `config: { freshDeployments: true }` (`...FRESH`), and one hook derives what was acknowledged before its handler runs.
import type { FastifyInstance, RouteOptions } from 'fastify'
import fp from 'fastify-plugin'

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * The route reads derived deployments (the board, the read API, settings' environments): every
     * event acknowledged before the request must show in its answer (SPEC §6.1, read-your-writes).
     */
    freshDeployments?: boolean
  }
}

/** Route options of a route that reads deployments: `{ schema, ...FRESH }`. */
export const FRESH = { config: { freshDeployments: true } } as const

/** What the hook waits on: DeploymentSync.current(). */
export interface DeploymentsCatchUp {
  current(): Promise<void>
}

/**
 * Adds, to every route registered after it whose config says `freshDeployments`, a preHandler that
 * awaits `deployments.current()`. It goes last of the route's own preHandlers, so it runs after
 * the authentication hooks, the CSRF check and the schema validation, just before the handler.
 */
export const freshDeployments = fp<{ deployments: DeploymentsCatchUp }>(
  async (app: FastifyInstance, { deployments }) => {
    async function awaitFreshDeployments(): Promise<void> {
      await deployments.current()
    }
    app.addHook('onRoute', (route: RouteOptions) => {
      if (!route.config?.freshDeployments) return
      const own = route.preHandler === undefined ? [] : [route.preHandler].flat()
      // The HEAD route Fastify adds for a GET is made from the GET's options: add the hook once.
      if (own.includes(awaitFreshDeployments)) return
      route.preHandler = [...own, awaitFreshDeployments]
    })
  },
  { name: 'fresh-deployments' },
)
