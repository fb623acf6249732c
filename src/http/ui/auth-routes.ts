// First-run set-up, login, logout and password change.
import type { FastifyPluginAsync } from 'fastify'
import {
  accountNameProblem,
  countUsers,
  emailProblem,
  findUserByEmail,
  normaliseEmail,
  SetupClosedError,
  setPassword,
  setupFirstAdmin,
} from '../../domain/accounts.js'
import { hashPassword, passwordProblem, verifyPassword } from '../../domain/passwords.js'
import { createSession, deleteSession, deleteUserSessions } from '../../domain/sessions.js'
import { loginPage, logoutPage, passwordPage, setupPage } from '../../views/auth-pages.js'
import { HttpProblem } from '../problem.js'
import { checkRateLimit } from '../rate-limit.js'
import { formField, safeNext, type UiContext } from './plugin.js'

type Form = Record<string, string | undefined>

const LOGIN_WINDOW_MS = 15 * 60 * 1000
const LOGINS_PER_EMAIL = 10
const LOGINS_PER_IP = 50

// Verifying against a real hash when the email is unknown keeps the answer time the same, so
// timing does not tell which addresses have accounts.
const decoyHash = hashPassword('decoy password that never matches')

export const authRoutes: FastifyPluginAsync<UiContext> = async (app, ctx) => {
  const { db } = ctx.database

  // SPEC §3: / leads to the log, or to first-run set-up while nobody has an account yet (the log
  // itself sends visitors who are not logged in on to /login).
  app.get('/', async (request, reply) => {
    if (!request.user && (await countUsers(db)) === 0) return reply.redirect('/setup', 303)
    return reply.redirect('/logs/', 303)
  })

  app.get('/setup', async (request, reply) => {
    if ((await countUsers(db)) > 0) return reply.redirect(request.user ? '/logs/' : '/login', 303)
    return ctx.page(reply, setupPage({ csrfToken: reply.generateCsrf(), errors: [], values: {} }))
  })

  app.post('/setup', async (request, reply) => {
    if ((await countUsers(db)) > 0) return reply.redirect('/login', 303)
    const account = formField(request, 'account').trim()
    const email = formField(request, 'email').trim()
    const password = formField(request, 'password')
    const errors: string[] = []
    const accountProblem = accountNameProblem(account)
    if (accountProblem) errors.push(`Team name ${accountProblem}.`)
    const badEmail = emailProblem(email)
    if (badEmail) errors.push(`Email ${badEmail}.`)
    const badPassword = passwordProblem(password)
    if (badPassword) errors.push(`Password ${badPassword}.`)
    else if (password !== formField(request, 'confirm')) errors.push('The two passwords differ.')
    if (errors.length > 0) {
      return ctx.page(
        reply,
        setupPage({ csrfToken: reply.generateCsrf(), errors, values: { account, email } }),
        422,
      )
    }
    try {
      const user = await setupFirstAdmin(db, { accountName: account, email, password })
      ctx.setSessionCookie(reply, await createSession(db, user.id))
      return reply.redirect('/settings/', 303)
    } catch (err) {
      if (err instanceof SetupClosedError) return reply.redirect('/login', 303)
      throw err
    }
  })

  app.get('/login', async (request, reply) => {
    if (request.user) return reply.redirect('/logs/', 303)
    if ((await countUsers(db)) === 0) return reply.redirect('/setup', 303)
    const next = safeNext((request.query as Form).next)
    const notice = (request.query as Form).bye === '1' ? 'You are logged out.' : undefined
    return ctx.page(
      reply,
      loginPage({
        csrfToken: reply.generateCsrf(),
        errors: [],
        ...(next ? { next } : {}),
        ...(notice ? { notice } : {}),
      }),
    )
  })

  app.post('/login', async (request, reply) => {
    const email = normaliseEmail(formField(request, 'email'))
    const password = formField(request, 'password')
    const next = safeNext(formField(request, 'next'))
    const rerender = (errors: string[], status: number) =>
      ctx.page(
        reply,
        loginPage({ csrfToken: reply.generateCsrf(), errors, email, ...(next ? { next } : {}) }),
        status,
      )

    for (const [key, limit] of [
      [`login:email:${email}`, LOGINS_PER_EMAIL],
      [`login:ip:${request.ip}`, LOGINS_PER_IP],
    ] as const) {
      const decision = await checkRateLimit(ctx.rateLimitStore, key, limit, LOGIN_WINDOW_MS, (err) =>
        request.log.warn({ err }, 'login rate limit store unavailable'),
      )
      if (!decision.allowed) {
        reply.header('retry-after', decision.headers['retry-after'] ?? '900')
        return rerender(['Too many login attempts. Wait a few minutes, then try again.'], 429)
      }
    }

    const user = email ? await findUserByEmail(db, email) : undefined
    const ok = await verifyPassword(password, user?.password_hash ?? (await decoyHash))
    if (!user || !ok) {
      request.log.info({ email }, 'login failed')
      return rerender(['That email and password do not match.'], 401)
    }
    ctx.setSessionCookie(reply, await createSession(db, user.id))
    if (user.must_change_password === 1) return reply.redirect('/account/password', 303)
    return reply.redirect(next ?? '/logs/', 303)
  })

  // Someone who types /logout gets a button; logging out itself needs the form's CSRF token.
  app.get('/logout', async (request, reply) => {
    if (!request.user) return reply.redirect('/login', 303)
    return ctx.page(reply, logoutPage({ user: request.user, csrfToken: reply.generateCsrf() }))
  })

  app.post('/logout', async (request, reply) => {
    if (request.user) await deleteSession(db, request.user.sessionId)
    ctx.clearSessionCookie(reply)
    return reply.redirect('/login?bye=1', 303)
  })

  app.get('/account/password', async (request, reply) => {
    const user = ctx.requireUser(request, reply)
    if (!user) return reply
    return ctx.page(
      reply,
      passwordPage({ user, csrfToken: reply.generateCsrf(), errors: [], forced: user.mustChangePassword }),
    )
  })

  app.post('/account/password', async (request, reply) => {
    const user = ctx.requireUser(request, reply)
    if (!user) return reply
    const current = formField(request, 'current')
    const password = formField(request, 'password')
    const errors: string[] = []
    const row = await findUserByEmail(db, user.email)
    if (!row) throw new HttpProblem(401, 'not-logged-in', 'Not logged in', 'Your account no longer exists.')
    if (!(await verifyPassword(current, row.password_hash))) errors.push('The current password is wrong.')
    const badPassword = passwordProblem(password)
    if (badPassword) errors.push(`The new password ${badPassword}.`)
    else if (password !== formField(request, 'confirm')) errors.push('The two new passwords differ.')
    else if (password === current) errors.push('Choose a password different from the current one.')
    if (errors.length > 0) {
      return ctx.page(
        reply,
        passwordPage({ user, csrfToken: reply.generateCsrf(), errors, forced: user.mustChangePassword }),
        422,
      )
    }
    await setPassword(db, user.userId, password, { oneTime: false })
    // Other browsers signed in with the old password are signed out.
    await deleteUserSessions(db, user.userId, user.sessionId)
    return reply.redirect('/logs/', 303)
  })
}
