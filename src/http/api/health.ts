// Liveness (/healthz: the process answers) and readiness (/readyz: the database accepts writes).
import type { FastifyPluginAsync } from 'fastify'
import { Type } from 'typebox'
import type { Database } from '../../db/connect.js'
import { isDatabaseUnavailable, outageLogFor } from '../../domain/database-errors.js'
import { checkWritable } from '../../domain/settings.js'
import { methodNotAllowed, problems, sendProblem } from '../problem.js'

const READY_TIMEOUT_MS = 2000

export const healthRoutes: FastifyPluginAsync<{ database: Database }> = async (app, { database }) => {
  methodNotAllowed(app, '/healthz', ['GET', 'HEAD'])
  methodNotAllowed(app, '/readyz', ['GET', 'HEAD'])

  const Ok = Type.Object({ status: Type.Literal('ok') })

  app.get('/healthz', { schema: { response: { 200: Ok } } }, async () => ({ status: 'ok' as const }))

  const outages = outageLogFor(database)

  app.get('/readyz', async (request, reply) => {
    let timer: NodeJS.Timeout | undefined
    try {
      await Promise.race([
        checkWritable(database.db, database.dialect),
        new Promise((_, reject) => {
          timer = setTimeout(
            () =>
              reject(
                Object.assign(new Error(`the database did not answer within ${READY_TIMEOUT_MS} ms`), {
                  code: 'ETIMEDOUT',
                }),
              ),
            READY_TIMEOUT_MS,
          )
        }),
      ])
      outages.recovered(request.log)
      return { status: 'ok', database: database.dialect }
    } catch (err) {
      // Probes come every few seconds: an outage is logged once, with the requests it refuses.
      if (isDatabaseUnavailable(err)) outages.failed(request.log, err)
      else request.log.warn({ err }, 'readiness check failed')
      return sendProblem(reply, problems.unavailable())
    } finally {
      clearTimeout(timer)
    }
  })
}
