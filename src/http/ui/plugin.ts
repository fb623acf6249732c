// The web UI: sessions, CSRF, static assets and every page (setup, login, logs, exports, settings).
import cookie from '@fastify/cookie'
import csrf from '@fastify/csrf-protection'
import formbody from '@fastify/formbody'
import fastifyStatic from '@fastify/static'
import type { FastifyInstance, FastifyPluginAsync } from 'fastify'
import { findSession } from '../../domain/sessions.js'
import { PUBLIC_DIR } from '../../paths.js'
import { staticAssets } from '../../views/assets.js'
import { errorPage } from '../../views/auth-pages.js'
import { HttpProblem, methodNotAllowed, toProblem } from '../problem.js'
import { auditRoutes } from './audit-routes.js'
import { authRoutes } from './auth-routes.js'
import { badgeRoutes } from './badge-routes.js'
import { boardRoutes } from './board-routes.js'
import { cookiePolicy, createUiContext, csrfUserInfo, type UiOptions } from './context.js'
import { deploymentRoutes } from './deployment-routes.js'
import { guardrailRoutes } from './guardrail-routes.js'
import { insightsRoutes } from './insights-routes.js'
import { logsRoutes } from './logs-routes.js'
import { namesRoutes } from './names-routes.js'
import { retentionRoutes } from './retention-routes.js'
import { settingsRoutes } from './settings-routes.js'
import { ssoRoutes } from './sso-routes.js'
import { webhookRoutes } from './webhook-routes.js'

export const uiRoutes: FastifyPluginAsync<UiOptions> = async (app: FastifyInstance, options) => {
  const { config, database } = options
  const { secure, csrfCookie } = cookiePolicy(config)
  const ctx = createUiContext(options)

  await app.register(cookie, { secret: config.secret })
  await app.register(formbody, { bodyLimit: 64 * 1024 })
  await app.register(csrf, {
    sessionPlugin: '@fastify/cookie',
    cookieKey: csrfCookie,
    cookieOpts: { signed: true, httpOnly: true, sameSite: 'lax', path: '/', secure },
    getToken: (request) => (request.body as Record<string, string> | undefined)?._csrf,
    // Each token is an HMAC over the session it was made for: a token (and secret cookie) from an
    // anonymous visit or from another session is refused, whichever csrf cookie arrives first.
    getUserInfo: csrfUserInfo,
    csrfOpts: { hmacKey: `${config.secret}:csrf` },
  })
  // The pages load each file from a URL that names its content (src/views/assets.ts): the
  // browser keeps it for a year and an upgrade, being new content, is a new URL.
  for (const [name, asset] of staticAssets()) {
    // `file` as @fastify/static marks its routes: a public file, the same bytes for everyone.
    app.get(asset.url, { config: { file: `/${name}` } }, async (request, reply) => {
      reply
        .header('cache-control', 'public, max-age=31536000, immutable')
        .header('etag', asset.etag)
        .type(asset.contentType)
      if (request.headers['if-none-match'] === asset.etag) return reply.code(304).send()
      return reply.send(asset.body)
    })
  }
  // The plain names still answer, for links from elsewhere, but are revalidated every time: a
  // browser holding one after an upgrade must not run the old code.
  await app.register(fastifyStatic, {
    root: PUBLIC_DIR,
    prefix: '/static/',
    maxAge: 0,
    index: false,
    wildcard: false,
  })

  app.decorateRequest('user', null)
  app.addHook('onRequest', async (request, reply) => {
    // Route modules call reply.generateCsrf() as before; every token made here is bound.
    const generate = reply.generateCsrf
    reply.generateCsrf = (opts) => generate.call(reply, { ...opts, userInfo: csrfUserInfo(request) })
    const raw = request.cookies[ctx.sessionCookie]
    if (!raw) return
    const unsigned = request.unsignCookie(raw)
    if (!unsigned.valid || !unsigned.value) return
    request.user = (await findSession(database.db, unsigned.value)) ?? null
  })
  // Every POST in the UI is a form: it must carry the token from the page it came from.
  // Callback style: on a bad token the plugin answers (403) itself and never calls back.
  app.addHook('preHandler', (request, reply, done) => {
    if (request.method !== 'POST' || request.routeOptions.config.methodNotAllowed) return done()
    app.csrfProtection(request, reply, done)
  })

  app.setErrorHandler(async (err, request, reply) => {
    const code = (err as { code?: string }).code
    if (code === 'FST_CSRF_INVALID_TOKEN' || code === 'FST_CSRF_MISSING_SECRET') {
      request.log.info({ code }, 'form refused: CSRF token missing or invalid')
      return ctx.page(
        reply,
        errorPage({
          status: 403,
          title: 'This form has expired',
          detail: 'For your safety the form could not be accepted. Go back, reload the page and try again.',
          user: request.user,
          csrfToken: ctx.csrfToken(request, reply),
        }),
        403,
      )
    }
    const problem = err instanceof HttpProblem ? err : toProblem(err as Error, request)
    for (const [name, value] of Object.entries(problem.extra.headers ?? {})) reply.header(name, value)
    return ctx.page(
      reply,
      errorPage({
        status: problem.status,
        title: problem.title,
        detail: problem.detail,
        user: request.user,
        csrfToken: ctx.csrfToken(request, reply),
      }),
      problem.status,
    )
  })

  await app.register(authRoutes, ctx)
  await app.register(logsRoutes, ctx)
  await app.register(settingsRoutes, ctx)
  await app.register(boardRoutes, ctx)
  await app.register(namesRoutes, ctx)
  await app.register(badgeRoutes, ctx)
  await app.register(insightsRoutes, ctx)
  await app.register(deploymentRoutes, ctx)
  await app.register(webhookRoutes, ctx)
  await app.register(ssoRoutes, ctx)
  await app.register(auditRoutes, ctx)
  await app.register(retentionRoutes, ctx)
  await app.register(guardrailRoutes, ctx)

  const readOnly = [
    '/',
    '/logs',
    '/logs/',
    '/logs/export.csv',
    '/logs/export.json',
    '/settings',
    '/settings/',
    '/services',
    '/services/',
    '/services/:service',
    '/services/:service/',
    '/badge/:token/:service/:file',
    '/insights',
    '/insights/',
    '/insights/deployments',
    '/deployments/:id',
    '/deployments/:id/',
    '/settings/webhooks/',
    '/settings/webhooks/:id/',
    '/settings/audit',
    '/settings/audit/',
    '/settings/audit/export.csv',
    '/settings/audit/export.json',
    '/settings/guardrails',
    '/settings/guardrails/',
  ]
  for (const path of readOnly) methodNotAllowed(app, path, ['GET', 'HEAD'])
  for (const path of ['/setup', '/login', '/logout', '/account/password', '/settings/webhooks']) {
    methodNotAllowed(app, path, ['GET', 'HEAD', 'POST'])
  }
  // The board's forms only take a POST.
  for (const path of [
    '/services/:service/meta',
    '/settings/environments',
    '/settings/stall-time',
    '/settings/badge-token',
    '/settings/retention',
    '/settings/webhooks/:id/delete',
    '/settings/webhooks/:id/enable',
    '/settings/webhooks/:id/deliveries/:delivery/redeliver',
    '/deployments/:id/incident',
    '/deployments/:id/incident/remove',
    '/deployments/:id/fixed',
    '/settings/guardrails/locks',
    '/settings/guardrails/locks/:id/unlock',
    '/settings/guardrails/freezes',
    '/settings/guardrails/freezes/:id/remove',
    '/settings/guardrails/promotions',
    '/settings/guardrails/promotions/remove',
    '/settings/guardrails/bad-versions',
    '/settings/guardrails/bad-versions/good',
  ]) {
    methodNotAllowed(app, path, ['POST'])
  }
}
