// GET /api/v1/deployments: the deployments derived from the events, newest first (SPEC §6.1, §7).
import type { FastifyInstance } from 'fastify'
import { type Static, Type } from 'typebox'
import { stallMsOf } from '../../domain/board/settings.js'
import { type Incident, incidentsOf } from '../../domain/deployments/incident-store.js'
import { listDeployments } from '../../domain/deployments/queries.js'
import { clockSkewed, type Deployment, durationMs, outcomeAt } from '../../domain/deployments/rules.js'
import { FRESH } from '../plugins/fresh-deployments.js'
import { READ_SECURITY } from './openapi-schemas.js'
import { readerOf } from './read-auth.js'
import { iso, ParamReader, queryAsSent } from './read-params.js'
import {
  filterText,
  Instant,
  linkNext,
  NextCursor,
  NullableString,
  OUTCOMES,
  OutcomeSchema,
  pageParams,
  READ_PROBLEMS,
  type ReadResource,
} from './read-shared.js'

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

export const IncidentSchema = Type.Union(
  [
    Type.Object({
      link: Type.Union([Type.String({ format: 'uri' }), Type.Null()], {
        description: 'Where the incident is described.',
        examples: ['https://status.example.com/incidents/42'],
      }),
      note: NullableString,
      fixed_by: Type.Union([Type.Integer(), Type.Null()], {
        description: 'The id of the deployment that fixed it; null while none is named.',
        examples: [131],
      }),
    }),
    Type.Null(),
  ],
  {
    description:
      'Set when it is marked as having caused an incident (POST /api/v1/deployments/{id}/incident): it then counts as a failure in change failure rate, restored by `fixed_by` when named, else by the next success.',
  },
)

/** A mark as the API shows it. */
export function toApiIncident(incident: Incident | undefined): Static<typeof IncidentSchema> {
  if (!incident) return null
  return { link: incident.link, note: incident.note, fixed_by: incident.fixedBy }
}

/** A listed deployment: the stream's shape, and its incident mark. */
const ListedDeploymentSchema = Type.Object({ ...DeploymentSchema.properties, incident: IncidentSchema })

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
const DeploymentsAnswer = Type.Object({
  deployments: Type.Array(ListedDeploymentSchema),
  next_cursor: NextCursor,
})

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

export function deploymentsRoute(scope: FastifyInstance, { database, cursors }: ReadResource): void {
  const { db } = database
  scope.get('/api/v1/deployments', {
    attachValidation: true,
    ...FRESH,
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
      const incidents = await incidentsOf(
        db,
        reader.accountId,
        shown.map((d) => d.id),
      )
      return {
        deployments: shown.map((d) => ({
          ...toApiDeployment(d, now, stallMs),
          incident: toApiIncident(incidents.get(d.id)),
        })),
        next_cursor: next,
      }
    },
  })
}
