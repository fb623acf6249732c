// Adding, removing and changing a user of an account with the audit entry, in one transaction:
// what Settings and `shiplog users` call (an entry exists exactly when the change does).
import type { Kysely } from 'kysely'
import type { DB, User, UserRole } from '../../db/schema.js'
import { changeRole, createUser, ensureAccount, removeUser, resetPassword } from '../accounts.js'
import { type AuditSource, recordAudit } from '../audit/log.js'
import type { HashedPassword } from '../passwords.js'

/** A user of the account as it is before a change, for the audit entry's target and "from". */
function userOf(trx: Kysely<DB>, accountId: number, userId: number) {
  return trx
    .selectFrom('users')
    .select(['email', 'role'])
    .where('id', '=', userId)
    .where('account_id', '=', accountId)
    .executeTakeFirst()
}

/**
 * Adds a user to an account: `{ id }` names an existing one, `{ name }` one created when it is new,
 * in the same transaction, so a refused user (UserExistsError) leaves no new, empty account behind.
 * The password comes hashed (passwords.ts: HashedPassword): a hash inside the transaction would
 * hold the write lock through it.
 */
export function createUserAudited(
  db: Kysely<DB>,
  account: { id: number } | { name: string },
  user: {
    email: string
    password: HashedPassword
    role: UserRole
    oneTimePassword?: boolean
    /** How the user came to be, for the entry: `shiplog users create`, `settings (one-time password)`. */
    via: string
  },
  who: AuditSource,
): Promise<User> {
  return db.transaction().execute(async (trx) => {
    const acct = 'name' in account ? await ensureAccount(trx, account.name) : account
    const added = await createUser(trx, {
      accountId: acct.id,
      email: user.email,
      password: user.password,
      role: user.role,
      ...(user.oneTimePassword ? { oneTimePassword: true } : {}),
    })
    await recordAudit(trx, {
      accountId: acct.id,
      ...who,
      action: 'user.added',
      target: added.email,
      details: { role: added.role, via: user.via },
    })
    return added
  })
}

/**
 * Changes a user's role; false when the account has no such user, LastAdminError when it would
 * leave the account without an admin. Setting the role a user already has writes no entry.
 */
export function changeRoleAudited(
  db: Kysely<DB>,
  accountId: number,
  userId: number,
  role: UserRole,
  who: AuditSource,
): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const before = await userOf(trx, accountId, userId)
    if (!before || !(await changeRole(trx, accountId, userId, role))) return false
    if (before.role !== role) {
      await recordAudit(trx, {
        accountId,
        ...who,
        action: 'user.role_changed',
        target: before.email,
        details: { from: before.role, to: role },
      })
    }
    return true
  })
}

/** Removes a user (their sessions end with them); false when there is no such user, LastAdminError for the last admin. */
export function removeUserAudited(
  db: Kysely<DB>,
  accountId: number,
  userId: number,
  who: AuditSource,
): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const before = await userOf(trx, accountId, userId)
    if (!before || !(await removeUser(trx, accountId, userId))) return false
    await recordAudit(trx, {
      accountId,
      ...who,
      action: 'user.removed',
      target: before.email,
      details: { role: before.role },
    })
    return true
  })
}

/**
 * Gives a user of the account a new password (hashed beforehand) and ends their sessions; the
 * user's email, or undefined when the account has no such user.
 */
export function resetPasswordAudited(
  db: Kysely<DB>,
  accountId: number,
  userId: number,
  password: HashedPassword,
  options: {
    oneTime: boolean
    /** How it was set, for the entry: `admin reset (one-time password)`, `shiplog users set-password`. */
    how: string
  },
  who: AuditSource,
): Promise<string | undefined> {
  return db.transaction().execute(async (trx) => {
    const before = await userOf(trx, accountId, userId)
    if (!before || !(await resetPassword(trx, accountId, userId, password, { oneTime: options.oneTime })))
      return undefined
    await recordAudit(trx, {
      accountId,
      ...who,
      action: 'password.changed',
      target: before.email,
      details: { how: options.how },
    })
    return before.email
  })
}
