// Reads and validates the process environment once into a typed, frozen configuration. Each
// variable's type, default and message are in the schema (config/variables.ts); here the values
// become the Config every other module reads.
import { randomBytes } from 'node:crypto'
import { type DatabaseTarget, parseDatabaseUrl, readSecretFile, secretFileBeside } from './config/database.js'
import { ConfigError } from './config/error.js'
import { type OidcConfig, oidcConfig } from './config/oidc.js'
import {
  type Environment,
  HEADERS_TIMEOUT_DEFAULT_MS,
  KEY_CACHE_SECONDS_BY_DIALECT,
  type LogLevel,
  readEnvironment,
} from './config/variables.js'

export {
  type DatabaseTarget,
  DEFAULT_DATABASE_URL,
  type DialectName,
  type PostgresTarget,
  parseDatabaseUrl,
  readSecretFile,
  redactUrl,
  type SqliteTarget,
  secretFileBeside,
} from './config/database.js'
export { ConfigError } from './config/error.js'
export type { OidcConfig } from './config/oidc.js'
export type { LogLevel } from './config/variables.js'

export interface Config {
  readonly port: number
  readonly host: string
  readonly database: DatabaseTarget
  /**
   * The app secret as configured: SHIPLOG_SECRET, else the contents of `secretFile` when it exists.
   * Null when it is still to be made, or must come from the database (PostgreSQL without
   * SHIPLOG_SECRET). Reading the configuration never creates it: domain/app-secret.ts does, for the
   * commands that may (see resolveAppSecret).
   */
  readonly secret: string | null
  /** The file beside the SQLite database that keeps the secret when SHIPLOG_SECRET is unset; else null. */
  readonly secretFile: string | null
  readonly publicUrl: string | null
  readonly logLevel: LogLevel
  readonly redisUrl: string | null
  /** Requests per minute allowed for one API key. */
  readonly rateLimitPerMinute: number
  /** How far into the past an event's own time (occurred_at) may lie, in days (SPEC §1.2). */
  readonly maxEventAgeDays: number
  /** How long a verified API key may be served from memory before the database is asked again. */
  readonly keyCacheMs: number
  readonly trustProxy: boolean
  /** A client must have sent its request line and headers within this time, or it is cut off (408). */
  readonly headersTimeoutMs: number
  /** A client must have sent its whole request, body included, within this time, or it is cut off. */
  readonly requestTimeoutMs: number
  /** Where the shiplog-deploy image is published, for the pipeline snippets in Settings. */
  readonly deployImage: string
  /** When set, GET /metrics requires `Authorization: Bearer <token>`; when null it is open (SPEC §8). */
  readonly metricsToken: string | null
  /** Live streams (GET /api/v1/stream) one account may hold open at once (429 beyond). */
  readonly streamsPerAccount: number
  /** Live streams one API key or one session may hold open at once on this process (429 beyond). */
  readonly streamsPerCredential: number
  /** Live streams this process holds open at once (503 beyond). */
  readonly streamsPerProcess: number
  /** Bytes a live stream may have waiting for a slow client before it is dropped. */
  readonly streamBufferBytes: number
  /** While streams are open, how often to look for new events in case a notice was missed. */
  readonly streamPollMs: number
  /** Webhooks may target loopback, private and link-local addresses (tests, closed networks). */
  readonly webhookAllowPrivate: boolean
  /** How long one webhook delivery may take, connecting and answering included. */
  readonly webhookTimeoutMs: number
  /** The first retry of a failed delivery waits up to this long; each next one up to twice as long. */
  readonly webhookRetryBaseMs: number
  /** Single sign-on with an OpenID Connect provider; null when SHIPLOG_OIDC_ISSUER is unset. */
  readonly oidc: OidcConfig | null
}

export interface ConfigOverrides {
  port?: string | undefined
  host?: string | undefined
  databaseUrl?: string | undefined
}

/** Builds the configuration from environment variables (and command-line overrides). */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, overrides: ConfigOverrides = {}): Config {
  const values = readEnvironment({
    ...env,
    PORT: overrides.port ?? env.PORT,
    HOST: overrides.host ?? env.HOST,
    DATABASE_URL: overrides.databaseUrl ?? env.DATABASE_URL,
  })
  const database = parseDatabaseUrl(values.DATABASE_URL)
  const publicUrl = values.SHIPLOG_PUBLIC_URL?.replace(/\/+$/, '') ?? null

  const requestTimeoutMs = values.SHIPLOG_REQUEST_TIMEOUT_MS
  const headersTimeoutMs =
    values.SHIPLOG_HEADERS_TIMEOUT_MS ?? Math.min(HEADERS_TIMEOUT_DEFAULT_MS, requestTimeoutMs)
  if (headersTimeoutMs > requestTimeoutMs) {
    throw new ConfigError(
      `SHIPLOG_HEADERS_TIMEOUT_MS (${headersTimeoutMs}) must not exceed SHIPLOG_REQUEST_TIMEOUT_MS (${requestTimeoutMs})`,
    )
  }

  const oidc = oidcConfig(env, values, publicUrl)

  return Object.freeze({
    port: values.PORT,
    host: values.HOST,
    database: Object.freeze(database),
    ...configuredSecret(values, database),
    publicUrl,
    logLevel: values.LOG_LEVEL,
    redisUrl: values.REDIS_URL ?? null,
    rateLimitPerMinute: values.SHIPLOG_RATE_LIMIT,
    maxEventAgeDays: values.SHIPLOG_MAX_EVENT_AGE_DAYS,
    keyCacheMs: (values.SHIPLOG_KEY_CACHE_SECONDS ?? KEY_CACHE_SECONDS_BY_DIALECT[database.dialect]) * 1000,
    trustProxy: values.SHIPLOG_TRUST_PROXY,
    headersTimeoutMs,
    requestTimeoutMs,
    deployImage: values.SHIPLOG_DEPLOY_IMAGE,
    metricsToken: values.SHIPLOG_METRICS_TOKEN ?? null,
    streamsPerAccount: values.SHIPLOG_STREAMS_PER_ACCOUNT,
    streamsPerCredential: values.SHIPLOG_STREAMS_PER_CREDENTIAL,
    streamsPerProcess: values.SHIPLOG_STREAMS_PER_PROCESS,
    streamBufferBytes: values.SHIPLOG_STREAM_BUFFER_BYTES,
    streamPollMs: values.SHIPLOG_STREAM_POLL_MS,
    webhookAllowPrivate: values.SHIPLOG_WEBHOOK_ALLOW_PRIVATE,
    webhookTimeoutMs: values.SHIPLOG_WEBHOOK_TIMEOUT_MS,
    webhookRetryBaseMs: values.SHIPLOG_WEBHOOK_RETRY_BASE_MS,
    oidc,
  })
}

/**
 * The secret as configured and the file that keeps it (see Config.secret): SHIPLOG_SECRET, else
 * the file beside a SQLite database when it exists. Reads only; an in-memory database gets one
 * of its own.
 */
function configuredSecret(
  values: Environment,
  database: DatabaseTarget,
): { secret: string | null; secretFile: string | null } {
  if (values.SHIPLOG_SECRET !== undefined) return { secret: values.SHIPLOG_SECRET, secretFile: null }
  if (database.dialect === 'postgres') return { secret: null, secretFile: null }
  if (database.path === ':memory:') return { secret: randomBytes(32).toString('hex'), secretFile: null }
  const secretFile = secretFileBeside(database.path)
  return { secret: readSecretFile(secretFile), secretFile }
}

/** What the operator should hear about a configuration that works but is likely not what they want. */
export function configurationWarnings(config: Config): string[] {
  const warnings: string[] = []
  if (config.trustProxy && config.publicUrl === null) {
    warnings.push(
      'SHIPLOG_TRUST_PROXY is on but SHIPLOG_PUBLIC_URL is unset: the links and pipeline snippets in ' +
        'Settings take their address from the X-Forwarded-Proto and X-Forwarded-Host headers the proxy ' +
        'passes on; set SHIPLOG_PUBLIC_URL to the address users reach Shiplog at',
    )
  }
  return warnings
}
