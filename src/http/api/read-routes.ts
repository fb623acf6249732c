// The read API (SPEC §7): /api/v1/events, /api/v1/deployments, /api/v1/services and
// /api/v1/metrics, for a key with the read scope or a logged-in browser session.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { type Static, Type } from 'typebox'
import { boardCells } from '../../domain/board/cells.js'
import { environmentsInOrder } from '../../domain/board/environments.js'
import { stallMsOf } from '../../domain/board/settings.js'
import { CHAIN_HEAD_HEADER, eventsHeadFor } from '../../domain/chain/heads.js'
import { coverageOf, dataStart, daySlices, frequencyPerDay } from '../../domain/deployments/coverage.js'
import { DAY_MS, type Spread } from '../../domain/deployments/metrics.js'
import { listDeployments, metricsForWindow } from '../../domain/deployments/queries.js'
import {
  clockSkewed,
  type Deployment,
  type DeploymentOutcome,
  durationMs,
  outcomeAt,
} from '../../domain/deployments/rules.js'
import { byName } from '../../domain/events/account-names.js'
import { ApiEventSchema, toApiEvent } from '../../domain/events/event.js'
import { listEventPage } from '../../domain/events/event-pages.js'
import type { EventFilter } from '../../domain/events/logs-query.js'
import { hasService, teamsOf } from '../../domain/services.js'
import { EVENT_STATUSES } from '../../text-rules.js'
import { HttpProblem, methodNotAllowed } from '../problem.js'
import { problemResponses, READ_SECURITY } from './openapi-schemas.js'
import { type ReadOptions, readerOf, requireReader } from './read-auth.js'
import {
  CursorCodec,
  iso,
  keepFieldsAsSent,
  MAX_LIMIT,
  ParamReader,
  queryAsSent,
  readEventNames,
  windowProblem,
} from './read-params.js'

const OUTCOMES: readonly DeploymentOutcome[] = ['in_progress', 'succeeded', 'failed', 'stalled']
const OutcomeSchema = Type.Union([
  Type.Literal('in_progress'),
  Type.Literal('succeeded'),
  Type.Literal('failed'),
  Type.Literal('stalled'),
])
const METRICS_DEFAULT_DAYS = 30

const NullableString = Type.Union([Type.String(), Type.Null()])
const Instant = (description: string, example: string) =>
  Type.String({ format: 'date-time', description, examples: [example] })
const NextCursor = Type.Union([Type.String(), Type.Null()], {
  description: 'Pass as `cursor` for the next page; null on the last page.',
  examples: ['ZTE6MTIz'],
})

const filterText = (description: string, example?: string) =>
  Type.Optional(Type.String({ description, ...(example ? { examples: [example] } : {}) }))
const windowParams = {
  from: filterText(
    'Start of the window, inclusive: ISO 8601 (a date means 00:00 UTC; a time without zone is UTC).',
    '2026-11-01T00:00:00Z',
  ),
  to: filterText(
    'End of the window, exclusive: ISO 8601. Must be after `from`, at most 5 years later.',
    '2026-12-01',
  ),
}
const pageParams = {
  limit: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: MAX_LIMIT,
      description: 'Page length, 1–1000; default 100.',
      examples: [100],
    }),
  ),
  cursor: filterText('The `next_cursor` of the previous page (opaque).'),
}

/** The event filter's names, status and version text (readEventNames), shared with /api/v1/stream. */
export const eventNameParams = {
  service: filterText('Service name (letter case ignored).', 'App1'),
  environment: filterText('Environment name (letter case ignored).', 'Prod'),
  status: Type.Optional(
    Type.String({ enum: [...EVENT_STATUSES], description: 'Deploying, Deployed or Failed (any case).' }),
  ),
  version: filterText('Text the version contains (letter case ignored).', '1.0'),
}

const EventsQuery = Type.Object(
  {
    ...eventNameParams,
    ...windowParams,
    ...pageParams,
  },
  { additionalProperties: true },
)

const EventsAnswer = Type.Object({ events: Type.Array(ApiEventSchema), next_cursor: NextCursor })

export const DeploymentSchema = Type.Object({
  id: Type.Integer({ description: 'The id of the event that opened it.', examples: [120] }),
  service: Type.String({ examples: ['App1'] }),
  environment: Type.String({ examples: ['Prod'] }),
  version: Type.String({ examples: ['1.0.3'] }),
  outcome: Type.Union(OutcomeSchema.anyOf, {
    description: "Open deployments are in_progress, or stalled once older than the account's stall time.",
  }),
  started_at: Instant(
    'When it started (for an instant deployment: when it finished).',
    '2026-11-21T22:38:10.000Z',
  ),
  finished_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
    examples: ['2026-11-21T22:40:00.123Z'],
  }),
  duration_ms: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()], {
    description:
      'finished_at − started_at; null while open, for instant deployments, and when clock_skew is true (never negative).',
    examples: [110123],
  }),
  clock_skew: Type.Boolean({
    description:
      "Its end was received with an earlier time than its start (two instances' clocks disagree): it has no duration and is left out of duration figures.",
  }),
  rollback: Type.Boolean({ description: 'It brought back a version that had succeeded here before.' }),
  rolled_back: Type.Boolean({ description: 'A later rollback replaced it.' }),
  deployer: NullableString,
  api_key_name: NullableString,
  event_ids: Type.Array(Type.Integer(), {
    description: 'Its events, in arrival order.',
    examples: [[120, 125]],
  }),
})

const DeploymentsQuery = Type.Object(
  {
    service: filterText('Service name (exact).', 'App1'),
    environment: filterText('Environment name (exact).', 'Prod'),
    outcome: Type.Optional(Type.String({ enum: [...OUTCOMES] })),
    from: filterText('Deployments that started at or after this instant (ISO 8601).', '2026-11-01'),
    to: filterText('Deployments that started before this instant (ISO 8601).', '2026-12-01'),
    ...pageParams,
  },
  { additionalProperties: true },
)
const DeploymentsAnswer = Type.Object({ deployments: Type.Array(DeploymentSchema), next_cursor: NextCursor })

const CellSchema = Type.Object({
  version: Type.Union([Type.String(), Type.Null()], {
    description: 'The running version; null if none succeeded yet.',
    examples: ['1.0.3'],
  }),
  since: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
    description: 'When that version finished deploying.',
  }),
  deployment_id: Type.Union([Type.Integer(), Type.Null()]),
  latest: Type.Union([
    Type.Object({
      version: Type.String(),
      outcome: OutcomeSchema,
      started_at: Type.String({ format: 'date-time' }),
    }),
    Type.Null(),
  ]),
})
const ServicesQuery = Type.Object(
  {
    at: filterText(
      'Show the board as it was at this instant (ISO 8601); default now.',
      '2026-11-17T14:00:00Z',
    ),
  },
  { additionalProperties: true },
)
const ServicesAnswer = Type.Object({
  at: Type.String({ format: 'date-time' }),
  environments: Type.Array(Type.String(), {
    description: "In the account's order; hidden ones left out.",
    examples: [['staging', 'prod']],
  }),
  services: Type.Array(
    Type.Object({
      service: Type.String({ examples: ['App1'] }),
      team: NullableString,
      environments: Type.Record(Type.String(), CellSchema),
    }),
  ),
})

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
  change_failure_rate: Type.Union([Type.Number(), Type.Null()]),
  time_to_restore_ms: SpreadSchema,
  duration_ms: SpreadSchema,
  lead_time_ms: SpreadSchema,
  lead_time_from: Type.Object(
    { commit: Type.Integer(), first_deployment: Type.Integer() },
    {
      description:
        'How many lead-time values ran from the commit (`commit_time` on its events, DORA) and how many from the start of the version’s first deployment (no commit time sent).',
    },
  ),
})

const READ_PROBLEMS = problemResponses(401, 403, 422, 429, 503)

export function toApiDeployment(
  d: Deployment,
  now: number,
  stallMs: number,
): Static<typeof DeploymentSchema> {
  return {
    id: d.id,
    service: d.service,
    environment: d.environment,
    version: d.version,
    outcome: outcomeAt(d, now, stallMs),
    started_at: iso(d.startedAt),
    finished_at: d.finishedAt === null ? null : iso(d.finishedAt),
    duration_ms: durationMs(d),
    clock_skew: clockSkewed(d),
    rollback: d.rollback,
    rolled_back: d.rolledBack,
    deployer: d.deployer,
    api_key_name: d.apiKeyName,
    event_ids: d.eventIds,
  }
}

function spread(s: Spread | null): Static<typeof SpreadSchema> {
  return s === null ? null : { median: s.median, p90: s.p90, count: s.count }
}

/**
 * The address of the next page: this request's path and parameters with the new cursor. Root-relative,
 * so it holds behind any proxy.
 */
export function nextLink(request: FastifyRequest, cursor: string): string {
  const path = request.url.split('?')[0] ?? '/'
  const params = new URLSearchParams()
  for (const [name, value] of Object.entries(queryAsSent(request))) {
    if (name === 'cursor' || value === undefined || value === null) continue
    if (Array.isArray(value)) for (const v of value) params.append(name, String(v))
    else params.append(name, String(value))
  }
  params.set('cursor', cursor)
  return `${path}?${params.toString()}`
}

function linkNext(reply: FastifyReply, request: FastifyRequest, cursor: string | null): void {
  if (cursor !== null) reply.header('link', `<${nextLink(request, cursor)}>; rel="next"`)
}

const notFound = (slug: string, detail: string) => new HttpProblem(404, slug, 'Not found', detail)

export async function readRoutes(app: FastifyInstance, options: ReadOptions): Promise<void> {
  const { database } = options
  const { db } = database
  const cursors = new CursorCodec(options.secret)
  for (const path of ['/api/v1/events', '/api/v1/deployments', '/api/v1/services', '/api/v1/metrics']) {
    methodNotAllowed(app, path, ['GET', 'HEAD'])
  }

  await app.register(async (scope) => {
    await requireReader(scope, options, { sessions: true })
    keepFieldsAsSent(scope)

    scope.get('/api/v1/events', {
      attachValidation: true,
      schema: {
        operationId: 'listEvents',
        tags: ['read'],
        summary: 'List events, newest first',
        description:
          'The account\'s events in the shape of the ingest 201 answer, newest first. While more remain, `next_cursor` is set and a `Link: <…>; rel="next"` header carries the same filters.',
        security: READ_SECURITY,
        querystring: EventsQuery,
        response: { 200: EventsAnswer, ...READ_PROBLEMS },
      },
      handler: async (request, reply) => {
        const reader = readerOf(request)
        const params = new ParamReader(queryAsSent(request))
        const filter: EventFilter = readEventNames(params)
        const { from, to } = params.window()
        if (from !== undefined) filter.from = from
        // The listing's upper bound is inclusive; the API's window is [from, to).
        if (to !== undefined) filter.to = to - 1
        const limit = params.limit()
        const before = params.cursor('events', cursors)
        if (before !== undefined) {
          // A keyset over (received_at, id) needs the row the cursor names: one of the account's.
          const row = await db
            .selectFrom('events')
            .select('id')
            .where('account_id', '=', reader.accountId)
            .where('id', '=', before)
            .executeTakeFirst()
          if (!row) params.fail('cursor', 'cursor does not name an event of this account')
        }
        params.check()
        const page = await listEventPage(
          db,
          database.dialect,
          reader.accountId,
          filter,
          before === undefined ? {} : { before },
          limit,
        )
        const next = page.olderCursor === null ? null : cursors.encode('events', page.olderCursor)
        linkNext(reply, request, next)
        // Tamper evidence: the chain head covering the page's newest event (docs/SECURITY.md).
        const chainHead = await eventsHeadFor(
          db,
          page.rows.length === 0 ? null : Math.max(...page.rows.map((r) => r.id)),
        )
        if (chainHead !== null) reply.header(CHAIN_HEAD_HEADER, chainHead)
        return { events: page.rows.map(toApiEvent), next_cursor: next }
      },
    })

    scope.get('/api/v1/deployments', {
      attachValidation: true,
      schema: {
        operationId: 'listDeployments',
        tags: ['read'],
        summary: 'List deployments, newest first',
        description:
          "Deployments derived from the events (SPEC §6.1), newest first by id. Open ones are `in_progress` or, once older than the account's stall time, `stalled`.",
        security: READ_SECURITY,
        querystring: DeploymentsQuery,
        response: { 200: DeploymentsAnswer, ...READ_PROBLEMS },
      },
      handler: async (request, reply) => {
        const reader = readerOf(request)
        const params = new ParamReader(queryAsSent(request))
        const service = params.text('service', 100)
        const environment = params.text('environment', 100)
        const outcome = params.choice('outcome', OUTCOMES)
        const { from, to } = params.window()
        const limit = params.limit()
        const beforeId = params.cursor('deployments', cursors)
        params.check()
        await request.server.shiplog.deployments.current()
        const now = Date.now()
        const stallMs = await stallMsOf(db, reader.accountId)
        const rows = await listDeployments(
          db,
          reader.accountId,
          {
            ...(service ? { service } : {}),
            ...(environment ? { environment } : {}),
            ...(outcome ? { outcome } : {}),
            ...(from === undefined ? {} : { from }),
            ...(to === undefined ? {} : { to }),
          },
          { ...(beforeId === undefined ? {} : { beforeId }), limit: limit + 1 },
          { now, stallMs },
        )
        const more = rows.length > limit
        const shown = more ? rows.slice(0, limit) : rows
        const last = shown.at(-1)
        const next = more && last ? cursors.encode('deployments', last.id) : null
        linkNext(reply, request, next)
        return { deployments: shown.map((d) => toApiDeployment(d, now, stallMs)), next_cursor: next }
      },
    })

    scope.get('/api/v1/services', {
      attachValidation: true,
      schema: {
        operationId: 'getBoard',
        tags: ['read'],
        summary: 'The board: what runs where, now or at an instant',
        description:
          'Every service with, per environment, the running version, since when, and the latest deployment with its outcome as it stood at `at`.',
        security: READ_SECURITY,
        querystring: ServicesQuery,
        response: { 200: ServicesAnswer, ...READ_PROBLEMS },
      },
      handler: async (request) => {
        const reader = readerOf(request)
        const params = new ParamReader(queryAsSent(request))
        const at = params.instant('at')
        params.check()
        await request.server.shiplog.deployments.current()
        const now = Date.now()
        const stallMs = await stallMsOf(db, reader.accountId)
        const [cells, environments, teams] = await Promise.all([
          boardCells(db, reader.accountId, at ?? null, { now, stallMs }),
          environmentsInOrder(db, reader.accountId),
          teamsOf(db, reader.accountId),
        ])
        const shown = new Set(environments)
        const byService = new Map<string, Record<string, Static<typeof CellSchema>>>()
        for (const cell of cells) {
          if (!shown.has(cell.environment)) continue
          const row = byService.get(cell.service) ?? {}
          row[cell.environment] = {
            version: cell.running?.version ?? null,
            since: cell.running?.finishedAt == null ? null : iso(cell.running.finishedAt),
            deployment_id: cell.running?.id ?? null,
            latest: cell.latest
              ? {
                  version: cell.latest.deployment.version,
                  outcome: cell.latest.outcome,
                  started_at: iso(cell.latest.deployment.startedAt),
                }
              : null,
          }
          byService.set(cell.service, row)
        }
        return {
          at: iso(at ?? now),
          environments,
          services: [...byService.keys()].sort(byName).map((service) => ({
            service,
            team: teams.get(service) ?? null,
            // Keys in the environments' order, so a reader that keeps key order sees the board.
            environments: Object.fromEntries(
              environments.flatMap((e) => {
                const cell = byService.get(service)?.[e]
                return cell ? [[e, cell]] : []
              }),
            ),
          })),
        }
      },
    })

    scope.get('/api/v1/metrics', {
      attachValidation: true,
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
        await request.server.shiplog.deployments.current()
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
        }
      },
    })
  })
}
