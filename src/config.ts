// Reads and validates the process environment once into a typed, frozen configuration.
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'

export type DialectName = 'sqlite' | 'postgres'

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent'
const LOG_LEVELS: readonly LogLevel[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']

export interface SqliteTarget {
  readonly dialect: 'sqlite'
  /** File path, or ':memory:' for a private in-memory database (tests). */
  readonly path: string
}

export interface PostgresTarget {
  readonly dialect: 'postgres'
  readonly connectionString: string
}

export type DatabaseTarget = SqliteTarget | PostgresTarget

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

/** Single sign-on (SPEC §10), from the SHIPLOG_OIDC_* variables; see README "Single sign-on". */
export interface OidcConfig {
  /** The issuer identifier exactly as the provider names itself (discovery starts here). */
  readonly issuer: string
  readonly clientId: string
  readonly clientSecret: string
  /** The provider's name on the login button: "Sign in with <name>". */
  readonly name: string
  readonly scopes: readonly string[]
  /** The ID token claim that lists the person's groups. */
  readonly groupsClaim: string
  /** Email domain (lower case) → account name, in the order given. */
  readonly accountByDomain: ReadonlyArray<readonly [string, string]>
  /** Group → account name, in the order given; a group match wins over the email domain. */
  readonly accountByGroup: ReadonlyArray<readonly [string, string]>
  /** Members of any of these groups are admins of their account; everyone else is a member. */
  readonly adminGroups: readonly string[]
  /** `<SHIPLOG_PUBLIC_URL>/login/oidc/callback`: what to register at the provider. */
  readonly redirectUri: string
  /** Where the provider sends the browser back after its own logout: `<SHIPLOG_PUBLIC_URL>/login?bye=1`. */
  readonly postLogoutRedirectUri: string
}

/** A configuration problem: the message is meant to be shown to the operator as is. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError'
}

export const DEFAULT_DATABASE_URL = 'sqlite:./data/shiplog.db'

/** Turns a DATABASE_URL into a connection target; throws ConfigError with a readable reason. */
export function parseDatabaseUrl(url: string): DatabaseTarget {
  if (url.startsWith('postgres://') || url.startsWith('postgresql://')) {
    try {
      new URL(url)
    } catch {
      throw new ConfigError(`DATABASE_URL is not a valid PostgreSQL URL: ${redactUrl(url)}`)
    }
    return { dialect: 'postgres', connectionString: url }
  }
  if (url.startsWith('sqlite:')) {
    // Accept sqlite:./relative, sqlite:/absolute, sqlite:///absolute and sqlite::memory:.
    let path = url.slice('sqlite:'.length)
    if (path.startsWith('//')) path = path.slice(2)
    if (path === '')
      throw new ConfigError('DATABASE_URL "sqlite:" needs a file path, e.g. sqlite:./data/shiplog.db')
    if (path === ':memory:') return { dialect: 'sqlite', path }
    return { dialect: 'sqlite', path: resolve(path) }
  }
  throw new ConfigError(
    `DATABASE_URL must start with sqlite: or postgres:// (got "${redactUrl(url)}"); e.g. ${DEFAULT_DATABASE_URL}`,
  )
}

/** Hides a password in a connection URL so it can be printed. */
export function redactUrl(url: string): string {
  return url.replace(/(\/\/[^:/@]*:)[^@]*@/, '$1***@')
}

function parseInteger(name: string, raw: string, min: number, max: number): number {
  if (!/^\d+$/.test(raw.trim())) throw new ConfigError(`${name} must be a whole number, got "${raw}"`)
  const value = Number(raw.trim())
  if (value < min || value > max)
    throw new ConfigError(`${name} must be between ${min} and ${max}, got ${value}`)
  return value
}

function parseBoolean(name: string, raw: string): boolean {
  const v = raw.trim().toLowerCase()
  if (['1', 'true', 'yes', 'on'].includes(v)) return true
  if (['0', 'false', 'no', 'off', ''].includes(v)) return false
  throw new ConfigError(`${name} must be true or false, got "${raw}"`)
}

export interface ConfigOverrides {
  port?: string | undefined
  host?: string | undefined
  databaseUrl?: string | undefined
}

/** Builds the configuration from environment variables (and command-line overrides). */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, overrides: ConfigOverrides = {}): Config {
  const port = parseInteger('PORT', overrides.port ?? env.PORT ?? '8080', 0, 65535)
  const host = (overrides.host ?? env.HOST ?? '127.0.0.1').trim()
  if (host === '') throw new ConfigError('HOST must not be empty')

  const database = parseDatabaseUrl(
    (overrides.databaseUrl ?? env.DATABASE_URL ?? DEFAULT_DATABASE_URL).trim(),
  )

  const logLevel = (env.LOG_LEVEL ?? 'info').trim().toLowerCase() as LogLevel
  if (!LOG_LEVELS.includes(logLevel)) {
    throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, got "${env.LOG_LEVEL}"`)
  }

  let publicUrl: string | null = null
  if (env.SHIPLOG_PUBLIC_URL?.trim()) {
    const raw = env.SHIPLOG_PUBLIC_URL.trim()
    let parsed: URL
    try {
      parsed = new URL(raw)
    } catch {
      throw new ConfigError(`SHIPLOG_PUBLIC_URL must be an absolute http(s) URL, got "${raw}"`)
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
      throw new ConfigError(`SHIPLOG_PUBLIC_URL must be an absolute http(s) URL, got "${raw}"`)
    }
    publicUrl = raw.replace(/\/+$/, '')
  }

  let redisUrl: string | null = null
  if (env.REDIS_URL?.trim()) {
    redisUrl = env.REDIS_URL.trim()
    if (!/^rediss?:\/\//.test(redisUrl)) {
      throw new ConfigError(`REDIS_URL must start with redis:// or rediss://, got "${redactUrl(redisUrl)}"`)
    }
  }

  const rateLimitPerMinute = parseInteger(
    'SHIPLOG_RATE_LIMIT',
    env.SHIPLOG_RATE_LIMIT ?? '600',
    1,
    10_000_000,
  )

  const maxEventAgeDays = parseInteger(
    'SHIPLOG_MAX_EVENT_AGE_DAYS',
    env.SHIPLOG_MAX_EVENT_AGE_DAYS ?? '3650',
    1,
    36_500,
  )

  // One SQLite process sees every revocation itself, so no cache is needed there; instances sharing
  // PostgreSQL may each hold a verified key this long after another instance revoked it.
  const defaultCacheSeconds = database.dialect === 'postgres' ? '5' : '0'
  const keyCacheMs =
    parseInteger('SHIPLOG_KEY_CACHE_SECONDS', env.SHIPLOG_KEY_CACHE_SECONDS ?? defaultCacheSeconds, 0, 300) *
    1000

  const trustProxy = parseBoolean('SHIPLOG_TRUST_PROXY', env.SHIPLOG_TRUST_PROXY ?? 'false')

  // Slow clients (slowloris) hold a connection open by sending a request a byte at a time; these
  // bound how long that can last. Headers are small, so they get the shorter bound by default.
  const requestTimeoutMs = parseInteger(
    'SHIPLOG_REQUEST_TIMEOUT_MS',
    env.SHIPLOG_REQUEST_TIMEOUT_MS ?? '30000',
    1000,
    3_600_000,
  )
  const headersTimeoutMs = parseInteger(
    'SHIPLOG_HEADERS_TIMEOUT_MS',
    env.SHIPLOG_HEADERS_TIMEOUT_MS ?? String(Math.min(10_000, requestTimeoutMs)),
    1000,
    3_600_000,
  )
  if (headersTimeoutMs > requestTimeoutMs) {
    throw new ConfigError(
      `SHIPLOG_HEADERS_TIMEOUT_MS (${headersTimeoutMs}) must not exceed SHIPLOG_REQUEST_TIMEOUT_MS (${requestTimeoutMs})`,
    )
  }

  const deployImage = (env.SHIPLOG_DEPLOY_IMAGE ?? 'shiplog/deploy').trim()
  if (!/^[a-z0-9][a-z0-9._\-/:]*$/.test(deployImage) || deployImage.endsWith(':1')) {
    throw new ConfigError(
      `SHIPLOG_DEPLOY_IMAGE must be an image name without tag, e.g. ghcr.io/acme/shiplog-deploy`,
    )
  }

  let metricsToken: string | null = null
  if (env.SHIPLOG_METRICS_TOKEN !== undefined && env.SHIPLOG_METRICS_TOKEN !== '') {
    metricsToken = env.SHIPLOG_METRICS_TOKEN
    // It travels in a header (Authorization: Bearer …): visible ASCII only, and long enough not to guess.
    if (!/^[\x21-\x7e]+$/.test(metricsToken)) {
      throw new ConfigError('SHIPLOG_METRICS_TOKEN must be printable ASCII without spaces')
    }
    if (metricsToken.length < 16) {
      throw new ConfigError(
        'SHIPLOG_METRICS_TOKEN must be at least 16 characters (try: openssl rand -hex 32)',
      )
    }
  }
  const streamsPerAccount = parseInteger(
    'SHIPLOG_STREAMS_PER_ACCOUNT',
    env.SHIPLOG_STREAMS_PER_ACCOUNT ?? '50',
    1,
    100_000,
  )
  // Below the account's: one key (or one browser) filling the account's share would shut off live
  // updates for everyone else in it.
  const streamsPerCredential = parseInteger(
    'SHIPLOG_STREAMS_PER_CREDENTIAL',
    env.SHIPLOG_STREAMS_PER_CREDENTIAL ?? '10',
    1,
    100_000,
  )
  const streamsPerProcess = parseInteger(
    'SHIPLOG_STREAMS_PER_PROCESS',
    env.SHIPLOG_STREAMS_PER_PROCESS ?? '1000',
    1,
    100_000,
  )
  const streamBufferBytes = parseInteger(
    'SHIPLOG_STREAM_BUFFER_BYTES',
    env.SHIPLOG_STREAM_BUFFER_BYTES ?? String(1024 * 1024),
    16 * 1024,
    64 * 1024 * 1024,
  )
  const streamPollMs = parseInteger(
    'SHIPLOG_STREAM_POLL_MS',
    env.SHIPLOG_STREAM_POLL_MS ?? '2000',
    200,
    600_000,
  )
  const webhookAllowPrivate = parseBoolean(
    'SHIPLOG_WEBHOOK_ALLOW_PRIVATE',
    env.SHIPLOG_WEBHOOK_ALLOW_PRIVATE ?? 'false',
  )
  const webhookTimeoutMs = parseInteger(
    'SHIPLOG_WEBHOOK_TIMEOUT_MS',
    env.SHIPLOG_WEBHOOK_TIMEOUT_MS ?? '10000',
    50,
    120_000,
  )
  const webhookRetryBaseMs = parseInteger(
    'SHIPLOG_WEBHOOK_RETRY_BASE_MS',
    env.SHIPLOG_WEBHOOK_RETRY_BASE_MS ?? '10000',
    1,
    3_600_000,
  )

  const oidc = parseOidcConfig(env, publicUrl)

  let secret: string | null = null
  let secretFile: string | null = null
  if (env.SHIPLOG_SECRET !== undefined && env.SHIPLOG_SECRET !== '') {
    if (env.SHIPLOG_SECRET.length < 32) {
      throw new ConfigError('SHIPLOG_SECRET must be at least 32 characters (try: openssl rand -hex 32)')
    }
    secret = env.SHIPLOG_SECRET
  } else if (database.dialect === 'sqlite') {
    if (database.path === ':memory:') secret = randomBytes(32).toString('hex')
    else {
      secretFile = secretFileBeside(database.path)
      secret = readSecretFile(secretFile)
    }
  }

  return Object.freeze({
    port,
    host,
    database: Object.freeze(database),
    secret,
    secretFile,
    publicUrl,
    logLevel,
    redisUrl,
    rateLimitPerMinute,
    maxEventAgeDays,
    keyCacheMs,
    trustProxy,
    headersTimeoutMs,
    requestTimeoutMs,
    deployImage,
    metricsToken,
    streamsPerAccount,
    streamsPerCredential,
    streamsPerProcess,
    streamBufferBytes,
    streamPollMs,
    webhookAllowPrivate,
    webhookTimeoutMs,
    webhookRetryBaseMs,
    oidc,
  })
}

const OIDC_VARIABLES = [
  'SHIPLOG_OIDC_ISSUER',
  'SHIPLOG_OIDC_CLIENT_ID',
  'SHIPLOG_OIDC_CLIENT_SECRET',
  'SHIPLOG_OIDC_NAME',
  'SHIPLOG_OIDC_SCOPES',
  'SHIPLOG_OIDC_GROUPS_CLAIM',
  'SHIPLOG_OIDC_ACCOUNT_BY_DOMAIN',
  'SHIPLOG_OIDC_ACCOUNT_BY_GROUP',
  'SHIPLOG_OIDC_ADMIN_GROUPS',
] as const

/** "key=Account,key2=Other" → pairs; keys are unique, account names plain text. */
function parseOidcMapping(
  name: string,
  raw: string,
  key: 'domain' | 'group',
): Array<readonly [string, string]> {
  const pairs: Array<readonly [string, string]> = []
  for (const item of raw.split(',')) {
    if (item.trim() === '') continue
    const at = item.indexOf('=')
    const left = at < 0 ? '' : item.slice(0, at).trim()
    const account = at < 0 ? '' : item.slice(at + 1).trim()
    if (left === '' || account === '') {
      throw new ConfigError(
        `${name} must be a comma-separated list of ${key}=Account pairs, got "${item.trim()}"`,
      )
    }
    const mapped = key === 'domain' ? left.toLowerCase().replace(/^@/, '') : left
    if (
      key === 'domain' &&
      !/^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+$/.test(mapped)
    ) {
      throw new ConfigError(`${name}: "${left}" is not an email domain such as example.com`)
    }
    if (account.length > 100 || hasControlCharacter(account)) {
      throw new ConfigError(`${name}: the account name for "${left}" must be 1 to 100 printable characters`)
    }
    if (pairs.some(([k]) => k === mapped)) throw new ConfigError(`${name} names "${left}" twice`)
    pairs.push([mapped, account] as const)
  }
  return pairs
}

function hasControlCharacter(text: string): boolean {
  for (const char of text) {
    const code = char.codePointAt(0) ?? 0
    if (code < 0x20 || code === 0x7f) return true
  }
  return false
}

function isLoopbackHost(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(hostname)
}

/** The SHIPLOG_OIDC_* variables, checked together: all or nothing, and enough to decide an account. */
function parseOidcConfig(env: NodeJS.ProcessEnv, publicUrl: string | null): OidcConfig | null {
  const value = (name: (typeof OIDC_VARIABLES)[number]) => env[name]?.trim() ?? ''
  const issuer = value('SHIPLOG_OIDC_ISSUER')
  if (issuer === '') {
    const stray = OIDC_VARIABLES.find((name) => value(name) !== '')
    if (stray)
      throw new ConfigError(
        `${stray} is set but SHIPLOG_OIDC_ISSUER is not: set it to turn single sign-on on`,
      )
    return null
  }
  let issuerUrl: URL
  try {
    issuerUrl = new URL(issuer)
  } catch {
    throw new ConfigError(
      `SHIPLOG_OIDC_ISSUER must be the provider's issuer URL, e.g. https://id.example.com/realms/acme, got "${issuer}"`,
    )
  }
  if (
    !(
      issuerUrl.protocol === 'https:' ||
      (issuerUrl.protocol === 'http:' && isLoopbackHost(issuerUrl.hostname))
    ) ||
    issuerUrl.search !== '' ||
    issuerUrl.hash !== ''
  ) {
    throw new ConfigError(
      `SHIPLOG_OIDC_ISSUER must be an https URL without query (plain http only for localhost), got "${issuer}"`,
    )
  }
  const clientId = value('SHIPLOG_OIDC_CLIENT_ID')
  if (clientId === '') throw new ConfigError('SHIPLOG_OIDC_CLIENT_ID must be set when SHIPLOG_OIDC_ISSUER is')
  // The secret is taken as given: spaces may be part of it.
  const clientSecret = env.SHIPLOG_OIDC_CLIENT_SECRET ?? ''
  if (clientSecret === '') {
    throw new ConfigError(
      'SHIPLOG_OIDC_CLIENT_SECRET must be set when SHIPLOG_OIDC_ISSUER is (Shiplog is a confidential client)',
    )
  }
  if (publicUrl === null) {
    throw new ConfigError(
      'single sign-on needs SHIPLOG_PUBLIC_URL: the provider sends users back to <SHIPLOG_PUBLIC_URL>/login/oidc/callback',
    )
  }
  const name = value('SHIPLOG_OIDC_NAME') || 'single sign-on'
  if (name.length > 60 || hasControlCharacter(name)) {
    throw new ConfigError('SHIPLOG_OIDC_NAME must be at most 60 printable characters')
  }
  const scopes = (value('SHIPLOG_OIDC_SCOPES') || 'openid email profile')
    .split(/[\s,]+/)
    .filter((s) => s !== '')
  for (const needed of ['openid', 'email']) {
    if (!scopes.includes(needed))
      throw new ConfigError(`SHIPLOG_OIDC_SCOPES must include "${needed}", got "${scopes.join(' ')}"`)
  }
  if (scopes.some((s) => !/^[\x21\x23-\x5b\x5d-\x7e]+$/.test(s))) {
    throw new ConfigError('SHIPLOG_OIDC_SCOPES must be scope names separated by spaces')
  }
  const groupsClaim = value('SHIPLOG_OIDC_GROUPS_CLAIM') || 'groups'
  const accountByDomain = parseOidcMapping(
    'SHIPLOG_OIDC_ACCOUNT_BY_DOMAIN',
    value('SHIPLOG_OIDC_ACCOUNT_BY_DOMAIN'),
    'domain',
  )
  const accountByGroup = parseOidcMapping(
    'SHIPLOG_OIDC_ACCOUNT_BY_GROUP',
    value('SHIPLOG_OIDC_ACCOUNT_BY_GROUP'),
    'group',
  )
  if (accountByDomain.length === 0 && accountByGroup.length === 0) {
    throw new ConfigError(
      'single sign-on needs SHIPLOG_OIDC_ACCOUNT_BY_DOMAIN or SHIPLOG_OIDC_ACCOUNT_BY_GROUP to decide which account a person joins, e.g. SHIPLOG_OIDC_ACCOUNT_BY_DOMAIN="example.com=Acme"',
    )
  }
  const adminGroups = value('SHIPLOG_OIDC_ADMIN_GROUPS')
    .split(',')
    .map((g) => g.trim())
    .filter((g) => g !== '')
  return Object.freeze({
    issuer,
    clientId,
    clientSecret,
    name,
    scopes: Object.freeze(scopes),
    groupsClaim,
    accountByDomain: Object.freeze(accountByDomain),
    accountByGroup: Object.freeze(accountByGroup),
    adminGroups: Object.freeze(adminGroups),
    redirectUri: `${publicUrl}/login/oidc/callback`,
    postLogoutRedirectUri: `${publicUrl}/login?bye=1`,
  })
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

/** Where a SQLite installation without SHIPLOG_SECRET keeps its secret: `secret` beside the database. */
export function secretFileBeside(dbPath: string): string {
  return join(dirname(dbPath), 'secret')
}

/**
 * The secret kept in `file`, or null when there is none yet. Never creates it: only the commands
 * that seal or sign may (domain/app-secret.ts), so a read-only command on a backup file leaves no
 * new secret beside it.
 */
export function readSecretFile(file: string): string | null {
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null
    throw new ConfigError(`cannot read the secret ${file}: ${(err as Error).message}`)
  }
  const secret = text.trim()
  if (secret.length < 32) {
    throw new ConfigError(
      `the secret ${file} holds ${secret.length} characters, fewer than 32: put back the file the data was sealed with, or remove it if nothing was`,
    )
  }
  return secret
}
