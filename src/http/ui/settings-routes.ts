// /settings/: API keys and users of the viewer's account; changes are for admins only.
import { randomBytes } from 'node:crypto'
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify'
import {
  changeRole,
  createUser,
  emailProblem,
  LastAdminError,
  listUsers,
  removeUser,
  UserExistsError,
} from '../../domain/accounts.js'
import { createApiKey, listApiKeys, revokeApiKeyEverywhere } from '../../domain/keys.js'
import type { SessionUser } from '../../domain/sessions.js'
import { isUserRole, nameProblem } from '../../domain/text-rules.js'
import { type SettingsPageData, settingsPage } from '../../views/settings-page.js'
import { HttpProblem } from '../problem.js'
import { formField, type UiContext } from './plugin.js'

type Form = Record<string, string | undefined>

function idParam(request: FastifyRequest): number {
  const raw = (request.params as { id?: string }).id ?? ''
  if (!/^\d{1,15}$/.test(raw)) throw new HttpProblem(404, 'not-found', 'Not found', 'There is no such item.')
  return Number(raw)
}

/**
 * Runs a change to one of the account's users: 404 when there is no such user, or the reason in
 * words when it would leave the account without an admin (undefined when it was done).
 */
async function keepingAnAdmin(change: () => Promise<boolean>): Promise<string | undefined> {
  try {
    if (!(await change()))
      throw new HttpProblem(404, 'not-found', 'No such user', 'This account has no such user.')
    return undefined
  } catch (err) {
    if (err instanceof LastAdminError) return 'The account must keep at least one admin.'
    throw err
  }
}

const forbidden = () =>
  new HttpProblem(
    403,
    'admin-only',
    'Admins only',
    'Only an admin of this account can do that. Ask one of them.',
  )

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

export const settingsRoutes: FastifyPluginAsync<UiContext> = async (app, ctx) => {
  const { db } = ctx.database

  const render = async (
    request: FastifyRequest,
    reply: FastifyReply,
    user: SessionUser,
    extra: Partial<Pick<SettingsPageData, 'newKey' | 'newPassword' | 'notice'>> & { errors?: string[] } = {},
    status = 200,
  ) => {
    const [keys, users] = await Promise.all([listApiKeys(db, user.accountId), listUsers(db, user.accountId)])
    return ctx.page(
      reply,
      settingsPage({
        user,
        csrfToken: reply.generateCsrf(),
        keys,
        users,
        baseUrl: ctx.baseUrl(request),
        deployImage: ctx.config.deployImage,
        errors: extra.errors ?? [],
        ...(extra.newKey ? { newKey: extra.newKey } : {}),
        ...(extra.newPassword ? { newPassword: extra.newPassword } : {}),
        ...(extra.notice ? { notice: extra.notice } : {}),
      }),
      status,
    )
  }

  const admin = (request: FastifyRequest, reply: FastifyReply): SessionUser | null => {
    const user = ctx.requireUser(request, reply)
    if (user && user.role !== 'admin') throw forbidden()
    return user
  }

  app.get('/settings', async (_request, reply) => reply.redirect('/settings/', 301))

  app.get('/settings/', async (request, reply) => {
    const user = ctx.requireUser(request, reply)
    if (!user) return reply
    const done = (request.query as Form).done
    const notices: Record<string, string> = {
      revoked: 'The key is revoked: requests using it are refused from now on.',
      role: 'The role is changed.',
      removed: 'The user is removed and logged out.',
    }
    return render(request, reply, user, done && notices[done] ? { notice: notices[done] } : {})
  })

  app.post('/settings/keys', async (request, reply) => {
    const user = admin(request, reply)
    if (!user) return reply
    const name = formField(request, 'name').trim()
    const errors: string[] = []
    const badName = nameProblem(name)
    if (name === '') errors.push('Give the key a name.')
    else if (badName) errors.push(`The key name ${badName}.`)
    if (errors.length > 0) return render(request, reply, user, { errors }, 422)
    const { key } = await createApiKey(db, {
      accountId: user.accountId,
      name,
      createdBy: user.email,
      createdByUserId: user.userId,
    })
    // Shown in this response only; reloading does not show it again.
    return render(request, reply, user, { newKey: { name, key } }, 201)
  })

  app.post('/settings/keys/:id/revoke', async (request, reply) => {
    const user = admin(request, reply)
    if (!user) return reply
    const row = await revokeApiKeyEverywhere(
      ctx.database,
      user.accountId,
      String(idParam(request)),
      ctx.verifier,
    )
    if (!row) throw new HttpProblem(404, 'not-found', 'No such key', 'This account has no such API key.')
    return reply.redirect('/settings/?done=revoked', 303)
  })

  app.post('/settings/users', async (request, reply) => {
    const user = admin(request, reply)
    if (!user) return reply
    const email = formField(request, 'email').trim()
    const role = formField(request, 'role') || 'member'
    const errors: string[] = []
    const badEmail = emailProblem(email)
    if (badEmail) errors.push(`Email ${badEmail}.`)
    if (!isUserRole(role)) errors.push('Role must be admin or member.')
    if (errors.length > 0 || !isUserRole(role)) return render(request, reply, user, { errors }, 422)
    const password = oneTimePassword()
    try {
      const created = await createUser(db, {
        accountId: user.accountId,
        email,
        password,
        role,
        oneTimePassword: true,
      })
      return render(request, reply, user, { newPassword: { email: created.email, password } }, 201)
    } catch (err) {
      if (err instanceof UserExistsError) {
        return render(request, reply, user, { errors: ['A user with that email already exists.'] }, 409)
      }
      throw err
    }
  })

  app.post('/settings/users/:id/role', async (request, reply) => {
    const user = admin(request, reply)
    if (!user) return reply
    const role = formField(request, 'role')
    if (!isUserRole(role)) {
      return render(request, reply, user, { errors: ['Role must be admin or member.'] }, 422)
    }
    const refused = await keepingAnAdmin(() => changeRole(db, user.accountId, idParam(request), role))
    if (refused) return render(request, reply, user, { errors: [refused] }, 409)
    return reply.redirect('/settings/?done=role', 303)
  })

  app.post('/settings/users/:id/remove', async (request, reply) => {
    const user = admin(request, reply)
    if (!user) return reply
    const id = idParam(request)
    if (id === user.userId) {
      return render(request, reply, user, { errors: ['You cannot remove yourself.'] }, 409)
    }
    const refused = await keepingAnAdmin(() => removeUser(db, user.accountId, id))
    if (refused) return render(request, reply, user, { errors: [refused] }, 409)
    return reply.redirect('/settings/?done=removed', 303)
  })
}
