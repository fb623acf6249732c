// API keys: creation (shown once), lookup by digest, revocation, and last-used bookkeeping.
import { randomInt } from 'node:crypto'
import type { Kysely } from 'kysely'
import type { Database } from '../db/connect.js'
import { announceRevocation } from '../db/notices.js'
import type { ApiKeyRow, DB } from '../db/schema.js'
import { sha256Hex } from '../text-rules.js'
import { withTransaction } from './audit/transaction.js'
import type { Task } from './tasks.js'

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'
export const KEY_PREFIX = 'shl_'
const KEY_RANDOM_LENGTH = 40 // 40 base62 characters: about 238 bits
const DISPLAY_PREFIX_LENGTH = KEY_PREFIX.length + 8
export const KEY_PATTERN = /^shl_[0-9A-Za-z]{32,128}$/

export function generateApiKey(): string {
  let out = KEY_PREFIX
  for (let i = 0; i < KEY_RANDOM_LENGTH; i++) out += BASE62[randomInt(BASE62.length)]
  return out
}

/** What the database keeps of a key. */
export const digestApiKey: (key: string) => string = sha256Hex

/** What a key may do (SPEC §7): record events, read the API, or both. */
export type KeyScope = 'ingest' | 'read'
export const KEY_SCOPES: readonly KeyScope[] = ['ingest', 'read']

/** The scopes column as stored: the names in KEY_SCOPES order, comma-separated. */
export function scopesToColumn(scopes: readonly KeyScope[]): string {
  return KEY_SCOPES.filter((s) => scopes.includes(s)).join(',')
}

/** The stored column read back; a value it cannot read grants nothing rather than everything. */
export function scopesFromColumn(column: string | null | undefined): KeyScope[] {
  const names = (column ?? '').split(',').map((s) => s.trim())
  return KEY_SCOPES.filter((s) => names.includes(s))
}

/**
 * Parses `ingest`, `read` or `ingest,read` (any order, any case, spaces allowed) as an operator
 * types it; undefined for anything else (an unknown name, an empty list, a repeat).
 */
export function parseScopes(text: string): KeyScope[] | undefined {
  const names = text.split(',').map((s) => s.trim().toLowerCase())
  if (names.length === 0 || names.length > KEY_SCOPES.length) return undefined
  const scopes: KeyScope[] = []
  for (const name of names) {
    const scope = KEY_SCOPES.find((s) => s === name)
    if (!scope || scopes.includes(scope)) return undefined
    scopes.push(scope)
  }
  return KEY_SCOPES.filter((s) => scopes.includes(s))
}

export interface CreatedApiKey {
  /** The plaintext: returned once, never stored. */
  key: string
  row: ApiKeyRow
}

export async function createApiKey(
  db: Kysely<DB>,
  input: {
    accountId: number
    name: string
    createdBy: string
    createdByUserId?: number | null
    /** Default: ingest only, as every key was before scopes existed. */
    scopes?: readonly KeyScope[]
  },
): Promise<CreatedApiKey> {
  const scopes = scopesToColumn(input.scopes ?? ['ingest'])
  if (scopes === '') throw new Error('an API key needs at least one scope')
  const key = generateApiKey()
  const row = await db
    .insertInto('api_keys')
    .values({
      account_id: input.accountId,
      name: input.name.trim(),
      prefix: key.slice(0, DISPLAY_PREFIX_LENGTH),
      digest: digestApiKey(key),
      created_at: Date.now(),
      created_by: input.createdBy,
      created_by_user_id: input.createdByUserId ?? null,
      last_used_at: null,
      revoked_at: null,
      scopes,
    })
    .returningAll()
    .executeTakeFirstOrThrow()
  return { key, row }
}

export async function listApiKeys(db: Kysely<DB>, accountId: number): Promise<ApiKeyRow[]> {
  return db
    .selectFrom('api_keys')
    .selectAll()
    .where('account_id', '=', accountId)
    .orderBy('id', 'asc')
    .execute()
}

/**
 * Revokes one of the account's keys, named by its id or by the full key. Returns the row, or
 * undefined when the account has no such key. Revoking twice keeps the first time.
 */
export async function revokeApiKey(
  db: Kysely<DB>,
  accountId: number,
  idOrKey: string,
): Promise<ApiKeyRow | undefined> {
  const ref = idOrKey.trim()
  let query = db.selectFrom('api_keys').selectAll().where('account_id', '=', accountId)
  if (/^\d{1,15}$/.test(ref)) query = query.where('id', '=', Number(ref))
  else if (KEY_PATTERN.test(ref)) query = query.where('digest', '=', digestApiKey(ref))
  else return undefined
  const row = await query.executeTakeFirst()
  if (!row) return undefined
  if (row.revoked_at !== null) return row
  const revokedAt = Date.now()
  await db.updateTable('api_keys').set({ revoked_at: revokedAt }).where('id', '=', row.id).execute()
  return { ...row, revoked_at: revokedAt }
}

/**
 * The one revoke operation, for Settings and the CLI alike: revokes the key, drops it from this
 * process's key cache (when there is one) and tells every other instance sharing the database to
 * drop it from theirs. Undefined when the account has no such key.
 */
export async function revokeApiKeyEverywhere(
  database: Database,
  accountId: number,
  idOrKey: string,
  verifier?: ApiKeyVerifier,
  /** Writes the audit entry in the revoke's own transaction (SPEC §10). */
  audit?: (trx: Kysely<DB>, row: ApiKeyRow) => Promise<void>,
): Promise<ApiKeyRow | undefined> {
  const row = await withTransaction(database.db, async (trx) => {
    const revoked = await revokeApiKey(trx, accountId, idOrKey)
    if (revoked && audit) await audit(trx, revoked)
    return revoked
  })
  if (!row) return undefined
  verifier?.forget(row.id)
  await announceRevocation(database, row.digest)
  return row
}

/** What a request learns about the key that authenticated it. */
export interface VerifiedKey {
  id: number
  accountId: number
  name: string
  /** SHA-256 of the key: unique across installations, so shared counters (Redis) can use it. */
  digest: string
  /** Read with the key and cached with it, so checking a scope costs no query. */
  canIngest: boolean
  canRead: boolean
}

interface KeyRow {
  id: number
  account_id: number
  name: string
  revoked_at: number | null
  scopes: string
}

const KEY_BY_DIGEST = 'SELECT id, account_id, name, revoked_at, scopes FROM api_keys WHERE digest = '

/**
 * Finds a key's row by its digest. Every ingest request asks this (SQLite keeps no cache, so a
 * revocation from the CLI counts at once), so it is a prepared statement, not a built query.
 */
function keyLookup(database: Database): (digest: string) => Promise<KeyRow | undefined> {
  if (database.dialect === 'sqlite') {
    const text = `${KEY_BY_DIGEST}?`
    return (digest) => database.read((sql) => sql.get<KeyRow>(text, digest))
  }
  const pool = database.pool
  const query = { name: 'shiplog_key_by_digest', text: `${KEY_BY_DIGEST}$1` }
  return async (digest) => (await pool.query<KeyRow>({ ...query, values: [digest] })).rows[0]
}

/**
 * Verifies keys with a short-lived in-memory cache keyed by digest. A revocation made through this
 * process drops the entry at once; one made elsewhere is seen within `ttlMs`.
 */
export class ApiKeyVerifier {
  readonly #cache = new Map<string, { key: VerifiedKey; expires: number }>()
  readonly #ttlMs: number
  readonly #maxEntries: number

  readonly #lookup: (digest: string) => Promise<KeyRow | undefined>
  readonly #digests = new Map<string, string>()

  constructor(database: Database, options: { ttlMs: number; maxEntries?: number }) {
    this.#lookup = keyLookup(database)
    this.#ttlMs = options.ttlMs
    this.#maxEntries = options.maxEntries ?? 10_000
  }

  /** Looks a presented key up; undefined for malformed, unknown and revoked keys alike. */
  async verify(presented: string): Promise<VerifiedKey | undefined> {
    if (!KEY_PATTERN.test(presented)) return undefined
    const digest = this.#digestOf(presented)
    if (this.#ttlMs <= 0) {
      const key = await this.#find(digest)
      if (key) this.#rememberDigest(presented, digest)
      return key
    }
    const hit = this.#cache.get(digest)
    const now = Date.now()
    if (hit && hit.expires > now) return hit.key
    const key = await this.#find(digest)
    if (key) {
      this.#rememberDigest(presented, digest)
      if (this.#cache.size >= this.#maxEntries) this.#cache.clear()
      this.#cache.set(digest, { key, expires: now + this.#ttlMs })
    } else {
      this.#cache.delete(digest)
    }
    return key
  }

  /**
   * SHA-256 of a presented key. A pipeline sends the same key with every request, and hashing it
   * each time was 3 % of the ingest profile, so the digests of keys that verified are remembered
   * (bounded like the key cache; unknown keys are not, so guessing fills nothing).
   */
  #digestOf(presented: string): string {
    return this.#digests.get(presented) ?? digestApiKey(presented)
  }

  #rememberDigest(presented: string, digest: string): void {
    if (this.#digests.has(presented)) return
    if (this.#digests.size >= this.#maxEntries) this.#digests.clear()
    this.#digests.set(presented, digest)
  }

  async #find(digest: string): Promise<VerifiedKey | undefined> {
    const row = await this.#lookup(digest)
    if (!row || row.revoked_at !== null) return undefined
    const scopes = scopesFromColumn(row.scopes)
    return {
      id: row.id,
      accountId: row.account_id,
      name: row.name,
      digest,
      canIngest: scopes.includes('ingest'),
      canRead: scopes.includes('read'),
    }
  }

  /** Forget a key at once (after this process revoked it). */
  forget(keyId: number): void {
    for (const [digest, entry] of this.#cache) if (entry.key.id === keyId) this.#cache.delete(digest)
  }

  /** Forget a key revoked elsewhere, named by its digest (see listenForRevocations). */
  forgetDigest(digest: string): void {
    this.#cache.delete(digest)
  }

  /** Forget everything, e.g. when revocation notices may have been missed. */
  clear(): void {
    this.#cache.clear()
  }
}

/**
 * Remembers when each key was last used; the background task (keyUsageTask) writes that down every
 * few seconds, so recording an event costs no extra write. Times only move forward, even with
 * several instances writing.
 */
export class KeyUsageRecorder {
  readonly #pending = new Map<number, number>()

  constructor(private readonly db: Kysely<DB>) {}

  touch(keyId: number, at: number): void {
    this.#pending.set(keyId, at)
  }

  async flush(): Promise<void> {
    const batch = [...this.#pending]
    this.#pending.clear()
    for (let i = 0; i < batch.length; i++) {
      const [keyId, at] = batch[i] as [number, number]
      try {
        await this.db
          .updateTable('api_keys')
          .set({ last_used_at: at })
          .where('id', '=', keyId)
          .where((eb) => eb.or([eb('last_used_at', 'is', null), eb('last_used_at', '<', at)]))
          .execute()
      } catch (err) {
        // Keep what was not written for the next round (a newer touch wins); bookkeeping must not
        // lose the times because the database blinked.
        for (const [id, time] of batch.slice(i)) if (!this.#pending.has(id)) this.touch(id, time)
        throw err
      }
    }
  }
}

/** The background task that writes the last-used times down (see tasks.ts). */
export function keyUsageTask(usage: KeyUsageRecorder, intervalMs = 10_000): Task {
  return { name: 'key-usage', intervalMs, run: async () => void (await usage.flush()) }
}
