// The `shiplog` operator command as a real process (SPEC §2.1): users, keys, migrate, serve, exit codes, stdout/stderr.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { parseDatabaseUrl } from '../../src/config.js'
import { type Database, openDatabase } from '../../src/db/connect.js'
import { migrateTo } from '../../src/db/migrate.js'
import { digestApiKey } from '../../src/domain/keys.js'
import { verifyPassword } from '../../src/domain/passwords.js'
import { type Cleanup, freshDatabaseUrl, testDialect } from '../helper.js'
import {
  type ProcessResult,
  processEnv,
  runCli,
  type ServerProcess,
  sleep,
  startServer,
} from '../support/processes.js'

const KEY_LINE = /^shl_[0-9A-Za-z]{32,}$/
const PASSWORD = 'correct horse battery staple'
/** What `serve` needs besides the database; each case below spoils one variable. */
const VALID_SERVE_ENV: Record<string, string> = { PORT: '0', HOST: '127.0.0.1' }

/** A private database plus the environment every command of one test runs with. */
/** The admin most tests start from: ada@example.com in account Acme (password on stdin). */
const CREATE_ADA = ['users', 'create', '--account', 'Acme', '--email', 'ada@example.com', '--password-stdin']

async function setup(t: Cleanup) {
  const databaseUrl = await freshDatabaseUrl(t)
  const env = processEnv(databaseUrl)
  return { databaseUrl, env, cli: (args: string[], stdin?: string) => runCli(t, args, { env, stdin }) }
}

/** Opens the database the processes use, to check what they wrote. */
function openDirect(t: Cleanup, databaseUrl: string): Database {
  const database = openDatabase(parseDatabaseUrl(databaseUrl))
  t.after(() => database.close())
  return database
}

function summary(result: ProcessResult): string {
  return `exit ${result.code} (signal ${result.signal}); stdout: ${JSON.stringify(result.stdout)}; stderr: ${JSON.stringify(result.stderr)}`
}

function assertSuccess(result: ProcessResult): void {
  assert.equal(result.code, 0, summary(result))
}

/** The command failed with exactly one non-empty line on stderr and printed nothing on stdout. */
function assertFailsWithOneLine(result: ProcessResult, pattern?: RegExp): string {
  assert.notEqual(result.code, 0, summary(result))
  assert.equal(result.signal, null, summary(result))
  assert.equal(result.stdout, '', summary(result))
  assert.match(result.stderr, /^[^\n]*\S[^\n]*\n$/, `expected one line on stderr: ${summary(result)}`)
  if (pattern) assert.match(result.stderr, pattern)
  return result.stderr.trimEnd()
}

/** Runs `keys create` and returns the key, checking that it is the only thing on stdout. */
async function createKey(cli: (args: string[]) => Promise<ProcessResult>, account: string, name: string) {
  const result = await cli(['keys', 'create', '--account', account, '--name', name])
  assertSuccess(result)
  const lines = result.stdout.split('\n')
  assert.equal(lines.length, 2, `one line and its newline on stdout: ${summary(result)}`)
  assert.equal(lines[1], '')
  const key = lines[0] ?? ''
  assert.match(key, KEY_LINE)
  return key
}

function postDeploy(server: ServerProcess, key: string, version: string): Promise<Response> {
  return fetch(`${server.url}/deploy`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key },
    body: JSON.stringify({ service: 'billing', environment: 'prod', version, status: 'deployed' }),
    signal: AbortSignal.timeout(10_000),
  })
}

/**
 * After a revocation the key must be refused: at once on SQLite (one process sees every change),
 * within the documented key cache (SHIPLOG_KEY_CACHE_SECONDS, 5 s by default) on PostgreSQL.
 */
async function assertRefusedAfterRevocation(server: ServerProcess, key: string): Promise<void> {
  const deadline = Date.now() + (testDialect === 'postgres' ? 8_000 : 0)
  let attempt = 0
  for (;;) {
    const response = await postDeploy(server, key, `after-revoke-${attempt++}`)
    const body = await response.text()
    if (response.status === 401) {
      assert.match(response.headers.get('content-type') ?? '', /^application\/problem\+json/)
      return
    }
    assert.equal(response.status, 201, `a revoked key is either still cached (201) or refused (401): ${body}`)
    if (Date.now() >= deadline) {
      assert.fail(
        testDialect === 'sqlite'
          ? 'on SQLite a revoked key must be refused immediately, but the next request got 201'
          : 'the revoked key was still accepted 8 s after revocation',
      )
    }
    await sleep(250)
  }
}

/** The rows of `keys list` under its header, split into columns. */
function listedRows(stdout: string): string[][] {
  const lines = stdout.split('\n').filter((line) => line !== '')
  assert.match(lines[0] ?? '', /^ID\s+NAME\s+PREFIX\b/, `keys list starts with its header: ${stdout}`)
  return lines.slice(1).map((line) => line.split(/\s{2,}/))
}

async function keyIdOf(database: Database, key: string): Promise<number> {
  const row = await database.db
    .selectFrom('api_keys')
    .select('id')
    .where('digest', '=', digestApiKey(key))
    .executeTakeFirstOrThrow()
  return row.id
}

test('--help exits 0 and describes every command on stdout', { timeout: 60_000 }, async (t) => {
  const { cli } = await setup(t)
  const result = await cli(['--help'])
  assertSuccess(result)
  for (const command of [
    'serve',
    'migrate',
    'users create',
    'users set-password',
    'keys create',
    'keys list',
    'keys revoke',
  ]) {
    assert.ok(result.stdout.includes(command), `--help mentions "${command}": ${result.stdout}`)
  }
  assertFailsWithOneLine(await cli(['frobnicate']), /frobnicate/)
})

test('migrate exits 0 on a new database, creates the schema, and is idempotent', {
  timeout: 60_000,
}, async (t) => {
  const { cli, databaseUrl } = await setup(t)
  const first = await cli(['migrate'])
  assertSuccess(first)
  // It says what it did: on a new database, that it created the schema (not "up to date").
  assert.match(first.stderr, /^created the database schema: applied \d+ migrations\n$/)
  const database = openDirect(t, databaseUrl)
  const events = await database.db.selectFrom('events').select('id').execute()
  assert.deepEqual(events, [])
  const second = await cli(['migrate'])
  assertSuccess(second)
  assert.equal(second.stdout, '')
  assert.match(second.stderr, /^database schema is already up to date \(\d+ migrations\); nothing to do\n$/)
})

test('migrate on a database an older release left names the migrations it applied', {
  timeout: 60_000,
}, async (t) => {
  const { cli, databaseUrl } = await setup(t)
  const database = openDirect(t, databaseUrl)
  await migrateTo(database, '2026_11_26_0011_oidc')
  const run = await cli(['migrate'])
  assertSuccess(run)
  assert.match(
    run.stderr,
    /^applied \d+ migrations? \([^)]*2026_11_27_0012_webhook_cursors[^)]*\): the database schema is up to date\n$/,
  )
})

test('users create reads the password from stdin and creates the account', { timeout: 60_000 }, async (t) => {
  const { cli, databaseUrl } = await setup(t)
  // The account does not exist yet, so a key cannot be made for it.
  assertFailsWithOneLine(await cli(['keys', 'create', '--account', 'Acme', '--name', 'ci']), /Acme/)

  const created = await cli(
    ['users', 'create', '--account', 'Acme', '--email', 'Ada@Example.com', '--password-stdin'],
    `${PASSWORD}\n`,
  )
  assertSuccess(created)
  assert.equal(created.stdout, '', 'users create keeps stdout empty')
  assert.ok(!created.stderr.includes(PASSWORD), 'the password is never echoed')

  const database = openDirect(t, databaseUrl)
  const users = await database.db
    .selectFrom('users')
    .innerJoin('accounts', 'accounts.id', 'users.account_id')
    .select(['users.email', 'users.role', 'users.password_hash', 'accounts.name'])
    .execute()
  assert.equal(users.length, 1)
  const [user] = users
  assert.ok(user)
  assert.equal(user.name, 'Acme')
  assert.equal(user.email, 'ada@example.com')
  assert.equal(user.role, 'admin', 'the default role is admin')
  assert.ok(!user.password_hash.includes(PASSWORD), 'only a hash is stored')
  assert.equal(
    await verifyPassword(PASSWORD, user.password_hash),
    true,
    'the trailing newline is not part of it',
  )

  // A member can be added to the existing account.
  assertSuccess(
    await cli(
      [
        'users',
        'create',
        '--account',
        'Acme',
        '--email',
        'bob@example.com',
        '--password-stdin',
        '--role',
        'member',
      ],
      PASSWORD,
    ),
  )
  const bob = await database.db
    .selectFrom('users')
    .select(['role', 'account_id'])
    .where('email', '=', 'bob@example.com')
    .executeTakeFirstOrThrow()
  assert.equal(bob.role, 'member')
  const accounts = await database.db.selectFrom('accounts').select('id').execute()
  assert.deepEqual(
    accounts.map((a) => a.id),
    [bob.account_id],
    'the second user joined the same account',
  )

  // Now the account exists.
  await createKey(cli, 'Acme', 'ci')
})

test('users create refuses a bad --role, a second user with the same email in one account, and a short password', {
  timeout: 60_000,
}, async (t) => {
  const { cli, databaseUrl } = await setup(t)
  const badRole = await cli(
    [
      'users',
      'create',
      '--account',
      'Globex',
      '--email',
      'eve@example.com',
      '--password-stdin',
      '--role',
      'owner',
    ],
    PASSWORD,
  )
  assertFailsWithOneLine(badRole, /role/)
  // Nothing was created: the account still does not exist.
  assertFailsWithOneLine(await cli(['keys', 'create', '--account', 'Globex', '--name', 'ci']))

  assertSuccess(await cli(CREATE_ADA, PASSWORD))
  assertFailsWithOneLine(await cli(CREATE_ADA, PASSWORD), /ada@example\.com/)
  // Emails are compared without regard to case.
  const upper = ['users', 'create', '--account', 'Acme', '--email', 'ADA@EXAMPLE.COM', '--password-stdin']
  assertFailsWithOneLine(await cli(upper, PASSWORD), /ada@example\.com/i)
  // Emails are unique per account: the same address in another account is another user (10.6).
  const elsewhere = [
    'users',
    'create',
    '--account',
    'Initech',
    '--email',
    'ada@example.com',
    '--password-stdin',
  ]
  assertSuccess(await cli(elsewhere, 'another good password'))
  await createKey(cli, 'Initech', 'ci')

  const shortPassword = [
    'users',
    'create',
    '--account',
    'Acme',
    '--email',
    'bob@example.com',
    '--password-stdin',
  ]
  assertFailsWithOneLine(await cli(shortPassword, 'short\n'), /password/)

  const database = openDirect(t, databaseUrl)
  const users = await database.db
    .selectFrom('users')
    .innerJoin('accounts', 'accounts.id', 'users.account_id')
    .select(['users.email', 'accounts.name'])
    .orderBy('users.id')
    .execute()
  assert.deepEqual(users, [
    { email: 'ada@example.com', name: 'Acme' },
    { email: 'ada@example.com', name: 'Initech' },
  ])
})

test('users set-password gives a user of one account a new password and ends their sessions; errors exit non-zero with one line', {
  timeout: 90_000,
}, async (t) => {
  const { cli, databaseUrl } = await setup(t)
  assertSuccess(await cli(CREATE_ADA, PASSWORD))
  const initech = [
    'users',
    'create',
    '--account',
    'Initech',
    '--email',
    'ada@example.com',
    '--password-stdin',
  ]
  assertSuccess(await cli(initech, 'initech password'))
  const database = openDirect(t, databaseUrl)
  const row = (account: string) =>
    database.db
      .selectFrom('users')
      .innerJoin('accounts', 'accounts.id', 'users.account_id')
      .select(['users.id', 'users.password_hash', 'users.must_change_password'])
      .where('accounts.name', '=', account)
      .executeTakeFirstOrThrow()
  const acme = await row('Acme')
  const now = Date.now()
  await database.db
    .insertInto('sessions')
    .values({
      id: 'a'.repeat(64),
      user_id: acme.id,
      created_at: now,
      last_seen_at: now,
      expires_at: now + 60_000,
    })
    .execute()
  const before = await row('Initech')

  const setAcme = [
    'users',
    'set-password',
    '--account',
    'Acme',
    '--email',
    'ADA@example.com',
    '--password-stdin',
  ]
  const done = await cli(setAcme, 'a recovered password\n')
  assertSuccess(done)
  assert.equal(done.stdout, '')
  assert.ok(!done.stderr.includes('a recovered password'), 'the password is never echoed')
  const after = await row('Acme')
  assert.equal(await verifyPassword('a recovered password', after.password_hash), true)
  assert.equal(after.must_change_password, 0)
  const sessions = await database.db
    .selectFrom('sessions')
    .select('id')
    .where('user_id', '=', acme.id)
    .execute()
  assert.deepEqual(sessions, [], 'their sessions are ended')
  assert.deepEqual(await row('Initech'), before, 'the same address in another account is untouched')

  assertSuccess(await cli([...setAcme, '--one-time'], 'a temporary password'))
  assert.equal((await row('Acme')).must_change_password, 1, '--one-time: chosen anew at next login')

  // Errors: exit 1 (or 2 for usage) with one line on stderr, and nothing changes.
  const unchanged = await row('Acme')
  const nobody = [
    'users',
    'set-password',
    '--account',
    'Acme',
    '--email',
    'eve@example.com',
    '--password-stdin',
  ]
  const missing = await cli(nobody, PASSWORD)
  assertFailsWithOneLine(missing, /no user eve@example\.com/)
  assert.equal(missing.code, 1)
  const noAccount = [
    'users',
    'set-password',
    '--account',
    'Globex',
    '--email',
    'ada@example.com',
    '--password-stdin',
  ]
  assertFailsWithOneLine(await cli(noAccount, PASSWORD), /Globex/)
  assertFailsWithOneLine(await cli(setAcme, 'short\n'), /password/)
  const noStdin = await cli(['users', 'set-password', '--account', 'Acme', '--email', 'ada@example.com'])
  assertFailsWithOneLine(noStdin, /--password-stdin/)
  assert.equal(noStdin.code, 2)
  const noEmail = await cli(['users', 'set-password', '--account', 'Acme', '--password-stdin'], PASSWORD)
  assertFailsWithOneLine(noEmail, /--email/)
  assert.equal(noEmail.code, 2)
  assert.deepEqual(await row('Acme'), unchanged)
})

test('keys create prints only the key; an unknown account exits 1 with one line', {
  timeout: 60_000,
}, async (t) => {
  const { cli, databaseUrl } = await setup(t)
  assertSuccess(await cli(CREATE_ADA, PASSWORD))
  const key = await createKey(cli, 'Acme', 'ci')
  const other = await createKey(cli, 'Acme', 'ci')
  assert.notEqual(key, other, 'every key is new')

  const database = openDirect(t, databaseUrl)
  const rows = await database.db.selectFrom('api_keys').selectAll().orderBy('id').execute()
  assert.equal(rows.length, 2)
  assert.equal(rows[0]?.digest, digestApiKey(key), 'only the digest is stored')
  assert.ok(!JSON.stringify(rows).includes(key), 'the plaintext key is not stored')

  const missing = await cli(['keys', 'create', '--account', 'Nope', '--name', 'ci'])
  assert.equal(missing.code, 1, summary(missing))
  assertFailsWithOneLine(missing, /Nope/)
  assertFailsWithOneLine(await cli(['keys', 'create', '--account', 'Acme']), /--name/)
})

for (const [label, env] of [
  ['PORT=abc', { PORT: 'abc' }],
  ['DATABASE_URL=mysql://x', { DATABASE_URL: 'mysql://x' }],
  ['a short SHIPLOG_SECRET', { SHIPLOG_SECRET: 'too-short' }],
  ['LOG_LEVEL=loud', { LOG_LEVEL: 'loud' }],
] as const) {
  test(`serve with ${label} exits non-zero with one line on stderr`, { timeout: 60_000 }, async (t) => {
    const databaseUrl = await freshDatabaseUrl(t)
    const result = await runCli(t, ['serve'], {
      env: processEnv(databaseUrl, { ...VALID_SERVE_ENV, ...env }),
      timeoutMs: 20_000,
    })
    const variable = Object.keys(env)[0] ?? ''
    assertFailsWithOneLine(result, new RegExp(variable))
  })
}

test('end to end: a key made by the CLI records events, is listed, and once revoked by id is refused', {
  timeout: 90_000,
}, async (t) => {
  const { cli, databaseUrl } = await setup(t)
  assertSuccess(await cli(CREATE_ADA, PASSWORD))
  const key = await createKey(cli, 'Acme', 'ci')
  const server = await startServer(t, { databaseUrl })

  const response = await postDeploy(server, key, '1.4.2')
  const event = (await response.json()) as Record<string, unknown>
  assert.equal(response.status, 201, JSON.stringify(event))
  assert.equal(typeof event.id, 'number')
  assert.equal(event.service, 'billing')
  assert.equal(event.environment, 'prod')
  assert.equal(event.version, '1.4.2')
  assert.equal(event.status, 'Deployed')
  assert.equal(event.api_key_name, 'ci')

  const database = openDirect(t, databaseUrl)
  const keyId = await keyIdOf(database, key)

  const listed = await cli(['keys', 'list', '--account', 'Acme'])
  assertSuccess(listed)
  assert.ok(!listed.stdout.includes(key), 'keys list never shows the whole key')
  const rows = listedRows(listed.stdout)
  assert.equal(rows.length, 1, listed.stdout)
  const [row] = rows
  assert.ok(row)
  assert.equal(row[0], String(keyId))
  assert.equal(row[1], 'ci')
  assert.ok(row[2]?.startsWith(key.slice(0, 8)), `the prefix column shows the key's start: ${row[2]}`)
  assert.ok((row[2]?.replace(/…$/, '').length ?? 0) < key.length - 16, 'the prefix is short')
  assert.match(row.at(-1) ?? '', /^active$/)

  const revoked = await cli(['keys', 'revoke', '--account', 'Acme', String(keyId)])
  assertSuccess(revoked)
  assert.ok(!revoked.stdout.includes(key) && !revoked.stderr.includes(key), 'revoke never prints the key')

  await assertRefusedAfterRevocation(server, key)

  const after = await cli(['keys', 'list', '--account', 'Acme'])
  assertSuccess(after)
  assert.match(listedRows(after.stdout)[0]?.at(-1) ?? '', /^revoked\b/)
  const stored = await database.db
    .selectFrom('events')
    .select(['id', 'version'])
    .where('id', '=', Number(event.id))
    .executeTakeFirstOrThrow()
  assert.equal(stored.version, '1.4.2')
})

test('keys revoke accepts the full key, is scoped to the account, and exits 1 for an unknown id', {
  timeout: 90_000,
}, async (t) => {
  const { cli, databaseUrl } = await setup(t)
  assertSuccess(await cli(CREATE_ADA, PASSWORD))
  assertSuccess(
    await cli(
      ['users', 'create', '--account', 'Globex', '--email', 'hank@example.com', '--password-stdin'],
      PASSWORD,
    ),
  )
  const key = await createKey(cli, 'Acme', 'deployer')
  const keep = await createKey(cli, 'Acme', 'other')
  const server = await startServer(t, { databaseUrl })
  assert.equal((await postDeploy(server, key, '2.0.0')).status, 201)

  // Another account cannot revoke Acme's key, by key text or by id.
  const database = openDirect(t, databaseUrl)
  const keyId = await keyIdOf(database, key)
  assertFailsWithOneLine(await cli(['keys', 'revoke', '--account', 'Globex', key]))
  assertFailsWithOneLine(await cli(['keys', 'revoke', '--account', 'Globex', String(keyId)]))
  assert.equal((await postDeploy(server, key, '2.0.1')).status, 201, 'the key still works')

  const unknown = await cli(['keys', 'revoke', '--account', 'Acme', '999999'])
  assert.equal(unknown.code, 1, summary(unknown))
  assertFailsWithOneLine(unknown, /999999/)
  assertFailsWithOneLine(await cli(['keys', 'revoke', '--account', 'Acme']))

  const revoked = await cli(['keys', 'revoke', '--account', 'Acme', key])
  assertSuccess(revoked)
  assert.ok(!revoked.stdout.includes(key) && !revoked.stderr.includes(key), 'revoke never prints the key')
  await assertRefusedAfterRevocation(server, key)

  const row = await database.db
    .selectFrom('api_keys')
    .select('revoked_at')
    .where('id', '=', keyId)
    .executeTakeFirstOrThrow()
  assert.notEqual(row.revoked_at, null)
  // Only that key: the account's other key still records.
  const response = await postDeploy(server, keep, '2.0.2')
  assert.equal(response.status, 201, await response.text())
})
