// GET /api/v1/services: the board, what runs where, now or at an instant (SPEC §7).
import type { FastifyInstance } from 'fastify'
import { type Static, Type } from 'typebox'
import { boardCells } from '../../domain/board/cells.js'
import { environmentsInOrder } from '../../domain/board/environments.js'
import { stallMsOf } from '../../domain/board/settings.js'
import { byName } from '../../domain/events/account-names.js'
import { teamsOf } from '../../domain/services.js'
import { FRESH } from '../plugins/fresh-deployments.js'
import { READ_SECURITY } from './openapi-schemas.js'
import { readerOf } from './read-auth.js'
import { iso, ParamReader, queryAsSent } from './read-params.js'
import { filterText, NullableString, OutcomeSchema, READ_PROBLEMS, type ReadResource } from './read-shared.js'

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

export function boardRoute(scope: FastifyInstance, { database }: ReadResource): void {
  const { db } = database
  scope.get('/api/v1/services', {
    attachValidation: true,
    ...FRESH,
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
}
