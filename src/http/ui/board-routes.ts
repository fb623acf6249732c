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
import { environmentListing, isEnvironmentMove } from '../../domain/board/environments.js'
import { readBoardGuards } from '../../domain/board/guard-reads.js'
import { readBoardInstant } from '../../domain/board/instant.js'
import { boardRows } from '../../domain/board/rows.js'
import { boardSettings, parseStallMinutes } from '../../domain/board/settings.js'
import { getRetention } from '../../domain/operations/retention.js'
import { counted } from '../../domain/plural.js'
import { checkServiceMeta, listServiceMeta, serviceExists } from '../../domain/services.js'
import { type SessionUser, takeFlash } from '../../domain/sessions.js'
import { textProblem } from '../../text-rules.js'
import { errorPage } from '../../views/auth-pages.js'
import { boardPage, servicePath } from '../../views/board-page.js'
import { FRESH } from '../plugins/fresh-deployments.js'
import { auditSource } from './audit-context.js'
import { boardRowRoute } from './board-row-route.js'
import type { UiContext } from './context.js'
import { noSuchService, renderService, serviceName, single } from './service-render.js'
import { versionRoutes } from './version-routes.js'

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

export const boardRoutes: FastifyPluginAsyncTypebox<UiContext> = async (app, ctx) => {
  const { db } = ctx.database

  const admin = (request: FastifyRequest, reply: FastifyReply) => ctx.requireAdmin(request, reply)
  await app.register(boardRowRoute, ctx)
  await app.register(versionRoutes, ctx)

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
    const guards = await readBoardGuards(db, user.accountId, {
      rows,
      cells,
      environments: environments.visible,
      at,
      now,
    })
    const teamNames = [...new Set(metas.map((m) => m.team).filter((t): t is string => t !== null))].sort()
    return ctx.page(
      reply,
      boardPage({
        user,
        csrfToken: ctx.csrfToken(request, reply),
        environments: environments.visible,
        rows,
        guards,
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

  app.get(
    '/services/:service/',
    { schema: { params: ServiceParams, querystring: ServiceQuery }, ...FRESH },
    async (request, reply) => {
      const user = ctx.requireUser(request, reply)
      if (!user) return reply
      const flash = await takeFlash(db, user)
      return renderService(
        ctx,
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
        return renderService(ctx, request, reply, user, service, {}, { errors: checked.errors, form }, 422)
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
