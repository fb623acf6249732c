// Accounts (teams) and their users.
import type { Kysely } from 'kysely'
import type { Account, DB, User, UserRole } from '../db/schema.js'
import { hashPassword } from './passwords.js'

export const ACCOUNT_NAME_MAX = 100

/** Null when acceptable, else the reason in words. */
export function accountNameProblem(name: string): string | null {
  const trimmed = name.trim()
  if (trimmed === '') return 'must not be empty'
  if ([...trimmed].length > ACCOUNT_NAME_MAX) return `must be at most ${ACCOUNT_NAME_MAX} characters`
  if (hasControlCharacter(trimmed)) return 'must not contain control characters'
  return null
}

// Deliberately simple: one @, something on each side, no spaces. Real checking is sending mail.
const EMAIL_PATTERN = /^[^\s@]+@[^\s@]+$/

export function normaliseEmail(email: string): string {
  return email.trim().toLowerCase()
}

export function emailProblem(email: string): string | null {
  const e = normaliseEmail(email)
  if (e.length > 254 || !EMAIL_PATTERN.test(e)) return 'must be an email address'
  return null
}

export function hasControlCharacter(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i)
    if (c <= 0x1f || c === 0x7f) return true
  }
  return false
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

export async function createUser(
  db: Kysely<DB>,
  input: { accountId: number; email: string; password: string; role: UserRole },
): Promise<User> {
  const email = normaliseEmail(input.email)
  const taken = await db.selectFrom('users').select('id').where('email', '=', email).executeTakeFirst()
  if (taken) throw new UserExistsError(`a user with email ${email} already exists`)
  const passwordHash = await hashPassword(input.password)
  return db
    .insertInto('users')
    .values({
      account_id: input.accountId,
      email,
      password_hash: passwordHash,
      role: input.role,
      created_at: Date.now(),
    })
    .returningAll()
    .executeTakeFirstOrThrow()
}

export async function countUsers(db: Kysely<DB>): Promise<number> {
  const row = await db
    .selectFrom('users')
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .executeTakeFirstOrThrow()
  return Number(row.n)
}
