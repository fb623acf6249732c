// Tidying names (issue 28), admins only: rename or merge a service (/services/<s>/rename) or an
// environment (/settings/environments/rename), and delete a service's history with its name typed
// as confirmation (/services/<s>/delete). Plain forms with CSRF; a refused value comes back (422)
// beside its field with nothing changed; a change redirects with a notice (post/redirect/get).
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { Type } from 'typebox'
import { environmentListing } from '../../domain/board/environments.js'
import { deleteServiceAudited, renameAudited } from '../../domain/names/audited.js'
import { checkRename, knownNames } from '../../domain/names/rename.js'
import { serviceExists } from '../../domain/services.js'
import type { SessionUser } from '../../domain/sessions.js'
import { DOT_NAME_SEGMENT, servicePath } from '../../views/board-page.js'
import { deleteServicePage, renameEnvironmentPage, renameServicePage } from '../../views/names-pages.js'
import { FRESH } from '../plugins/fresh-deployments.js'
import { HttpProblem } from '../problem.js'
import { auditFrom } from './audit-context.js'
import type { UiContext } from './context.js'

const text = (maxLength = 4096) => Type.Optional(Type.String({ maxLength }))
const ServiceParams = Type.Object({ service: Type.String() })
const RenameBody = Type.Object({ _csrf: text(200), to: text() })
const EnvironmentRenameBody = Type.Object({ _csrf: text(200), from: text(), to: text() })
const DeleteBody = Type.Object({ _csrf: text(200), confirm: text() })

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

/** A page of one service; every route here reads its deployments, so each is FRESH. */
const SERVICE_PAGE = { schema: { params: ServiceParams }, ...FRESH }

export const namesRoutes: FastifyPluginAsyncTypebox<UiContext> = async (app, ctx) => {
  const { db } = ctx.database
  const admin = (request: FastifyRequest, reply: FastifyReply) => ctx.requireAdmin(request, reply)

  /** The service of the path, once it is known to exist (404 otherwise). */
  const existing = async (user: SessionUser, params: { service: string }, query: unknown) => {
    const service = serviceName(params.service, query)
    if (!(await serviceExists(db, user.accountId, service))) throw noSuchService()
    return service
  }

  const renameService = async (
    request: FastifyRequest,
    reply: FastifyReply,
    user: SessionUser,
    service: string,
    form: Record<string, string>,
    problems: Record<string, string>,
  ) => {
    const others = (await knownNames(db, user.accountId, 'service')).filter((n) => n !== service).sort()
    const body = renameServicePage({
      user,
      csrfToken: ctx.csrfToken(request, reply),
      service,
      others,
      form,
      problems,
    })
    return ctx.page(reply, body, Object.keys(problems).length > 0 ? 422 : 200)
  }

  app.get('/services/:service/rename', SERVICE_PAGE, async (request, reply) => {
    const user = admin(request, reply)
    if (!user) return reply
    const service = await existing(user, request.params, request.query)
    return renameService(request, reply, user, service, { to: service }, {})
  })

  app.post(
    '/services/:service/rename',
    { schema: { params: ServiceParams, body: RenameBody }, ...FRESH },
    async (request, reply) => {
      const user = admin(request, reply)
      if (!user) return reply
      const service = await existing(user, request.params, request.query)
      const to = request.body.to ?? ''
      const checked = await checkRename(db, user.accountId, 'service', service, to)
      if ('problem' in checked) {
        return renameService(request, reply, user, service, { to }, { [checked.field]: checked.problem })
      }
      const { actor, address } = auditFrom(request, user)
      const result = await renameAudited(db, user.accountId, checked, { actor, address })
      return ctx.redirectWithFlash(reply, user, servicePath(result.to), {
        notice: `${result.from} is ${result.merge ? 'merged into' : 'renamed to'} ${result.to}.`,
      })
    },
  )

  const deletePage = async (
    request: FastifyRequest,
    reply: FastifyReply,
    user: SessionUser,
    service: string,
    form: Record<string, string>,
    problems: Record<string, string>,
  ) => {
    const events = await eventsOf(user.accountId, service)
    const body = deleteServicePage({
      user,
      csrfToken: ctx.csrfToken(request, reply),
      service,
      events,
      form,
      problems,
    })
    return ctx.page(reply, body, Object.keys(problems).length > 0 ? 422 : 200)
  }

  /** The events a deletion would take: those of the service's deployments. */
  const eventsOf = async (accountId: number, service: string) => {
    const rows = await db
      .selectFrom('deployments')
      .select('event_ids')
      .where('account_id', '=', accountId)
      .where('service', '=', service)
      .execute()
    return rows.reduce((n, r) => n + r.event_ids.split(',').length, 0)
  }

  app.get('/services/:service/delete', SERVICE_PAGE, async (request, reply) => {
    const user = admin(request, reply)
    if (!user) return reply
    const service = await existing(user, request.params, request.query)
    return deletePage(request, reply, user, service, {}, {})
  })

  app.post(
    '/services/:service/delete',
    { schema: { params: ServiceParams, body: DeleteBody }, ...FRESH },
    async (request, reply) => {
      const user = admin(request, reply)
      if (!user) return reply
      const service = await existing(user, request.params, request.query)
      const typed = request.body.confirm ?? ''
      if (typed.trim() !== service) {
        const problem =
          typed.trim() === ''
            ? 'Type the service name to confirm.'
            : `That is not the service name: type ${service} exactly.`
        return deletePage(request, reply, user, service, { confirm: typed }, { confirm: problem })
      }
      const { actor, address } = auditFrom(request, user)
      const result = await deleteServiceAudited(db, user.accountId, service, { actor, address })
      return ctx.redirectWithFlash(reply, user, '/services/', {
        notice: `The history of ${service} is deleted: ${result.events} events, ${result.deployments} deployments.`,
      })
    },
  )

  const renameEnvironment = async (
    request: FastifyRequest,
    reply: FastifyReply,
    user: SessionUser,
    form: Record<string, string>,
    problems: Record<string, string>,
  ) => {
    const environments = (await environmentListing(db, user.accountId)).all.map((e) => e.name)
    const body = renameEnvironmentPage({
      user,
      csrfToken: ctx.csrfToken(request, reply),
      environments,
      form,
      problems,
    })
    return ctx.page(reply, body, Object.keys(problems).length > 0 ? 422 : 200)
  }

  app.get('/settings/environments/rename', FRESH, async (request, reply) => {
    const user = admin(request, reply)
    if (!user) return reply
    const from = (request.query as Record<string, unknown>).from
    return renameEnvironment(request, reply, user, typeof from === 'string' ? { from } : {}, {})
  })

  app.post(
    '/settings/environments/rename',
    { schema: { body: EnvironmentRenameBody }, ...FRESH },
    async (request, reply) => {
      const user = admin(request, reply)
      if (!user) return reply
      const form = { from: request.body.from ?? '', to: request.body.to ?? '' }
      const checked = await checkRename(db, user.accountId, 'environment', form.from, form.to)
      if ('problem' in checked)
        return renameEnvironment(request, reply, user, form, { [checked.field]: checked.problem })
      const { actor, address } = auditFrom(request, user)
      const result = await renameAudited(db, user.accountId, checked, { actor, address })
      return ctx.redirectWithFlash(reply, user, '/settings/#environments-heading', {
        notice: `${result.from} is ${result.merge ? 'merged into' : 'renamed to'} ${result.to}.`,
      })
    },
  )
}
