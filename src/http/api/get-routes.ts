// The original interface's read endpoints (SPEC §7): GET|POST /get (what runs where) and
// GET|POST /get/logs (one app and environment's events), for a key with the read scope.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { type Static, Type } from 'typebox'
import { boardCells } from '../../domain/board/cells.js'
import { environmentsInOrder } from '../../domain/board/environments.js'
import { stallMsOf } from '../../domain/board/settings.js'
import { byName } from '../../domain/events/account-names.js'
import { ApiEventSchema, toApiEvent } from '../../domain/events/event.js'
import { listEventPage } from '../../domain/events/event-pages.js'
import { FRESH } from '../plugins/fresh-deployments.js'
import { methodNotAllowed } from '../problem.js'
import { readBodyOfAnyType } from './ingest.js'
import { BODY_OPTIONAL } from './openapi-document.js'
import { KEY_SECURITY, problemResponses } from './openapi-schemas.js'
import { type ReadOptions, readerOf, requireReader } from './read-auth.js'
import {
  bodyAsSent,
  CursorCodec,
  iso,
  keepFieldsAsSent,
  ParamReader,
  queryAsSent,
  type RawQuery,
} from './read-params.js'

export const GET_LOGS_DEFAULT_LIMIT = 100
export const GET_LOGS_MAX_LIMIT = 1000

const RunningSchema = Type.Object({
  version: Type.String({ examples: ['1.0.3'] }),
  deployed_at: Type.String({ format: 'date-time', examples: ['2026-11-21T22:40:00.123Z'] }),
})
const GetAnswer = Type.Object({
  environments: Type.Array(Type.String(), {
    description: "In the account's order.",
    examples: [['Staging', 'Prod']],
  }),
  apps: Type.Array(
    Type.Object({
      app: Type.String({ examples: ['App1'] }),
      environments: Type.Record(Type.String(), RunningSchema, {
        description:
          'Environment name → the version running there; environments where none has succeeded are left out.',
      }),
    }),
  ),
})
const GetLogsQuery = Type.Object(
  {
    app: Type.Optional(
      Type.String({
        description: 'The service (letter case ignored). Required, here or in the body.',
        examples: ['App1'],
      }),
    ),
    env: Type.Optional(
      Type.String({
        description: 'The environment (letter case ignored). Required, here or in the body.',
        examples: ['Prod'],
      }),
    ),
    limit: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: GET_LOGS_MAX_LIMIT,
        description: `Events per answer, 1–${GET_LOGS_MAX_LIMIT}; default ${GET_LOGS_DEFAULT_LIMIT}.`,
      }),
    ),
    cursor: Type.Optional(Type.String({ description: 'The `next_cursor` of the previous answer.' })),
  },
  { additionalProperties: true },
)
const GetLogsAnswer = Type.Object({
  app: Type.String(),
  env: Type.String(),
  logs: Type.Array(ApiEventSchema, { description: 'Newest first.' }),
  next_cursor: Type.Union([Type.String(), Type.Null()]),
})
const GetLogsBody = Type.Object(
  {
    app: Type.Optional(Type.String()),
    env: Type.Optional(Type.String()),
    limit: Type.Optional(Type.Integer()),
  },
  {
    additionalProperties: true,
    description: 'Optional: the same fields as JSON (any content type, like POST /put) or form fields.',
  },
)

const PROBLEMS = problemResponses(400, 401, 403, 413, 422, 429, 503)

/** The query string and, for POST, the body's fields (the body wins), as sent: never coerced. */
function fieldsOf(request: FastifyRequest): RawQuery {
  return { ...queryAsSent(request), ...bodyAsSent(request) }
}

export async function getRoutes(app: FastifyInstance, options: ReadOptions): Promise<void> {
  const { database } = options
  const { db } = database
  const cursors = new CursorCodec(options.secret)
  methodNotAllowed(app, '/get', ['GET', 'POST'])
  methodNotAllowed(app, '/get/logs', ['GET', 'POST'])

  await app.register(async (scope) => {
    // Like POST /put: the body is read whatever its Content-Type says (curl -d labels JSON as a form).
    readBodyOfAnyType(scope)
    await requireReader(scope, options, { sessions: false })
    keepFieldsAsSent(scope)

    const running = async (request: FastifyRequest): Promise<Static<typeof GetAnswer>> => {
      const reader = readerOf(request)
      const now = Date.now()
      const stallMs = await stallMsOf(db, reader.accountId)
      const [cells, environments] = await Promise.all([
        boardCells(db, reader.accountId, null, { now, stallMs }),
        environmentsInOrder(db, reader.accountId),
      ])
      const byApp = new Map<string, Map<string, Static<typeof RunningSchema>>>()
      for (const cell of cells) {
        if (!cell.running || cell.running.finishedAt === null) continue
        const row = byApp.get(cell.service) ?? new Map()
        row.set(cell.environment, {
          version: cell.running.version,
          deployed_at: iso(cell.running.finishedAt),
        })
        byApp.set(cell.service, row)
      }
      return {
        environments,
        apps: [...byApp.keys()].sort(byName).map((name) => {
          const row = byApp.get(name) ?? new Map()
          return {
            app: name,
            environments: Object.fromEntries(
              environments.flatMap((e) => (row.has(e) ? [[e, row.get(e)]] : [])),
            ),
          }
        }),
      }
    }

    const logs = async (request: FastifyRequest, reply: FastifyReply) => {
      const reader = readerOf(request)
      const params = new ParamReader(fieldsOf(request))
      const appName = params.text('app', 100)
      const env = params.text('env', 100)
      if (appName === undefined && !params.errors.some((e) => e.field === 'app'))
        params.fail('app', 'app is required')
      if (env === undefined && !params.errors.some((e) => e.field === 'env'))
        params.fail('env', 'env is required')
      const limit = params.limit(GET_LOGS_MAX_LIMIT, GET_LOGS_DEFAULT_LIMIT)
      const before = params.cursor('get-logs', cursors)
      params.check()
      if (appName === undefined || env === undefined) return reply // unreachable: check() threw
      const page = await listEventPage(
        db,
        database.dialect,
        reader.accountId,
        { service: appName, environment: env },
        before === undefined ? {} : { before },
        limit,
      )
      const next = page.olderCursor === null ? null : cursors.encode('get-logs', page.olderCursor)
      return { app: appName, env, logs: page.rows.map(toApiEvent), next_cursor: next }
    }

    const getSchema = {
      tags: ['legacy read'],
      summary: 'Every app with its running version per environment',
      description: "The original interface's read endpoint. Needs a key with the read scope.",
      security: KEY_SECURITY,
      response: { 200: GetAnswer, ...PROBLEMS },
    }
    scope.get('/get', {
      exposeHeadRoute: false,
      ...FRESH,
      schema: { ...getSchema, operationId: 'getRunning' },
      handler: running,
    })
    scope.post('/get', {
      ...FRESH,
      schema: { ...getSchema, operationId: 'getRunningPost', summary: `${getSchema.summary} (POST form)` },
      handler: running,
    })

    const logsSchema = {
      tags: ['legacy read'],
      summary: 'The event log of one app and environment, newest first',
      description: `The original interface's log endpoint. \`app\` and \`env\` are required (missing: 422). At most \`limit\` events (default ${GET_LOGS_DEFAULT_LIMIT}, max ${GET_LOGS_MAX_LIMIT}) per answer; \`next_cursor\` fetches the older ones. Needs a key with the read scope.`,
      security: KEY_SECURITY,
      querystring: GetLogsQuery,
      response: { 200: GetLogsAnswer, ...PROBLEMS },
    }
    scope.get('/get/logs', {
      exposeHeadRoute: false,
      attachValidation: true,
      schema: { ...logsSchema, operationId: 'getLogs' },
      handler: logs,
    })
    scope.post('/get/logs', {
      attachValidation: true,
      schema: {
        ...logsSchema,
        operationId: 'getLogsPost',
        summary: `${logsSchema.summary} (POST form)`,
        body: GetLogsBody,
        // Works without a body: the fields may all be in the query string.
        [BODY_OPTIONAL]: true,
      },
      handler: logs,
    })
  })
}
