// First-run set-up, login (choosing the account when an address has several), logout, password change.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { Type } from 'typebox'
import {
  accountNameProblem,
  countUsers,
  emailProblem,
  findUserById,
  findUsersByEmail,
  normaliseEmail,
  SetupClosedError,
  setPassword,
  setupFirstAdmin,
} from '../../domain/accounts.js'
import { recordAudit } from '../../domain/audit/log.js'
import { ssoClientFor } from '../../domain/identity/oidc-client.js'
import {
  anyAccountWithoutPasswordLogin,
  passwordLoginAllowed,
  sessionIdToken,
} from '../../domain/identity/provisioning.js'
import { hashedPassword, hashPassword, passwordProblem, verifyPassword } from '../../domain/passwords.js'
import {
  createSession,
  deleteSession,
  deleteUserSessions,
  provesOneTimePassword,
  type SessionUser,
} from '../../domain/sessions.js'
import { loginPage, logoutPage, passwordPage, setupPage } from '../../views/auth-pages.js'
import { providerLogoutPage } from '../../views/sso-pages.js'
import { HttpProblem } from '../problem.js'
import { checkRateLimit } from '../rate-limit.js'
import { auditFrom } from './audit-context.js'
import { safeNext, type UiContext } from './context.js'

const LOGIN_WINDOW_MS = 15 * 60 * 1000
const LOGINS_PER_EMAIL = 10
const LOGINS_PER_IP = 50

// Form fields are text; a field sent twice (an array) is refused by the schema with a 400.
const text = (maxLength = 4096) => Type.Optional(Type.String({ maxLength }))
const CSRF = { _csrf: text(200) }

const SetupBody = Type.Object({
  ...CSRF,
  account: text(),
  email: text(),
  password: text(),
  confirm: text(),
})
// "next" is checked by safeNext, which turns anything but a same-site path (a second value too)
// into "no next": a bad one never makes the login page fail.
const LoginQuery = Type.Object({ next: Type.Optional(Type.Unknown()), bye: Type.Optional(Type.Unknown()) })
const LoginBody = Type.Object({
  ...CSRF,
  email: text(),
  password: text(),
  next: Type.Optional(Type.Unknown()),
  /** The account chosen when the address belongs to several (its id). */
  account: text(20),
})
const PasswordBody = Type.Object({ ...CSRF, current: text(), password: text(), confirm: text() })
const CsrfOnlyBody = Type.Object(CSRF)

// Verifying against a real hash when the email is unknown keeps the answer time the same, so
// timing does not tell which addresses have accounts.
const decoyHash = hashPassword('decoy password that never matches')

export const authRoutes: FastifyPluginAsyncTypebox<UiContext> = async (app, ctx) => {
  const { db } = ctx.database
  // Single sign-on (src/http/ui/sso-routes.ts): the login page offers it when configured.
  const sso = ssoClientFor(ctx.config)
  const ssoButton = sso ? { sso: { name: sso.settings.name } } : {}

  /**
   * What every failed password login says, whatever failed (unknown address, wrong password, or a
   * right one where password login is off): the same words for all, which depend on the
   * installation only, never on the address or the password typed.
   */
  const loginFailure = async (): Promise<string> => {
    const offSomewhere = sso !== null || (await anyAccountWithoutPasswordLogin(db))
    if (!offSomewhere) return 'That email and password do not match.'
    return `That email and password do not match. If password login is turned off for your team, ${sso ? `use "Sign in with ${sso.settings.name}" below` : 'ask your administrator how to sign in'}.`
  }

  /** False (and a 429 page already sent) when the address or the client has tried too often. */
  const withinLoginLimits = async (
    request: FastifyRequest,
    reply: FastifyReply,
    email: string,
    what: 'login' | 'password',
    refuse: (errors: string[], status: number) => FastifyReply,
  ): Promise<boolean> => {
    for (const [key, limit] of [
      [`login:email:${email}`, LOGINS_PER_EMAIL],
      [`login:ip:${request.ip}`, LOGINS_PER_IP],
    ] as const) {
      const decision = await checkRateLimit(ctx.rateLimitStore, key, limit, LOGIN_WINDOW_MS, (err) =>
        request.log.warn({ err }, 'login rate limit store unavailable'),
      )
      if (!decision.allowed) {
        reply.header('retry-after', decision.headers['retry-after'] ?? '900')
        refuse([`Too many ${what} attempts. Wait a few minutes, then try again.`], 429)
        return false
      }
    }
    return true
  }

  // / leads to the board, the home of the product (UI.md), or to first-run set-up while nobody has
  // an account yet (the board itself sends visitors who are not logged in on to /login).
  app.get('/', async (request, reply) => {
    if (!request.user && (await countUsers(db)) === 0) return reply.redirect('/setup', 303)
    return reply.redirect('/services/', 303)
  })

  app.get('/setup', async (request, reply) => {
    if ((await countUsers(db)) > 0) return reply.redirect(request.user ? '/logs/' : '/login', 303)
    return ctx.page(reply, setupPage({ csrfToken: ctx.csrfToken(request, reply), errors: [], values: {} }))
  })

  app.post('/setup', { schema: { body: SetupBody } }, async (request, reply) => {
    if ((await countUsers(db)) > 0) return reply.redirect('/login', 303)
    const account = (request.body.account ?? '').trim()
    const email = (request.body.email ?? '').trim()
    const password = request.body.password ?? ''
    const errors: string[] = []
    const accountProblem = accountNameProblem(account)
    if (accountProblem) errors.push(`Team name ${accountProblem}.`)
    const badEmail = emailProblem(email)
    if (badEmail) errors.push(`Email ${badEmail}.`)
    const badPassword = passwordProblem(password)
    if (badPassword) errors.push(`Password ${badPassword}.`)
    else if (password !== (request.body.confirm ?? '')) errors.push('The two passwords differ.')
    if (errors.length > 0) {
      return ctx.page(
        reply,
        setupPage({ csrfToken: ctx.csrfToken(request, reply), errors, values: { account, email } }),
        422,
      )
    }
    try {
      // The first admin is the first entry of the new account's audit log, written with it.
      const hashed = await hashedPassword(password)
      const user = await db.transaction().execute(async (trx) => {
        const created = await setupFirstAdmin(trx, { accountName: account, email, password: hashed })
        await recordAudit(trx, {
          accountId: created.account_id,
          actor: { kind: 'user', id: created.id, name: created.email },
          address: request.ip,
          action: 'user.added',
          target: created.email,
          details: { role: created.role, via: 'first-run set-up' },
        })
        return created
      })
      ctx.setSessionCookie(reply, await createSession(db, user.id))
      return reply.redirect('/settings/', 303)
    } catch (err) {
      if (err instanceof SetupClosedError) return reply.redirect('/login', 303)
      throw err
    }
  })

  app.get('/login', { schema: { querystring: LoginQuery } }, async (request, reply) => {
    if (request.user) return reply.redirect('/logs/', 303)
    if ((await countUsers(db)) === 0) return reply.redirect('/setup', 303)
    const next = safeNext(request.query.next)
    const notice =
      request.query.bye === '1'
        ? 'You are logged out.'
        : request.query.bye === 'password-off'
          ? `Password login is now off for your team, and every session opened with a password has ended.${sso ? ` Sign in with ${sso.settings.name}.` : ''}`
          : undefined
    return ctx.page(
      reply,
      loginPage({
        csrfToken: ctx.csrfToken(request, reply),
        errors: [],
        ...(next ? { next } : {}),
        ...(notice ? { notice } : {}),
        ...ssoButton,
      }),
    )
  })

  app.post('/login', { schema: { body: LoginBody } }, async (request, reply) => {
    const email = normaliseEmail(request.body.email ?? '')
    const password = request.body.password ?? ''
    const next = safeNext(request.body.next)
    const chosen = request.body.account ?? ''
    const rerender = (
      errors: string[],
      status: number,
      accounts?: { id: number; name: string }[],
    ): FastifyReply =>
      ctx.page(
        reply,
        loginPage({
          csrfToken: ctx.csrfToken(request, reply),
          errors,
          email,
          ...(next ? { next } : {}),
          ...(accounts ? { accounts } : {}),
          ...ssoButton,
        }),
        status,
      )

    if (!(await withinLoginLimits(request, reply, email, 'login', rerender))) return reply

    // One address may belong to several accounts (an account's emails are its own): the password
    // is checked against each, and only accounts whose password it is are ever named.
    let candidates = email ? await findUsersByEmail(db, email) : []
    if (chosen !== '') candidates = candidates.filter((u) => String(u.account_id) === chosen)
    const matched: typeof candidates = []
    for (const candidate of candidates) {
      if (await verifyPassword(password, candidate.password_hash)) matched.push(candidate)
    }
    if (candidates.length === 0) await verifyPassword(password, await decoyHash)
    // An account that turned password login off takes its users by single sign-on only. A right
    // password there is refused exactly like a wrong one (same status, same words): anything else
    // would tell a guesser that the password they tried is right. Its admins see which it was in
    // the audit log.
    const allowed: typeof matched = []
    const refused: typeof matched = []
    for (const candidate of matched) {
      if (await passwordLoginAllowed(db, candidate.account_id)) allowed.push(candidate)
      else refused.push(candidate)
    }
    const [user, ...others] = allowed
    if (!user) {
      request.log.info({ email }, 'login failed')
      for (const candidate of refused) {
        await recordAudit(db, {
          accountId: candidate.account_id,
          actor: { kind: 'anonymous', id: null, name: email },
          address: request.ip,
          action: 'login.failed',
          target: email,
          details: { method: 'password', reason: 'password_login_off' },
        })
      }
      const refusedByAccount = new Set(refused.map((r) => r.account_id))
      // One entry for each account the address belongs to (its admins see attempts on their users),
      // or one belonging to no account; the password tried is never written anywhere.
      const failure = {
        actor: { kind: 'anonymous', id: null, name: email || '(no email)' },
        address: request.ip,
      } as const
      for (const candidate of candidates) {
        if (refusedByAccount.has(candidate.account_id)) continue
        await recordAudit(db, {
          ...failure,
          accountId: candidate.account_id,
          action: 'login.failed',
          target: candidate.email,
          details: { account: candidate.account_name, reason: 'wrong password' },
        })
      }
      if (candidates.length === 0) {
        await ctx.recordUnclaimedAudit(request, {
          ...failure,
          accountId: null,
          action: 'login.failed',
          target: email || null,
          details: { reason: 'no user with this email' },
        })
      }
      return rerender([await loginFailure()], 401)
    }
    if (others.length > 0) {
      return rerender(
        ['This email belongs to several accounts. Choose one, and enter your password again.'],
        200,
        allowed.map((u) => ({ id: u.account_id, name: u.account_name })),
      )
    }
    const token = await db.transaction().execute(async (trx) => {
      const created = await createSession(trx, user.id)
      await recordAudit(trx, {
        accountId: user.account_id,
        actor: { kind: 'user', id: user.id, name: user.email },
        address: request.ip,
        action: 'login.succeeded',
        target: user.email,
        details: { method: 'password', account: user.account_name },
      })
      return created
    })
    ctx.setSessionCookie(reply, token)
    if (user.must_change_password === 1) return reply.redirect('/account/password', 303)
    return reply.redirect(next ?? '/logs/', 303)
  })

  // Someone who types /logout gets a button; logging out itself needs the form's CSRF token.
  app.get('/logout', async (request, reply) => {
    if (!request.user) return reply.redirect('/login', 303)
    return ctx.page(reply, logoutPage({ user: request.user, csrfToken: ctx.csrfToken(request, reply) }))
  })

  app.post('/logout', { schema: { body: CsrfOnlyBody } }, async (request, reply) => {
    // A session opened by single sign-on also ends at the provider when it has a logout endpoint.
    const idToken = sso && request.user ? await sessionIdToken(db, request.user.sessionId) : null
    const providerLogout = sso && idToken ? await sso.endSessionUrl(idToken) : null
    const user = request.user
    if (user) {
      await db.transaction().execute(async (trx) => {
        await deleteSession(trx, user.sessionId)
        await recordAudit(trx, { ...auditFrom(request, user), action: 'logout', target: user.email })
      })
    }
    ctx.clearSessionCookie(reply)
    if (sso && providerLogout) {
      return ctx.page(reply, providerLogoutPage({ providerName: sso.settings.name, url: providerLogout }))
    }
    return reply.redirect('/login?bye=1', 303)
  })

  /**
   * Whether the form asks for the current password: always, except right after signing in with a
   * one-time password, which that sign-in has just proved (provesOneTimePassword).
   */
  const asksCurrent = async (user: SessionUser): Promise<boolean> =>
    !(user.mustChangePassword && (await provesOneTimePassword(db, user.sessionId, Date.now())))

  app.get('/account/password', async (request, reply) => {
    const user = ctx.requireUser(request, reply)
    if (!user) return reply
    return ctx.page(
      reply,
      passwordPage({
        user,
        csrfToken: ctx.csrfToken(request, reply),
        errors: [],
        forced: user.mustChangePassword,
        askCurrent: await asksCurrent(user),
      }),
    )
  })

  app.post('/account/password', { schema: { body: PasswordBody } }, async (request, reply) => {
    const user = ctx.requireUser(request, reply)
    if (!user) return reply
    const current = request.body.current ?? ''
    const password = request.body.password ?? ''
    const askCurrent = await asksCurrent(user)
    const rerender = (errors: string[], status: number) =>
      ctx.page(
        reply,
        passwordPage({
          user,
          csrfToken: ctx.csrfToken(request, reply),
          errors,
          forced: user.mustChangePassword,
          askCurrent,
        }),
        status,
      )
    // A stolen session must not become a way to guess the password: the login limits apply.
    if (!(await withinLoginLimits(request, reply, user.email, 'password', rerender))) return reply
    const errors: string[] = []
    const row = await findUserById(db, user.userId)
    if (!row) throw new HttpProblem(401, 'not-logged-in', 'Not logged in', 'Your account no longer exists.')
    if (askCurrent && !(await verifyPassword(current, row.password_hash))) {
      errors.push(
        user.mustChangePassword ? 'The one-time password is wrong.' : 'The current password is wrong.',
      )
    }
    const badPassword = passwordProblem(password)
    if (badPassword) errors.push(`The new password ${badPassword}.`)
    else if (password !== (request.body.confirm ?? '')) errors.push('The two new passwords differ.')
    else if (askCurrent ? password === current : await verifyPassword(password, row.password_hash)) {
      errors.push(
        user.mustChangePassword
          ? 'Choose a password different from the one-time password.'
          : 'Choose a password different from the current one.',
      )
    }
    if (errors.length > 0) return rerender(errors, 422)
    const hashed = await hashedPassword(password)
    await db.transaction().execute(async (trx) => {
      await setPassword(trx, user.userId, hashed, { oneTime: false })
      // Other browsers signed in with the old password are signed out.
      await deleteUserSessions(trx, user.userId, user.sessionId)
      await recordAudit(trx, {
        ...auditFrom(request, user),
        action: 'password.changed',
        target: user.email,
        details: { how: user.mustChangePassword ? 'one-time password replaced' : 'own change' },
      })
    })
    return ctx.redirectWithFlash(reply, user, '/settings/', {
      notice: 'Your password is changed. Any other browser signed in as you has been logged out.',
    })
  })
}
