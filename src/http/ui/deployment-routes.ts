// /deployments/<id>/: one deployment's page, and the admins' forms that mark it as having caused an
// incident, name its fix, remove the mark, or say "this fixed #N" from the fixing deployment (issue
// 27). Plain forms with CSRF; a refused value comes back (422) beside its field, nothing changed.

import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { Type } from 'typebox'
import { stallMsOf } from '../../domain/board/settings.js'
import { deploymentDetails } from '../../domain/deployments/details.js'
import {
  deploymentById,
  incidentsFixedBy,
  incidentsOf,
  neighbours,
} from '../../domain/deployments/incident-store.js'
import {
  type IncidentResult,
  markFixed,
  markIncident,
  readIncidentInput,
  unmarkIncident,
} from '../../domain/deployments/incidents.js'
import { outcomeAt } from '../../domain/deployments/rules.js'
import { type SessionUser, takeFlash } from '../../domain/sessions.js'
import { MAX_ID, parseWholeNumber } from '../../domain/whole-numbers.js'
import { deploymentPage } from '../../views/deployment-page.js'
import { deploymentPath } from '../../views/deployments-list.js'
import { FRESH } from '../plugins/fresh-deployments.js'
import { HttpProblem } from '../problem.js'
import { auditSource } from './audit-context.js'
import type { UiContext } from './context.js'

/** How many deployments each choice list offers. */
const CHOICES = 20

const text = (maxLength = 4096) => Type.Optional(Type.String({ maxLength }))
const Params = Type.Object({ id: Type.String({ maxLength: 40 }) })
const MarkBody = Type.Object({ _csrf: text(200), link: text(), note: text(), fixed_by: text(40) })
const FixedBody = Type.Object({ _csrf: text(200), incident: text(40) })
const CsrfBody = Type.Object({ _csrf: text(200) })

const noSuchDeployment = () =>
  new HttpProblem(404, 'not-found', 'No such deployment', 'This account has no deployment of that number.')

/** The id of the path; anything but a whole number names no deployment. */
function idOf(text: string): number {
  return parseWholeNumber(text, 1, MAX_ID) ?? Number.NaN
}

export const deploymentRoutes: FastifyPluginAsyncTypebox<UiContext> = async (app, ctx) => {
  const { db } = ctx.database

  const existing = async (user: SessionUser, idText: string) => {
    const found = await deploymentById(db, user.accountId, idOf(idText))
    if (!found) throw noSuchDeployment()
    return found
  }

  const render = async (
    request: FastifyRequest,
    reply: FastifyReply,
    user: SessionUser,
    id: number,
    extra: { notice?: string; form?: Record<string, string>; problems?: Record<string, string> },
  ) => {
    const deployment = await deploymentById(db, user.accountId, id)
    if (!deployment) throw noSuchDeployment()
    const incident = (await incidentsOf(db, user.accountId, [id])).get(id) ?? null
    const fixedHere = await incidentsFixedBy(db, user.accountId, id)
    const related = await Promise.all(
      fixedHere.map(async (i) => ({
        incident: i,
        deployment: await deploymentById(db, user.accountId, i.deploymentId),
      })),
    )
    const body = deploymentPage({
      user,
      csrfToken: ctx.csrfToken(request, reply),
      deployment,
      outcome: outcomeAt(deployment, Date.now(), await stallMsOf(db, user.accountId)),
      details: (await deploymentDetails(db, user.accountId, [deployment])).get(id),
      incident,
      fix:
        incident?.fixedBy == null
          ? null
          : ((await deploymentById(db, user.accountId, incident.fixedBy)) ?? null),
      fixes: related.flatMap((r) =>
        r.deployment ? [{ incident: r.incident, deployment: r.deployment }] : [],
      ),
      laterSuccesses: await neighbours(db, user.accountId, deployment, 'later_successes', CHOICES),
      earlier: await neighbours(db, user.accountId, deployment, 'earlier', CHOICES),
      ...extra,
    })
    return ctx.page(reply, body, Object.keys(extra.problems ?? {}).length > 0 ? 422 : 200)
  }

  /** A command's refusal shown beside its field (`fields` maps the command's names to the form's). */
  const refused = (
    request: FastifyRequest,
    reply: FastifyReply,
    user: SessionUser,
    id: number,
    result: Extract<IncidentResult, { ok: false }>,
    form: Record<string, string>,
    fields: Record<string, string> = {},
  ) => {
    if (result.status === 404 && result.errors.every((e) => e.field === 'id') && !fields.id)
      throw noSuchDeployment()
    const problems: Record<string, string> = {}
    for (const e of result.errors) problems[fields[e.field] ?? e.field] = e.message
    return render(request, reply, user, id, { form, problems })
  }

  app.get('/deployments/:id', { schema: { params: Params } }, async (request, reply) => {
    const id = idOf(request.params.id)
    if (!Number.isSafeInteger(id)) throw noSuchDeployment()
    return reply.redirect(deploymentPath(id), 301)
  })

  app.get('/deployments/:id/', { schema: { params: Params }, ...FRESH }, async (request, reply) => {
    const user = ctx.requireUser(request, reply)
    if (!user) return reply
    const deployment = await existing(user, request.params.id)
    const flash = await takeFlash(db, user)
    return render(request, reply, user, deployment.id, flash?.notice ? { notice: flash.notice } : {})
  })

  app.post(
    '/deployments/:id/incident',
    { schema: { params: Params, body: MarkBody }, ...FRESH },
    async (request, reply) => {
      const user = ctx.requireAdmin(request, reply)
      if (!user) return reply
      const deployment = await existing(user, request.params.id)
      const form = {
        link: request.body.link ?? '',
        note: request.body.note ?? '',
        fixed_by: request.body.fixed_by ?? '',
      }
      const { input, errors } = readIncidentInput(form)
      if (errors.length > 0) {
        return refused(request, reply, user, deployment.id, { ok: false, status: 422, errors }, form)
      }
      const result = await markIncident(db, user.accountId, deployment.id, input, auditSource(request, user))
      if (!result.ok) return refused(request, reply, user, deployment.id, result, form)
      return ctx.redirectWithFlash(reply, user, deploymentPath(deployment.id), {
        notice: `#${deployment.id} is marked as having caused an incident.`,
      })
    },
  )

  app.post(
    '/deployments/:id/incident/remove',
    { schema: { params: Params, body: CsrfBody }, ...FRESH },
    async (request, reply) => {
      const user = ctx.requireAdmin(request, reply)
      if (!user) return reply
      const deployment = await existing(user, request.params.id)
      const result = await unmarkIncident(db, user.accountId, deployment.id, auditSource(request, user))
      return ctx.redirectWithFlash(reply, user, deploymentPath(deployment.id), {
        notice: result.ok
          ? `The incident mark of #${deployment.id} is removed.`
          : `#${deployment.id} was not marked (any more): nothing to remove.`,
      })
    },
  )

  app.post(
    '/deployments/:id/fixed',
    { schema: { params: Params, body: FixedBody }, ...FRESH },
    async (request, reply) => {
      const user = ctx.requireAdmin(request, reply)
      if (!user) return reply
      const fix = await existing(user, request.params.id)
      const form = { incident: request.body.incident ?? '' }
      const incidentId = idOf(form.incident.trim().replace(/^#/, ''))
      if (!Number.isSafeInteger(incidentId)) {
        return render(request, reply, user, fix.id, {
          form,
          problems: { incident: 'Choose the deployment this one fixed.' },
        })
      }
      const result = await markFixed(db, user.accountId, incidentId, fix.id, auditSource(request, user))
      // The command speaks of the marked deployment (id) and its fix (fixed_by): here the marked
      // one is the form's choice, and a refused fix is this very deployment.
      if (!result.ok)
        return refused(request, reply, user, fix.id, result, form, { id: 'incident', fixed_by: 'incident' })
      return ctx.redirectWithFlash(reply, user, deploymentPath(fix.id), {
        notice: `#${incidentId} is marked as having caused an incident, fixed by #${fix.id}.`,
      })
    },
  )
}
