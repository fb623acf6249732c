// GET /api/v1/events: the account's events, newest first, a page at a time (SPEC §7).
import type { FastifyInstance } from 'fastify'
import { Type } from 'typebox'
import { CHAIN_HEAD_HEADER, eventsHeadFor } from '../../domain/chain/heads.js'
import { ApiEventSchema, toApiEvent } from '../../domain/events/event.js'
import { listEventPage } from '../../domain/events/event-pages.js'
import type { EventFilter } from '../../domain/events/logs-query.js'
import { READ_SECURITY } from './openapi-schemas.js'
import { readerOf } from './read-auth.js'
import { ParamReader, queryAsSent, readEventNames } from './read-params.js'
import {
  eventNameParams,
  linkNext,
  NextCursor,
  pageParams,
  READ_PROBLEMS,
  type ReadResource,
  windowParams,
} from './read-shared.js'

const EventsQuery = Type.Object(
  {
    ...eventNameParams,
    ...windowParams,
    ...pageParams,
  },
  { additionalProperties: true },
)

const EventsAnswer = Type.Object({ events: Type.Array(ApiEventSchema), next_cursor: NextCursor })

export function eventsRoute(scope: FastifyInstance, { database, cursors }: ReadResource): void {
  const { db } = database
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
}
