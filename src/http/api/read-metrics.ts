// GET /api/v1/metrics: one environment's delivery metrics over a window (SPEC §6.2, §7).
import type { FastifyInstance } from 'fastify'
import { type Static, Type } from 'typebox'
import { environmentsInOrder } from '../../domain/board/environments.js'
import { coverageOf, dataStart, daySlices, frequencyPerDay } from '../../domain/deployments/coverage.js'
import { DAY_MS, type Spread } from '../../domain/deployments/metrics.js'
import { metricsForWindow } from '../../domain/deployments/queries.js'
import { hasService } from '../../domain/services.js'
import { FRESH } from '../plugins/fresh-deployments.js'
import { HttpProblem } from '../problem.js'
import { problemResponses, READ_SECURITY } from './openapi-schemas.js'
import { readerOf } from './read-auth.js'
import { iso, ParamReader, queryAsSent, windowProblem } from './read-params.js'
import { filterText, NullableString, READ_PROBLEMS, type ReadResource } from './read-shared.js'

const METRICS_DEFAULT_DAYS = 30

const SpreadSchema = Type.Union([
  Type.Object({ median: Type.Number(), p90: Type.Number(), count: Type.Integer() }),
  Type.Null(),
])
const MetricsQuery = Type.Object(
  {
    environment: filterText("Environment (exact); default the last in the account's order.", 'prod'),
    service: filterText('One service (exact); default all.', 'App1'),
    from: filterText('Window start, inclusive (ISO 8601); default 30 days before `to`.', '2026-11-01'),
    to: filterText('Window end, exclusive (ISO 8601); default now.', '2026-12-01'),
  },
  { additionalProperties: true },
)
const MetricsAnswer = Type.Object({
  from: Type.String({ format: 'date-time' }),
  to: Type.String({ format: 'date-time' }),
  environment: Type.String(),
  service: NullableString,
  deployments_succeeded: Type.Integer(),
  deployments_failed: Type.Integer(),
  rolled_back: Type.Integer(),
  deployment_frequency_per_day: Type.Number({
    description: 'deployments_succeeded ÷ days in the window (SPEC §6.2), whatever part of it holds data.',
  }),
  deployment_frequency_per_covered_day: Type.Number({
    description:
      'deployments_succeeded ÷ days_covered: the days of the window that the data covers (0 when it covers none). Differs from deployment_frequency_per_day on the first days of use and when retention keeps fewer days than the window.',
  }),
  days_in_window: Type.Integer({
    description: 'The window in days (24-hour slices from `from`; a shorter last one counts).',
  }),
  days_covered: Type.Integer({
    description:
      "The window's days that hold data: from the account's earliest kept event (or the retention cut-off, when later) up to now. A day begun counts.",
  }),
  covered_from: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
    description: 'Where the data the window covers starts; null when it covers none of the window.',
  }),
  covered_to: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
    description: 'Where it ends: `to`, or now when `to` is later.',
  }),
  change_failure_rate: Type.Union([Type.Number(), Type.Null()], {
    description:
      '(deployments_failed + rolled_back + marked successes that neither failed nor were rolled back) ÷ (deployments_succeeded + deployments_failed); null when nothing finished. Without incident marks: SPEC §6.2.',
  }),
  time_to_restore_ms: Type.Union(SpreadSchema.anyOf, {
    description:
      'Per failed, rolled-back or incident-marked deployment: from its finish to the finish of the deployment its mark names as the fix (fixed_by), else of the next success in its service and environment.',
  }),
  duration_ms: SpreadSchema,
  lead_time_ms: SpreadSchema,
  lead_time_from: Type.Object(
    { commit: Type.Integer(), first_deployment: Type.Integer() },
    {
      description:
        'How many lead-time values ran from the commit (`commit_time` on its events, DORA) and how many from the start of the version’s first deployment (no commit time sent).',
    },
  ),
  incidents_marked: Type.Integer({
    description:
      'Deployments counted here that are marked as having caused an incident (POST /api/v1/deployments/{id}/incident); 0 when none, and then every figure is SPEC §6.2’s plain one.',
  }),
})

function spread(s: Spread | null): Static<typeof SpreadSchema> {
  return s === null ? null : { median: s.median, p90: s.p90, count: s.count }
}

const notFound = (slug: string, detail: string) => new HttpProblem(404, slug, 'Not found', detail)

export function deliveryMetricsRoute(scope: FastifyInstance, { database }: ReadResource): void {
  const { db } = database
  scope.get('/api/v1/metrics', {
    attachValidation: true,
    ...FRESH,
    schema: {
      operationId: 'getDeliveryMetrics',
      tags: ['read'],
      summary: 'Delivery metrics of one environment over a window',
      description:
        'SPEC §6.2, counting deployments that finished in [from, to). An environment or service the account has no deployments in is a 404 (type urn:shiplog:problem:unknown-environment or unknown-service), so a typo is not read as "no deployments".',
      security: READ_SECURITY,
      querystring: MetricsQuery,
      response: { 200: MetricsAnswer, ...READ_PROBLEMS, ...problemResponses(404) },
    },
    handler: async (request) => {
      const reader = readerOf(request)
      const params = new ParamReader(queryAsSent(request))
      const environmentParam = params.text('environment', 100)
      const service = params.text('service', 100) ?? null
      const window = params.window()
      params.check()
      const now = Date.now()
      const to = window.to ?? now
      const from = window.from ?? to - METRICS_DEFAULT_DAYS * DAY_MS
      // Checked again with the defaults filled in: a `from` alone after now is still a bad window.
      if (window.to === undefined) {
        const problem = windowProblem(from, to)
        if (problem) params.fail('from', `${problem} (to defaults to now)`)
      }
      params.check()
      const all = await environmentsInOrder(db, reader.accountId, { includeHidden: true })
      const visible = await environmentsInOrder(db, reader.accountId)
      const environment = environmentParam ?? visible.at(-1) ?? all.at(-1)
      if (environment === undefined) {
        throw notFound(
          'unknown-environment',
          'This account has no deployments yet, so no environment to measure.',
        )
      }
      if (!all.includes(environment)) {
        throw notFound(
          'unknown-environment',
          `This account has no environment named "${environment}" (names are exact; known: ${all.join(', ')}).`,
        )
      }
      if (service !== null && !(await hasService(db, reader.accountId, service))) {
        throw notFound(
          'unknown-service',
          `This account has no deployments of a service named "${service}" (names are exact).`,
        )
      }
      const m = await metricsForWindow(db, reader.accountId, { environment, service, from, to })
      const coverage = coverageOf(daySlices(from, to), await dataStart(db, reader.accountId, now), now)
      return {
        from: iso(from),
        to: iso(to),
        environment,
        service,
        deployments_succeeded: m.succeeded.length,
        deployments_failed: m.failed.length,
        rolled_back: m.rolledBack.length,
        deployment_frequency_per_day: m.deploymentFrequencyPerDay,
        deployment_frequency_per_covered_day: frequencyPerDay(m.succeeded.length, coverage),
        days_in_window: coverage.daysInWindow,
        days_covered: coverage.daysCovered,
        covered_from: coverage.covered ? iso(coverage.covered.from) : null,
        covered_to: coverage.covered ? iso(coverage.covered.to) : null,
        change_failure_rate: m.changeFailureRate,
        time_to_restore_ms: spread(m.timeToRestore.spread),
        duration_ms: spread(m.duration.spread),
        lead_time_ms: spread(m.leadTime.spread),
        lead_time_from: m.leadTime.from,
        incidents_marked: m.incidents.marked.length,
      }
    },
  })
}
