// Keeping the history: tamper evidence (chaining events and audit entries off the request path,
// waiting while a burst of ingest lasts; src/domain/chain/) and retention (old events removed).
import fp from 'fastify-plugin'
import { chainTask } from '../domain/chain/chainer.js'
import { retentionTask } from '../domain/operations/retention.js'

export const history = fp(
  async (app) => {
    app.tasks.add(chainTask(app.database, {}, app.log))
    app.tasks.add(retentionTask(app.database, app.log))
  },
  { name: 'history', dependencies: ['platform', 'events'] },
)
