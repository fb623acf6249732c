// The /logs/ page and its CSV and JSON downloads, always within the viewer's account.
import { Readable } from 'node:stream'
import type { FastifyPluginAsync, FastifyRequest } from 'fastify'
import { exportEvents } from '../../domain/events/export.js'
import {
  type EventFilter,
  FILTER_FIELDS,
  filterToQuery,
  listEventPage,
  parseEventFilter,
  recentNames,
} from '../../domain/events/queries.js'
import { logsPage } from '../../views/logs-page.js'
import { HttpProblem } from '../problem.js'
import type { UiContext } from './plugin.js'

const PAGE_SIZE = 50
const MAX_PAGE_SIZE = 500

type Query = Record<string, string | string[] | undefined>

function queryString(pairs: Record<string, string>): string {
  const qs = new URLSearchParams(pairs).toString()
  return qs ? `?${qs}` : ''
}

function cursor(value: unknown): number | undefined {
  return typeof value === 'string' && /^\d{1,15}$/.test(value) ? Number(value) : undefined
}

/** The filter as the user typed it, to put back into the form. */
function formValues(query: Query): Record<string, string> {
  const form: Record<string, string> = {}
  for (const name of FILTER_FIELDS) {
    const v = query[name]
    form[name] = typeof v === 'string' ? v : ''
  }
  return form
}

function exportFilename(extension: 'csv' | 'json'): string {
  const stamp = new Date().toISOString().replace(/[-:]/g, '').replace(/\..*$/, 'Z')
  return `shiplog-events-${stamp}.${extension}`
}

export const logsRoutes: FastifyPluginAsync<UiContext> = async (app, ctx) => {
  const { db } = ctx.database
  const dialect = ctx.database.dialect

  app.get('/logs', async (request, reply) => {
    const q = request.url.indexOf('?')
    return reply.redirect(`/logs/${q === -1 ? '' : request.url.slice(q)}`, 301)
  })

  app.get('/logs/', async (request, reply) => {
    const user = ctx.requireUser(request, reply)
    if (!user) return reply
    const query = request.query as Query
    const { filter, errors } = parseEventFilter(query)
    const requested = cursor(query.limit)
    const limit = Math.min(Math.max(requested ?? PAGE_SIZE, 1), MAX_PAGE_SIZE)
    const page = await listEventPage(
      db,
      dialect,
      user.accountId,
      filter,
      { before: cursor(query.before), after: cursor(query.after) },
      limit,
    )
    const filterQuery = filterToQuery(filter)
    const limitQuery: Record<string, string> = requested ? { limit: String(limit) } : {}
    const [suggestions, anyEvent] = await Promise.all([
      recentNames(db, user.accountId),
      page.rows.length > 0
        ? Promise.resolve(true)
        : db
            .selectFrom('events')
            .select('id')
            .where('account_id', '=', user.accountId)
            .limit(1)
            .executeTakeFirst()
            .then(Boolean),
    ])
    return ctx.page(
      reply,
      logsPage({
        user,
        csrfToken: reply.generateCsrf(),
        filter,
        form: formValues(query),
        errors: errors.map((e) => `${e.message}.`),
        rows: page.rows,
        olderHref:
          page.olderCursor === null
            ? null
            : `/logs/${queryString({ ...filterQuery, ...limitQuery, before: String(page.olderCursor) })}`,
        newerHref:
          page.newerCursor === null
            ? null
            : `/logs/${queryString({ ...filterQuery, ...limitQuery, after: String(page.newerCursor) })}`,
        csvHref: `/logs/export.csv${queryString(filterQuery)}`,
        jsonHref: `/logs/export.json${queryString(filterQuery)}`,
        suggestions,
        accountIsEmpty: !anyEvent,
        baseUrl: ctx.baseUrl(request),
      }),
      errors.length > 0 ? 400 : 200,
    )
  })

  const exportFilter = (request: FastifyRequest): EventFilter => {
    const { filter, errors } = parseEventFilter(request.query as Query)
    if (errors.length > 0) {
      throw new HttpProblem(
        400,
        'invalid-filter',
        'Invalid filter',
        errors.map((e) => e.message).join('; '),
        {
          errors,
        },
      )
    }
    return filter
  }

  for (const format of ['csv', 'json'] as const) {
    app.get(`/logs/export.${format}`, async (request, reply) => {
      const user = ctx.requireUser(request, reply)
      if (!user) return reply
      const filter = exportFilter(request)
      const chunks = exportEvents(ctx.database, user.accountId, filter, format)
      // The first step reads the first chunk: a database error is still an error answer here, not
      // a download cut short.
      const first = await chunks.next()
      async function* body() {
        if (!first.done) yield first.value
        yield* chunks
      }
      return reply
        .header(
          'content-type',
          format === 'csv' ? 'text/csv; charset=utf-8' : 'application/json; charset=utf-8',
        )
        .header('content-disposition', `attachment; filename="${exportFilename(format)}"`)
        .header('cache-control', 'no-store')
        .header('x-content-type-options', 'nosniff')
        .send(Readable.from(body(), { objectMode: false }))
    })
  }
}
