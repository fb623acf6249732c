// Accounts (teams) and their users.
import type { Kysely } from 'kysely'
import type { Account, DB, User, UserRole } from '../db/schema.js'
import { nameProblem, textProblem } from '../text-rules.js'
import { withTransaction } from './audit/transaction.js'
import { type HashedPassword, hashOf } from './passwords.js'

/** Null when acceptable, else the reason in words. */
export function accountNameProblem(name: string): string | null {
  return nameProblem(name.trim())
}

// Deliberately simple: one @, something on each side, no spaces. Real checking is sending mail.
const EMAIL_PATTERN = /^[^\s@]+@[^\s@]+$/

export function normaliseEmail(email: string): string {
  return email.trim().toLowerCase()
}

export function emailProblem(email: string): string | null {
  const e = normaliseEmail(email)
  const textual = textProblem(e)
  if (textual) return textual
  if (e.length > 254 || !EMAIL_PATTERN.test(e)) return 'must be an email address'
  return null
}

export async function findAccountByName(db: Kysely<DB>, name: string): Promise<Account | undefined> {
  return db.selectFrom('accounts').selectAll().where('name', '=', name.trim()).executeTakeFirst()
}

/** Returns the account with that name, creating it first when it does not exist. */
export async function ensureAccount(db: Kysely<DB>, name: string): Promise<Account> {
  const existing = await findAccountByName(db, name)
  if (existing) return existing
  await db
    .insertInto('accounts')
    .values({ name: name.trim(), created_at: Date.now() })
    .onConflict((oc) => oc.column('name').doNothing())
    .execute()
  const created = await findAccountByName(db, name)
  if (!created) throw new Error(`account ${name} could not be created`)
  return created
}

export class UserExistsError extends Error {
  override readonly name = 'UserExistsError'
}

/**
 * Adds a user to an account. An address is unique within an account only: the same person may
 * belong to several, and whether an address exists in another account is never revealed.
 */
export async function createUser(
  db: Kysely<DB>,
  input: {
    accountId: number
    email: string
    password: string | HashedPassword
    role: UserRole
    oneTimePassword?: boolean
  },
): Promise<User> {
  const email = normaliseEmail(input.email)
  // Before the first read (a caller inside a transaction passes it hashed: passwords.ts).
  const passwordHash = await hashOf(input.password)
  const exists = () => findUserInAccount(db, input.accountId, email)
  if (await exists()) throw new UserExistsError(`a user with email ${email} already exists in this account`)
  try {
    return await db
      .insertInto('users')
      .values({
        account_id: input.accountId,
        email,
        password_hash: passwordHash,
        role: input.role,
        created_at: Date.now(),
        must_change_password: input.oneTimePassword ? 1 : 0,
      })
      .returningAll()
      .executeTakeFirstOrThrow()
  } catch (err) {
    // Added by someone else between the check and the insert: the unique (account, email) refused it.
    if (await exists()) throw new UserExistsError(`a user with email ${email} already exists in this account`)
    throw err
  }
}

export async function countUsers(db: Kysely<DB>): Promise<number> {
  const row = await db
    .selectFrom('users')
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .executeTakeFirstOrThrow()
  return Number(row.n)
}

export async function findUserInAccount(
  db: Kysely<DB>,
  accountId: number,
  email: string,
): Promise<User | undefined> {
  return db
    .selectFrom('users')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('email', '=', normaliseEmail(email))
    .executeTakeFirst()
}

export async function findUserById(db: Kysely<DB>, userId: number): Promise<User | undefined> {
  return db.selectFrom('users').selectAll().where('id', '=', userId).executeTakeFirst()
}

/** Every user with this address, one per account, with the account's name (login picks one). */
export async function findUsersByEmail(
  db: Kysely<DB>,
  email: string,
): Promise<(User & { account_name: string })[]> {
  return db
    .selectFrom('users')
    .innerJoin('accounts', 'accounts.id', 'users.account_id')
    .selectAll('users')
    .select('accounts.name as account_name')
    .where('users.email', '=', normaliseEmail(email))
    .orderBy('accounts.name')
    .limit(MAX_ACCOUNTS_PER_EMAIL)
    .execute()
}

/** Login checks the password against each of a person's accounts; this bounds the work. */
export const MAX_ACCOUNTS_PER_EMAIL = 20

export async function listUsers(db: Kysely<DB>, accountId: number): Promise<User[]> {
  return db.selectFrom('users').selectAll().where('account_id', '=', accountId).orderBy('id').execute()
}

export class SetupClosedError extends Error {
  override readonly name = 'SetupClosedError'
}

/**
 * First-run set-up: creates the first account and its admin, only while no user exists. Runs in
 * one transaction so two people submitting the set-up form at once cannot both succeed.
 */
export async function setupFirstAdmin(
  db: Kysely<DB>,
  input: { accountName: string; email: string; password: string | HashedPassword },
): Promise<User> {
  const passwordHash = await hashOf(input.password)
  return withTransaction(db, async (trx) => {
    // Claiming a fixed settings row serialises concurrent set-ups on both databases: a second
    // transaction waits on the row's unique key, then finds it taken.
    const claimed = await trx
      .insertInto('settings')
      .values({ name: 'setup_done', value: String(Date.now()) })
      .onConflict((oc) => oc.column('name').doNothing())
      .returning('name')
      .executeTakeFirst()
    if (!claimed || (await countUsers(trx)) > 0) throw new SetupClosedError('Shiplog is already set up')
    const account = await ensureAccount(trx, input.accountName)
    return trx
      .insertInto('users')
      .values({
        account_id: account.id,
        email: normaliseEmail(input.email),
        password_hash: passwordHash,
        role: 'admin',
        created_at: Date.now(),
      })
      .returningAll()
      .executeTakeFirstOrThrow()
  })
}

export async function setPassword(
  db: Kysely<DB>,
  userId: number,
  password: string | HashedPassword,
  options: { oneTime: boolean },
): Promise<void> {
  const passwordHash = await hashOf(password)
  await db
    .updateTable('users')
    .set({ password_hash: passwordHash, must_change_password: options.oneTime ? 1 : 0 })
    .where('id', '=', userId)
    .execute()
}

/**
 * Sets a new one-time password for a user of the account (an admin's reset, or the operator's
 * `users set-password`) and ends their sessions. False when the account has no such user.
 */
export async function resetPassword(
  db: Kysely<DB>,
  accountId: number,
  userId: number,
  password: string | HashedPassword,
  options: { oneTime: boolean },
): Promise<boolean> {
  const passwordHash = await hashOf(password)
  return withTransaction(db, async (trx) => {
    const updated = await trx
      .updateTable('users')
      .set({ password_hash: passwordHash, must_change_password: options.oneTime ? 1 : 0 })
      .where('id', '=', userId)
      .where('account_id', '=', accountId)
      .executeTakeFirst()
    if (Number(updated.numUpdatedRows) !== 1) return false
    await trx.deleteFrom('sessions').where('user_id', '=', userId).execute()
    return true
  })
}

export class LastAdminError extends Error {
  override readonly name = 'LastAdminError'
}

async function otherAdmins(db: Kysely<DB>, accountId: number, userId: number): Promise<number> {
  // Touch the account row first: on PostgreSQL this row lock makes concurrent role changes of one
  // account wait for each other, so two admins cannot demote or remove each other at once.
  await db
    .updateTable('accounts')
    .set((eb) => ({ name: eb.ref('name') }))
    .where('id', '=', accountId)
    .execute()
  const row = await db
    .selectFrom('users')
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .where('account_id', '=', accountId)
    .where('role', '=', 'admin')
    .where('id', '!=', userId)
    .executeTakeFirstOrThrow()
  return Number(row.n)
}

/**
 * Runs `change` on one user of the account inside a transaction, unless it would leave the account
 * without an admin (`staysAdmin`: whether the user is still an admin afterwards). False when the
 * account has no such user.
 */
async function changeUserKeepingAnAdmin(
  db: Kysely<DB>,
  accountId: number,
  userId: number,
  staysAdmin: boolean,
  change: (trx: Kysely<DB>) => Promise<void>,
): Promise<boolean> {
  return withTransaction(db, async (trx) => {
    const user = await trx
      .selectFrom('users')
      .select(['id', 'role'])
      .where('id', '=', userId)
      .where('account_id', '=', accountId)
      .executeTakeFirst()
    if (!user) return false
    if (user.role === 'admin' && !staysAdmin && (await otherAdmins(trx, accountId, userId)) === 0) {
      throw new LastAdminError('the account must keep at least one admin')
    }
    await change(trx)
    return true
  })
}

/** Changes a user's role within the account; an account always keeps at least one admin. */
export function changeRole(
  db: Kysely<DB>,
  accountId: number,
  userId: number,
  role: UserRole,
): Promise<boolean> {
  return changeUserKeepingAnAdmin(db, accountId, userId, role === 'admin', async (trx) => {
    await trx.updateTable('users').set({ role }).where('id', '=', userId).execute()
  })
}

/** Removes a user of the account (their sessions end with them); the last admin stays. */
export function removeUser(db: Kysely<DB>, accountId: number, userId: number): Promise<boolean> {
  return changeUserKeepingAnAdmin(db, accountId, userId, false, async (trx) => {
    await trx.deleteFrom('sessions').where('user_id', '=', userId).execute()
    await trx.deleteFrom('users').where('id', '=', userId).execute()
  })
}
