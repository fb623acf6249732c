// /settings/: API keys and users of the viewer's account; changes are for admins only.
import { randomBytes } from 'node:crypto'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { Type } from 'typebox'
import { emailProblem, LastAdminError, listUsers, UserExistsError } from '../../domain/accounts.js'
import { loadBoardSettings } from '../../domain/board/settings.js'
import { createApiKeyAudited, revokeApiKeyAudited } from '../../domain/keys/commands.js'
import { listApiKeys, parseScopes } from '../../domain/keys.js'
import { getRetention, MAX_RETENTION_DAYS } from '../../domain/operations/retention.js'
import { hashedPassword } from '../../domain/passwords.js'
import { type SessionUser, takeFlash } from '../../domain/sessions.js'
import {
  changeRoleAudited,
  createUserAudited,
  removeUserAudited,
  resetPasswordAudited,
} from '../../domain/users/commands.js'
import { MAX_ID, parseWholeNumber } from '../../domain/whole-numbers.js'
import { isUserRole, nameProblem } from '../../text-rules.js'
import { boardSettingsSections } from '../../views/board-settings.js'
import { retentionSection, type SettingsPageData, settingsPage } from '../../views/settings-page.js'
import { FRESH } from '../plugins/fresh-deployments.js'
import { HttpProblem } from '../problem.js'
import { auditSource } from './audit-context.js'
import type { UiContext } from './context.js'
import { ssoSettingsSection } from './sso-routes.js'

// Form fields are text; a field sent twice (an array) is refused by the schema with a 400.
const text = (maxLength = 4096) => Type.Optional(Type.String({ maxLength }))
const CSRF = { _csrf: text(200) }
const IdParams = Type.Object({ id: Type.String({ maxLength: 40 }) })
const KeyBody = Type.Object({
  ...CSRF,
  name: text(),
  scopes_offered: text(4),
  // One checkbox per scope: absent, one value, or both (a repeated field).
  scope: Type.Optional(
    Type.Union([Type.String({ maxLength: 40 }), Type.Array(Type.String({ maxLength: 40 }), { maxItems: 4 })]),
  ),
})
const UserBody = Type.Object({ ...CSRF, email: text(), role: text(40) })
const RoleBody = Type.Object({ ...CSRF, role: text(40) })
const CsrfOnlyBody = Type.Object(CSRF)

/** The schema of a form posted to /…/:id/… with nothing but its CSRF token. */
const ID_FORM = { schema: { params: IdParams, body: CsrfOnlyBody } }
// The routes that may answer with the Settings page, whose environments are derived: read-your-writes.
const KEY_FORM = { schema: { body: KeyBody }, ...FRESH }
const USER_FORM = { schema: { body: UserBody }, ...FRESH }
const FRESH_ID_FORM = { ...ID_FORM, ...FRESH }

/** The numeric id in the path; anything else is a 404 (there is no such item). */
const noSuchKey = () => new HttpProblem(404, 'not-found', 'No such key', 'This account has no such API key.')
const noSuchUser = () => new HttpProblem(404, 'not-found', 'No such user', 'This account has no such user.')

/**
 * The id in the path. One that is not an id at all (`0x10`, `007`) gets the very answer of an id
 * the account does not have: nobody learns more from the one than from the other.
 */
function idParam(request: { params: { id: string } }, noSuch: () => HttpProblem): number {
  const id = parseWholeNumber(request.params.id, 1, MAX_ID)
  if (id === undefined) throw noSuch()
  return id
}

/**
 * Runs a change to one of the account's users: 404 when there is no such user, or the reason in
 * words when it would leave the account without an admin (undefined when it was done).
 */
async function keepingAnAdmin(change: () => Promise<boolean>): Promise<string | undefined> {
  try {
    if (!(await change())) throw noSuchUser()
    return undefined
  } catch (err) {
    if (err instanceof LastAdminError) return 'The account must keep at least one admin.'
    throw err
  }
}

/** A readable one-time password: 4 groups of 5 characters from an unambiguous alphabet. */
function oneTimePassword(): string {
  const alphabet = 'abcdefghjkmnpqrstuvwxyz23456789'
  const bytes = randomBytes(20)
  let out = ''
  for (let i = 0; i < 20; i++) {
    if (i > 0 && i % 5 === 0) out += '-'
    out += alphabet[(bytes[i] ?? 0) % alphabet.length]
  }
  return out
}

export const settingsRoutes: FastifyPluginAsyncTypebox<UiContext> = async (app, ctx) => {
  const { db } = ctx.database

  const render = async (
    request: FastifyRequest,
    reply: FastifyReply,
    user: SessionUser,
    extra: Partial<Pick<SettingsPageData, 'secret' | 'notice'>> & { errors?: string[] } = {},
    status = 200,
  ) => {
    const [keys, users] = await Promise.all([listApiKeys(db, user.accountId), listUsers(db, user.accountId)])
    const csrfToken = ctx.csrfToken(request, reply)
    const board = await loadBoardSettings(db, user.accountId, user.role === 'admin')
    return ctx.page(
      reply,
      settingsPage({
        user,
        csrfToken,
        board: boardSettingsSections({ user, csrfToken, baseUrl: ctx.baseUrl(request), ...board }),
        signIn: await ssoSettingsSection(ctx, user, csrfToken),
        retention: retentionSection({
          user,
          csrfToken,
          days: await getRetention(db, user.accountId),
          maxDays: MAX_RETENTION_DAYS,
        }),
        keys,
        users,
        baseUrl: ctx.baseUrl(request),
        deployImage: ctx.config.deployImage,
        errors: extra.errors ?? [],
        ...(extra.secret ? { secret: extra.secret } : {}),
        ...(extra.notice ? { notice: extra.notice } : {}),
      }),
      status,
    )
  }

  const admin = (request: FastifyRequest, reply: FastifyReply) => ctx.requireAdmin(request, reply)

  app.get('/settings', async (_request, reply) => reply.redirect('/settings/', 301))

  app.get('/settings/', FRESH, async (request, reply) => {
    const user = ctx.requireUser(request, reply)
    if (!user) return reply
    // The result of the form that redirected here, shown on this view only (post/redirect/get).
    const flash = await takeFlash(db, user)
    return render(request, reply, user, {
      ...(flash?.notice ? { notice: flash.notice } : {}),
      ...(flash?.secret ? { secret: flash.secret } : {}),
    })
  })

  app.post('/settings/keys', KEY_FORM, async (request, reply) => {
    const user = admin(request, reply)
    if (!user) return reply
    const name = (request.body.name ?? '').trim()
    const errors: string[] = []
    const badName = nameProblem(name)
    if (name === '') errors.push('Give the key a name.')
    else if (badName) errors.push(`The key name ${badName}.`)
    // The form says it offered the checkboxes; a post without that (an older page or a script)
    // gets the default, ingest, as before scopes existed. With it, none checked is refused.
    const checked = request.body.scope
    const offered = request.body.scopes_offered === '1'
    const names = Array.isArray(checked) ? checked : checked ? [checked] : offered ? [] : ['ingest']
    const scopes = parseScopes(names.join(','))
    if (!scopes) errors.push('Choose what the key may do: ingest, read, or both.')
    if (errors.length > 0 || !scopes) return render(request, reply, user, { errors }, 422)
    const { key } = await createApiKeyAudited(
      db,
      user.accountId,
      { name, scopes },
      auditSource(request, user),
    )
    // Kept server-side for the next page view only: never in a URL, and reloading shows it no more.
    return ctx.redirectWithFlash(reply, user, '/settings/', {
      secret: { kind: 'key', label: name, value: key },
    })
  })

  app.post('/settings/keys/:id/revoke', ID_FORM, async (request, reply) => {
    const user = admin(request, reply)
    if (!user) return reply
    const row = await revokeApiKeyAudited(
      ctx.database,
      user.accountId,
      String(idParam(request, noSuchKey)),
      auditSource(request, user),
      ctx.verifier,
    )
    if (!row) throw noSuchKey()
    return ctx.redirectWithFlash(reply, user, '/settings/', {
      notice: 'The key is revoked: requests using it are refused from now on.',
    })
  })

  app.post('/settings/users', USER_FORM, async (request, reply) => {
    const user = admin(request, reply)
    if (!user) return reply
    const email = (request.body.email ?? '').trim()
    const role = request.body.role || 'member'
    const errors: string[] = []
    const badEmail = emailProblem(email)
    if (badEmail) errors.push(`Email ${badEmail}.`)
    if (!isUserRole(role)) errors.push('Role must be admin or member.')
    if (errors.length > 0 || !isUserRole(role)) return render(request, reply, user, { errors }, 422)
    const password = oneTimePassword()
    // Hashed before the transaction begins (passwords.ts: HashedPassword).
    const hashed = await hashedPassword(password)
    try {
      const created = await createUserAudited(
        db,
        { id: user.accountId },
        { email, password: hashed, role, oneTimePassword: true, via: 'settings (one-time password)' },
        auditSource(request, user),
      )
      return ctx.redirectWithFlash(reply, user, '/settings/', {
        notice: `${created.email} is added as ${created.role}.`,
        secret: { kind: 'password', label: created.email, value: password },
      })
    } catch (err) {
      if (err instanceof UserExistsError) {
        return render(
          request,
          reply,
          user,
          { errors: ['This account already has a user with that email.'] },
          409,
        )
      }
      throw err
    }
  })

  app.post(
    '/settings/users/:id/role',
    { schema: { params: IdParams, body: RoleBody }, ...FRESH },
    async (request, reply) => {
      const user = admin(request, reply)
      if (!user) return reply
      const role = request.body.role ?? ''
      if (!isUserRole(role)) {
        return render(request, reply, user, { errors: ['Role must be admin or member.'] }, 422)
      }
      const id = idParam(request, noSuchUser)
      const refused = await keepingAnAdmin(() =>
        changeRoleAudited(db, user.accountId, id, role, auditSource(request, user)),
      )
      if (refused) return render(request, reply, user, { errors: [refused] }, 409)
      return ctx.redirectWithFlash(reply, user, '/settings/', { notice: 'The role is changed.' })
    },
  )

  app.post('/settings/users/:id/password', FRESH_ID_FORM, async (request, reply) => {
    const user = admin(request, reply)
    if (!user) return reply
    const id = idParam(request, noSuchUser)
    if (id === user.userId) {
      return render(request, reply, user, { errors: ['Change your own password under "Your account".'] }, 409)
    }
    const password = oneTimePassword()
    const hashed = await hashedPassword(password)
    // Scoped to the admin's account: another account's user id is "no such user".
    const email = await resetPasswordAudited(
      db,
      user.accountId,
      id,
      hashed,
      { oneTime: true, how: 'admin reset (one-time password)' },
      auditSource(request, user),
    )
    if (email === undefined) throw noSuchUser()
    return ctx.redirectWithFlash(reply, user, '/settings/', {
      notice: `${email} has a new one-time password and was logged out everywhere.`,
      secret: { kind: 'password', label: email, value: password },
    })
  })

  app.post('/settings/users/:id/remove', FRESH_ID_FORM, async (request, reply) => {
    const user = admin(request, reply)
    if (!user) return reply
    const id = idParam(request, noSuchUser)
    if (id === user.userId) {
      return render(request, reply, user, { errors: ['You cannot remove yourself.'] }, 409)
    }
    const refused = await keepingAnAdmin(() =>
      removeUserAudited(db, user.accountId, id, auditSource(request, user)),
    )
    if (refused) return render(request, reply, user, { errors: [refused] }, 409)
    return ctx.redirectWithFlash(reply, user, '/settings/', {
      notice: 'The user is removed and logged out.',
    })
  })
}
