// Deployments derived from the events: the background task that derives what arrived, and the
// route option that makes a read wait for it (read-your-writes, http/plugins/fresh-deployments.ts).
import fp from 'fastify-plugin'
import { DeploymentSync } from '../domain/deployments/sync.js'
import { freshDeployments } from '../http/plugins/fresh-deployments.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** Routes that read deployments say `...FRESH` rather than calling `current()` themselves. */
    deployments: DeploymentSync
  }
}

export const deployments = fp(
  async (app) => {
    const deployments = new DeploymentSync(app.database)
    app.tasks.add(deployments.task())
    deployments.onDerived((result) => app.metrics.deploymentsDerived(result))
    app.decorate('deployments', deployments)
    // Before any route that reads deployments is registered: the hook is added as routes are.
    await app.register(freshDeployments, { deployments })
  },
  { name: 'deployments', dependencies: ['platform', 'metrics', 'events'] },
)
