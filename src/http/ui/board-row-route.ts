// One row of the live board (/services/): public/app.js fetches it when a deployment of the service
// arrives over the stream, so the updated cells are the ones the page draws (sender, alerts, the
// "≠" drift marks, which depend on the whole row, and the guardrail marks).
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { boardCells } from '../../domain/board/cells.js'
import { environmentListing } from '../../domain/board/environments.js'
import { readBoardGuards } from '../../domain/board/guard-reads.js'
import { boardRows } from '../../domain/board/rows.js'
import { boardSettings } from '../../domain/board/settings.js'
import { serviceMeta } from '../../domain/services.js'
import { textProblem } from '../../text-rules.js'
import { boardRowHtml } from '../../views/board-page.js'
import { html } from '../../views/html.js'
import { FRESH } from '../plugins/fresh-deployments.js'
import { HttpProblem } from '../problem.js'
import type { UiContext } from './context.js'

const RowQuery = Type.Object({ service: Type.Optional(Type.String({ maxLength: 4096 })) })

export const boardRowRoute: FastifyPluginAsyncTypebox<UiContext> = async (app, ctx) => {
  const { db } = ctx.database

  app.get('/board/row', { schema: { querystring: RowQuery }, ...FRESH }, async (request, reply) => {
    const user = ctx.requireUser(request, reply)
    if (!user) return reply
    const service = request.query.service ?? ''
    const bad = service === '' ? 'is empty' : textProblem(service)
    if (bad) throw new HttpProblem(422, 'invalid-query', 'Invalid address', `The "service" ${bad}.`)
    const now = Date.now()
    const [settings, environments, meta] = await Promise.all([
      boardSettings(db, user.accountId),
      environmentListing(db, user.accountId),
      serviceMeta(db, user.accountId, service),
    ])
    const cells = await boardCells(db, user.accountId, null, { now, stallMs: settings.stallMinutes * 60_000 })
    const mine = cells.filter((c) => c.service === service)
    const [row] = boardRows(mine, environments.visible, new Map([[service, meta.team]]))
    // Nothing to draw (no deployment in a shown environment, or another account's name): the page
    // offers a reload instead.
    if (!row) return ctx.page(reply, html``, 404)
    // The same marks as the page's row: locks on the service, bad versions, flagged deployments.
    const guards = await readBoardGuards(db, user.accountId, {
      rows: [row],
      cells: mine,
      environments: environments.visible,
      at: null,
      now,
    })
    return ctx.page(reply, boardRowHtml(row, environments.visible, now, guards))
  })
}
