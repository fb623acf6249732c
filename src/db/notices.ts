// Notices between instances sharing a PostgreSQL database, over LISTEN/NOTIFY on one connection per
// process: revoked API keys (dropped from key caches at once instead of after the cache's lifetime)
// and derivation runs (live streams send what was derived elsewhere).
import { sql } from 'kysely'
import type pg from 'pg'
import type { Database } from './connect.js'
import { loadPg } from './connect.js'

/** PostgreSQL channel on which instances announce revoked keys (payload: the key's digest). */
export const KEY_REVOKED_CHANNEL = 'shiplog_key_revoked'

/** Tells every instance on the same PostgreSQL database that a key is revoked. No-op on SQLite. */
export async function announceRevocation(database: Database, digest: string): Promise<void> {
  if (database.dialect !== 'postgres') return
  await sql`select pg_notify(${KEY_REVOKED_CHANNEL}, ${digest})`.execute(database.db)
}

/** PostgreSQL channel on which instances announce a committed derivation run (payload: `through`). */
export const DEPLOYMENTS_DERIVED_CHANNEL = 'shiplog_deployments_derived'

/** Tells every instance on the same PostgreSQL database how far events are derived. No-op on SQLite. */
export async function announceDerived(database: Database, through: number): Promise<void> {
  if (database.dialect !== 'postgres') return
  await sql`select pg_notify(${DEPLOYMENTS_DERIVED_CHANNEL}, ${String(through)})`.execute(database.db)
}

export interface RevocationHandlers {
  onRevoked?(digest: string): void
  /** A derivation run committed (here or elsewhere); `through` as announced. */
  onDerived?(through: number): void
  /** Notices may have been missed (the connection dropped, or the subscriber is new). */
  onGap(): void
}

export interface RevocationListener {
  /** Adds handlers for what the connection hears (an app's key cache, its live hub); opened before the app. */
  subscribe(handlers: RevocationHandlers): void
  close(): Promise<void>
}

/**
 * Keeps one connection listening for revocations and derivation runs and calls `onRevoked` with
 * each digest, `onDerived` with each `through`. If the
 * connection drops, notices may have been missed: `onGap` is called, and it reconnects with
 * backoff. The key cache's lifetime bounds what a missed notice can cost.
 */
export function listenForRevocations(
  connectionString: string,
  onError: (err: unknown) => void,
): RevocationListener {
  const subscribers: RevocationHandlers[] = []
  const handlers = {
    onRevoked: (digest: string) => {
      for (const s of subscribers) s.onRevoked?.(digest)
    },
    onDerived: (through: number) => {
      for (const s of subscribers) s.onDerived?.(through)
    },
    onGap: () => {
      for (const s of subscribers) s.onGap()
    },
    onError,
  }
  let client: pg.Client | null = null
  let closed = false
  let retryTimer: NodeJS.Timeout | null = null
  let delay = 500

  const schedule = () => {
    if (closed || retryTimer) return
    retryTimer = setTimeout(() => {
      retryTimer = null
      void connect()
    }, delay)
    retryTimer.unref()
    delay = Math.min(delay * 2, 15_000)
  }

  const connect = async () => {
    const c = new (loadPg().Client)({ connectionString, application_name: 'shiplog-notices' })
    c.on('notification', (message) => {
      if (message.channel === KEY_REVOKED_CHANNEL && message.payload) handlers.onRevoked(message.payload)
      if (message.channel === DEPLOYMENTS_DERIVED_CHANNEL && /^\d+$/.test(message.payload ?? ''))
        handlers.onDerived(Number(message.payload))
    })
    c.on('error', (err) => handlers.onError(err))
    c.on('end', () => {
      if (client === c) client = null
      if (!closed) {
        handlers.onGap()
        schedule()
      }
    })
    try {
      await c.connect()
      await c.query(`LISTEN ${KEY_REVOKED_CHANNEL}`)
      await c.query(`LISTEN ${DEPLOYMENTS_DERIVED_CHANNEL}`)
      if (closed) {
        await c.end()
        return
      }
      client = c
      delay = 500
      // Anything revoked while no connection listened is unknown: start from an empty cache.
      handlers.onGap()
    } catch (err) {
      handlers.onError(err)
      c.end().catch(() => {})
      schedule()
    }
  }

  void connect()
  return {
    subscribe(added) {
      subscribers.push(added)
      // Whatever was announced before it subscribed is unknown to it.
      added.onGap()
    },
    async close() {
      closed = true
      if (retryTimer) clearTimeout(retryTimer)
      await client?.end().catch(() => {})
    },
  }
}
