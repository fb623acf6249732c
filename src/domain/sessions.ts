// Server-side login sessions: the cookie holds a random token, the database its digest.
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto'
import type { Kysely } from 'kysely'
import type { DB, UserRole } from '../db/schema.js'
import { sha256Hex } from '../text-rules.js'

export const SESSION_LIFETIME_MS = 14 * 24 * 60 * 60 * 1000
// Extending the session on every page view would be a write per request; once a while is enough.
const TOUCH_EVERY_MS = 5 * 60 * 1000

const digest = sha256Hex

/** Who is logged in, as pages need it. */
export interface SessionUser {
  sessionId: string
  userId: number
  email: string
  role: UserRole
  accountId: number
  accountName: string
  mustChangePassword: boolean
  /**
   * Encrypts this session's flash. Derived from the cookie's token, which the database never
   * holds (it keeps another digest of it), so a pending new key is not readable from a copy of it.
   */
  flashKey: Buffer
}

function flashKeyOf(token: string): Buffer {
  return createHash('sha256').update(`shiplog flash\0${token}`).digest()
}

export async function createSession(db: Kysely<DB>, userId: number): Promise<string> {
  const token = randomBytes(32).toString('base64url')
  const now = Date.now()
  await db
    .insertInto('sessions')
    .values({
      id: digest(token),
      user_id: userId,
      created_at: now,
      last_seen_at: now,
      expires_at: now + SESSION_LIFETIME_MS,
    })
    .execute()
  return token
}

export async function findSession(db: Kysely<DB>, token: string): Promise<SessionUser | undefined> {
  if (!/^[A-Za-z0-9_-]{43}$/.test(token)) return undefined
  const id = digest(token)
  const now = Date.now()
  const row = await db
    .selectFrom('sessions')
    .innerJoin('users', 'users.id', 'sessions.user_id')
    .innerJoin('accounts', 'accounts.id', 'users.account_id')
    .select([
      'sessions.id as sessionId',
      'sessions.last_seen_at',
      'sessions.expires_at',
      'users.id as userId',
      'users.email',
      'users.role',
      'users.must_change_password',
      'accounts.id as accountId',
      'accounts.name as accountName',
    ])
    .where('sessions.id', '=', id)
    .executeTakeFirst()
  if (!row || row.expires_at <= now) return undefined
  if (now - row.last_seen_at > TOUCH_EVERY_MS) {
    await db
      .updateTable('sessions')
      .set({ last_seen_at: now, expires_at: now + SESSION_LIFETIME_MS })
      .where('id', '=', id)
      .execute()
  }
  return {
    sessionId: row.sessionId,
    userId: row.userId,
    email: row.email,
    role: row.role,
    accountId: row.accountId,
    accountName: row.accountName,
    mustChangePassword: row.must_change_password === 1,
    flashKey: flashKeyOf(token),
  }
}

/** Whether the session (by its id, the token's digest) still exists. */
export async function sessionExists(db: Kysely<DB>, sessionId: string): Promise<boolean> {
  const row = await db.selectFrom('sessions').select('id').where('id', '=', sessionId).executeTakeFirst()
  return row !== undefined
}

/**
 * How long after signing in with a one-time password the session alone proves it: within this time
 * the first password change does not ask for it again; later (a session left open, perhaps taken)
 * it does.
 */
export const ONE_TIME_PROOF_MS = 15 * 60 * 1000

/**
 * Whether this session proves its user's one-time password: a session a password opened (not single
 * sign-on) less than ONE_TIME_PROOF_MS ago. Setting a one-time password ends the user's sessions
 * (accounts.ts, resetPassword), so a session that is left was opened with it.
 */
export async function provesOneTimePassword(
  db: Kysely<DB>,
  sessionId: string,
  now: number,
): Promise<boolean> {
  const row = await db
    .selectFrom('sessions')
    .select(['created_at', 'id_token'])
    .where('id', '=', sessionId)
    .executeTakeFirst()
  return row !== undefined && row.id_token === null && now - Number(row.created_at) < ONE_TIME_PROOF_MS
}

export async function deleteSession(db: Kysely<DB>, sessionId: string): Promise<void> {
  await db.deleteFrom('sessions').where('id', '=', sessionId).execute()
}

/** Ends every session of a user (password changed, user removed), except optionally one. */
export async function deleteUserSessions(
  db: Kysely<DB>,
  userId: number,
  keepSessionId?: string,
): Promise<void> {
  let q = db.deleteFrom('sessions').where('user_id', '=', userId)
  if (keepSessionId) q = q.where('id', '!=', keepSessionId)
  await q.execute()
}

/**
 * The result of a form, kept in the session for the page the browser is redirected to
 * (post/redirect/get): a notice, and at most one secret (a new key or one-time password) that
 * must be shown exactly once and never travel in a URL.
 */
export interface Flash {
  notice?: string
  secret?: { kind: 'key' | 'password'; label: string; value: string }
}

// A flash nobody came back for (the redirect was never followed) is not shown hours later.
const FLASH_LIFETIME_MS = 10 * 60 * 1000

function sealFlash(key: Buffer, flash: Flash): string {
  const iv = randomBytes(12)
  const cipher = createCipheriv('aes-256-gcm', key, iv)
  const body = Buffer.concat([
    cipher.update(JSON.stringify({ ...flash, at: Date.now() }), 'utf8'),
    cipher.final(),
  ])
  return [iv, cipher.getAuthTag(), body].map((b) => b.toString('base64')).join('.')
}

function openFlash(key: Buffer, sealed: string): (Flash & { at: number }) | undefined {
  const [iv, tag, body] = sealed.split('.').map((part) => Buffer.from(part, 'base64'))
  if (!iv || !tag || !body) return undefined
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, iv)
    decipher.setAuthTag(tag)
    return JSON.parse(Buffer.concat([decipher.update(body), decipher.final()]).toString('utf8'))
  } catch {
    // Not sealed with this session's key: nothing to show.
    return undefined
  }
}

export async function setFlash(db: Kysely<DB>, session: SessionUser, flash: Flash): Promise<void> {
  await db
    .updateTable('sessions')
    .set({ flash: sealFlash(session.flashKey, flash) })
    .where('id', '=', session.sessionId)
    .execute()
}

/** The session's flash, removed as it is read: of two page views at once only one gets it. */
export async function takeFlash(db: Kysely<DB>, session: SessionUser): Promise<Flash | undefined> {
  const row = await db
    .selectFrom('sessions')
    .select('flash')
    .where('id', '=', session.sessionId)
    .executeTakeFirst()
  if (!row?.flash) return undefined
  const cleared = await db
    .updateTable('sessions')
    .set({ flash: null })
    .where('id', '=', session.sessionId)
    .where('flash', '=', row.flash)
    .executeTakeFirst()
  if (Number(cleared.numUpdatedRows) !== 1) return undefined
  const stored = openFlash(session.flashKey, row.flash)
  if (!stored || Date.now() - stored.at > FLASH_LIFETIME_MS) return undefined
  return {
    ...(typeof stored.notice === 'string' ? { notice: stored.notice } : {}),
    ...(stored.secret === undefined ? {} : { secret: stored.secret }),
  }
}

export async function deleteExpiredSessions(db: Kysely<DB>): Promise<void> {
  await db.deleteFrom('sessions').where('expires_at', '<=', Date.now()).execute()
}
