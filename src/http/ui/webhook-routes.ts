// /settings/webhooks/: the account's webhooks and their delivery logs; changes are for admins only.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { Type } from 'typebox'
import type { UserRole } from '../../db/schema.js'
import { takeFlash } from '../../domain/sessions.js'
import {
  createWebhookAudited,
  deleteWebhookAudited,
  enableWebhookAudited,
  redeliverAudited,
} from '../../domain/webhooks/commands.js'
import { webhookBacklogs } from '../../domain/webhooks/cursor.js'
import { shownWebhookUrl } from '../../domain/webhooks/mask.js'
import { deliveryLog, getWebhook, listWebhooks, WebhookInputError } from '../../domain/webhooks/queries.js'
import { webhookOpens } from '../../domain/webhooks/secrets.js'
import { MAX_ID, parseWholeNumber } from '../../domain/whole-numbers.js'
import { deliveryLogPage, webhooksPage } from '../../views/webhooks-page.js'
import { HttpProblem } from '../problem.js'
import { auditSource } from './audit-context.js'
import type { UiContext } from './context.js'

const text = (maxLength = 4096) => Type.Optional(Type.String({ maxLength }))
const many = Type.Optional(
  Type.Union([Type.String({ maxLength: 40 }), Type.Array(Type.String({ maxLength: 40 }), { maxItems: 5 })]),
)
const CreateBody = Type.Object({
  _csrf: text(200),
  url: text(4096),
  format: text(40),
  status: many,
  outcome: many,
  environments: text(),
  services: text(),
  grafana_token: text(2000),
})
const CsrfOnly = Type.Object({ _csrf: text(200) })
const IdParams = Type.Object({ id: Type.String({ maxLength: 40 }) })
const DeliveryParams = Type.Object({
  id: Type.String({ maxLength: 40 }),
  delivery: Type.String({ maxLength: 40 }),
})
const LogQuery = Type.Object({ before: Type.Optional(Type.String({ maxLength: 20 })) })

const notFound = () =>
  new HttpProblem(404, 'not-found', 'No such webhook', 'This account has no such webhook.')

function id(raw: string): number {
  const id = parseWholeNumber(raw, 1, MAX_ID)
  if (id === undefined) throw notFound()
  return id
}

const list = (v: string | string[] | undefined): string[] => (Array.isArray(v) ? v : v ? [v] : [])
const commaList = (v: string | undefined): string[] => (v ?? '').split(',')

/**
 * The webhook as a page may show it to this user: the target's path is its secret (Slack's), so the
 * full URL never reaches a template (members see the origin, admins a masked path).
 */
function forViewer<T extends { url: string }>(webhook: T, user: { role: UserRole }): T {
  return { ...webhook, url: shownWebhookUrl(webhook.url, user.role) }
}

export const webhookRoutes: FastifyPluginAsyncTypebox<UiContext> = async (app, ctx) => {
  const { db } = ctx.database
  const { secret: appSecret, webhookAllowPrivate } = ctx.config

  const admin = (request: FastifyRequest, reply: FastifyReply) => ctx.requireAdmin(request, reply)

  app.get('/settings/webhooks', async (_request, reply) => reply.redirect('/settings/webhooks/', 301))

  app.get('/settings/webhooks/', async (request, reply) => {
    const user = ctx.requireUser(request, reply)
    if (!user) return reply
    const flash = await takeFlash(db, user)
    const webhooks = await listWebhooks(db, user.accountId)
    return ctx.page(
      reply,
      webhooksPage({
        user,
        csrfToken: ctx.csrfToken(request, reply),
        webhooks: webhooks.map((w) => forViewer(w, user)),
        backlogs: await webhookBacklogs(ctx.database, webhooks),
        unsealable: new Set(webhooks.filter((w) => !webhookOpens(appSecret, w)).map((w) => Number(w.id))),
        errors: [],
        ...(flash?.notice ? { notice: flash.notice } : {}),
        ...(flash?.secret ? { secret: flash.secret } : {}),
      }),
    )
  })

  app.post('/settings/webhooks', { schema: { body: CreateBody } }, async (request, reply) => {
    const user = admin(request, reply)
    if (!user) return reply
    const b = request.body
    try {
      const { webhook, secret } = await createWebhookAudited(
        db,
        appSecret,
        {
          accountId: user.accountId,
          url: b.url ?? '',
          format: b.format ?? '',
          statuses: list(b.status),
          outcomes: list(b.outcome),
          environments: commaList(b.environments),
          services: commaList(b.services),
          grafanaToken: b.grafana_token ?? null,
        },
        { allowPrivate: webhookAllowPrivate },
        auditSource(request, user),
      )
      return ctx.redirectWithFlash(reply, user, '/settings/webhooks/', {
        notice: `The webhook to ${shownWebhookUrl(webhook.url, user.role)} is added.`,
        secret: {
          kind: 'key',
          label: `the webhook to ${shownWebhookUrl(webhook.url, user.role)}`,
          value: secret,
        },
      })
    } catch (err) {
      if (!(err instanceof WebhookInputError)) throw err
      const { grafana_token: _token, _csrf, ...form } = b
      return ctx.page(
        reply,
        webhooksPage({
          user,
          csrfToken: ctx.csrfToken(request, reply),
          webhooks: (await listWebhooks(db, user.accountId)).map((w) => forViewer(w, user)),
          errors: [`${err.message.charAt(0).toUpperCase()}${err.message.slice(1)}.`],
          form: Object.fromEntries(
            Object.entries(form).filter((e): e is [string, string | string[]] => e[1] !== undefined),
          ),
        }),
        422,
      )
    }
  })

  app.post(
    '/settings/webhooks/:id/delete',
    { schema: { params: IdParams, body: CsrfOnly } },
    async (request, reply) => {
      const user = admin(request, reply)
      if (!user) return reply
      const webhookId = id(request.params.id)
      if (!(await deleteWebhookAudited(db, user.accountId, webhookId, auditSource(request, user))))
        throw notFound()
      return ctx.redirectWithFlash(reply, user, '/settings/webhooks/', { notice: 'The webhook is deleted.' })
    },
  )

  app.post(
    '/settings/webhooks/:id/enable',
    { schema: { params: IdParams, body: CsrfOnly } },
    async (request, reply) => {
      const user = admin(request, reply)
      if (!user) return reply
      const webhookId = id(request.params.id)
      if (!(await enableWebhookAudited(db, user.accountId, webhookId, auditSource(request, user))))
        throw notFound()
      return ctx.redirectWithFlash(reply, user, '/settings/webhooks/', {
        notice: 'The webhook is enabled again: new events are sent to it.',
      })
    },
  )

  app.get(
    '/settings/webhooks/:id/',
    { schema: { params: IdParams, querystring: LogQuery } },
    async (request, reply) => {
      const user = ctx.requireUser(request, reply)
      if (!user) return reply
      const webhook = await getWebhook(db, user.accountId, id(request.params.id))
      if (!webhook) throw notFound()
      const rawBefore = request.query.before
      const before = rawBefore === undefined ? null : parseWholeNumber(rawBefore, 0, MAX_ID)
      if (before === undefined) {
        throw new HttpProblem(400, 'bad-request', 'Bad page', 'The page asked for does not exist.')
      }
      const flash = await takeFlash(db, user)
      const page = await deliveryLog(db, user.accountId, Number(webhook.id), before)
      return ctx.page(
        reply,
        deliveryLogPage({
          user,
          csrfToken: ctx.csrfToken(request, reply),
          webhook: forViewer(webhook, user),
          backlog: (await webhookBacklogs(ctx.database, [webhook])).get(Number(webhook.id)) ?? 0,
          unsealable: !webhookOpens(appSecret, webhook),
          ...page,
          ...(flash?.notice ? { notice: flash.notice } : {}),
        }),
      )
    },
  )

  app.post(
    '/settings/webhooks/:id/deliveries/:delivery/redeliver',
    { schema: { params: DeliveryParams, body: CsrfOnly } },
    async (request, reply) => {
      const user = admin(request, reply)
      if (!user) return reply
      const webhookId = id(request.params.id)
      const deliveryId = id(request.params.delivery)
      const queued = await redeliverAudited(
        db,
        user.accountId,
        webhookId,
        deliveryId,
        auditSource(request, user),
      )
      if (!queued) throw notFound()
      return ctx.redirectWithFlash(reply, user, `/settings/webhooks/${webhookId}/`, {
        notice: 'The delivery is queued again, with the same delivery id.',
      })
    },
  )
}
