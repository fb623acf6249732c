// What the UI route modules share (cookies, CSRF binding, page sending, the login gate, flashes):
// its own module so plugin.ts imports the route files and they import only this, never plugin.ts.
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Config } from '../../config.js'
import type { Database } from '../../db/connect.js'
import type { AuditEntryInput } from '../../domain/audit/log.js'
import type { ApiKeyVerifier } from '../../domain/keys.js'
import { type Flash, type SessionUser, setFlash } from '../../domain/sessions.js'
import { hasControlCharacter } from '../../text-rules.js'
import type { SafeHtml } from '../../views/html.js'
import { HttpProblem } from '../problem.js'
import type { RateLimitStore } from '../rate-limit.js'
import { recordUnclaimedAudit } from './unclaimed-audit.js'

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
  /** Counts an audit entry of no account that was not written, the installation's budget spent. */
  onAuditDropped: (action: string) => void
}

/** Everything a UI route needs, handed to each route module. */
export interface UiContext extends UiOptions {
  /** The session cookie's name: `__Host-` prefixed when Shiplog is served over https. */
  sessionCookie: string
  /** Sends a page (HTML, never cached: pages hold account data). */
  page(reply: FastifyReply, body: SafeHtml, status?: number): FastifyReply
  /** A CSRF token bound to this request's session (or to "no session" before login). */
  csrfToken(request: FastifyRequest, reply: FastifyReply): string
  /** The logged-in user, or a redirect to /login (or to the password page) already sent. */
  requireUser(request: FastifyRequest, reply: FastifyReply): SessionUser | null
  /**
   * requireUser, and the user must be an admin of the account: anyone else gets 403 (a problem
   * page), with `why` as its detail when given.
   */
  requireAdmin(request: FastifyRequest, reply: FastifyReply, why?: string): SessionUser | null
  /** Base address for links and snippets: SHIPLOG_PUBLIC_URL, else what the browser used. */
  baseUrl(request: FastifyRequest): string
  setSessionCookie(reply: FastifyReply, token: string): void
  clearSessionCookie(reply: FastifyReply): void
  /**
   * Post/redirect/get: keeps `flash` in the session for the next page view only, then answers
   * 303 to `location`. Refreshing the page it lands on repeats nothing and shows no secret again.
   */
  redirectWithFlash(
    reply: FastifyReply,
    user: SessionUser,
    location: string,
    flash: Flash,
  ): Promise<FastifyReply>
  /** An audit entry of no account for an unauthenticated request, within the budget (unclaimed-audit.ts). */
  recordUnclaimedAudit(
    request: FastifyRequest,
    entry: AuditEntryInput & { accountId: null },
  ): Promise<boolean>
}

/** A field of the submitted form, or '' when it is absent or not text. */
export function formField(request: FastifyRequest, name: string): string {
  const value = (request.body as Record<string, unknown> | undefined)?.[name]
  return typeof value === 'string' ? value : ''
}

const PROBE_ORIGIN = 'http://shiplog.invalid'

/**
 * Only same-site paths may be redirected to after login; anything else (another site, a
 * scheme-relative `//host`, something the URL parser refuses) means "no next".
 */
export function safeNext(next: unknown): string | undefined {
  if (typeof next !== 'string' || !next.startsWith('/') || next.length > 2000) return undefined
  // Browsers drop tabs and newlines from URLs and read a backslash as a slash, so "/\t/evil" would
  // become "//evil": refuse those outright, then make sure the path stays on this site.
  if (hasControlCharacter(next) || next.includes('\\')) return undefined
  let resolved: URL
  try {
    resolved = new URL(next, PROBE_ORIGIN)
  } catch {
    // "//" or "//:99999" parse as a host with no name or a bad port: not a path of this site.
    return undefined
  }
  if (resolved.origin !== PROBE_ORIGIN) return undefined
  // Dot segments collapse while parsing ("/.//evil.com" becomes "//evil.com"), so the result can
  // itself be scheme-relative: the Location header must never start with two slashes.
  const path = `${resolved.pathname}${resolved.search}`
  if (!path.startsWith('/') || path.startsWith('//')) return undefined
  return path
}

/** The CSRF token's binding: the session's id, or a fixed value before anyone logs in. */
export function csrfUserInfo(request: FastifyRequest): string {
  return request.user ? `session:${request.user.sessionId}` : 'anonymous'
}

/** Cookie names and the Secure flag, decided once from the configuration (see README). */
export function cookiePolicy(config: Pick<Config, 'publicUrl' | 'trustProxy'>): {
  secure: boolean | 'auto'
  sessionCookie: string
  csrfCookie: string
} {
  // A `__Host-` cookie must be Secure, Path=/ and without Domain, and browsers keep it only over
  // https: so the prefix is used only when the public address is https, which makes it certain.
  if (config.publicUrl?.startsWith('https://')) {
    return { secure: true, sessionCookie: '__Host-shiplog_session', csrfCookie: '__Host-shiplog_csrf' }
  }
  return {
    secure: config.trustProxy ? 'auto' : false,
    sessionCookie: 'shiplog_session',
    csrfCookie: 'shiplog_csrf',
  }
}

export function createUiContext(options: UiOptions): UiContext {
  const { config, database } = options
  const { secure, sessionCookie } = cookiePolicy(config)
  const requireUser = (request: FastifyRequest, reply: FastifyReply): SessionUser | null => {
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
  }
  return {
    ...options,
    sessionCookie,
    page(reply, body, status = 200) {
      return reply
        .code(status)
        .header('cache-control', 'no-store')
        .type('text/html; charset=utf-8')
        .send(body.toString())
    },
    csrfToken(request, reply) {
      return reply.generateCsrf({ userInfo: csrfUserInfo(request) })
    },
    requireUser,
    requireAdmin(request, reply, why) {
      const user = requireUser(request, reply)
      if (user && user.role !== 'admin') {
        throw new HttpProblem(
          403,
          'admin-only',
          'Admins only',
          why ?? 'Only an admin of this account can do that. Ask one of them.',
        )
      }
      return user
    },
    baseUrl(request) {
      return config.publicUrl ?? `${request.protocol}://${request.host}`
    },
    setSessionCookie(reply, token) {
      reply.setCookie(sessionCookie, token, {
        signed: true,
        httpOnly: true,
        sameSite: 'lax',
        secure,
        path: '/',
        maxAge: 14 * 24 * 60 * 60,
      })
    },
    clearSessionCookie(reply) {
      reply.clearCookie(sessionCookie, { path: '/', ...(secure === true ? { secure: true } : {}) })
    },
    async redirectWithFlash(reply, user, location, flash) {
      await setFlash(database.db, user, flash)
      return reply.redirect(location, 303)
    },
    recordUnclaimedAudit(request, entry) {
      return recordUnclaimedAudit(database.db, entry, {
        store: options.rateLimitStore,
        onDropped: options.onAuditDropped,
        onStoreError: (err) => request.log.warn({ err }, 'audit budget store unavailable'),
      })
    },
  }
}
