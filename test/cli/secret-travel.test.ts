// The app secret when data moves (issue 28, points 1 and 2): a default SQLite installation (no
// SHIPLOG_SECRET, the secret in data/secret) copied to the other database keeps its sessions and
// webhook signatures; a dump loaded elsewhere refuses to start without the secret, in one line, and
// works with it; read-only commands on a backup file never create a secret; doctor says where the
// default set-up keeps it; a webhook sealed with another secret shows as failing. Both databases.
import assert from 'node:assert/strict'
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { test } from 'node:test'
import { parseDatabaseUrl } from '../../src/config.js'
import { openDatabase } from '../../src/db/connect.js'
import { freshDatabaseUrl, testDialect } from '../helper.js'
import { otherDialectUrl } from '../support/installation.js'
import {
  fileScope,
  processEnv,
  runCli,
  type ServerProcess,
  sleep,
  startServer,
} from '../support/processes.js'
import { PASSWORD } from '../support/ui.js'
import { type Receiver, startReceiver, verifySignature } from '../support/webhook-receiver.js'

const EMAIL = 'ada@example.com'
/** A default installation: no SHIPLOG_SECRET (empty counts as unset), private webhook targets allowed. */
const DEFAULT_SETUP = {
  SHIPLOG_SECRET: '',
  SHIPLOG_WEBHOOK_ALLOW_PRIVATE: 'true',
  SHIPLOG_WEBHOOK_RETRY_BASE_MS: '50',
}
const REFUSED =
  /^shiplog: the database holds data sealed with (another secret than the one in|a secret this installation does not have)/

interface DefaultInstall {
  dir: string
  url: string
  secretFile: string
  key: string
  signingSecret: string
  receiver: Receiver
  /** A session cookie from a login on the source installation. */
  cookie: string
}

const scope = fileScope()
let built: Promise<DefaultInstall> | null = null

/** A default SQLite installation set up from the command line, with a user, a key, a webhook and a session. */
function defaultInstall(): Promise<DefaultInstall> {
  built ??= (async () => {
    const dir = mkdtempSync(join(tmpdir(), 'shiplog-secret-'))
    scope.after(() => rmSync(dir, { recursive: true, force: true }))
    const url = `sqlite:${join(dir, 'data', 'shiplog.db')}`
    const env = processEnv(url, DEFAULT_SETUP)
    const user = await runCli(
      scope,
      ['users', 'create', '--account', 'Acme', '--email', EMAIL, '--password-stdin'],
      { env, stdin: PASSWORD },
    )
    assert.equal(user.code, 0, user.stderr)
    assert.ok(!existsSync(join(dir, 'data', 'secret')), 'creating a user seals nothing: no secret yet')
    const key = await runCli(scope, ['keys', 'create', '--account', 'Acme', '--name', 'ci'], { env })
    assert.equal(key.code, 0, key.stderr)
    const receiver = await startReceiver(scope)
    const hook = await runCli(
      scope,
      [
        'webhooks',
        'create',
        '--account',
        'Acme',
        '--url',
        `${receiver.url}/hook`,
        '--format',
        'json',
        '--status',
        'Deployed',
      ],
      { env },
    )
    assert.equal(hook.code, 0, hook.stderr)
    const secretFile = join(dir, 'data', 'secret')
    assert.equal(statSync(secretFile).mode & 0o777, 0o600, 'sealing made the secret, owner-only')
    const server = await startServer(scope, { databaseUrl: url, env: DEFAULT_SETUP })
    const cookie = await httpLogin(server.url)
    assert.equal(await loggedIn(server.url, cookie), true)
    await stop(server)
    return {
      dir,
      url,
      secretFile,
      key: key.stdout.trim(),
      signingSecret: hook.stdout.trim(),
      receiver,
      cookie,
    }
  })()
  return built
}

function cookiesOf(response: Response): string[] {
  return response.headers.getSetCookie().map((c) => c.split(';')[0] ?? '')
}

/** Logs in through the form over HTTP, as a browser would; returns the Cookie header. */
async function httpLogin(base: string): Promise<string> {
  const page = await fetch(`${base}/login`)
  const token = /name="_csrf" value="([^"]*)"/.exec(await page.text())?.[1]
  assert.ok(token, 'the login page has a CSRF token')
  const jar = cookiesOf(page)
  const res = await fetch(`${base}/login`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: jar.join('; ') },
    body: new URLSearchParams({ _csrf: token, email: EMAIL, password: PASSWORD }).toString(),
  })
  assert.equal(res.status, 303, await res.text())
  const session = cookiesOf(res).find((c) => c.startsWith('shiplog_session='))
  assert.ok(session, 'a session cookie was set')
  return session
}

/** Whether the cookie is still a session there (Settings answers 200 rather than sending to /login). */
async function loggedIn(base: string, cookie: string): Promise<boolean> {
  const res = await fetch(`${base}/settings/webhooks/`, { redirect: 'manual', headers: { cookie } })
  const body = await res.text()
  if (res.status === 200) assert.match(body, /webhook-state active/, 'the webhook is active there')
  return res.status === 200
}

async function stop(server: ServerProcess): Promise<void> {
  server.signal('SIGTERM')
  await server.waitForExit(30_000)
}

/** Records an event and waits for the webhook to receive it, signed with its signing secret. */
async function assertDelivers(server: ServerProcess, install: DefaultInstall, version: string) {
  const res = await fetch(`${server.url}/deploy`, {
    method: 'POST',
    headers: { 'x-api-key': install.key, 'content-type': 'application/json' },
    body: JSON.stringify({ service: 'api', environment: 'prod', version, status: 'Deployed' }),
  })
  assert.equal(res.status, 201, await res.text())
  const deadline = Date.now() + 20_000
  for (;;) {
    const got = install.receiver.received.find((r) => r.body.includes(`"version":"${version}"`))
    if (got) {
      const header = got.headers['shiplog-signature']
      assert.ok(verifySignature(install.signingSecret, String(header), got.body), 'signed with its secret')
      return
    }
    assert.ok(Date.now() < deadline, `no delivery of ${version}; server output:\n${server.output()}`)
    await sleep(100)
  }
}

/** `shiplog serve` that must be refused: one line on stderr, exit 1, nothing listening. */
async function assertRefused(t: { after(fn: () => void): void }, url: string, env: Record<string, string>) {
  const res = await runCli(t, ['serve', '--port', '0'], { env: processEnv(url, env) })
  assert.equal(res.code, 1, `${res.stdout}${res.stderr}`)
  assert.equal(res.stderr.trim().split('\n').length, 1, res.stderr)
  assert.match(res.stderr, REFUSED)
  assert.match(res.stderr, /the secret of the installation this data came from/)
}

async function settingsNames(url: string): Promise<string[]> {
  const database = openDatabase(parseDatabaseUrl(url))
  try {
    return (await database.db.selectFrom('settings').select('name').execute()).map((r) => r.name).sort()
  } finally {
    await database.close()
  }
}

test('a default SQLite installation copied to PostgreSQL and back keeps its secret: sessions stay, webhooks sign, another secret is refused', async (t) => {
  const install = await defaultInstall()
  const target =
    testDialect === 'postgres' ? await freshDatabaseUrl(t) : await otherDialectUrl(t, install.dir)
  const copied = await runCli(t, ['copy', '--from', install.url, '--to', target], {
    env: processEnv(undefined, DEFAULT_SETUP),
  })
  assert.equal(copied.code, 0, copied.stderr)
  assert.match(copied.stderr, /^secret: the secret came along from .*data\/secret to /m)

  // Started as the README says, without SHIPLOG_SECRET: the session and the webhook carry on.
  const server = await startServer(t, { databaseUrl: target, env: DEFAULT_SETUP })
  assert.equal(await loggedIn(server.url, install.cookie), true, 'the session from before the copy is valid')
  await assertDelivers(server, install, 'after-copy')
  await stop(server)

  // With another secret: refused in one line, before anything runs.
  await assertRefused(t, target, {
    ...DEFAULT_SETUP,
    SHIPLOG_SECRET: 'another-secret-0123456789abcdef0123456789',
  })

  // And back into a new SQLite directory: the secret is written beside it, not into its database.
  const back = mkdtempSync(join(tmpdir(), 'shiplog-secret-back-'))
  t.after(() => rmSync(back, { recursive: true, force: true }))
  const backUrl = `sqlite:${join(back, 'data', 'shiplog.db')}`
  const returned = await runCli(t, ['copy', '--from', target, '--to', backUrl], {
    env: processEnv(undefined, DEFAULT_SETUP),
  })
  assert.equal(returned.code, 0, returned.stderr)
  assert.equal(readFileSync(join(back, 'data', 'secret'), 'utf8'), readFileSync(install.secretFile, 'utf8'))
  assert.equal(statSync(join(back, 'data', 'secret')).mode & 0o777, 0o600)
  assert.ok(!(await settingsNames(backUrl)).includes('session_secret'), 'no copy of the secret in the file')
  const again = await startServer(t, { databaseUrl: backUrl, env: DEFAULT_SETUP })
  assert.equal(await loggedIn(again.url, install.cookie), true, 'still the same session')
  await stop(again)
})

test('a dump loaded elsewhere: the server refuses to start without the secret, in one line; with it, sessions and webhooks work', async (t) => {
  const install = await defaultInstall()
  const file = join(install.dir, 'all.ndjson')
  const dumped = await runCli(t, ['dump', '--out', file], { env: processEnv(install.url, DEFAULT_SETUP) })
  assert.equal(dumped.code, 0, dumped.stderr)
  assert.match(dumped.stderr, /^keep the secret .*data\/secret with .*all\.ndjson, stored apart from it/m)
  const secret = readFileSync(install.secretFile, 'utf8').trim()
  assert.ok(!readFileSync(file, 'utf8').includes(secret), 'the dump does not hold the secret')

  const target = await freshDatabaseUrl(t)
  const loaded = await runCli(t, ['load', file], { env: processEnv(target, DEFAULT_SETUP) })
  assert.equal(loaded.code, 0, loaded.stderr)
  assert.match(
    loaded.stderr,
    /^note: the dump holds no secret, and the database holds data sealed with a secret/m,
  )

  await assertRefused(t, target, DEFAULT_SETUP)
  // The refusal made no new secret, neither beside the file nor in the database.
  const where = parseDatabaseUrl(target)
  if (where.dialect === 'sqlite')
    assert.ok(!existsSync(join(dirname(where.path), 'secret')), 'no secret file')
  assert.ok(!(await settingsNames(target)).includes('session_secret'), 'no secret generated on refusal')

  const server = await startServer(t, {
    databaseUrl: target,
    env: { ...DEFAULT_SETUP, SHIPLOG_SECRET: secret },
  })
  assert.equal(await loggedIn(server.url, install.cookie), true, 'the session from before the dump is valid')
  await assertDelivers(server, install, 'after-load')
  await stop(server)
})

test('read-only commands on a backup file create no secret; doctor passes on the default set-up and says where the secret is', async (t) => {
  const install = await defaultInstall()
  const doctor = await runCli(t, ['doctor'], { env: processEnv(install.url, DEFAULT_SETUP) })
  assert.equal(doctor.code, 0, doctor.stdout)
  assert.match(
    doctor.stdout,
    /^ok +secret +kept in .*data\/secret \(mode 600\); it opens what the database holds/m,
  )
  assert.doesNotMatch(doctor.stdout, /^warn/m, 'no warning on the default set-up')

  const backups = mkdtempSync(join(tmpdir(), 'shiplog-secret-backup-'))
  t.after(() => rmSync(backups, { recursive: true, force: true }))
  const backup = join(backups, 'shiplog.db')
  const made = await runCli(t, ['backup', '--out', backup], { env: processEnv(install.url, DEFAULT_SETUP) })
  assert.equal(made.code, 0, made.stderr)
  assert.match(made.stderr, /^keep the secret .*data\/secret with .*shiplog\.db, stored apart from it/m)

  const env = processEnv(`sqlite:${backup}`, DEFAULT_SETUP)
  for (const args of [
    ['verify'],
    ['keys', 'list', '--account', 'Acme'],
    ['webhooks', 'list', '--account', 'Acme'],
    ['dump', '--out', join(backups, 'backup.ndjson')],
    ['retention', 'show'],
  ]) {
    const res = await runCli(t, args, { env })
    assert.equal(res.code, 0, `${args.join(' ')}: ${res.stderr}`)
    assert.ok(!existsSync(join(backups, 'secret')), `shiplog ${args.join(' ')} created no secret`)
  }
  // Doctor on the backup alone: the secret is missing for what it holds, and it says so.
  const lonely = await runCli(t, ['doctor'], { env })
  assert.equal(lonely.code, 1, lonely.stdout)
  assert.match(
    lonely.stdout,
    /^FAIL secret +the database holds data sealed with a secret this installation does not have/m,
  )
  assert.ok(!existsSync(join(backups, 'secret')), 'doctor created no secret')

  // A secret others can read is the one thing to warn about.
  chmodSync(install.secretFile, 0o644)
  t.after(() => chmodSync(install.secretFile, 0o600))
  const loose = await runCli(t, ['doctor'], { env: processEnv(install.url, DEFAULT_SETUP) })
  assert.equal(loose.code, 0, loose.stdout)
  assert.match(loose.stdout, /^warn secret +.*data\/secret can be read by others \(mode 644\) → chmod 600/m)
})
