// GET /api/v1/check (SPEC §11): may this version of a service be deployed to this environment now?
// Every guardrail that says no, with its reason and until when, from the same rules recording
// applies (domain/guardrails/check.ts); CI asks it before it deploys (`shiplog-deploy --check`).
import type { FastifyInstance } from 'fastify'
import { Type } from 'typebox'
import { checkDeployment } from '../../domain/guardrails/check.js'
import { GUARDRAIL_RULES } from '../../text-rules.js'
import { FRESH } from '../plugins/fresh-deployments.js'
import { READ_SECURITY } from './openapi-schemas.js'
import { readerOf } from './read-auth.js'
import { iso, ParamReader, queryAsSent } from './read-params.js'
import { READ_PROBLEMS, type ReadResource } from './read-shared.js'

/** The names' limits, as recording takes them (SPEC §1.1). */
const NAME_MAX = 100
const VERSION_MAX = 200

const required = (description: string, example: string) => Type.String({ description, examples: [example] })

const CheckQuery = Type.Object(
  {
    service: required('The service to deploy, as events name it (letter case counts).', 'App1'),
    environment: required('The environment to deploy to, as events name it.', 'Prod'),
    version: required('The version to deploy.', '1.0.3'),
  },
  { additionalProperties: true },
)

const CheckReason = Type.Object({
  rule: Type.Union(
    GUARDRAIL_RULES.map((r) => Type.Literal(r)),
    { description: 'Which guardrail: lock, freeze, bad_version or promotion.' },
  ),
  message: Type.String({
    description: 'The reason in words: who set it, why, and until when.',
    examples: ['Prod is in a freeze window until 2026-12-27T00:00:00.000Z: end of year'],
  }),
  until: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
    description:
      'When this reason stops holding (a lock’s end, the end of the current freeze occurrence, the end of a promotion wait); null when it holds until someone changes it.',
    examples: ['2026-12-27T00:00:00.000Z'],
  }),
})

const CheckAnswer = Type.Object({
  allowed: Type.Boolean({ description: 'True when no guardrail says no (`reasons` is then empty).' }),
  reasons: Type.Array(CheckReason, {
    description: 'Every reason that applies, not only the first: locks, freezes, bad version, promotion.',
  }),
  service: Type.String({
    description: 'The service the rules were applied to (a renamed name: the new one).',
  }),
  environment: Type.String({ description: 'The environment the rules were applied to.' }),
  version: Type.String({ description: 'The version asked about.' }),
})

export function checkRoute(scope: FastifyInstance, { database }: ReadResource): void {
  const { db } = database
  scope.get('/api/v1/check', {
    attachValidation: true,
    // A promotion rule asks whether the version succeeded elsewhere: events acknowledged before
    // the question count.
    ...FRESH,
    schema: {
      operationId: 'checkDeployment',
      tags: ['read'],
      summary: 'May this version be deployed here now?',
      description:
        'Applies the account’s guardrails (environment locks, freeze windows, versions marked bad, promotion rules) to deploying `version` of `service` to `environment` now, as recording would. `allowed` is false when any applies; `reasons` lists every one. Recording never refuses an event: one that breaks a guardrail is stored and carries `guardrails`.',
      security: READ_SECURITY,
      querystring: CheckQuery,
      response: { 200: CheckAnswer, ...READ_PROBLEMS },
    },
    handler: async (request) => {
      const reader = readerOf(request)
      const params = new ParamReader(queryAsSent(request))
      const need = (name: string, max: number): string => {
        const before = params.errors.length
        const value = params.text(name, max)
        if (value === undefined && params.errors.length === before) params.fail(name, `${name} is required`)
        return value ?? ''
      }
      const service = need('service', NAME_MAX)
      const environment = need('environment', NAME_MAX)
      const version = need('version', VERSION_MAX)
      params.check()
      const answer = await checkDeployment(db, reader.accountId, { service, environment, version })
      return {
        allowed: answer.allowed,
        reasons: answer.reasons.map((r) => ({
          rule: r.rule,
          message: r.message,
          until: r.until === null ? null : iso(r.until),
        })),
        service: answer.deployment.service,
        environment: answer.deployment.environment,
        version: answer.deployment.version,
      }
    },
  })
}
