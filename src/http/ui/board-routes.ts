// The board /services/, each service's page /services/<service>/ (metadata edits by admins), and
// the board's Settings forms (environment order, stall time, badge token rotation).
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { Type } from 'typebox'
import { boardCells, firstDeploymentStart } from '../../domain/board/cells.js'
import {
  changeEnvironmentAudited,
  rotateBadgeTokenAudited,
  saveServiceMetaAudited,
  setStallMinutesAudited,
} from '../../domain/board/commands.js'
import {
  environmentListing,
  isEnvironmentMove,
  serviceEnvironments,
} from '../../domain/board/environments.js'
import { readBoardInstant } from '../../domain/board/instant.js'
import { boardRows } from '../../domain/board/rows.js'
import { boardSettings, parseStallMinutes } from '../../domain/board/settings.js'
import { deploymentDetails } from '../../domain/deployments/details.js'
import { serviceTimeline } from '../../domain/deployments/queries.js'
import { durationMs, outcomeAt } from '../../domain/deployments/rules.js'
import { renamedTo } from '../../domain/names/rename.js'
import { getRetention } from '../../domain/operations/retention.js'
import { counted } from '../../domain/plural.js'
import { checkServiceMeta, listServiceMeta, serviceExists, serviceMeta } from '../../domain/services.js'
import { type SessionUser, takeFlash } from '../../domain/sessions.js'
import { MAX_ID, parseWholeNumber } from '../../domain/whole-numbers.js'
import { textProblem } from '../../text-rules.js'
import { errorPage } from '../../views/auth-pages.js'
import { boardPage, DOT_NAME_SEGMENT, servicePath } from '../../views/board-page.js'
import { type ServicePageData, servicePage, type TimelineSection } from '../../views/service-page.js'
import { FRESH } from '../plugins/fresh-deployments.js'
import { HttpProblem } from '../problem.js'
import { auditSource } from './audit-context.js'
import { boardRowRoute } from './board-row-route.js'
import type { UiContext } from './context.js'

/** Deployments per environment and page on a service's page. */
export const TIMELINE_PAGE = 20

// Query values are text, or a list when repeated (refused below, by name); others are ignored.
const QueryValue = Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())]))
const BoardQuery = Type.Object(
  { at: QueryValue, tz: QueryValue, team: QueryValue, name: QueryValue },
  { additionalProperties: true },
)
const ServiceQuery = Type.Object(
  { environment: QueryValue, before: QueryValue },
  { additionalProperties: true },
)
const ServiceParams = Type.Object({ service: Type.String() })
const text = (maxLength = 4096) => Type.Optional(Type.String({ maxLength }))
const MetaBody = Type.Object({
  _csrf: text(200),
  team: text(),
  description: text(),
  repository_url: text(),
  runbook_url: text(),
  dashboard_url: text(),
})
const EnvironmentBody = Type.Object({ _csrf: text(200), environment: text(), action: text(20) })
const StallBody = Type.Object({ _csrf: text(200), minutes: text(40) })
const CsrfBody = Type.Object({ _csrf: text(200) })
/** The service fields an audit entry compares, before and after. */

const invalid = (detail: string) => new HttpProblem(422, 'invalid-query', 'Invalid address', detail)

/** One query value as text: undefined when absent, a 422 when it was given more than once. */
function single(query: Record<string, unknown>, name: string): string | undefined {
  const value = query[name]
  if (value === undefined) return undefined
  if (typeof value !== 'string') throw invalid(`Give "${name}" once.`)
  return value
}

/** The service a path names: its one segment, or the `name` query under the dot-name segment. */
function serviceName(segment: string, query: unknown): string {
  if (segment !== DOT_NAME_SEGMENT) return segment
  const name = (query as Record<string, unknown> | undefined)?.name
  return name === '.' || name === '..' ? name : segment
}

const noSuchService = () =>
  new HttpProblem(
    404,
    'not-found',
    'No such service',
    'This account has recorded no deployment of that service.',
  )

export const boardRoutes: FastifyPluginAsyncTypebox<UiContext> = async (app, ctx) => {
  const { db } = ctx.database

  const admin = (request: FastifyRequest, reply: FastifyReply) => ctx.requireAdmin(request, reply)
  await app.register(boardRowRoute, ctx)

  app.get('/services', async (request, reply) => {
    const q = request.url.indexOf('?')
    return reply.redirect(`/services/${q === -1 ? '' : request.url.slice(q)}`, 301)
  })

  app.get('/services/', { schema: { querystring: BoardQuery }, ...FRESH }, async (request, reply) => {
    const user = ctx.requireUser(request, reply)
    if (!user) return reply
    const query = request.query as Record<string, unknown>
    const atText = (single(query, 'at') ?? '').trim()
    const team = (single(query, 'team') ?? '').trim()
    const name = (single(query, 'name') ?? '').trim()
    const now = Date.now()
    // A refused time is shown beside its field, over the board as it is now (status 422).
    const asked = readBoardInstant(atText, (single(query, 'tz') ?? '').trim(), now)
    const at = asked.at
    const [settings, environments, metas] = await Promise.all([
      boardSettings(db, user.accountId),
      environmentListing(db, user.accountId),
      listServiceMeta(db, user.accountId),
    ])
    const cells = await boardCells(db, user.accountId, at, { now, stallMs: settings.stallMinutes * 60_000 })
    const teams = new Map(metas.map((m) => [m.name, m.team]))
    // A time before the first deployment: the page says so, and when the first one started.
    // With retention on, "nothing yet" would be wrong: older history was removed, and the page says so.
    const before =
      at !== null && cells.length === 0 && environments.all.length > 0
        ? await Promise.all([firstDeploymentStart(db, user.accountId), getRetention(db, user.accountId)])
        : null
    const firstDeployment = before?.[0] ?? null
    const rows = boardRows(cells, environments.visible, teams, {
      ...(team ? { team } : {}),
      ...(name ? { name } : {}),
    })
    const teamNames = [...new Set(metas.map((m) => m.team).filter((t): t is string => t !== null))].sort()
    return ctx.page(
      reply,
      boardPage({
        user,
        csrfToken: ctx.csrfToken(request, reply),
        environments: environments.visible,
        rows,
        at,
        atForm: { text: atText, ...(asked.zone ? { zone: asked.zone } : {}), error: asked.error ?? null },
        firstDeployment,
        retentionDays: before?.[1] ?? null,
        now,
        filter: { team, name },
        teams: teamNames,
        accountIsEmpty: environments.all.length === 0,
        baseUrl: ctx.baseUrl(request),
      }),
      asked.error ? 422 : 200,
    )
  })

  // The name is one path segment: `/services/a%2Fb/` is the service "a/b".
  app.get('/services/:service', { schema: { params: ServiceParams } }, async (request, reply) =>
    reply.redirect(servicePath(serviceName(request.params.service, request.query)), 301),
  )

  const renderService = async (
    request: FastifyRequest,
    reply: FastifyReply,
    user: SessionUser,
    service: string,
    query: Record<string, unknown>,
    extra: Pick<ServicePageData, 'errors'> & Partial<Pick<ServicePageData, 'notice' | 'form'>>,
    status = 200,
  ) => {
    const environmentParam = single(query, 'environment')
    const beforeParam = single(query, 'before')
    let before: number | undefined
    if (beforeParam !== undefined && beforeParam !== '') {
      before = parseWholeNumber(beforeParam, 0, MAX_ID)
      if (before === undefined) throw invalid('"before" must be a deployment id (a whole number).')
    }
    if (!(await serviceExists(db, user.accountId, service))) {
      // A renamed or merged service: its old page's links and bookmarks lead to the new name.
      const renamed =
        request.method === 'GET' ? await renamedTo(db, user.accountId, 'service', service) : null
      if (renamed === null) throw noSuchService()
      const q = request.url.indexOf('?')
      const kept = new URLSearchParams(q === -1 ? '' : request.url.slice(q + 1))
      kept.delete('name')
      return reply.redirect(servicePath(renamed, '', Object.fromEntries(kept)), 301)
    }
    const [meta, environments, settings] = await Promise.all([
      serviceMeta(db, user.accountId, service),
      serviceEnvironments(db, user.accountId, service),
      boardSettings(db, user.accountId),
    ])
    const environment = environmentParam === undefined || environmentParam === '' ? null : environmentParam
    if (environment !== null && !environments.includes(environment)) {
      throw new HttpProblem(
        404,
        'not-found',
        'No such environment',
        'This service has no deployments in that environment.',
      )
    }
    // Paging ("before") applies to one environment: without one, each shows its newest page.
    const shown = environment === null ? environments : [environment]
    const now = Date.now()
    const stallMs = settings.stallMinutes * 60_000
    const sections: TimelineSection[] = []
    for (const env of shown) {
      const page = await serviceTimeline(db, user.accountId, service, {
        environment: env,
        limit: TIMELINE_PAGE + 1,
        ...(environment !== null && before !== undefined ? { beforeId: before } : {}),
      })
      const more = page.length > TIMELINE_PAGE
      const rows = page.slice(0, TIMELINE_PAGE)
      const details = await deploymentDetails(db, user.accountId, rows)
      const last = rows.at(-1)
      sections.push({
        environment: env,
        deployments: rows.map((d) => ({
          deployment: d,
          outcome: outcomeAt(d, now, stallMs),
          durationMs: durationMs(d),
          details: details.get(d.id),
        })),
        olderHref:
          more && last ? servicePath(service, '', { environment: env, before: String(last.id) }) : null,
        newestHref:
          environment !== null && before !== undefined
            ? servicePath(service, '', { environment: env })
            : null,
      })
    }
    return ctx.page(
      reply,
      servicePage({ user, csrfToken: ctx.csrfToken(request, reply), meta, sections, environment, ...extra }),
      status,
    )
  }

  app.get(
    '/services/:service/',
    { schema: { params: ServiceParams, querystring: ServiceQuery }, ...FRESH },
    async (request, reply) => {
      const user = ctx.requireUser(request, reply)
      if (!user) return reply
      const flash = await takeFlash(db, user)
      return renderService(
        request,
        reply,
        user,
        serviceName(request.params.service, request.query),
        request.query as Record<string, unknown>,
        {
          errors: [],
          ...(flash?.notice ? { notice: flash.notice } : {}),
        },
      )
    },
  )

  app.post(
    '/services/:service/meta',
    { schema: { params: ServiceParams, body: MetaBody }, ...FRESH },
    async (request, reply) => {
      const user = admin(request, reply)
      if (!user) return reply
      const service = serviceName(request.params.service, request.query)
      if (!(await serviceExists(db, user.accountId, service))) throw noSuchService()
      const b = request.body
      const checked = checkServiceMeta({
        team: b.team ?? '',
        description: b.description ?? '',
        repositoryUrl: b.repository_url ?? '',
        runbookUrl: b.runbook_url ?? '',
        dashboardUrl: b.dashboard_url ?? '',
      })
      if ('errors' in checked) {
        const form = {
          team: b.team ?? '',
          description: b.description ?? '',
          repository_url: b.repository_url ?? '',
          runbook_url: b.runbook_url ?? '',
          dashboard_url: b.dashboard_url ?? '',
        }
        return renderService(request, reply, user, service, {}, { errors: checked.errors, form }, 422)
      }
      await saveServiceMetaAudited(db, user.accountId, service, checked.meta, auditSource(request, user))
      return ctx.redirectWithFlash(reply, user, servicePath(service), {
        notice: 'The service details are saved.',
      })
    },
  )

  /** A refused Settings form: a clear page, a link back, nothing changed. */
  const refused = (request: FastifyRequest, reply: FastifyReply, user: SessionUser, detail: string) =>
    ctx.page(
      reply,
      errorPage({
        status: 422,
        title: 'Not saved',
        detail: `${detail} Nothing was changed; go back to Settings and try again.`,
        user,
        csrfToken: ctx.csrfToken(request, reply),
      }),
      422,
    )

  app.post(
    '/settings/environments',
    { schema: { body: EnvironmentBody }, ...FRESH },
    async (request, reply) => {
      const user = admin(request, reply)
      if (!user) return reply
      const action = request.body.action ?? ''
      const environment = request.body.environment ?? ''
      if (!isEnvironmentMove(action))
        return refused(request, reply, user, 'The action must be Up, Down, Hide or Show.')
      const badName = textProblem(environment)
      if (badName) return refused(request, reply, user, `The environment name ${badName}.`)
      const changed = await changeEnvironmentAudited(
        db,
        user.accountId,
        environment,
        action,
        auditSource(request, user),
      )
      if (!changed) {
        return refused(request, reply, user, 'This account has no such environment.')
      }
      const done = {
        up: 'moved up',
        down: 'moved down',
        hide: 'hidden from the board',
        show: 'shown on the board',
      }
      return ctx.redirectWithFlash(reply, user, '/settings/#environments-heading', {
        notice: `${environment} is ${done[action]}.`,
      })
    },
  )

  app.post('/settings/stall-time', { schema: { body: StallBody } }, async (request, reply) => {
    const user = admin(request, reply)
    if (!user) return reply
    const parsed = parseStallMinutes(request.body.minutes ?? '')
    if ('error' in parsed) return refused(request, reply, user, parsed.error)
    await setStallMinutesAudited(db, user.accountId, parsed.minutes, auditSource(request, user))
    return ctx.redirectWithFlash(reply, user, '/settings/#stall-heading', {
      notice: `Stall time is now ${counted(parsed.minutes, 'minute')}.`,
    })
  })

  app.post('/settings/badge-token', { schema: { body: CsrfBody } }, async (request, reply) => {
    const user = admin(request, reply)
    if (!user) return reply
    // The token itself is a secret: the entry says only that it changed.
    await rotateBadgeTokenAudited(db, user.accountId, auditSource(request, user))
    return ctx.redirectWithFlash(reply, user, '/settings/#badges-heading', {
      notice: 'The badge token is rotated: old badge links no longer work. Paste the new ones.',
    })
  })
}
