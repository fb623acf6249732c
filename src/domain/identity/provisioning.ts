// Single sign-on users: created or updated at each login from the provider's claims, linked by (issuer, subject).
import { randomBytes } from 'node:crypto'
import type { Kysely } from 'kysely'
import type { DB, UserRole } from '../../db/schema.js'
import { sha256Hex } from '../../text-rules.js'
import { ensureAccount, findUserInAccount } from '../accounts.js'
import { type AuditActor, recordAudit } from '../audit/log.js'
import { createSession } from '../sessions.js'

/**
 * A password hash no password matches (verifyPassword only accepts `scrypt$…`): users made at
 * single sign-on have no password until an operator sets one (`shiplog users set-password`).
 */
export function unusablePasswordHash(): string {
  return `sso-only$${randomBytes(16).toString('hex')}`
}

export interface SignInInput {
  readonly issuer: string
  readonly subject: string
  readonly email: string
  readonly accountName: string
  readonly role: UserRole
  /** Whether the provider's groups decide the role (SHIPLOG_OIDC_ADMIN_GROUPS is set). */
  readonly roleFromGroups: boolean
  readonly idToken: string
  readonly address: string | null
}

export type SignInResult =
  | { readonly ok: true; readonly sessionToken: string; readonly userId: number; readonly accountId: number }
  | { readonly ok: false; readonly reason: 'identity_mismatch'; readonly accountId: number }

/**
 * Finds or creates the user, brings the role in line with the provider's groups, links the
 * identity and opens a session, all in one transaction with their audit entries.
 */
export async function signInWithProvider(db: Kysely<DB>, input: SignInInput): Promise<SignInResult> {
  return db.transaction().execute(async (trx) => {
    const account = await ensureAccount(trx, input.accountName)
    const now = Date.now()
    let user = await findUserInAccount(trx, account.id, input.email)
    if (user) {
      const link = await trx
        .selectFrom('user_identities')
        .select(['id', 'subject'])
        .where('user_id', '=', user.id)
        .where('issuer', '=', input.issuer)
        .executeTakeFirst()
      // The provider gave this address to another person (a recycled mailbox): not the same user.
      if (link && link.subject !== input.subject)
        return { ok: false, reason: 'identity_mismatch', accountId: account.id }
    }
    const actorFor = (id: number): AuditActor => ({ kind: 'user', id, name: input.email })
    if (!user) {
      user = await trx
        .insertInto('users')
        .values({
          account_id: account.id,
          email: input.email,
          password_hash: unusablePasswordHash(),
          role: input.role,
          created_at: now,
        })
        .returningAll()
        .executeTakeFirstOrThrow()
      await recordAudit(trx, {
        accountId: account.id,
        actor: actorFor(user.id),
        address: input.address,
        action: 'user.added',
        target: input.email,
        details: { method: 'oidc', role: input.role },
      })
    } else if (
      input.roleFromGroups &&
      user.role !== input.role &&
      !(await isLastAdmin(trx, user.id, account.id, user.role))
    ) {
      await trx.updateTable('users').set({ role: input.role }).where('id', '=', user.id).execute()
      await recordAudit(trx, {
        accountId: account.id,
        actor: actorFor(user.id),
        address: input.address,
        action: 'user.role_changed',
        target: input.email,
        details: { method: 'oidc', from: user.role, to: input.role },
      })
    }
    const linked = await trx
      .updateTable('user_identities')
      .set({ email: input.email, last_login_at: now })
      .where('user_id', '=', user.id)
      .where('issuer', '=', input.issuer)
      .executeTakeFirst()
    if (Number(linked.numUpdatedRows) === 0) {
      await trx
        .insertInto('user_identities')
        .values({
          user_id: user.id,
          issuer: input.issuer,
          subject: input.subject,
          email: input.email,
          created_at: now,
          last_login_at: now,
        })
        .execute()
    }
    const sessionToken = await createSession(trx, user.id)
    await trx
      .updateTable('sessions')
      .set({ id_token: input.idToken })
      .where('id', '=', sha256Hex(sessionToken))
      .execute()
    await recordAudit(trx, {
      accountId: account.id,
      actor: actorFor(user.id),
      address: input.address,
      action: 'login.succeeded',
      target: input.email,
      details: { method: 'oidc' },
    })
    return { ok: true, sessionToken, userId: user.id, accountId: account.id }
  })
}

/**
 * An account always keeps an admin (as in Settings): the provider's groups do not demote the last
 * one, who stays admin until another admin exists.
 */
async function isLastAdmin(
  db: Kysely<DB>,
  userId: number,
  accountId: number,
  role: UserRole,
): Promise<boolean> {
  if (role !== 'admin') return false
  const row = await db
    .selectFrom('users')
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .where('account_id', '=', accountId)
    .where('role', '=', 'admin')
    .where('id', '!=', userId)
    .executeTakeFirstOrThrow()
  return Number(row.n) === 0
}

/** The ID token the session was opened with (single sign-on), for the provider's logout. */
export async function sessionIdToken(db: Kysely<DB>, sessionId: string): Promise<string | null> {
  const row = await db
    .selectFrom('sessions')
    .select('id_token')
    .where('id', '=', sessionId)
    .executeTakeFirst()
  return row?.id_token ?? null
}

/** Whether the user has signed in with this provider at least once. */
export async function hasIdentity(db: Kysely<DB>, userId: number, issuer: string): Promise<boolean> {
  const row = await db
    .selectFrom('user_identities')
    .select('id')
    .where('user_id', '=', userId)
    .where('issuer', '=', issuer)
    .executeTakeFirst()
  return row !== undefined
}

/** Whether the account lets its users sign in with a password (the default). */
export async function passwordLoginAllowed(db: Kysely<DB>, accountId: number): Promise<boolean> {
  const row = await db
    .selectFrom('accounts')
    .select('password_login')
    .where('id', '=', accountId)
    .executeTakeFirst()
  return row?.password_login !== 0
}

/** Whether any account of the installation has turned password login off. */
export async function anyAccountWithoutPasswordLogin(db: Kysely<DB>): Promise<boolean> {
  const row = await db.selectFrom('accounts').select('id').where('password_login', '=', 0).executeTakeFirst()
  return row !== undefined
}

/**
 * Turns password login on or off for an account, with its audit entry; false when nothing changed.
 * Turning it off also ends every session of the account's users that a password opened (a session
 * opened by single sign-on keeps the provider's ID token; one opened with a password has none), so
 * nobody keeps working, or makes a key, on a password the account no longer accepts.
 */
export async function setPasswordLogin(
  db: Kysely<DB>,
  accountId: number,
  allowed: boolean,
  who: { actor: AuditActor; address: string | null },
): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const changed = await trx
      .updateTable('accounts')
      .set({ password_login: allowed ? 1 : 0 })
      .where('id', '=', accountId)
      .where('password_login', '=', allowed ? 0 : 1)
      .executeTakeFirst()
    if (Number(changed.numUpdatedRows) === 0) return false
    let ended = 0
    if (!allowed) {
      const deleted = await trx
        .deleteFrom('sessions')
        .where('id_token', 'is', null)
        .where('user_id', 'in', (eb) =>
          eb.selectFrom('users').select('users.id').where('users.account_id', '=', accountId),
        )
        .executeTakeFirst()
      ended = Number(deleted.numDeletedRows)
    }
    await recordAudit(trx, {
      accountId,
      actor: who.actor,
      address: who.address,
      action: 'settings.changed',
      target: 'password login',
      details: {
        setting: 'password_login',
        value: allowed ? 'on' : 'off',
        ...(allowed ? {} : { signed_out: ended }),
      },
    })
    return true
  })
}
