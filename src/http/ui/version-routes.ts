// Marking a version of a service bad, and good again, from the service's page (SPEC §11): admins
// only, through the audited commands; a refused form lands on the page again with each field named.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { markVersionBad, markVersionGood } from '../../domain/guardrails/commands.js'
import { type FieldError, readBadVersionInput } from '../../domain/guardrails/inputs.js'
import { serviceExists } from '../../domain/services.js'
import { servicePath } from '../../views/board-page.js'
import { FRESH } from '../plugins/fresh-deployments.js'
import { auditSource } from './audit-context.js'
import type { UiContext } from './context.js'
import { noSuchService, renderService, serviceName } from './service-render.js'

const ServiceParams = Type.Object({ service: Type.String() })
const text = (maxLength = 4096) => Type.Optional(Type.String({ maxLength }))
const BadBody = Type.Object({ _csrf: text(200), version: text(), reason: text() })
const GoodBody = Type.Object({ _csrf: text(200), version: text() })

export const versionRoutes: FastifyPluginAsyncTypebox<UiContext> = async (app, ctx) => {
  const { db } = ctx.database

  app.post(
    '/services/:service/versions/bad',
    { schema: { params: ServiceParams, body: BadBody }, ...FRESH },
    async (request, reply) => {
      const user = ctx.requireAdmin(request, reply)
      if (!user) return reply
      const service = serviceName(request.params.service, request.query)
      if (!(await serviceExists(db, user.accountId, service))) throw noSuchService()
      const version = request.body.version ?? ''
      const reason = request.body.reason ?? ''
      const refuse = (errors: readonly FieldError[]) =>
        renderService(
          ctx,
          request,
          reply,
          user,
          service,
          {},
          { errors: [], versionForm: { version, reason, errors } },
          422,
        )
      const read = readBadVersionInput({ service, version, reason })
      if (!read.ok) return refuse(read.errors)
      const marked = await markVersionBad(db, user.accountId, read.value, auditSource(request, user))
      if (!marked.ok) return refuse(marked.errors)
      app.guardrails.invalidate(user.accountId)
      const again = marked.value.replaced
      return ctx.redirectWithFlash(reply, user, servicePath(service), {
        notice: again
          ? `${service} ${read.value.version} stays marked bad, with the new reason.`
          : `${service} ${read.value.version} is marked bad.`,
      })
    },
  )

  app.post(
    '/services/:service/versions/good',
    { schema: { params: ServiceParams, body: GoodBody }, ...FRESH },
    async (request, reply) => {
      const user = ctx.requireAdmin(request, reply)
      if (!user) return reply
      const service = serviceName(request.params.service, request.query)
      if (!(await serviceExists(db, user.accountId, service))) throw noSuchService()
      const version = (request.body.version ?? '').trim()
      const unmarked =
        version === ''
          ? { ok: false as const, errors: [{ field: 'version', message: 'version is required' }] }
          : await markVersionGood(db, user.accountId, { service, version }, auditSource(request, user))
      if (!unmarked.ok) {
        const versionForm = { version, reason: '', errors: unmarked.errors }
        return renderService(ctx, request, reply, user, service, {}, { errors: [], versionForm }, 422)
      }
      app.guardrails.invalidate(user.accountId)
      return ctx.redirectWithFlash(reply, user, servicePath(service), {
        notice: `${service} ${version} is no longer marked bad.`,
      })
    },
  )
}
