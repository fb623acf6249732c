// Bad versions over the API (SPEC §11): list them (read scope or a session), mark one bad and take
// the mark off (an ingest key, as a pipeline does after a failed smoke test, or an admin's session).
// The same audited commands as Settings, the service page and `shiplog versions`.
import type { FastifyInstance } from 'fastify'
import { Type } from 'typebox'
import { markVersionBad, markVersionGood } from '../../domain/guardrails/commands.js'
import { readBadVersionInput } from '../../domain/guardrails/inputs.js'
import { loadBadVersions } from '../../domain/guardrails/store.js'
import { FRESH } from '../plugins/fresh-deployments.js'
import { HttpProblem, methodNotAllowed } from '../problem.js'
import { problemResponses, READ_SECURITY } from './openapi-schemas.js'
import { type ReadOptions, readerOf, requireReader } from './read-auth.js'
import { invalidParameters, iso, ParamReader, queryAsSent } from './read-params.js'
import { READ_PROBLEMS } from './read-shared.js'
import { requireWriter, writerOf } from './write-auth.js'

const PATH = '/api/v1/bad-versions'
const NAME_MAX = 200

const BadVersion = Type.Object({
  service: Type.String({ examples: ['billing'] }),
  version: Type.String({ examples: ['2.4.1'] }),
  reason: Type.String({ examples: ['corrupts invoices (INC-42)'] }),
  marked_by: Type.String({
    description: 'Who marked it: a user’s email, an API key’s name, or `cli (user)`.',
  }),
  marked_at: Type.String({ format: 'date-time' }),
})

const ListAnswer = Type.Object({ bad_versions: Type.Array(BadVersion) })
const ListQuery = Type.Object(
  { service: Type.Optional(Type.String({ description: 'Only this service’s (exact name).' })) },
  { additionalProperties: true },
)
const MarkBody = Type.Object(
  {
    service: Type.String({ description: 'A service the account has deployed.', examples: ['billing'] }),
    version: Type.String({ examples: ['2.4.1'] }),
    reason: Type.String({ description: 'Why; at most 500 characters.', examples: ['corrupts invoices'] }),
  },
  { additionalProperties: true },
)
const MarkAnswer = Type.Object({
  ...BadVersion.properties,
  replaced: Type.Boolean({ description: 'True when it was marked already: the reason is the new one.' }),
})
const GoodQuery = Type.Object(
  { service: Type.String(), version: Type.String() },
  { additionalProperties: true },
)
const GoodAnswer = Type.Object({
  service: Type.String(),
  version: Type.String(),
  reason: Type.String({ description: 'The reason it had been marked bad with.' }),
})

type Row = { service: string; version: string; reason: string; createdBy: string; createdAt: number }
const shown = (b: Row) => ({
  service: b.service,
  version: b.version,
  reason: b.reason,
  marked_by: b.createdBy,
  marked_at: iso(b.createdAt),
})

const refused = (errors: { field: string; message: string }[]) =>
  new HttpProblem(422, 'invalid-fields', 'Invalid fields', errors.map((e) => e.message).join('; '), {
    errors,
  })

export async function badVersionRoutes(
  app: FastifyInstance,
  options: ReadOptions & { invalidate: (accountId: number) => void },
): Promise<void> {
  const { db } = options.database
  methodNotAllowed(app, PATH, ['GET', 'HEAD', 'POST', 'DELETE'])

  await app.register(async (scope) => {
    await requireReader(scope, options, { sessions: true })
    scope.get(PATH, {
      attachValidation: true,
      schema: {
        operationId: 'listBadVersions',
        tags: ['read'],
        summary: 'Versions marked bad',
        description: 'Every version the account has marked bad, by service and version.',
        security: READ_SECURITY,
        querystring: ListQuery,
        response: { 200: ListAnswer, ...READ_PROBLEMS },
      },
      handler: async (request) => {
        const reader = readerOf(request)
        const params = new ParamReader(queryAsSent(request))
        const service = params.text('service', NAME_MAX)
        params.check()
        const all = await loadBadVersions(db, reader.accountId)
        return { bad_versions: all.filter((b) => service === undefined || b.service === service).map(shown) }
      },
    })
  })

  await app.register(async (scope) => {
    await requireWriter(scope, options, 'mark versions bad')
    scope.post(PATH, {
      attachValidation: true,
      // The service must be one the account has deployed: what was acknowledged before counts.
      ...FRESH,
      schema: {
        operationId: 'markVersionBad',
        tags: ['ingest'],
        summary: 'Mark a version bad',
        description:
          'The check (`GET /api/v1/check`) then refuses deploying it anywhere, and an event of it is recorded with `bad_version` in its `guardrails`. Marking it again replaces the reason. Needs an API key with the ingest scope, or an admin’s session (JSON body). Audited.',
        security: READ_SECURITY,
        body: MarkBody,
        response: { 200: MarkAnswer, ...problemResponses(400, 401, 403, 413, 415, 422, 429, 503) },
      },
      handler: async (request) => {
        const writer = writerOf(request)
        const body = request.body
        const fields = typeof body === 'object' && body !== null && !Array.isArray(body) ? body : {}
        const input = readBadVersionInput(fields as Record<string, unknown>)
        if (!input.ok) throw refused(input.errors)
        const done = await markVersionBad(db, writer.accountId, input.value, writer.source)
        if (!done.ok) throw refused(done.errors)
        options.invalidate(writer.accountId)
        const marked = (await loadBadVersions(db, writer.accountId)).find(
          (b) => b.service === input.value.service && b.version === input.value.version,
        )
        if (!marked) throw new Error('a version just marked bad is not there')
        return { ...shown(marked), replaced: done.value.replaced }
      },
    })
    scope.delete(PATH, {
      attachValidation: true,
      schema: {
        operationId: 'markVersionGood',
        tags: ['ingest'],
        summary: 'Take a version’s bad mark off',
        description: '404 when the version is not marked bad. Same credentials as marking. Audited.',
        security: READ_SECURITY,
        querystring: GoodQuery,
        response: { 200: GoodAnswer, ...problemResponses(400, 401, 403, 404, 415, 422, 429, 503) },
      },
      handler: async (request) => {
        const writer = writerOf(request)
        const params = new ParamReader(queryAsSent(request))
        const need = (name: string): string => {
          const before = params.errors.length
          const value = params.text(name, NAME_MAX)
          if (value === undefined && params.errors.length === before) params.fail(name, `${name} is required`)
          return value ?? ''
        }
        const target = { service: need('service'), version: need('version') }
        if (params.errors.length > 0) throw invalidParameters(params.errors)
        const done = await markVersionGood(db, writer.accountId, target, writer.source)
        if (!done.ok) {
          throw new HttpProblem(
            404,
            'not-found',
            'Not found',
            `${target.service} ${target.version} is not marked bad.`,
          )
        }
        options.invalidate(writer.accountId)
        return { ...target, reason: done.value.reason }
      },
    })
  })
}
