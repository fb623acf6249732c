// Every environment variable Shiplog reads, as one TypeBox schema like the routes': each variable's
// type, bounds, default and the words that refuse a bad value, in one place. readEnvironment turns
// the process environment into these values and ../config.ts builds the Config from them;
// test/domain/config-readme.test.ts holds the README's table to this list.
import { IsBoolean, IsEnum, IsInteger, IsOptional, IsString, type Static, type TSchema, Type } from 'typebox'
import Value from 'typebox/value'
import { nameProblem } from '../text-rules.js'
import { DEFAULT_DATABASE_URL, redactUrl } from './database.js'
import { ConfigError } from './error.js'

const LOG_LEVEL = Type.Enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], {
  default: 'info',
})
export type LogLevel = Static<typeof LOG_LEVEL>

/** How a flag may be spelled, trimmed and in lower case; empty is off. */
const ON = ['1', 'true', 'yes', 'on']
const OFF = ['0', 'false', 'no', 'off', '']

/** The key cache when SHIPLOG_KEY_CACHE_SECONDS is unset, by database. */
export const KEY_CACHE_SECONDS_BY_DIALECT = { sqlite: 0, postgres: 5 } as const

/** The headers bound when SHIPLOG_HEADERS_TIMEOUT_MS is unset, unless the request bound is shorter. */
export const HEADERS_TIMEOUT_DEFAULT_MS = 10_000

/**
 * A whole number from `minimum` to `maximum`: anything but digits is refused as "must be a whole
 * number", a number out of bounds as "must be between". `defaultText` is the default in words,
 * for one that depends on another variable (the README's table gives it so).
 */
function wholeNumber(minimum: number, maximum: number, options: { default?: number; defaultText?: string }) {
  return Type.Integer({ minimum, maximum, ...options })
}

/** On or off (see ON and OFF), off when unset. */
function flag() {
  return Type.Boolean({ default: false })
}

/**
 * Text, trimmed unless `verbatim` (secrets and tokens are taken as given, spaces included). An
 * optional text is unset when blank; one with a default refuses a blank value, unless
 * `blankIsDefault` says a blank one means the default.
 */
function text(
  options: { default?: string; defaultText?: string; verbatim?: true; blankIsDefault?: true } = {},
) {
  return Type.String(options)
}

/** The URL `text` names, or null when it is not one. */
function parsedUrl(text: string): URL | null {
  try {
    return new URL(text)
  } catch {
    return null
  }
}

function isLoopbackHost(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(hostname)
}

/** The scopes SHIPLOG_OIDC_SCOPES names, separated by spaces (or commas). */
export function scopeList(scopes: string): string[] {
  return scopes.split(/[\s,]+/).filter((s) => s !== '')
}

/** Whether the scope list has `needed`; when not, the words that say so. */
const scopesHave = (needed: string) =>
  [
    (scopes: string) => scopeList(scopes).includes(needed),
    (scopes: string) => `must include "${needed}", got "${scopeList(scopes).join(' ')}"`,
  ] as const

export const ENVIRONMENT = Type.Object({
  PORT: wholeNumber(0, 65535, { default: 8080 }),
  HOST: Type.Refine(
    text({ default: '127.0.0.1' }),
    (host) => host !== '',
    () => 'must not be empty',
  ),
  // parseDatabaseUrl (database.ts) reads it into a target and says what is wrong with it.
  DATABASE_URL: text({ default: DEFAULT_DATABASE_URL }),
  LOG_LEVEL,
  SHIPLOG_PUBLIC_URL: Type.Optional(
    Type.Refine(
      text(),
      (url) => ['http:', 'https:'].includes(parsedUrl(url)?.protocol ?? ''),
      (url) => `must be an absolute http(s) URL, got "${url}"`,
    ),
  ),
  REDIS_URL: Type.Optional(
    Type.Refine(
      text(),
      (url) => /^rediss?:\/\//.test(url),
      (url) => `must start with redis:// or rediss://, got "${redactUrl(url)}"`,
    ),
  ),
  SHIPLOG_RATE_LIMIT: wholeNumber(1, 10_000_000, { default: 600 }),
  SHIPLOG_MAX_EVENT_AGE_DAYS: wholeNumber(1, 36_500, { default: 3650 }),
  // One SQLite process sees every revocation itself, so no cache is needed there; instances sharing
  // PostgreSQL may each hold a verified key this long after another instance revoked it.
  SHIPLOG_KEY_CACHE_SECONDS: Type.Optional(
    wholeNumber(0, 300, {
      defaultText: `\`${KEY_CACHE_SECONDS_BY_DIALECT.sqlite}\` on SQLite, \`${KEY_CACHE_SECONDS_BY_DIALECT.postgres}\` on PostgreSQL`,
    }),
  ),
  SHIPLOG_TRUST_PROXY: flag(),
  // Slow clients (slowloris) hold a connection open by sending a request a byte at a time; these
  // bound how long that can last. Headers are small, so they get the shorter bound by default.
  SHIPLOG_REQUEST_TIMEOUT_MS: wholeNumber(1000, 3_600_000, { default: 30_000 }),
  SHIPLOG_HEADERS_TIMEOUT_MS: Type.Optional(
    wholeNumber(1000, 3_600_000, {
      defaultText: `\`${HEADERS_TIMEOUT_DEFAULT_MS}\` (at most the request bound)`,
    }),
  ),
  SHIPLOG_DEPLOY_IMAGE: Type.Refine(
    text({ default: 'shiplog/deploy' }),
    (image) => /^[a-z0-9][a-z0-9._\-/:]*$/.test(image) && !image.endsWith(':1'),
    () => 'must be an image name without tag, e.g. ghcr.io/acme/shiplog-deploy',
  ),
  // It travels in a header (Authorization: Bearer …): visible ASCII only, and long enough not to guess.
  SHIPLOG_METRICS_TOKEN: Type.Optional(
    Type.Refine(
      Type.Refine(
        text({ verbatim: true }),
        (token) => /^[\x21-\x7e]+$/.test(token),
        () => 'must be printable ASCII without spaces',
      ),
      (token) => token.length >= 16,
      () => 'must be at least 16 characters (try: openssl rand -hex 32)',
    ),
  ),
  SHIPLOG_STREAMS_PER_ACCOUNT: wholeNumber(1, 100_000, { default: 50 }),
  // Below the account's: one key (or one browser) filling the account's share would shut off live
  // updates for everyone else in it.
  SHIPLOG_STREAMS_PER_CREDENTIAL: wholeNumber(1, 100_000, { default: 10 }),
  SHIPLOG_STREAMS_PER_PROCESS: wholeNumber(1, 100_000, { default: 1000 }),
  SHIPLOG_STREAM_BUFFER_BYTES: wholeNumber(16 * 1024, 64 * 1024 * 1024, { default: 1024 * 1024 }),
  SHIPLOG_STREAM_POLL_MS: wholeNumber(200, 600_000, { default: 2000 }),
  SHIPLOG_WEBHOOK_ALLOW_PRIVATE: flag(),
  SHIPLOG_WEBHOOK_TIMEOUT_MS: wholeNumber(50, 120_000, { default: 10_000 }),
  SHIPLOG_WEBHOOK_RETRY_BASE_MS: wholeNumber(1, 3_600_000, { default: 10_000 }),
  // Single sign-on (SPEC §10): each variable on its own here; together, and the account mappings,
  // in oidc.ts.
  SHIPLOG_OIDC_ISSUER: Type.Optional(
    Type.Refine(
      Type.Refine(
        text(),
        (issuer) => parsedUrl(issuer) !== null,
        (issuer) =>
          `must be the provider's issuer URL, e.g. https://id.example.com/realms/acme, got "${issuer}"`,
      ),
      (issuer) => {
        const url = parsedUrl(issuer)
        if (url === null) return true
        const secure = url.protocol === 'https:' || (url.protocol === 'http:' && isLoopbackHost(url.hostname))
        return secure && url.search === '' && url.hash === ''
      },
      (issuer) => `must be an https URL without query (plain http only for localhost), got "${issuer}"`,
    ),
  ),
  SHIPLOG_OIDC_CLIENT_ID: Type.Optional(text()),
  SHIPLOG_OIDC_CLIENT_SECRET: Type.Optional(text({ verbatim: true })),
  SHIPLOG_OIDC_NAME: Type.Refine(
    text({ default: 'single sign-on', blankIsDefault: true }),
    (name) => nameProblem(name, 60) === null,
    () => 'must be at most 60 printable characters',
  ),
  SHIPLOG_OIDC_SCOPES: Type.Refine(
    Type.Refine(
      Type.Refine(text({ default: 'openid email profile', blankIsDefault: true }), ...scopesHave('openid')),
      ...scopesHave('email'),
    ),
    (scopes) => scopeList(scopes).every((s) => /^[\x21\x23-\x5b\x5d-\x7e]+$/.test(s)),
    () => 'must be scope names separated by spaces',
  ),
  SHIPLOG_OIDC_GROUPS_CLAIM: text({ default: 'groups', blankIsDefault: true }),
  SHIPLOG_OIDC_ACCOUNT_BY_DOMAIN: Type.Optional(text()),
  SHIPLOG_OIDC_ACCOUNT_BY_GROUP: Type.Optional(text()),
  SHIPLOG_OIDC_ADMIN_GROUPS: Type.Optional(text()),
  // Unset, the secret is kept beside a SQLite database or in a PostgreSQL one (see Config.secret).
  SHIPLOG_SECRET: Type.Optional(
    Type.Refine(
      text({ verbatim: true, defaultText: 'generated' }),
      (secret) => secret.length >= 32,
      () => 'must be at least 32 characters (try: openssl rand -hex 32)',
    ),
  ),
})

/** The variables' values, typed by the schema. */
export type Environment = Static<typeof ENVIRONMENT>

/** Reads every variable of ENVIRONMENT from `env`; the first bad one throws ConfigError naming it. */
export function readEnvironment(env: NodeJS.ProcessEnv): Environment {
  const values: Record<string, unknown> = {}
  for (const [name, schema] of Object.entries(ENVIRONMENT.properties)) {
    const value = readVariable(name, schema, env[name])
    if (value !== undefined) values[name] = value
  }
  if (Value.Check(ENVIRONMENT, values)) return values
  // Each value was checked against its own schema above: this would be a mistake in readVariable.
  // Names only: the values include secrets.
  const names = Value.Errors(ENVIRONMENT, values).map((error) => error.instancePath)
  throw new Error(`configuration values do not fit their schema: ${names.join(', ')}`)
}

/** One variable's value (its default when unset), or the ConfigError that says what is wrong. */
function readVariable(name: string, schema: TSchema, raw: string | undefined): unknown {
  if (raw === undefined) return keyword(schema, 'default')
  if (IsString(schema)) {
    const value = keyword(schema, 'verbatim') === true ? raw : raw.trim()
    if (value === '' && (IsOptional(schema) || keyword(schema, 'blankIsDefault') === true))
      return keyword(schema, 'default')
    return checked(name, schema, value, raw)
  }
  if (IsInteger(schema)) {
    if (!/^\d+$/.test(raw.trim())) throw new ConfigError(`${name} must be a whole number, got "${raw}"`)
    return checked(name, schema, Number(raw.trim()), raw)
  }
  if (IsEnum(schema)) return checked(name, schema, raw.trim().toLowerCase(), raw)
  if (IsBoolean(schema)) {
    const word = raw.trim().toLowerCase()
    if (ON.includes(word)) return true
    if (OFF.includes(word)) return false
    throw new ConfigError(`${name} must be true or false, got "${raw}"`)
  }
  throw new Error(`${name}: the configuration schema has no reading for this kind of variable`)
}

/** `value` when its schema takes it; else the ConfigError naming the variable, in the schema's words. */
function checked(name: string, schema: TSchema, value: unknown, raw: string): unknown {
  const [error] = Value.Errors(schema, value)
  if (error === undefined) return value
  if (IsInteger(schema)) {
    const [minimum, maximum] = [keyword(schema, 'minimum'), keyword(schema, 'maximum')]
    throw new ConfigError(`${name} must be between ${minimum} and ${maximum}, got ${value}`)
  }
  if (IsEnum(schema)) throw new ConfigError(`${name} must be one of ${schema.enum.join(', ')}, got "${raw}"`)
  // A rule's own words (Type.Refine).
  throw new ConfigError(`${name} ${error.message}`)
}

/** One of a schema's keywords: TypeBox keeps every option on the schema, but types only a few. */
export function keyword(schema: TSchema, name: string): unknown {
  return Reflect.get(schema, name)
}
