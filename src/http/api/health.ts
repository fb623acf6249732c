// Liveness (/healthz: the process answers) and readiness (/readyz: the database accepts writes).
import type { FastifyPluginAsync } from 'fastify'
import { Type } from 'typebox'
import type { Database } from '../../db/connect.js'
import { isDatabaseUnavailable, outageLogFor } from '../../domain/database-errors.js'
import { checkWritable } from '../../domain/settings.js'
import { methodNotAllowed, problems, sendProblem } from '../problem.js'
import { PUBLIC, problemResponses } from './openapi-schemas.js'

const READY_TIMEOUT_MS = 2000

export const healthRoutes: FastifyPluginAsync<{ database: Database }> = async (app, { database }) => {
  methodNotAllowed(app, '/healthz', ['GET', 'HEAD'])
  methodNotAllowed(app, '/readyz', ['GET', 'HEAD'])

  const Ok = Type.Object({ status: Type.Literal('ok') })
  const Ready = Type.Object({
    status: Type.Literal('ok'),
    database: Type.Union([Type.Literal('sqlite'), Type.Literal('postgres')], {
      description: 'The database the server writes to.',
    }),
  })

  app.get(
    '/healthz',
    {
      schema: {
        operationId: 'checkLiveness',
        tags: ['operations'],
        summary: 'Liveness: the process answers',
        description: 'Answers without touching the database; for a liveness probe.',
        security: PUBLIC,
        response: { 200: { ...Ok, description: 'The process is up.' }, ...problemResponses(400) },
      },
    },
    async () => ({ status: 'ok' as const }),
  )

  const outages = outageLogFor(database)

  const readySchema = {
    operationId: 'checkReadiness',
    tags: ['operations'],
    summary: 'Readiness: the database accepts writes',
    description: `Writes to the database (within ${READY_TIMEOUT_MS} ms); for a readiness probe or a load balancer.`,
    security: PUBLIC,
    response: {
      200: { ...Ready, description: 'The database accepts writes.' },
      ...problemResponses(400, 503),
    },
  }
  app.get('/readyz', { schema: readySchema }, async (request, reply) => {
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
      return { status: 'ok' as const, database: database.dialect }
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
