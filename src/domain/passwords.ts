// Password hashing with scrypt from node:crypto, compared in constant time.
import { randomBytes, type ScryptOptions, scrypt, timingSafeEqual } from 'node:crypto'

const KEY_LENGTH = 64
// N=2^15 costs about 32 MiB and ~50 ms here: slow for guessing, fine for a login.
const PARAMS = { N: 32768, r: 8, p: 1 } as const

function derive(
  password: string,
  salt: Buffer,
  params: { N: number; r: number; p: number },
): Promise<Buffer> {
  const options: ScryptOptions = { ...params, maxmem: 128 * params.N * params.r * 2 }
  return new Promise((resolve, reject) => {
    scrypt(password.normalize('NFC'), salt, KEY_LENGTH, options, (err, key) =>
      err ? reject(err) : resolve(key),
    )
  })
}

/** Returns a self-describing hash: scrypt$N$r$p$salt$key (base64). */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16)
  const key = await derive(password, salt, PARAMS)
  return ['scrypt', PARAMS.N, PARAMS.r, PARAMS.p, salt.toString('base64'), key.toString('base64')].join('$')
}

/**
 * A password already hashed. A transaction must not wait for a hash (about 50 ms on the thread
 * pool) once Kysely has begun it: on SQLite a transaction holds the one write connection from its
 * BEGIN to its COMMIT (db/sqlite/owner.ts), and every event arriving meanwhile waits behind it. So
 * whoever opens the transaction hashes first, with `hashedPassword`.
 */
export class HashedPassword {
  constructor(readonly hash: string) {}
}

export async function hashedPassword(password: string): Promise<HashedPassword> {
  return new HashedPassword(await hashPassword(password))
}

/** The hash of `password`: made now for a plain password, or the one it already carries. */
export async function hashOf(password: string | HashedPassword): Promise<string> {
  return password instanceof HashedPassword ? password.hash : hashPassword(password)
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const parts = stored.split('$')
  if (parts.length !== 6 || parts[0] !== 'scrypt') return false
  const [, n, r, p, saltText, keyText] = parts
  const expected = Buffer.from(keyText ?? '', 'base64')
  const key = await derive(password, Buffer.from(saltText ?? '', 'base64'), {
    N: Number(n),
    r: Number(r),
    p: Number(p),
  })
  return key.length === expected.length && timingSafeEqual(key, expected)
}

export const PASSWORD_MIN_LENGTH = 8
export const PASSWORD_MAX_LENGTH = 1024

/** Null when acceptable, else the reason in words. */
export function passwordProblem(password: string): string | null {
  if (password.length < PASSWORD_MIN_LENGTH) return `must be at least ${PASSWORD_MIN_LENGTH} characters`
  if (password.length > PASSWORD_MAX_LENGTH) return `must be at most ${PASSWORD_MAX_LENGTH} characters`
  return null
}
