// Single sign-on routes: start at the provider, come back to the callback, and the Sign-in setting (password login).
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { Type } from 'typebox'
import type { AuditActor } from '../../domain/audit/log.js'
import { recordAudit } from '../../domain/audit/log.js'
import { decideMembership, type RefusalReason, refusalMessage } from '../../domain/identity/mapping.js'
import { LOGIN_LIFETIME_MS, type SsoClient, ssoClientFor } from '../../domain/identity/oidc-client.js'
import {
  hasIdentity,
  passwordLoginAllowed,
  setPasswordLogin,
  signInWithProvider,
} from '../../domain/identity/provisioning.js'
import { deleteSession, type SessionUser, sessionExists } from '../../domain/sessions.js'
import type { SafeHtml } from '../../views/html.js'
import { signInSection, ssoRefusedPage } from '../../views/sso-pages.js'
import { HttpProblem, methodNotAllowed } from '../problem.js'
import { checkRateLimit } from '../rate-limit.js'
import { auditSource } from './audit-context.js'
import { safeNext, type UiContext } from './context.js'

/** The cookie that ties a pending sign-in to the browser that started it. */
export const SSO_BROWSER_COOKIE = 'shiplog_oidc'
const SSO_COOKIE_PATH = '/login/oidc'
const STARTS_PER_IP = 30
const STARTS_WINDOW_MS = 15 * 60 * 1000
/**
 * Each refused callback writes an audit entry that is never deleted, and anyone can call it, so it
 * is limited per address like the start (a real sign-in is one start and one callback). Over the
 * limit the answer is 429 and no entry: shiplog_rate_limited_requests_total counts those.
 */
const CALLBACKS_PER_IP = 30

const CSRF = { _csrf: Type.Optional(Type.String({ maxLength: 200 })) }
const StartQuery = Type.Object({ next: Type.Optional(Type.Unknown()) })
const SignInBody = Type.Object({ ...CSRF, password_login: Type.Optional(Type.String({ maxLength: 10 })) })

// A refusal the person can do something about is 403 (their identity is not allowed here); a
// broken or replayed answer is 400; a provider Shiplog cannot reach is 502.
function statusFor(reason: RefusalReason): number {
  switch (reason) {
    case 'email_missing':
    case 'email_unverified':
    case 'no_account_mapping':
    case 'identity_mismatch':
      return 403
    case 'provider_unavailable':
      return 502
    default:
      return 400
  }
}

const anonymous = (email: string | null): AuditActor => ({
  kind: 'anonymous',
  id: null,
  name: email ?? 'anonymous',
})

/** The Sign-in section for Settings; undefined when single sign-on is not configured. */
export async function ssoSettingsSection(
  ctx: UiContext,
  user: SessionUser,
  csrfToken: string,
): Promise<SafeHtml | undefined> {
  const sso = ssoClientFor(ctx.config)
  if (!sso) return undefined
  const { db } = ctx.database
  return signInSection({
    user,
    csrfToken,
    providerName: sso.settings.name,
    passwordLogin: await passwordLoginAllowed(db, user.accountId),
    linked: await hasIdentity(db, user.userId, sso.settings.issuer),
  })
}

export const ssoRoutes: FastifyPluginAsyncTypebox<UiContext> = async (app, ctx) => {
  const sso: SsoClient | null = ssoClientFor(ctx.config)
  // Without SHIPLOG_OIDC_ISSUER there is no single sign-on, and none of its routes.
  if (!sso) return
  const { db } = ctx.database
  const secure = ctx.config.publicUrl?.startsWith('https://') === true

  const setBrowserCookie = (reply: FastifyReply, token: string) =>
    reply.setCookie(SSO_BROWSER_COOKIE, token, {
      signed: true,
      httpOnly: true,
      // Lax: the provider sends the browser back with a top-level GET, which carries it.
      sameSite: 'lax',
      secure,
      path: SSO_COOKIE_PATH,
      maxAge: LOGIN_LIFETIME_MS / 1000,
    })
  const clearBrowserCookie = (reply: FastifyReply) =>
    reply.clearCookie(SSO_BROWSER_COOKIE, { path: SSO_COOKIE_PATH, ...(secure ? { secure: true } : {}) })
  const browserToken = (request: FastifyRequest): string | undefined => {
    const raw = request.cookies[SSO_BROWSER_COOKIE]
    if (!raw) return undefined
    const unsigned = request.unsignCookie(raw)
    return unsigned.valid && unsigned.value ? unsigned.value : undefined
  }

  /** Every refusal: its audit entry, a page saying why, no session and no pending cookie. */
  const refuse = async (
    request: FastifyRequest,
    reply: FastifyReply,
    reason: RefusalReason,
    audit: { email: string | null; accountId: number | null; check?: string },
  ): Promise<FastifyReply> => {
    const entry = {
      actor: anonymous(audit.email),
      address: request.ip,
      action: 'login.failed',
      target: audit.email,
      details: { method: 'oidc', reason, ...(audit.check ? { check: audit.check } : {}) },
    } as const
    if (audit.accountId === null) await ctx.recordUnclaimedAudit(request, { ...entry, accountId: null })
    else await recordAudit(db, { ...entry, accountId: audit.accountId })
    request.log.info({ reason, check: audit.check }, 'single sign-on refused')
    clearBrowserCookie(reply)
    const { title, detail } = refusalMessage(reason, sso.settings.name)
    return ctx.page(reply, ssoRefusedPage({ title, detail }), statusFor(reason))
  }

  /** Counts one attempt from this client against `bucket`; over `limit`, a 429 is thrown. */
  const limitPerAddress = async (
    request: FastifyRequest,
    reply: FastifyReply,
    bucket: string,
    limit: number,
  ): Promise<void> => {
    const limited = await checkRateLimit(
      ctx.rateLimitStore,
      `${bucket}:ip:${request.ip}`,
      limit,
      STARTS_WINDOW_MS,
      (err) => request.log.warn({ err }, 'sign-in rate limit store unavailable'),
    )
    if (!limited.allowed) {
      reply.header('retry-after', limited.headers['retry-after'] ?? '900')
      throw new HttpProblem(
        429,
        'too-many-sign-ins',
        'Too many sign-in attempts',
        'Wait a few minutes, then try again.',
      )
    }
  }

  // A GET (the login page links here): it only records a pending login, limited per client.
  app.get('/login/oidc', { schema: { querystring: StartQuery } }, async (request, reply) => {
    await limitPerAddress(request, reply, 'sso', STARTS_PER_IP)
    let started: Awaited<ReturnType<SsoClient['start']>>
    try {
      started = await sso.start(db, {
        next: safeNext(request.query.next) ?? null,
        browserToken: browserToken(request),
      })
    } catch (err) {
      request.log.warn({ err }, 'single sign-on: provider discovery failed')
      return refuse(request, reply, 'provider_unavailable', {
        email: null,
        accountId: null,
        check: 'discovery failed',
      })
    }
    setBrowserCookie(reply, started.browserToken)
    return reply.redirect(started.url, 303)
  })

  app.get('/login/oidc/callback', async (request, reply) => {
    await limitPerAddress(request, reply, 'sso-callback', CALLBACKS_PER_IP)
    const query = new URLSearchParams(
      request.url.includes('?') ? request.url.slice(request.url.indexOf('?') + 1) : '',
    )
    const finished = await sso.finish(db, { query, browserToken: browserToken(request) })
    if (!finished.ok)
      return refuse(request, reply, finished.reason, { email: null, accountId: null, check: finished.detail })
    const membership = decideMembership(finished.claims, sso.settings)
    if (!membership.ok)
      return refuse(request, reply, membership.reason, { email: membership.email, accountId: null })
    const signedIn = await signInWithProvider(db, {
      issuer: finished.issuer,
      subject: finished.subject,
      email: membership.email,
      accountName: membership.accountName,
      role: membership.role,
      roleFromGroups: sso.settings.adminGroups.length > 0,
      idToken: finished.idToken,
      address: request.ip,
    })
    if (!signedIn.ok) {
      return refuse(request, reply, signedIn.reason, {
        email: membership.email,
        accountId: signedIn.accountId,
      })
    }
    // Whoever was signed in in this browser before is signed out: one session per cookie.
    if (request.user) await deleteSession(db, request.user.sessionId)
    clearBrowserCookie(reply)
    ctx.setSessionCookie(reply, signedIn.sessionToken)
    return reply.redirect(finished.next ?? '/logs/', 303)
  })

  app.post('/settings/sign-in', { schema: { body: SignInBody } }, async (request, reply) => {
    const user = ctx.requireAdmin(request, reply)
    if (!user) return reply
    const wanted = request.body.password_login
    if (wanted !== 'on' && wanted !== 'off') {
      throw new HttpProblem(400, 'bad-form', 'Bad form', 'password_login must be "on" or "off".')
    }
    if (wanted === 'off' && !(await hasIdentity(db, user.userId, sso.settings.issuer))) {
      return ctx.redirectWithFlash(reply, user, '/settings/', {
        notice: `Password login stays on: sign in once with ${sso.settings.name} yourself first, so you know it works for you.`,
      })
    }
    const changed = await setPasswordLogin(db, user.accountId, wanted === 'on', auditSource(request, user))
    // An admin who turned it off from a password session ended that session too.
    if (changed && wanted === 'off' && !(await sessionExists(db, user.sessionId))) {
      ctx.clearSessionCookie(reply)
      return reply.redirect('/login?bye=password-off', 303)
    }
    const notice = !changed
      ? `Password login was already ${wanted}.`
      : wanted === 'off'
        ? `Password login is off: users of ${user.accountName} now sign in with ${sso.settings.name}.`
        : 'Password login is on again.'
    return ctx.redirectWithFlash(reply, user, '/settings/', { notice })
  })

  methodNotAllowed(app, '/login/oidc', ['GET', 'HEAD'])
  methodNotAllowed(app, '/login/oidc/callback', ['GET', 'HEAD'])
  methodNotAllowed(app, '/settings/sign-in', ['POST'])
}
