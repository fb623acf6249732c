// Configuration: defaults, every variable's validation, and one clear message per mistake.
import assert from 'node:assert/strict'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { ConfigError, configurationWarnings, loadConfig, parseDatabaseUrl } from '../../src/config.js'

test('defaults: port 8080 on 127.0.0.1, SQLite under ./data, 600 requests a minute', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'shiplog-config-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const cwd = process.cwd()
  process.chdir(dir)
  t.after(() => process.chdir(cwd))
  const config = loadConfig({})
  assert.equal(config.port, 8080)
  assert.equal(config.host, '127.0.0.1')
  assert.deepEqual(config.database, { dialect: 'sqlite', path: join(process.cwd(), 'data', 'shiplog.db') })
  assert.equal(config.rateLimitPerMinute, 600)
  assert.equal(config.redisUrl, null)
  assert.ok(Object.isFrozen(config))
  // The secret is kept beside the database; reading the configuration never creates it (the
  // commands that seal or sign do: test/cli/secret-travel.test.ts).
  const secretFile = join(process.cwd(), 'data', 'secret')
  assert.equal(config.secretFile, secretFile)
  assert.equal(config.secret, null)
  assert.ok(!existsSync(secretFile))
})

test('database URLs', () => {
  assert.deepEqual(parseDatabaseUrl('sqlite::memory:'), { dialect: 'sqlite', path: ':memory:' })
  assert.deepEqual(parseDatabaseUrl('sqlite:///var/lib/shiplog/db'), {
    dialect: 'sqlite',
    path: '/var/lib/shiplog/db',
  })
  assert.equal(parseDatabaseUrl('postgres://u:p@db:5432/shiplog').dialect, 'postgres')
  assert.equal(parseDatabaseUrl('postgresql://db/shiplog').dialect, 'postgres')
})

test('PostgreSQL without SHIPLOG_SECRET leaves the secret to the database; key cache defaults to 5 s', () => {
  const config = loadConfig({ DATABASE_URL: 'postgres://db/shiplog' })
  assert.equal(config.secret, null)
  assert.equal(config.keyCacheMs, 5000)
  assert.equal(loadConfig({ DATABASE_URL: 'sqlite::memory:' }).keyCacheMs, 0)
})

for (const [env, message] of [
  [{ PORT: 'eighty' }, /PORT must be a whole number/],
  [{ PORT: '70000' }, /PORT must be between 0 and 65535/],
  [{ DATABASE_URL: 'mysql://db/x' }, /DATABASE_URL must start with sqlite: or postgres:\/\//],
  [{ DATABASE_URL: 'postgres://user:hunter2@[bad' }, /not a valid PostgreSQL URL: postgres:\/\/user:\*\*\*@/],
  [{ LOG_LEVEL: 'loud' }, /LOG_LEVEL must be one of/],
  [{ SHIPLOG_PUBLIC_URL: 'shiplog.internal' }, /SHIPLOG_PUBLIC_URL must be an absolute http\(s\) URL/],
  [{ REDIS_URL: 'localhost:6379' }, /REDIS_URL must start with redis:\/\//],
  [{ SHIPLOG_RATE_LIMIT: '0' }, /SHIPLOG_RATE_LIMIT must be between/],
  [{ SHIPLOG_SECRET: 'short' }, /SHIPLOG_SECRET must be at least 32 characters/],
  [{ SHIPLOG_TRUST_PROXY: 'maybe' }, /SHIPLOG_TRUST_PROXY must be true or false/],
  [{ SHIPLOG_REQUEST_TIMEOUT_MS: '30s' }, /SHIPLOG_REQUEST_TIMEOUT_MS must be a whole number/],
  [{ SHIPLOG_HEADERS_TIMEOUT_MS: '0' }, /SHIPLOG_HEADERS_TIMEOUT_MS must be between 1000 and/],
  [
    { SHIPLOG_HEADERS_TIMEOUT_MS: '20000', SHIPLOG_REQUEST_TIMEOUT_MS: '10000' },
    /SHIPLOG_HEADERS_TIMEOUT_MS \(20000\) must not exceed SHIPLOG_REQUEST_TIMEOUT_MS \(10000\)/,
  ],
] as const) {
  test(`invalid ${Object.keys(env)[0]} is refused with one clear message`, () => {
    assert.throws(
      () => loadConfig({ DATABASE_URL: 'sqlite::memory:', ...env }),
      (err: unknown) =>
        err instanceof ConfigError && message.test(err.message) && !err.message.includes('\n'),
    )
  })
}

test('the password in a PostgreSQL URL never appears in a message', () => {
  assert.throws(
    () => loadConfig({ DATABASE_URL: 'postgres://user:hunter2@[bad' }),
    (err: unknown) => err instanceof Error && !err.message.includes('hunter2'),
  )
})

test('slow-client bounds: headers within 10 s and the whole request within 30 s by default; headers never longer than the request', () => {
  const defaults = loadConfig({ DATABASE_URL: 'sqlite::memory:' })
  assert.equal(defaults.headersTimeoutMs, 10_000)
  assert.equal(defaults.requestTimeoutMs, 30_000)
  const short = loadConfig({ DATABASE_URL: 'sqlite::memory:', SHIPLOG_REQUEST_TIMEOUT_MS: '5000' })
  assert.equal(short.headersTimeoutMs, 5000, 'the headers bound follows a shorter request bound')
  const both = loadConfig({
    DATABASE_URL: 'sqlite::memory:',
    SHIPLOG_HEADERS_TIMEOUT_MS: '2000',
    SHIPLOG_REQUEST_TIMEOUT_MS: '60000',
  })
  assert.deepEqual([both.headersTimeoutMs, both.requestTimeoutMs], [2000, 60_000])
})

test('behind a proxy without SHIPLOG_PUBLIC_URL the operator is warned; with it, or without a proxy, not', () => {
  const base = { DATABASE_URL: 'sqlite::memory:' }
  const [warning, ...more] = configurationWarnings(loadConfig({ ...base, SHIPLOG_TRUST_PROXY: 'true' }))
  assert.match(warning ?? '', /SHIPLOG_PUBLIC_URL is unset/)
  assert.deepEqual(more, [])
  assert.deepEqual(
    configurationWarnings(
      loadConfig({ ...base, SHIPLOG_TRUST_PROXY: 'true', SHIPLOG_PUBLIC_URL: 'https://shiplog.example.com' }),
    ),
    [],
  )
  assert.deepEqual(configurationWarnings(loadConfig(base)), [])
})

test('a blank optional variable is unset; a blank one with a default is refused, except where blank means the default', () => {
  const base = { DATABASE_URL: 'sqlite::memory:' }
  const config = loadConfig({ ...base, SHIPLOG_PUBLIC_URL: '  ', REDIS_URL: '', SHIPLOG_METRICS_TOKEN: '' })
  assert.deepEqual([config.publicUrl, config.redisUrl, config.metricsToken], [null, null, null])
  assert.throws(() => loadConfig({ ...base, PORT: '' }), /PORT must be a whole number, got ""/)
  assert.throws(() => loadConfig({ ...base, HOST: ' ' }), /HOST must not be empty/)
  assert.throws(() => loadConfig({ ...base, SHIPLOG_KEY_CACHE_SECONDS: '' }), /must be a whole number/)
  // Tokens are taken as given: spaces are not a missing token but a bad one.
  assert.throws(() => loadConfig({ ...base, SHIPLOG_METRICS_TOKEN: ' ' }), /printable ASCII without spaces/)
  assert.equal(loadConfig({ ...base, SHIPLOG_TRUST_PROXY: '' }).trustProxy, false)
  assert.equal(loadConfig({ ...base, PORT: '1' }, { port: ' 9090 ' }).port, 9090, '--port wins over PORT')
})

test('single sign-on names follow the rule for every name: no C1 controls or text-direction overrides', () => {
  const sso = {
    DATABASE_URL: 'sqlite::memory:',
    SHIPLOG_PUBLIC_URL: 'https://shiplog.example.com',
    SHIPLOG_OIDC_ISSUER: 'https://id.example.com',
    SHIPLOG_OIDC_CLIENT_ID: 'shiplog',
    SHIPLOG_OIDC_CLIENT_SECRET: 's3cret',
    SHIPLOG_OIDC_ACCOUNT_BY_DOMAIN: 'example.com=Acme',
  }
  assert.equal(loadConfig({ ...sso, SHIPLOG_OIDC_NAME: ' ' }).oidc?.name, 'single sign-on')
  // The account is made at first sign-in under this name; Settings and the CLI refuse such a name,
  // and so must the configuration (its own copy of the check let these through).
  assert.throws(
    () => loadConfig({ ...sso, SHIPLOG_OIDC_ACCOUNT_BY_DOMAIN: 'example.com=Ac\u202eme' }),
    /SHIPLOG_OIDC_ACCOUNT_BY_DOMAIN: the account name for "example.com" must be 1 to 100 printable characters/,
  )
  assert.throws(
    () => loadConfig({ ...sso, SHIPLOG_OIDC_NAME: 'Acme\u009b' }),
    /SHIPLOG_OIDC_NAME must be at most 60 printable characters/,
  )
  // Length is counted in characters, as for any name.
  const long = '\u{1f680}'.repeat(100)
  assert.deepEqual(
    loadConfig({ ...sso, SHIPLOG_OIDC_ACCOUNT_BY_GROUP: `ops=${long}` }).oidc?.accountByGroup,
    [['ops', long]],
  )
})
