// What every feature shares: the configuration, the database, the resources server.ts opened, the
// rate-limit counters and the one background task runner (started and stopped by runTasks).
import { readFileSync } from 'node:fs'
import fp from 'fastify-plugin'
import type { Config } from '../config.js'
import type { Database } from '../db/connect.js'
import { isDatabaseUnavailable, outageLogFor } from '../domain/database-errors.js'
import { TaskRunner } from '../domain/tasks.js'
import { healthRoutes } from '../http/api/health.js'
import { MemoryRateLimitStore, type RateLimitStore, RedisRateLimitStore } from '../http/rate-limit.js'
import { PACKAGE_JSON } from '../paths.js'
import type { AppResources } from '../resources.js'

declare module 'fastify' {
  interface FastifyInstance {
    config: Config
    database: Database
    /** Signs cookies and seals webhook secrets (the configuration's, or the one kept in the database). */
    appSecret: string
    /** Revocations and derivation runs other instances announce (PostgreSQL), or null. */
    revocations: AppResources['revocations']
    /** Rate-limit counters: in Redis when REDIS_URL is set, else in this process. */
    rateLimits: RateLimitStore
    /** Background work: features add their tasks; runTasks starts them when ready, stops them first. */
    tasks: TaskRunner
  }
}

/** The version the OpenAPI document and webhook requests state: the package's. */
export function packageVersion(): string {
  return (JSON.parse(readFileSync(PACKAGE_JSON, 'utf8')) as { version: string }).version
}

export interface PlatformOptions {
  config: Config
  database: Database
  resources: AppResources
}

export const platform = fp<PlatformOptions>(
  async (app, { config, database, resources }) => {
    app.decorate('config', config)
    app.decorate<Database>('database', database)
    app.decorate('appSecret', resources.secret)
    app.decorate<AppResources['revocations']>('revocations', resources.revocations)
    app.decorate<RateLimitStore>(
      'rateLimits',
      resources.redis
        ? new RedisRateLimitStore(resources.redis.client, resources.redis.health)
        : new MemoryRateLimitStore(),
    )
    // While the database is away a failing task would repeat every few seconds; the outage log
    // says it once.
    const outages = outageLogFor(database)
    app.decorate(
      'tasks',
      new TaskRunner(app.log, (_, err) => {
        if (!isDatabaseUnavailable(err)) return false
        outages.failed(app.log, err)
        return true
      }),
    )
    await app.register(healthRoutes, { database })
  },
  { name: 'platform' },
)

/**
 * Starts the background tasks when the app is ready and stops them when it closes. Registered
 * last: Fastify runs onClose hooks last-registered first, so the tasks stop before any feature
 * closes what they use (live updates, the event writer, the key-usage recorder).
 */
export const runTasks = fp(
  async (app) => {
    app.addHook('onReady', async () => app.tasks.start())
    app.addHook('onClose', async () => {
      await app.tasks.stop()
    })
  },
  { name: 'run-tasks', dependencies: ['platform'] },
)
