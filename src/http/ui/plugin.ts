// The web UI: sessions, CSRF, static assets and every page (setup, login, logs, exports, settings).
import cookie from '@fastify/cookie'
import csrf from '@fastify/csrf-protection'
import formbody from '@fastify/formbody'
import fastifyStatic from '@fastify/static'
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify'
import type { Config } from '../../config.js'
import type { Database } from '../../db/connect.js'
import type { ApiKeyVerifier } from '../../domain/keys.js'
import { findSession, type SessionUser } from '../../domain/sessions.js'
import { hasControlCharacter } from '../../domain/text-rules.js'
import { PUBLIC_DIR } from '../../paths.js'
import { errorPage } from '../../views/auth-pages.js'
import type { SafeHtml } from '../../views/html.js'
import { HttpProblem, methodNotAllowed, toProblem } from '../problem.js'
import type { RateLimitStore } from '../rate-limit.js'
import { authRoutes } from './auth-routes.js'
import { logsRoutes } from './logs-routes.js'
import { settingsRoutes } from './settings-routes.js'

export const SESSION_COOKIE = 'shiplog_session'

declare module 'fastify' {
  interface FastifyRequest {
    user: SessionUser | null
  }
}

export interface UiOptions {
  config: Config & { secret: string }
  database: Database
  verifier: ApiKeyVerifier
  rateLimitStore: RateLimitStore
}

/** Everything a UI route needs, handed to each route module. */
export interface UiContext extends UiOptions {
  /** Sends a page (HTML, never cached: pages hold account data). */
  page(reply: FastifyReply, body: SafeHtml, status?: number): FastifyReply
  /** The logged-in user, or a redirect to /login (or to the password page) already sent. */
  requireUser(request: FastifyRequest, reply: FastifyReply): SessionUser | null
  /** Base address for links and snippets: SHIPLOG_PUBLIC_URL, else what the browser used. */
  baseUrl(request: FastifyRequest): string
  setSessionCookie(reply: FastifyReply, token: string): void
  clearSessionCookie(reply: FastifyReply): void
}

/** A field of the submitted form, or '' when it is absent or not text. */
export function formField(request: FastifyRequest, name: string): string {
  const value = (request.body as Record<string, unknown> | undefined)?.[name]
  return typeof value === 'string' ? value : ''
}

/** Only same-site paths may be redirected to after login. */
export function safeNext(next: unknown): string | undefined {
  if (typeof next !== 'string' || !next.startsWith('/') || next.length > 2000) return undefined
  // Browsers drop tabs and newlines from URLs and read a backslash as a slash, so "/\t/evil" would
  // become "//evil": refuse those outright, then make sure the path stays on this site.
  if (hasControlCharacter(next) || next.includes('\\')) return undefined
  const resolved = new URL(next, 'http://shiplog.invalid')
  if (resolved.origin !== 'http://shiplog.invalid') return undefined
  return `${resolved.pathname}${resolved.search}`
}

export const uiRoutes: FastifyPluginAsync<UiOptions> = async (app: FastifyInstance, options) => {
  const { config, database } = options
  const secure = config.trustProxy ? 'auto' : false

  await app.register(cookie, { secret: config.secret })
  await app.register(formbody, { bodyLimit: 64 * 1024 })
  await app.register(csrf, {
    sessionPlugin: '@fastify/cookie',
    cookieKey: 'shiplog_csrf',
    cookieOpts: { signed: true, httpOnly: true, sameSite: 'lax', path: '/', secure },
    getToken: (request) => (request.body as Record<string, string> | undefined)?._csrf,
  })
  await app.register(fastifyStatic, {
    root: PUBLIC_DIR,
    prefix: '/static/',
    maxAge: '1h',
    index: false,
    wildcard: false,
  })

  app.decorateRequest('user', null)
  app.addHook('onRequest', async (request) => {
    const raw = request.cookies[SESSION_COOKIE]
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

  const ctx: UiContext = {
    ...options,
    page(reply, body, status = 200) {
      return reply
        .code(status)
        .header('cache-control', 'no-store')
        .type('text/html; charset=utf-8')
        .send(body.toString())
    },
    requireUser(request, reply) {
      const user = request.user
      if (!user) {
        const next = request.method === 'GET' ? `?next=${encodeURIComponent(request.url)}` : ''
        reply.redirect(`/login${next}`, 303)
        return null
      }
      const path = request.url.split('?')[0]
      if (user.mustChangePassword && path !== '/account/password') {
        reply.redirect('/account/password', 303)
        return null
      }
      return user
    },
    baseUrl(request) {
      return config.publicUrl ?? `${request.protocol}://${request.host}`
    },
    setSessionCookie(reply, token) {
      reply.setCookie(SESSION_COOKIE, token, {
        signed: true,
        httpOnly: true,
        sameSite: 'lax',
        secure,
        path: '/',
        maxAge: 14 * 24 * 60 * 60,
      })
    },
    clearSessionCookie(reply) {
      reply.clearCookie(SESSION_COOKIE, { path: '/' })
    },
  }

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
          csrfToken: reply.generateCsrf(),
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
        csrfToken: reply.generateCsrf(),
      }),
      problem.status,
    )
  })

  await app.register(authRoutes, ctx)
  await app.register(logsRoutes, ctx)
  await app.register(settingsRoutes, ctx)

  const readOnly = [
    '/',
    '/logs',
    '/logs/',
    '/logs/export.csv',
    '/logs/export.json',
    '/settings',
    '/settings/',
  ]
  for (const path of readOnly) methodNotAllowed(app, path, ['GET', 'HEAD'])
  for (const path of ['/setup', '/login', '/logout', '/account/password']) {
    methodNotAllowed(app, path, ['GET', 'HEAD', 'POST'])
  }
}
