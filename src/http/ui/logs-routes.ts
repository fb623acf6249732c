// The /logs/ page and its CSV and JSON downloads, always within the viewer's account.
import { Readable } from 'node:stream'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify'
import { type Static, Type } from 'typebox'
import { recordAudit } from '../../domain/audit/log.js'
import { CHAIN_HEAD_HEADER, eventsHeadFor } from '../../domain/chain/heads.js'
import { accountNames, byName } from '../../domain/events/account-names.js'
import type { FieldError } from '../../domain/events/event.js'
import { anyEvent, listEventPage } from '../../domain/events/event-pages.js'
import { exportEvents, parseBomParameter, UTF8_BOM } from '../../domain/events/export/index.js'
import {
  FILTER_FIELDS,
  filterToQuery,
  type LogsQuery,
  parseLogsQuery,
} from '../../domain/events/logs-query.js'
import { nameHints } from '../../domain/events/name-hints.js'
import { errorPage } from '../../views/auth-pages.js'
import { logsPage } from '../../views/logs-page.js'
import { nameHintsBlock } from '../../views/name-hints.js'
import { EVENT_EXPORT_COMPRESSION } from '../compression.js'
import { HttpProblem, sendProblem } from '../problem.js'
import { auditFrom } from './audit-context.js'
import type { UiContext } from './context.js'

/**
 * The query string of /logs/ and its exports: each parameter text, or a list when it was repeated
 * (parseLogsQuery refuses those, naming them). Other parameters are allowed and ignored. The shape
 * alone is checked here; the rules (characters, lengths, dates) are the domain's, so that every bad
 * parameter is listed at once, in the page's own error display or the export's 422.
 */
const QueryValue = Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())]))
const LogsQuerySchema = Type.Object(
  {
    service: QueryValue,
    environment: QueryValue,
    status: QueryValue,
    version: QueryValue,
    from: QueryValue,
    to: QueryValue,
    tz: QueryValue,
    before: QueryValue,
    after: QueryValue,
    limit: QueryValue,
    bom: QueryValue,
  },
  { additionalProperties: true },
)
type LogsQueryString = Static<typeof LogsQuerySchema>

function queryString(pairs: Record<string, string>): string {
  const qs = new URLSearchParams(pairs).toString()
  return qs ? `?${qs}` : ''
}

/** The query as parsed, or (should Fastify's own check ever refuse it) each refused parameter. */
function readQuery(
  request: Pick<FastifyRequest, 'validationError'> & { query: LogsQueryString },
  what: 'page' | 'export',
): LogsQuery {
  if (request.validationError) {
    const errors: FieldError[] = request.validationError.validation.map((v: { instancePath: string }) => {
      const field = v.instancePath.replace(/^\//, '') || 'query'
      return { field, message: `${field} is not valid here` }
    })
    return { filter: {}, page: { limit: 1, limitGiven: false }, errors }
  }
  return parseLogsQuery(request.query, what)
}

/** The filter as the user typed it, to put back into the form. */
function formValues(query: LogsQueryString): Record<string, string> {
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

/**
 * The export's answer to a bad query string: 422 listing each bad parameter, as problem+json for
 * programs, and as a page (with the navigation and Log out) for a person whose browser followed
 * an edited link, like the 404 answer.
 */
function invalidFilter(
  ctx: UiContext,
  request: FastifyRequest,
  reply: FastifyReply,
  errors: FieldError[],
): FastifyReply {
  const detail = errors.map((e) => `${e.message}.`).join(' ')
  if (/\btext\/html\b/.test(request.headers.accept ?? '')) {
    const page = errorPage({
      status: 422,
      title: 'Invalid filter',
      detail,
      user: request.user,
      csrfToken: reply.generateCsrf(),
    })
    return ctx.page(reply, page, 422)
  }
  return sendProblem(reply, new HttpProblem(422, 'invalid-filter', 'Invalid filter', detail, { errors }))
}

export const logsRoutes: FastifyPluginAsync<UiContext> = async (plain, ctx) => {
  const app = plain.withTypeProvider<TypeBoxTypeProvider>()
  const { db } = ctx.database
  const dialect = ctx.database.dialect

  app.get('/logs', async (request, reply) => {
    const q = request.url.indexOf('?')
    return reply.redirect(`/logs/${q === -1 ? '' : request.url.slice(q)}`, 301)
  })

  const schema = { querystring: LogsQuerySchema }

  app.get('/logs/', { schema, attachValidation: true }, async (request, reply) => {
    const user = ctx.requireUser(request, reply)
    if (!user) return reply
    const { filter, page: position, errors } = readQuery(request, 'page')
    // The "CSV for Excel" box (src/views/downloads.ts) comes back to the page as `bom`.
    const { bom, error: bomError } = parseBomParameter(request.query.bom)
    if (bomError) errors.push(bomError)
    const names = await accountNames(db, user.accountId)
    const suggestions = {
      services: [...names.service].sort(byName),
      environments: [...names.environment].sort(byName),
    }
    const common = {
      user,
      csrfToken: reply.generateCsrf(),
      form: formValues(request.query),
      suggestions,
      baseUrl: ctx.baseUrl(request),
    }
    if (errors.length > 0) {
      // Nothing but the errors: a list under them would look like the filter's result.
      return ctx.page(reply, logsPage({ ...common, filter: {}, errors, listing: null }), 422)
    }
    const { limit } = position
    const page = await listEventPage(
      db,
      dialect,
      user.accountId,
      filter,
      { before: position.before, after: position.after },
      limit,
      names,
    )
    const filterQuery = filterToQuery(filter)
    const hints = nameHintsBlock(nameHints(filter, names), filterQuery)
    const limitQuery: Record<string, string> = position.limitGiven ? { limit: String(limit) } : {}
    return ctx.page(
      reply,
      logsPage({
        ...common,
        filter,
        errors: [],
        nameHints: hints,
        listing: {
          rows: page.rows,
          olderHref:
            page.olderCursor === null
              ? null
              : `/logs/${queryString({ ...filterQuery, ...limitQuery, before: String(page.olderCursor) })}`,
          newerHref:
            page.newerCursor === null
              ? null
              : `/logs/${queryString({ ...filterQuery, ...limitQuery, after: String(page.newerCursor) })}`,
          downloads: {
            pagePath: '/logs/',
            pageQuery: {
              ...filterQuery,
              ...limitQuery,
              ...(position.before === undefined ? {} : { before: String(position.before) }),
              ...(position.after === undefined ? {} : { after: String(position.after) }),
            },
            csvHref: `/logs/export.csv${queryString({ ...filterQuery, ...(bom ? { bom: '1' } : {}) })}`,
            jsonHref: `/logs/export.json${queryString(filterQuery)}`,
            bom,
          },
          accountIsEmpty: page.rows.length === 0 && !(await anyEvent(db, user.accountId)),
        },
      }),
    )
  })

  for (const format of ['csv', 'json'] as const) {
    // Compressed at the levels that keep up with the stream (src/http/compression.ts).
    const options = { schema, attachValidation: true, compress: EVENT_EXPORT_COMPRESSION }
    app.get(`/logs/export.${format}`, options, async (request, reply) => {
      const user = ctx.requireUser(request, reply)
      if (!user) return reply
      const { filter, errors } = readQuery(request, 'export')
      // The byte-order mark is the CSV's alone: JSON has none (RFC 8259 §8.1), and ignores `bom`
      // like any other parameter it does not take.
      const { bom, error: bomError } =
        format === 'csv' ? parseBomParameter(request.query.bom) : { bom: false, error: undefined }
      if (bomError) errors.push(bomError)
      if (errors.length > 0) return invalidFilter(ctx, request, reply, errors)
      // A download is a read: its entry stands alone (there is no change to share a transaction with).
      await recordAudit(db, {
        ...auditFrom(request, user),
        action: 'export.downloaded',
        target: `events (${format.toUpperCase()})`,
        details: filterToQuery(filter),
      })
      const chunks = exportEvents(ctx.database, user.accountId, filter, format)
      // The first step reads the first chunk: a database error is still an error answer here, not
      // a download cut short.
      const first = await chunks.next()
      // Tamper evidence: the chain head as of this download (docs/SECURITY.md); the body is unchanged.
      const chainHead = await eventsHeadFor(ctx.database.db, null)
      if (chainHead !== null) reply.header(CHAIN_HEAD_HEADER, chainHead)
      async function* body() {
        if (bom) yield UTF8_BOM
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
