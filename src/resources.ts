// Opens, in order, what the app uses beside its database (the session secret, Redis, the revocation
// channel) and closes them in reverse; server.ts (and the tests' helper) call it, app.ts only uses them.
import type { Redis } from 'ioredis'
import type { Config } from './config.js'
import type { Database } from './db/connect.js'
import { listenForRevocations, type RevocationListener } from './db/notices.js'
import { resolveAppSecret } from './domain/app-secret.js'
import { isDatabaseUnavailable, outageLogFor } from './domain/database-errors.js'
import { RedisHealthLog } from './http/rate-limit.js'

/** The part of a pino logger the resources report to before and while the app runs. */
export interface ResourceLogger {
  error(fields: Record<string, unknown>, message: string): void
  warn(fields: Record<string, unknown>, message: string): void
  info(fields: Record<string, unknown>, message: string): void
}

export interface AppResources {
  /** Signs session and CSRF cookies. */
  secret: string
  /** Shared rate-limit counters, when REDIS_URL is set. */
  redis: { client: Redis; health: RedisHealthLog } | null
  /** Revocations and derivation runs announced by instances on the same PostgreSQL database. */
  revocations: RevocationListener | null
}

export interface OpenedResources extends AppResources {
  close(): Promise<void>
}

/** Opens the resources for `config` on an open, migrated database. */
export async function openResources(
  config: Config,
  database: Database,
  log: ResourceLogger,
): Promise<OpenedResources> {
  const closers: Array<() => Promise<void> | void> = []
  const close = async () => {
    for (const closer of closers.reverse()) await closer()
  }
  try {
    // Refuses (SecretError, one line) a database sealed with another secret, before anything runs.
    const secret = await resolveAppSecret(config, database.db)

    let redis: AppResources['redis'] = null
    if (config.redisUrl) {
      // Loaded only when configured: most installations never need it at start-up.
      const { Redis } = await import('ioredis')
      // No offline queue: while Redis is away, counting fails at once and requests are allowed,
      // rather than waiting on a reconnect.
      const client = new Redis(config.redisUrl, {
        lazyConnect: true,
        maxRetriesPerRequest: 1,
        enableOfflineQueue: false,
      })
      const health = new RedisHealthLog(log)
      client.on('error', (err) => health.failed(err))
      client.on('ready', () => health.recovered())
      closers.push(() => client.disconnect())
      await connectWithin(client, 2000).catch((err) => health.failed(err))
      redis = { client, health }
    }

    let revocations: RevocationListener | null = null
    // Always on PostgreSQL: live streams hear of other instances' derivation runs on it too.
    if (config.database.dialect === 'postgres') {
      const outages = outageLogFor(database)
      const listener = listenForRevocations(config.database.connectionString, (err) => {
        if (isDatabaseUnavailable(err)) outages.failed(log, err)
        else
          log.warn({ err }, 'notice listener (revocations, live updates): connection problem; reconnecting')
      })
      closers.push(() => listener.close())
      revocations = listener
    }
    return { secret, redis, revocations, close }
  } catch (err) {
    await close().catch(() => {})
    throw err
  }
}

/** Connects, but gives up waiting after `ms` (ioredis keeps retrying in the background). */
async function connectWithin(redis: Redis, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  try {
    await Promise.race([
      redis.connect(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms)
      }),
    ])
  } finally {
    clearTimeout(timer)
  }
}
