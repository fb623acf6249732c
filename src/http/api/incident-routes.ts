// POST and DELETE /api/v1/deployments/{id}/incident (issue 27): a pipeline or an incident tool marks
// a deployment as having caused an incident, names what fixed it, or removes the mark. An API key
// with the ingest scope writes (as it records events); a signed-in admin's session may too.

import type { FastifyInstance } from 'fastify'
import { type Static, Type } from 'typebox'
import { deploymentById } from '../../domain/deployments/incident-store.js'
import {
  type IncidentResult,
  markIncident,
  readIncidentInput,
  unmarkIncident,
} from '../../domain/deployments/incidents.js'
import { MAX_ID, parseWholeNumber } from '../../domain/whole-numbers.js'
import { FRESH } from '../plugins/fresh-deployments.js'
import { HttpProblem, methodNotAllowed } from '../problem.js'
import { problemResponses, READ_SECURITY } from './openapi-schemas.js'
import type { ReadOptions } from './read-auth.js'
import { IncidentSchema } from './read-deployments.js'
import { requireWriter, writerOf } from './write-auth.js'

const PATH = '/api/v1/deployments/:id/incident'

const Params = Type.Object({
  id: Type.String({ description: 'The deployment’s id (the id of its first event).', examples: ['120'] }),
})
const MarkBody = Type.Object(
  {
    link: Type.Optional(
      Type.Union([Type.String({ maxLength: 2000 }), Type.Null()], {
        description:
          'Where the incident is described: an absolute http(s) address. Absent: kept; null or empty: cleared.',
        examples: ['https://status.example.com/incidents/42'],
      }),
    ),
    note: Type.Optional(
      Type.Union([Type.String({ maxLength: 500 }), Type.Null()], {
        description:
          'A short note, at most 500 characters, no control characters. Absent: kept; null: cleared.',
        examples: ['checkout 500s for 12 minutes'],
      }),
    ),
    fixed_by: Type.Optional(
      Type.Union([Type.Integer({ minimum: 1 }), Type.Null()], {
        description:
          'The deployment that fixed it: a succeeded deployment of the same service and environment that finished after it. Absent: kept; null: cleared.',
        examples: [131],
      }),
    ),
  },
  { additionalProperties: true },
)
const MarkAnswer = Type.Object({
  id: Type.Integer({ description: 'The deployment.', examples: [120] }),
  incident: IncidentSchema,
})

const PROBLEMS = problemResponses(400, 401, 403, 404, 414, 415, 422, 429, 503)

/** The deployment id of the path; anything but a whole number names no deployment (404). */
function deploymentIdOf(text: string): number {
  const id = parseWholeNumber(text, 1, MAX_ID) ?? Number.NaN
  if (!Number.isSafeInteger(id) || id <= 0) {
    throw new HttpProblem(404, 'not-found', 'Not found', `This account has no deployment "${text}".`)
  }
  return id
}

function answerOf(id: number, result: IncidentResult): Static<typeof MarkAnswer> {
  if (!result.ok) {
    const detail = result.errors.map((e) => e.message).join('; ')
    if (result.status === 404) throw new HttpProblem(404, 'not-found', 'Not found', `${detail}.`)
    throw new HttpProblem(422, 'invalid-fields', 'Invalid incident mark', detail, { errors: result.errors })
  }
  const mark = result.value
  return {
    id,
    incident: mark === null ? null : { link: mark.link, note: mark.note, fixed_by: mark.fixedBy },
  }
}

export async function incidentRoutes(app: FastifyInstance, options: ReadOptions): Promise<void> {
  const { db } = options.database
  methodNotAllowed(app, PATH, ['POST', 'DELETE'])

  await app.register(async (scope) => {
    await requireWriter(scope, options, 'mark incidents')

    scope.post(PATH, {
      attachValidation: true,
      ...FRESH,
      schema: {
        operationId: 'markIncident',
        tags: ['ingest'],
        summary: 'Mark a deployment as having caused an incident, or change its mark',
        description:
          'Marks a finished deployment as having caused an incident, with a link, a note and the deployment that fixed it; a second call changes the fields it sends and keeps the others. A marked success counts as a failure in change failure rate, and its time to restore runs to `fixed_by` (else to the next success). Needs an API key with the ingest scope, or an admin’s session (JSON body). Audited.',
        security: READ_SECURITY,
        params: Params,
        body: MarkBody,
        response: { 200: MarkAnswer, ...PROBLEMS },
      },
      handler: async (request) => {
        const writer = writerOf(request)
        const id = deploymentIdOf((request.params as { id: string }).id)
        const body = request.body ?? {}
        if (typeof body !== 'object' || Array.isArray(body)) {
          throw new HttpProblem(
            422,
            'invalid-fields',
            'Invalid incident mark',
            'The body must be a JSON object.',
            {
              errors: [{ field: 'body', message: 'the body must be a JSON object' }],
            },
          )
        }
        const { input, errors } = readIncidentInput(body as Record<string, unknown>)
        if (errors.length > 0) {
          // Unknown deployment first: a 404 says more than the fields of a request about nothing.
          const known = await deploymentById(db, writer.accountId, id)
          if (!known)
            throw new HttpProblem(404, 'not-found', 'Not found', `This account has no deployment #${id}.`)
          throw new HttpProblem(
            422,
            'invalid-fields',
            'Invalid incident mark',
            errors.map((e) => e.message).join('; '),
            {
              errors,
            },
          )
        }
        return answerOf(id, await markIncident(db, writer.accountId, id, input, writer.source))
      },
    })

    scope.delete(PATH, {
      attachValidation: true,
      ...FRESH,
      schema: {
        operationId: 'unmarkIncident',
        tags: ['ingest'],
        summary: 'Remove a deployment’s incident mark',
        description:
          'The deployment counts again as its outcome says (SPEC §6.2). 404 when it is unknown or not marked. Same credentials as marking. Audited.',
        security: READ_SECURITY,
        params: Params,
        response: { 200: MarkAnswer, ...problemResponses(400, 401, 403, 404, 414, 415, 429, 503) },
      },
      handler: async (request) => {
        const writer = writerOf(request)
        const id = deploymentIdOf((request.params as { id: string }).id)
        return answerOf(id, await unmarkIncident(db, writer.accountId, id, writer.source))
      },
    })
  })
}
