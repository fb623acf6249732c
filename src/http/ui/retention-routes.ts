// Settings → Retention: an admin sets how many days the account keeps its events (or forever).
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { describeRetention, parseRetention } from '../../domain/operations/retention.js'
import { setRetentionAudited } from '../../domain/operations/retention-setting.js'
import { errorPage } from '../../views/auth-pages.js'
import { auditSource } from './audit-context.js'
import type { UiContext } from './context.js'

const text = (maxLength: number) => Type.Optional(Type.String({ maxLength }))
const RetentionBody = Type.Object({ _csrf: text(200), days: text(40), action: text(20) })

export const retentionRoutes: FastifyPluginAsyncTypebox<UiContext> = async (app, ctx) => {
  const { db } = ctx.database

  app.post('/settings/retention', { schema: { body: RetentionBody } }, async (request, reply) => {
    const user = ctx.requireAdmin(request, reply)
    if (!user) return reply
    const action = request.body.action ?? 'days'
    const raw = action === 'forever' ? 'forever' : (request.body.days ?? '').trim()
    const parsed =
      action === 'days' || action === 'forever' ? parseRetention(raw) : { problem: 'is not a known action' }
    if (parsed !== null && typeof parsed === 'object') {
      const detail =
        raw === '' && action === 'days'
          ? 'Give a number of days, or choose "Keep events forever".'
          : `The retention ${parsed.problem}.`
      return ctx.page(
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
    }
    await setRetentionAudited(db, user.accountId, parsed, auditSource(request, user))
    return ctx.redirectWithFlash(reply, user, '/settings/#retention-heading', {
      notice:
        parsed === null
          ? 'Events are now kept forever.'
          : `Events are now kept for ${describeRetention(parsed)}; older ones are deleted within about ten minutes.`,
    })
  })
}
