// Keeps each live stream only as long as the credential it was opened with: re-checks every open
// stream's key or session against the database, every few seconds and at once when told, and ends
// the streams whose credential no longer lets them read.
import type { Kysely } from 'kysely'
import type { DB } from '../../db/schema.js'
import { scopesFromColumn } from '../keys.js'

/** What a stream was opened with: a read key, or a browser session of a user. */
export type StreamCredential =
  | { readonly kind: 'key'; readonly keyId: number }
  | { readonly kind: 'session'; readonly sessionId: string; readonly userId: number }

/** Why a stream's credential stopped counting, as the stream tells its client. */
export type EndReason = 'key_revoked' | 'session_ended'

/** One string per credential: what per-credential limits count by. */
export function credentialLabel(credential: StreamCredential): string {
  return credential.kind === 'key' ? `key:${credential.keyId}` : `session:${credential.sessionId}`
}

/** A stream as the watch sees it. */
export interface GuardedStream {
  readonly credential: StreamCredential
  /** The credential is dead: tell the client and close (must not throw). */
  revoked(reason: EndReason): void
}

// Ids per statement: far below both databases' limits on bound parameters.
const CHUNK = 500

function chunks<T>(items: readonly T[]): T[][] {
  const out: T[][] = []
  for (let i = 0; i < items.length; i += CHUNK) out.push(items.slice(i, i + CHUNK))
  return out
}

/** Of these key ids, those that still read: not revoked, read scope. */
export async function keysThatRead(db: Kysely<DB>, keyIds: readonly number[]): Promise<Set<number>> {
  const alive = new Set<number>()
  for (const ids of chunks([...new Set(keyIds)])) {
    const rows = await db
      .selectFrom('api_keys')
      .select(['id', 'scopes'])
      .where('id', 'in', ids)
      .where('revoked_at', 'is', null)
      .execute()
    for (const row of rows) if (scopesFromColumn(row.scopes).includes('read')) alive.add(Number(row.id))
  }
  return alive
}

/**
 * Of these sessions, those that still read: the row is there (logout, a reset or changed password,
 * a removed user, password login turned off all delete it), not expired, still the same user's,
 * and not waiting for a forced password change (which the read API refuses too).
 */
export async function sessionsThatRead(
  db: Kysely<DB>,
  sessions: readonly { sessionId: string; userId: number }[],
): Promise<Set<string>> {
  const alive = new Set<string>()
  const owner = new Map(sessions.map((s) => [s.sessionId, s.userId]))
  const now = Date.now()
  for (const ids of chunks([...owner.keys()])) {
    const rows = await db
      .selectFrom('sessions')
      .innerJoin('users', 'users.id', 'sessions.user_id')
      .select(['sessions.id as id', 'sessions.user_id as userId'])
      .where('sessions.id', 'in', ids)
      .where('sessions.expires_at', '>', now)
      .where('users.must_change_password', '=', 0)
      .execute()
    for (const row of rows) if (owner.get(row.id) === Number(row.userId)) alive.add(row.id)
  }
  return alive
}

export interface CredentialWatchOptions {
  /** How often open streams are re-checked; catches changes no notice announces (another process). */
  intervalMs?: number
  onError?: (err: unknown) => void
}

/**
 * One per process. Streams are added when they open and removed when they close; while any is
 * open, their credentials are re-checked every `intervalMs`, and at once on `check()` (a revocation
 * notice from another instance). Checks do not overlap: one asked for during a check runs after it.
 */
export class CredentialWatch {
  readonly #streams = new Set<GuardedStream>()
  #timer: NodeJS.Timeout | null = null
  #running: Promise<void> | null = null
  #again = false
  #closed = false

  constructor(
    private readonly db: Kysely<DB>,
    private readonly options: CredentialWatchOptions = {},
  ) {}

  add(stream: GuardedStream): void {
    this.#streams.add(stream)
    if (this.#timer || this.#closed) return
    this.#timer = setInterval(() => void this.check(), this.options.intervalMs ?? 2000)
    this.#timer.unref()
  }

  remove(stream: GuardedStream): void {
    this.#streams.delete(stream)
    if (this.#streams.size === 0 && this.#timer) {
      clearInterval(this.#timer)
      this.#timer = null
    }
  }

  /** Re-checks every open stream now; resolves when the streams found dead are ended. */
  check(): Promise<void> {
    if (this.#closed || this.#streams.size === 0) return Promise.resolve()
    if (this.#running) {
      // Whatever changed may have committed after the running check read: look once more after it.
      this.#again = true
      return this.#running
    }
    this.#running = this.#checkAll()
      .catch((err: unknown) => this.options.onError?.(err))
      .finally(() => {
        this.#running = null
        if (this.#again) {
          this.#again = false
          void this.check()
        }
      })
    return this.#running
  }

  close(): void {
    this.#closed = true
    if (this.#timer) clearInterval(this.#timer)
    this.#timer = null
  }

  async #checkAll(): Promise<void> {
    const streams = [...this.#streams]
    const keyIds: number[] = []
    const sessions: { sessionId: string; userId: number }[] = []
    for (const { credential } of streams) {
      if (credential.kind === 'key') keyIds.push(credential.keyId)
      else sessions.push(credential)
    }
    const keys = keyIds.length > 0 ? await keysThatRead(this.db, keyIds) : new Set<number>()
    const live = sessions.length > 0 ? await sessionsThatRead(this.db, sessions) : new Set<string>()
    for (const stream of streams) {
      const { credential } = stream
      // Closed while the check ran: nothing to end.
      if (!this.#streams.has(stream)) continue
      if (credential.kind === 'key' && !keys.has(credential.keyId)) {
        this.remove(stream)
        stream.revoked('key_revoked')
      } else if (credential.kind === 'session' && !live.has(credential.sessionId)) {
        this.remove(stream)
        stream.revoked('session_ended')
      }
    }
  }
}
