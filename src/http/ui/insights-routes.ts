// /insights/ and the deployments behind each of its figures, always within the viewer's account.
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify'
import { type Static, Type } from 'typebox'
import { coverageOf, dataStart } from '../../domain/deployments/coverage.js'
import { deploymentDetails } from '../../domain/deployments/details.js'
import {
  accountEnvironments,
  accountServices,
  type DayBucket,
  dayBuckets,
  daysBetween,
  deploymentsWithIds,
  FLAG_KINDS,
  flagCounts,
  guardrailFlagsOf,
  type InsightsWindow,
  isIsoDate,
  LIST_KINDS,
  type ListKind,
  listFor,
  MAX_WINDOW_DAYS,
  namedWindow,
  RANGES,
  type RangeName,
  windowOf,
} from '../../domain/deployments/insights.js'
import type { Metrics } from '../../domain/deployments/metrics.js'
import { metricsForWindow } from '../../domain/deployments/queries.js'
import type { FieldError } from '../../domain/events/event.js'
import { knownZone } from '../../domain/time-zones.js'
import { errorPage } from '../../views/auth-pages.js'
import { deploymentsListPage, type WindowQuery } from '../../views/deployments-list.js'
import { insightsPage, windowText } from '../../views/insights-page.js'
import { FRESH } from '../plugins/fresh-deployments.js'
import type { UiContext } from './context.js'

/** The most rows one list shows; the page says so when a figure counted more. */
const LIST_LIMIT = 500

/** Longer values than this are no environment, service, date or zone Shiplog knows. */
const MAX_PARAM = 200

/**
 * The query string of both pages: each parameter text, or a list when it was repeated (refused
 * below, by name). Other parameters are ignored. Shape only; the rules are checked in readWindow
 * so that every bad parameter is listed at once.
 */
const QueryValue = Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())]))
const InsightsQuerySchema = Type.Object(
  {
    environment: QueryValue,
    service: QueryValue,
    range: QueryValue,
    from: QueryValue,
    to: QueryValue,
    tz: QueryValue,
    kind: QueryValue,
  },
  { additionalProperties: true },
)
type InsightsQueryString = Static<typeof InsightsQuerySchema>

type ParamName = 'environment' | 'service' | 'range' | 'from' | 'to' | 'tz' | 'kind'

interface ReadWindow {
  form: { environment: string; service: string; range: string; from: string; to: string }
  zone: string
  zoneGiven: boolean
  /** Present when every parameter was good and the account has an environment. */
  query: WindowQuery | null
  window: InsightsWindow | null
  errors: FieldError[]
  /** 422 for a malformed parameter, 404 for an environment or service the account does not have. */
  status: 200 | 404 | 422
}

/**
 * Reads the window a query names: the zone (the viewer's, sent by the page's script; UTC by
 * default), the range (7, 30 or 90 days, or custom dates), the environment (by default the last in
 * the account's order) and the service (all by default). Nothing is read or changed for a bad one.
 */
function readWindow(
  raw: InsightsQueryString,
  known: { visible: string[]; all: Set<string>; services: Set<string> },
  now: number,
): ReadWindow {
  const errors: FieldError[] = []
  let notFound = false
  const text = (name: ParamName): string => {
    const v = raw[name]
    if (Array.isArray(v)) {
      errors.push({ field: name, message: `${name} was given more than once` })
      return ''
    }
    if (v !== undefined && v.length > MAX_PARAM) {
      errors.push({ field: name, message: `${name} is longer than ${MAX_PARAM} characters` })
      return ''
    }
    return v?.trim() ?? ''
  }
  const tzText = text('tz')
  const rangeText = text('range')
  const fromText = text('from')
  const toText = text('to')
  const environmentText = text('environment')
  const serviceText = text('service')

  let zone = 'UTC'
  const zoneGiven = tzText !== ''
  if (zoneGiven) {
    const found = knownZone(tzText)
    if (found === undefined)
      errors.push({ field: 'tz', message: 'tz must be a time zone name such as Europe/Berlin' })
    else zone = found
  }

  const range = rangeText !== '' ? rangeText : fromText !== '' || toText !== '' ? 'custom' : '30'
  if (range !== 'custom' && !(RANGES as readonly string[]).includes(range)) {
    errors.push({ field: 'range', message: 'range must be 7, 30, 90 or custom' })
  }
  if (range === 'custom') {
    if (fromText === '')
      errors.push({ field: 'from', message: 'from is needed for a custom range (a date such as 2026-03-01)' })
    else if (!isIsoDate(fromText))
      errors.push({ field: 'from', message: 'from must be a date written YYYY-MM-DD' })
    if (toText === '')
      errors.push({ field: 'to', message: 'to is needed for a custom range (a date such as 2026-04-01)' })
    else if (!isIsoDate(toText)) errors.push({ field: 'to', message: 'to must be a date written YYYY-MM-DD' })
    if (isIsoDate(fromText) && isIsoDate(toText)) {
      const span = daysBetween(fromText, toText)
      if (span <= 0)
        errors.push({ field: 'to', message: 'to must be a later date than from (to is not included)' })
      else if (span > MAX_WINDOW_DAYS)
        errors.push({ field: 'to', message: 'the window must not be longer than 5 years' })
      else if (fromText < '1970-01-02' || toText > '9999-12-31') {
        errors.push({ field: 'from', message: 'from and to must lie between 1970 and 9999' })
      }
    }
  }

  const environment = environmentText !== '' ? environmentText : (known.visible.at(-1) ?? '')
  if (environmentText !== '' && !known.all.has(environmentText)) {
    notFound = true
    errors.push({
      field: 'environment',
      message: `There is no environment named “${environmentText}” in this account`,
    })
  }
  if (serviceText !== '' && !known.services.has(serviceText)) {
    notFound = true
    errors.push({ field: 'service', message: `There is no service named “${serviceText}” in this account` })
  }

  const form = { environment, service: serviceText, range, from: fromText, to: toText }
  const malformed = errors.some((e) => e.field !== 'environment' && e.field !== 'service')
  const status = malformed ? 422 : notFound ? 404 : 200
  if (errors.length > 0 || environment === '') {
    return { form, zone, zoneGiven, query: null, window: null, errors, status }
  }
  const window =
    range === 'custom' ? windowOf(fromText, toText, zone) : namedWindow(range as RangeName, now, zone)
  const query: WindowQuery = {
    environment,
    service: serviceText === '' ? null : serviceText,
    range,
    from: range === 'custom' ? fromText : null,
    to: range === 'custom' ? toText : null,
    tz: zone,
  }
  return { form, zone, zoneGiven, query, window, errors, status }
}

/**
 * The per-day buckets of remembered metrics (queries.ts keeps one Metrics object per window while
 * the deployments do not change): worked out once per object and day list, not on every request.
 */
const bucketMemory = new WeakMap<Metrics, Map<string, DayBucket[]>>()

function bucketsOf(metrics: Metrics, window: InsightsWindow): DayBucket[] {
  let byDays = bucketMemory.get(metrics)
  if (!byDays) {
    byDays = new Map()
    bucketMemory.set(metrics, byDays)
  }
  // The days of a window are fixed by its bounds and the zone's offsets within them.
  const key = window.days.map((d) => `${d.date}@${d.start}-${d.end}`).join(',')
  let buckets = byDays.get(key)
  if (!buckets) {
    buckets = dayBuckets(metrics, window.days)
    // A few zones per window at most; the map goes with the metrics it belongs to.
    if (byDays.size >= 8) byDays.clear()
    byDays.set(key, buckets)
  }
  return buckets
}

export const insightsRoutes: FastifyPluginAsync<UiContext> = async (plain, ctx) => {
  const app = plain.withTypeProvider<TypeBoxTypeProvider>()
  const { db } = ctx.database
  const schema = { querystring: InsightsQuerySchema }

  /** What names are known in the account (its routes are FRESH_DEPLOYMENTS: read-your-writes). */
  async function knownNames(accountId: number) {
    const [environments, services] = await Promise.all([
      accountEnvironments(db, accountId),
      accountServices(db, accountId),
    ])
    return { visible: environments.visible, all: new Set(environments.all), services: new Set(services) }
  }

  /** The query string, or (should Fastify's own check refuse its shape) nothing, with an error. */
  function rawQuery(request: FastifyRequest & { query: InsightsQueryString }): {
    raw: InsightsQueryString
    shapeErrors: FieldError[]
  } {
    if (!request.validationError) return { raw: request.query, shapeErrors: [] }
    return { raw: {}, shapeErrors: [{ field: 'query', message: 'The query string is not valid here' }] }
  }

  app.get('/insights', async (request, reply) => {
    const q = request.url.indexOf('?')
    return reply.redirect(`/insights/${q === -1 ? '' : request.url.slice(q)}`, 301)
  })

  app.get('/insights/', { schema, attachValidation: true, ...FRESH }, async (request, reply) => {
    const user = ctx.requireUser(request, reply)
    if (!user) return reply
    const known = await knownNames(user.accountId)
    const { raw, shapeErrors } = rawQuery(request)
    const now = Date.now()
    const read = readWindow(raw, known, now)
    const errors = [...shapeErrors, ...read.errors]
    const services = read.query
      ? await accountServices(db, user.accountId, read.query.environment)
      : [...known.services].sort((a, b) => a.localeCompare(b))
    const common = {
      user,
      csrfToken: reply.generateCsrf(),
      form: read.form,
      environments: known.visible,
      services,
      zone: read.zone,
      zoneGiven: read.zoneGiven,
      errors,
      empty: errors.length === 0 && known.all.size === 0,
    }
    if (!read.query || !read.window || errors.length > 0) {
      const status = shapeErrors.length > 0 ? 422 : read.status
      return ctx.page(reply, insightsPage({ ...common, result: null }), status)
    }
    const metrics = await metricsForWindow(db, user.accountId, {
      environment: read.query.environment,
      service: read.query.service,
      from: read.window.from,
      to: read.window.to,
    })
    const finished = [...metrics.succeeded, ...metrics.failed]
    const flags = flagCounts(metrics, await guardrailFlagsOf(db, user.accountId, finished))
    return ctx.page(
      reply,
      insightsPage({
        ...common,
        result: {
          query: read.query,
          window: read.window,
          metrics,
          buckets: bucketsOf(metrics, read.window),
          flags,
          coverage: coverageOf(read.window.days, await dataStart(db, user.accountId, now), now),
        },
      }),
    )
  })

  app.get('/insights/deployments', { schema, attachValidation: true, ...FRESH }, async (request, reply) => {
    const user = ctx.requireUser(request, reply)
    if (!user) return reply
    const known = await knownNames(user.accountId)
    const { raw, shapeErrors } = rawQuery(request)
    const read = readWindow(raw, known, Date.now())
    const errors = [...shapeErrors, ...read.errors]
    const kindText = typeof raw.kind === 'string' ? raw.kind : ''
    const kind = (LIST_KINDS as readonly string[]).includes(kindText) ? (kindText as ListKind) : null
    if (kind === null) {
      errors.push({ field: 'kind', message: `kind must be one of ${LIST_KINDS.join(', ')}` })
    }
    if (errors.length === 0 && known.all.size === 0) {
      errors.push({ field: 'environment', message: 'This account has no deployments yet' })
    }
    if (!read.query || !read.window || errors.length > 0 || kind === null) {
      const malformed = shapeErrors.length > 0 || kind === null || read.status === 422
      return invalidList(ctx, reply, user, errors, malformed ? 422 : read.status === 200 ? 404 : read.status)
    }
    const metrics = await metricsForWindow(db, user.accountId, {
      environment: read.query.environment,
      service: read.query.service,
      from: read.window.from,
      to: read.window.to,
    })
    const flags = (FLAG_KINDS as readonly string[]).includes(kind)
      ? await guardrailFlagsOf(db, user.accountId, [...metrics.succeeded, ...metrics.failed])
      : undefined
    const { rows, relatedIds } = listFor(metrics, kind, flags)
    const shown = rows.slice(0, LIST_LIMIT)
    const related = await deploymentsWithIds(
      db,
      user.accountId,
      relatedIds.filter((id) => shown.some((r) => r.measured?.relatedId === id)),
    )
    for (const r of shown) {
      const id = r.measured?.relatedId
      r.related = id === null || id === undefined ? null : (related.get(id) ?? null)
    }
    return ctx.page(
      reply,
      deploymentsListPage({
        user,
        csrfToken: reply.generateCsrf(),
        query: read.query,
        kind,
        windowText: windowText(read.window),
        rows: shown,
        details: await deploymentDetails(
          db,
          user.accountId,
          shown.map((r) => r.deployment),
        ),
        incidents: new Set(metrics.incidents.marked.map((m) => m.id)),
        total: rows.length,
        limit: LIST_LIMIT,
      }),
    )
  })
}

/** The list's answer to a bad query: a page naming each bad parameter, with a way back. */
function invalidList(
  ctx: UiContext,
  reply: FastifyReply,
  user: NonNullable<FastifyRequest['user']>,
  errors: FieldError[],
  status: number,
): FastifyReply {
  return ctx.page(
    reply,
    errorPage({
      status,
      title: status === 404 ? 'Not found' : 'Invalid filter',
      detail: `${errors.map((e) => `${e.message}.`).join(' ')} Go back to Insights and choose again.`,
      user,
      csrfToken: reply.generateCsrf(),
    }),
    status,
  )
}
