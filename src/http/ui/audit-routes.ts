// Settings → Audit log (SPEC §10): admins read and download their account's entries; nobody edits
// or deletes one (there is no route for it, and the table refuses it).
import { Readable } from 'node:stream'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify'
import { Type } from 'typebox'
import { recordAudit } from '../../domain/audit/log.js'
import {
  AUDIT_CSV_HEADER,
  type AuditQuery,
  auditActorNames,
  auditCsvLine,
  auditEntries,
  auditFilterToQuery,
  auditJson,
  listAuditPage,
  parseAuditQuery,
} from '../../domain/audit/query.js'
import { parseBomParameter, UTF8_BOM } from '../../domain/events/export/format.js'
import { auditPage } from '../../views/audit-page.js'
import { errorPage } from '../../views/auth-pages.js'
import { EXPORT_COMPRESSION } from '../compression.js'
import { HttpProblem, sendProblem } from '../problem.js'
import { auditFrom } from './audit-context.js'
import type { UiContext } from './context.js'

// Each parameter is text, or a list when repeated (parseAuditQuery names those); others are ignored.
const QueryValue = Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())]))
const AuditQuerySchema = Type.Object(
  {
    action: QueryValue,
    actor: QueryValue,
    from: QueryValue,
    to: QueryValue,
    tz: QueryValue,
    before: QueryValue,
    bom: QueryValue,
  },
  { additionalProperties: true },
)
const FORM_FIELDS = ['action', 'actor', 'from', 'to'] as const

function queryString(pairs: Record<string, string>): string {
  const qs = new URLSearchParams(pairs).toString()
  return qs ? `?${qs}` : ''
}

/** The filter as the viewer typed it (with the zone it was typed in), for the form and the links. */
function typed(query: Record<string, unknown>): {
  form: Record<(typeof FORM_FIELDS)[number], string>
  pairs: Record<string, string>
} {
  const form = { action: '', actor: '', from: '', to: '' }
  const pairs: Record<string, string> = {}
  for (const name of FORM_FIELDS) {
    const v = query[name]
    if (typeof v === 'string') {
      form[name] = v
      if (v.trim() !== '') pairs[name] = v.trim()
    }
  }
  const tz = query.tz
  if (typeof tz === 'string' && tz !== '' && (pairs.from || pairs.to)) pairs.tz = tz
  return { form, pairs }
}

function exportFilename(extension: 'csv' | 'json'): string {
  const stamp = new Date().toISOString().replace(/[-:]/g, '').replace(/\..*$/, 'Z')
  return `shiplog-audit-${stamp}.${extension}`
}

export const auditRoutes: FastifyPluginAsync<UiContext> = async (plain, ctx) => {
  const app = plain.withTypeProvider<TypeBoxTypeProvider>()
  const { db } = ctx.database

  const why = 'Only an admin of this account can read the audit log. Ask one of them.'
  const admin = (request: FastifyRequest, reply: FastifyReply) => ctx.requireAdmin(request, reply, why)

  const read = (request: FastifyRequest): AuditQuery => {
    if (request.validationError) {
      return { filter: {}, errors: [{ field: 'query', message: 'the filter is not valid here' }] }
    }
    return parseAuditQuery(request.query as Record<string, unknown>)
  }

  app.get('/settings/audit', async (request, reply) => {
    const q = request.url.indexOf('?')
    return reply.redirect(`/settings/audit/${q === -1 ? '' : request.url.slice(q)}`, 301)
  })

  const schema = { querystring: AuditQuerySchema }

  app.get('/settings/audit/', { schema, attachValidation: true }, async (request, reply) => {
    const user = admin(request, reply)
    if (!user) return reply
    const query = read(request)
    // The "CSV for Excel" box (src/views/downloads.ts) comes back to the page as `bom`.
    const { bom, error: bomError } = parseBomParameter((request.query as Record<string, unknown>).bom)
    if (bomError) query.errors.push(bomError)
    const { form, pairs } = typed(request.query as Record<string, unknown>)
    const common = {
      user,
      csrfToken: ctx.csrfToken(request, reply),
      form,
      actors: await auditActorNames(db, user.accountId),
    }
    if (query.errors.length > 0) {
      return ctx.page(reply, auditPage({ ...common, errors: query.errors, listing: null }), 422)
    }
    const page = await listAuditPage(db, user.accountId, query.filter, query.before)
    const filtered = Object.keys(auditFilterToQuery(query.filter)).length > 0
    return ctx.page(
      reply,
      auditPage({
        ...common,
        errors: [],
        listing: {
          entries: page.entries,
          filtered,
          olderHref:
            page.olderCursor === null
              ? null
              : `/settings/audit/${queryString({ ...pairs, before: String(page.olderCursor) })}`,
          firstHref: query.before === undefined ? null : `/settings/audit/${queryString(pairs)}`,
          downloads: {
            pagePath: '/settings/audit/',
            pageQuery: query.before === undefined ? pairs : { ...pairs, before: String(query.before) },
            csvHref: `/settings/audit/export.csv${queryString({ ...pairs, ...(bom ? { bom: '1' } : {}) })}`,
            jsonHref: `/settings/audit/export.json${queryString(pairs)}`,
            bom,
          },
        },
      }),
    )
  })

  for (const format of ['csv', 'json'] as const) {
    app.get(
      `/settings/audit/export.${format}`,
      // Compressed at the levels that keep up with the stream (src/http/compression.ts).
      { schema, attachValidation: true, compress: EXPORT_COMPRESSION },
      async (request, reply) => {
        const user = admin(request, reply)
        if (!user) return reply
        const { filter, errors: filterErrors } = read(request)
        // As on /logs/: a byte-order mark for Excel when asked, on the CSV only.
        const { bom, error: bomError } =
          format === 'csv'
            ? parseBomParameter((request.query as Record<string, unknown>).bom)
            : { bom: false, error: undefined }
        const errors = bomError ? [...filterErrors, bomError] : filterErrors
        if (errors.length > 0) {
          const detail = errors.map((e) => `${e.message}.`).join(' ')
          if (/\btext\/html\b/.test(request.headers.accept ?? '')) {
            const page = errorPage({
              status: 422,
              title: 'Invalid filter',
              detail,
              user,
              csrfToken: ctx.csrfToken(request, reply),
            })
            return ctx.page(reply, page, 422)
          }
          return sendProblem(
            reply,
            new HttpProblem(422, 'invalid-filter', 'Invalid filter', detail, { errors }),
          )
        }
        // Downloading the log is itself recorded; the entry is written first, so it is in the file too.
        await recordAudit(db, {
          ...auditFrom(request, user),
          action: 'export.downloaded',
          target: `audit log (${format.toUpperCase()})`,
          details: auditFilterToQuery(filter),
        })
        const entries = auditEntries(db, user.accountId, filter)
        // The first entry is read before answering, so a database error is an error answer, not a
        // download cut short.
        const first = await entries.next()
        async function* body(): AsyncGenerator<string | Buffer> {
          if (format === 'csv') {
            if (bom) yield UTF8_BOM
            yield AUDIT_CSV_HEADER
            if (!first.done) yield auditCsvLine(first.value)
            for await (const entry of entries) yield auditCsvLine(entry)
            return
          }
          yield '['
          if (!first.done) yield `\n${auditJson(first.value)}`
          for await (const entry of entries) yield `,\n${auditJson(entry)}`
          yield '\n]\n'
        }
        return reply
          .header(
            'content-type',
            format === 'csv' ? 'text/csv; charset=utf-8' : 'application/json; charset=utf-8',
          )
          .header('content-disposition', `attachment; filename="${exportFilename(format)}"`)
          .header('cache-control', 'no-store')
          .header('x-content-type-options', 'nosniff')
          .send(Readable.from(body()))
      },
    )
  }
}
