// The real `shiplog-deploy` process against a real `shiplog serve` (SPEC §4): exit codes, encoding, retries under one Idempotency-Key, and the key never printed.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { before, test } from 'node:test'
import { parseDatabaseUrl } from '../../src/config.js'
import { type Database, openDatabase } from '../../src/db/connect.js'
import type { EventRow } from '../../src/db/schema.js'
import { findAccountByName } from '../../src/domain/accounts.js'
import { type Cleanup, freshDatabaseUrl } from '../helper.js'
import {
  type FlakyProxy,
  type ProxyAction,
  problemAnswer,
  scripted,
  startFlakyProxy,
} from '../support/flaky-proxy.js'
import {
  assertBuilt,
  fileScope,
  freePort,
  processEnv,
  REPO_ROOT,
  runCli,
  type ServerProcess,
  startServer,
  withTimeout,
} from '../support/processes.js'

const DEPLOY_BIN = join(REPO_ROOT, 'bin', 'shiplog-deploy.js')
/** A run of the wrapper that takes longer than this is killed and fails the test. */
const RUN_TIMEOUT_MS = 45_000
const TEST_TIMEOUT = { timeout: 90_000 }
const PACKAGE_VERSION = (
  JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string }
).version

// ---------------------------------------------------------------------------------------------
// One server, one database and one key for the whole file; every test uses its own service name.

/** Clean-up for what lives as long as the file (server, database). */
const suite = fileScope()

interface Fixture {
  server: ServerProcess
  database: Database
  accountId: number
  /** Created with `shiplog keys create`, named "ci". */
  key: string
}

let fixture: Fixture | undefined

function fx(): Fixture {
  if (!fixture) throw new Error('the shared server did not start (see the before hook)')
  return fixture
}

before(
  async () => {
    assertBuilt()
    const databaseUrl = await freshDatabaseUrl(suite)
    const env = processEnv(databaseUrl)
    const users = await runCli(
      suite,
      ['users', 'create', '--account', 'Acme', '--email', 'ops@acme.test', '--password-stdin'],
      { env, stdin: 'correct horse battery staple\n' },
    )
    assert.equal(users.code, 0, `users create: ${users.stderr}`)
    const keys = await runCli(suite, ['keys', 'create', '--account', 'Acme', '--name', 'ci'], { env })
    assert.equal(keys.code, 0, `keys create: ${keys.stderr}`)
    const key = keys.stdout.trim()
    assert.match(key, /^shl_[0-9A-Za-z]{32,}$/)
    const server = await startServer(suite, { databaseUrl })
    const database = openDatabase(parseDatabaseUrl(databaseUrl))
    suite.after(() => database.close())
    const account = await findAccountByName(database.db, 'Acme')
    if (!account) throw new Error('users create did not create the account Acme')
    fixture = { server, database, accountId: account.id, key }
  },
  { timeout: 120_000 },
)

// ---------------------------------------------------------------------------------------------
// Running the wrapper.

interface DeployRun {
  code: number | null
  signal: NodeJS.Signals | null
  stdout: string
  stderr: string
  /** Wall-clock milliseconds from spawn to exit. */
  elapsedMs: number
  /** performance.now() when the process had exited. */
  exitedAt: number
}

function describeRun(run: DeployRun): string {
  return `exit ${run.code} (signal ${run.signal}) after ${Math.round(run.elapsedMs)} ms; stdout: ${JSON.stringify(run.stdout)}; stderr: ${JSON.stringify(run.stderr)}`
}

/**
 * The key, or any 12 characters of its secret part, must not appear in the output: not whole, not
 * cut short, whatever went wrong.
 */
function assertKeyNotPrinted(run: DeployRun, key: string): void {
  const output = `${run.stdout}\n${run.stderr}`
  assert.ok(!output.includes(key), `the key was printed: ${describeRun(run)}`)
  const secret = key.startsWith('shl_') ? key.slice(4) : key
  for (let i = 0; i + 12 <= secret.length; i++) {
    const piece = secret.slice(i, i + 12)
    assert.ok(!output.includes(piece), `part of the key (${piece}) was printed: ${describeRun(run)}`)
  }
}

interface DeployOptions {
  /** Everything after `shiplog-deploy`. */
  args: string[]
  /** The key given in args (or meant to stay secret anyway): checked absent from the output. */
  key: string
  /** SHIPLOG_URL, unless null (then unset). */
  serverUrl: string | null
  env?: Record<string, string>
}

/**
 * Runs `node bin/shiplog-deploy.js ARGS…` with only a minimal environment (PATH, HOME, … plus what
 * is given: nothing of the developer's or CI's GITHUB_* leaks in), to completion, and checks on
 * every run that the key was not printed.
 */
async function deploy(t: Cleanup, options: DeployOptions): Promise<DeployRun> {
  assertBuilt()
  const extra: Record<string, string> = { ...options.env }
  if (options.serverUrl !== null) extra.SHIPLOG_URL = options.serverUrl
  const started = performance.now()
  const child = spawn(process.execPath, [DEPLOY_BIN, ...options.args], {
    cwd: REPO_ROOT,
    env: processEnv(undefined, extra),
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  t.after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  })
  let stdout = ''
  let stderr = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk
  })
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk
  })
  const closed = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve, reject) => {
    child.once('error', reject)
    child.once('close', (code, signal) => resolve({ code, signal }))
  })
  let status: { code: number | null; signal: NodeJS.Signals | null }
  try {
    status = await withTimeout(closed, RUN_TIMEOUT_MS, 'shiplog-deploy did not finish')
  } catch (err) {
    child.kill('SIGKILL')
    throw new Error(`${(err as Error).message}; stdout: ${stdout} stderr: ${stderr}`)
  }
  const exitedAt = performance.now()
  const run: DeployRun = { ...status, stdout, stderr, elapsedMs: exitedAt - started, exitedAt }
  assertKeyNotPrinted(run, options.key)
  return run
}

/** The usual five arguments with the shared key. */
function fiveArgs(app: string, env: string, version: string, status: string): string[] {
  return [fx().key, app, env, version, status]
}

function assertRecorded(run: DeployRun): void {
  assert.equal(run.code, 0, describeRun(run))
  assert.equal(run.signal, null, describeRun(run))
  assert.match(run.stdout, /^[^\n]*\S[^\n]*\n$/, `exactly one line on stdout: ${describeRun(run)}`)
}

function assertUsageError(run: DeployRun): void {
  assert.equal(run.code, 2, describeRun(run))
  assert.equal(run.stdout, '', describeRun(run))
  assert.match(run.stderr, /--help/, `a hint towards --help on stderr: ${describeRun(run)}`)
}

/** A service name no other test uses, so rows can be told apart on the shared database. */
function uniqueService(label: string): string {
  return `${label}-${randomBytes(4).toString('hex')}`
}

async function eventsOf(service: string): Promise<EventRow[]> {
  const { database, accountId } = fx()
  return database.db
    .selectFrom('events')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('service', '=', service)
    .orderBy('id')
    .execute()
}

async function onlyEventOf(service: string): Promise<EventRow> {
  const rows = await eventsOf(service)
  assert.equal(rows.length, 1, `exactly one stored event for ${service}: ${JSON.stringify(rows)}`)
  const [row] = rows
  if (!row) throw new Error('unreachable')
  return row
}

/** A well-formed key that the server has never issued. */
function unknownKey(): string {
  const alphabet = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'
  return `shl_${Array.from(randomBytes(40), (byte) => alphabet[byte % alphabet.length]).join('')}`
}

/** The Idempotency-Key of every request the proxy saw: present, and the same on each. */
function assertOneIdempotencyKey(proxy: FlakyProxy): void {
  const keys = proxy.requests.map((r) => r.headers['idempotency-key'])
  const first = keys[0]
  assert.ok(typeof first === 'string' && first.length > 0, `an Idempotency-Key is sent: ${keys}`)
  for (const k of keys) assert.equal(k, first, `every attempt reuses the Idempotency-Key: ${keys}`)
}

// ---------------------------------------------------------------------------------------------
// Success and encoding.

test(
  'records one event: exit 0, one line on stdout, nothing on stderr, stored with source deploy',
  TEST_TIMEOUT,
  async (t) => {
    const service = uniqueService('billing')
    const run = await deploy(t, {
      args: fiveArgs(service, 'Prod', '1.0.3', 'Deployed'),
      key: fx().key,
      serverUrl: fx().server.url,
    })
    assertRecorded(run)
    assert.equal(run.stderr, '', describeRun(run))
    const row = await onlyEventOf(service)
    assert.equal(row.environment, 'Prod')
    assert.equal(row.version, '1.0.3')
    assert.equal(row.status, 'Deployed')
    assert.equal(row.source, 'deploy')
    assert.equal(row.api_key_name, 'ci')
    // Without options or CI variables, the optional fields stay empty.
    assert.equal(row.url, null)
    assert.equal(row.commit_sha, null)
    assert.equal(row.description, null)
    assert.equal(row.deployer, null)
  },
)

test('SHIPLOG_URL with a trailing slash or a path prefix is joined correctly', TEST_TIMEOUT, async (t) => {
  const service = uniqueService('slash')
  const run = await deploy(t, {
    args: fiveArgs(service, 'Prod', '2.0.0', 'deploying'),
    key: fx().key,
    serverUrl: `${fx().server.url}/`,
  })
  assertRecorded(run)
  const row = await onlyEventOf(service)
  assert.equal(row.status, 'Deploying', 'the status is stored in its canonical spelling')

  // Behind a reverse proxy under a path: the request goes to PREFIX/deploy. (The proxy answers a
  // 201 itself, since the real server lives at the root.)
  const stored = { id: 1, service, environment: 'Prod', version: '2.0.0', status: 'Deploying' }
  const proxy = await startFlakyProxy(t, fx().server.url, () => ({
    kind: 'answer',
    status: 201,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(stored),
  }))
  for (const prefix of ['/shiplog', '/shiplog/']) {
    const prefixed = await deploy(t, {
      args: fiveArgs(service, 'Prod', '2.0.0', 'Deploying'),
      key: fx().key,
      serverUrl: `${proxy.url}${prefix}`,
    })
    assertRecorded(prefixed)
  }
  assert.deepEqual(
    proxy.requests.map((r) => `${r.method} ${r.path}`),
    ['POST /shiplog/deploy', 'POST /shiplog/deploy'],
  )
})

test('values with spaces, +, :, /, &, = and unicode arrive unchanged', TEST_TIMEOUT, async (t) => {
  const values = ['My App', '1.0.0+build.5', 'master:4d0r98wa', 'feature/a&b=c', 'Déploiement ✓']
  for (const value of values) {
    // Every field at once: app, env and version all carry the value.
    const run = await deploy(t, {
      args: fiveArgs(value, value, value, 'Deployed'),
      key: fx().key,
      serverUrl: fx().server.url,
    })
    assertRecorded(run)
    const row = await onlyEventOf(value)
    assert.equal(row.service, value)
    assert.equal(row.environment, value)
    assert.equal(row.version, value)
    assert.equal(row.source, 'deploy')
  }
})

test(
  "--at and --commit-time send the event's own times; a bad one is rejected (exit 3) naming the field",
  TEST_TIMEOUT,
  async (t) => {
    const run = await deploy(t, {
      args: [
        '--at',
        '2026-01-10T12:30:00+02:00',
        '--commit-time',
        '2026-01-10T09:15:00',
        ...fiveArgs('at-app', 'Prod', '1.0', 'Deployed'),
      ],
      key: fx().key,
      serverUrl: fx().server.url,
    })
    assertRecorded(run)
    const row = await onlyEventOf('at-app')
    assert.equal(Number(row.occurred_at), Date.UTC(2026, 0, 10, 10, 30))
    assert.equal(Number(row.commit_time), Date.UTC(2026, 0, 10, 9, 15))
    assert.ok(Number(row.received_at) > Number(row.occurred_at), 'received_at stays the arrival')
    // The same from the variables action.yml sets.
    const fromEnv = await deploy(t, {
      args: fiveArgs('at-env', 'Prod', '1.0', 'Deployed'),
      key: fx().key,
      serverUrl: fx().server.url,
      env: { SHIPLOG_DEPLOY_AT: '2026-02-01T00:00:00Z' },
    })
    assertRecorded(fromEnv)
    assert.equal(Number((await onlyEventOf('at-env')).occurred_at), Date.UTC(2026, 1, 1))
    const bad = await deploy(t, {
      args: ['--at', 'tomorrow', ...fiveArgs('at-bad', 'Prod', '1.0', 'Deployed')],
      key: fx().key,
      serverUrl: fx().server.url,
    })
    assert.equal(bad.code, 3, describeRun(bad))
    assert.match(bad.stderr, /occurred_at/)
    assert.deepEqual(await eventsOf('at-bad'), [])
    const help = await deploy(t, { args: ['--help'], key: fx().key, serverUrl: null })
    assert.match(help.stdout, /--at TIME/)
    assert.match(help.stdout, /--commit-time TIME/)
  },
)

// ---------------------------------------------------------------------------------------------
// Usage errors: exit 2, a hint, and nothing sent.

test('usage errors exit 2 with a hint on stderr and send nothing', TEST_TIMEOUT, async (t) => {
  const proxy = await startFlakyProxy(t, fx().server.url)
  const key = fx().key
  const cases: Array<{ name: string; args: string[]; serverUrl: string | null; stderr?: RegExp }> = [
    {
      name: 'four arguments',
      args: [key, 'App1', 'Prod', '1.0.3'],
      serverUrl: proxy.url,
      stderr: /5 arguments/,
    },
    {
      name: 'six arguments',
      args: [key, 'App1', 'Prod', '1.0.3', 'Deployed', 'extra'],
      serverUrl: proxy.url,
      stderr: /5 arguments/,
    },
    { name: 'no arguments', args: [], serverUrl: proxy.url },
    {
      name: 'SHIPLOG_URL unset',
      args: [key, 'App1', 'Prod', '1.0.3', 'Deployed'],
      serverUrl: null,
      stderr: /SHIPLOG_URL/,
    },
    {
      name: 'SHIPLOG_URL not a URL',
      args: [key, 'App1', 'Prod', '1.0.3', 'Deployed'],
      serverUrl: 'shiplog:8080x',
    },
    {
      name: 'unknown option',
      args: ['--bogus', key, 'App1', 'Prod', '1.0.3', 'Deployed'],
      serverUrl: proxy.url,
      stderr: /option/,
    },
    {
      // A likely slip: the key passed as an option. parseArgs would quote it; the wrapper must not.
      name: 'unknown option carrying the key',
      args: [`--api-key=${key}`, 'App1', 'Prod', '1.0.3', 'Deployed'],
      serverUrl: proxy.url,
      stderr: /option/,
    },
    {
      name: 'option without its value',
      args: [key, 'App1', 'Prod', '1.0.3', 'Deployed', '--url'],
      serverUrl: proxy.url,
    },
  ]
  for (const c of cases) {
    const run = await deploy(t, { args: c.args, key, serverUrl: c.serverUrl })
    assertUsageError(run)
    if (c.stderr) assert.match(run.stderr, c.stderr, `${c.name}: ${describeRun(run)}`)
  }
  assert.equal(proxy.requests.length, 0, 'a usage error sends no request')
})

test('SHIPLOG_TIMEOUT that is not a positive number of seconds is a usage error', TEST_TIMEOUT, async (t) => {
  for (const timeout of ['0', '-1', 'soon', '99999']) {
    const run = await deploy(t, {
      args: fiveArgs(uniqueService('timeout'), 'Prod', '1', 'Deployed'),
      key: fx().key,
      serverUrl: fx().server.url,
      env: { SHIPLOG_TIMEOUT: timeout },
    })
    assertUsageError(run)
    assert.match(run.stderr, /SHIPLOG_TIMEOUT/)
  }
})

// ---------------------------------------------------------------------------------------------
// Rejections: exit 3, the server's message shown.

test('a status the server refuses exits 3 and shows the server’s 422 message', TEST_TIMEOUT, async (t) => {
  const service = uniqueService('badstatus')
  // What the server says about this body, asked directly (with no Idempotency-Key, so nothing is
  // remembered; the status makes it fail validation anyway).
  const direct = await fetch(`${fx().server.url}/deploy`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': fx().key },
    body: JSON.stringify({ service, environment: 'Prod', version: '1.0.3', status: 'Shipped' }),
    signal: AbortSignal.timeout(10_000),
  })
  assert.equal(direct.status, 422)
  const problem = (await direct.json()) as { detail?: string; errors?: Array<{ message?: string }> }
  const messages = (problem.errors ?? []).map((e) => e.message).filter((m): m is string => !!m)
  assert.ok(messages.length > 0, `the server lists what is wrong: ${JSON.stringify(problem)}`)

  const run = await deploy(t, {
    args: fiveArgs(service, 'Prod', '1.0.3', 'Shipped'),
    key: fx().key,
    serverUrl: fx().server.url,
  })
  assert.equal(run.code, 3, describeRun(run))
  assert.equal(run.stdout, '', describeRun(run))
  assert.match(run.stderr, /422/, describeRun(run))
  for (const message of messages) {
    // Once: the detail of a one-field problem is that field's message, and it is not listed again.
    assert.equal(
      run.stderr.split(message).length - 1,
      1,
      `stderr shows "${message}" exactly once: ${describeRun(run)}`,
    )
  }
  assert.match(run.stderr, /Deploying/, `the allowed values reach the user: ${describeRun(run)}`)
  assert.deepEqual(await eventsOf(service), [])
})

test('several refused fields are each listed once under the server’s summary', TEST_TIMEOUT, async (t) => {
  const service = uniqueService('badfields')
  const run = await deploy(t, {
    args: fiveArgs(service, 'x'.repeat(101), '1.0.3', 'Shipped'),
    key: fx().key,
    serverUrl: fx().server.url,
  })
  assert.equal(run.code, 3, describeRun(run))
  const lines = run.stderr.trimEnd().split('\n')
  assert.match(lines[0] ?? '', /HTTP 422\): 2 fields are invalid\.$/, describeRun(run))
  assert.equal(lines.length, 3, describeRun(run))
  assert.match(lines[1] ?? '', /^ {2}- environment must be at most 100 characters$/, describeRun(run))
  assert.match(lines[2] ?? '', /^ {2}- status must be one of/, describeRun(run))
  assert.deepEqual(await eventsOf(service), [])
})

test(
  'the success line shows the event as stored (trimmed, canonical status), not as typed',
  TEST_TIMEOUT,
  async (t) => {
    const service = uniqueService('echo')
    const run = await deploy(t, {
      args: fiveArgs(`  ${service} `, ' Prod ', ' 1.0.3 ', 'deployed'),
      key: fx().key,
      serverUrl: fx().server.url,
    })
    assertRecorded(run)
    const row = await onlyEventOf(service)
    assert.equal(row.status, 'Deployed')
    assert.equal(run.stdout, `recorded event ${row.id}: ${service} 1.0.3 Deployed in Prod\n`)
  },
)

test(
  'a key the server does not know exits 3 with the 401, once, and the key is not printed',
  TEST_TIMEOUT,
  async (t) => {
    const service = uniqueService('badkey')
    const key = unknownKey()
    const proxy = await startFlakyProxy(t, fx().server.url)
    const run = await deploy(t, {
      args: [key, service, 'Prod', '1.0.3', 'Deployed'],
      key,
      serverUrl: proxy.url,
    })
    assert.equal(run.code, 3, describeRun(run))
    assert.equal(run.stdout, '', describeRun(run))
    assert.match(run.stderr, /401/, describeRun(run))
    assert.equal(proxy.requests.length, 1, 'a 4xx is not retried')
    assert.equal(proxy.requests[0]?.upstream?.status, 401)
    assert.deepEqual(await eventsOf(service), [])
  },
)

test('a key that cannot be sent as a header is refused as a usage error and never printed', {
  ...TEST_TIMEOUT,
}, async (t) => {
  // A secret pasted with a line break inside it.
  const key = `${unknownKey()}\n${unknownKey().slice(4)}`
  const run = await deploy(t, {
    args: [key, uniqueService('newline'), 'Prod', '1', 'Deployed'],
    key,
    serverUrl: fx().server.url,
    env: { SHIPLOG_TIMEOUT: '2' },
  })
  // assertKeyNotPrinted (inside deploy) already failed if the key was echoed.
  assert.equal(run.code, 2, describeRun(run))
})

// ---------------------------------------------------------------------------------------------
// Retries: 5xx, lost answers and 429, always under one Idempotency-Key.

test(
  'two 503 answers with Retry-After: 0, then success: exit 0 and exactly one stored event',
  TEST_TIMEOUT,
  async (t) => {
    const service = uniqueService('flaky503')
    const unavailable = problemAnswer(503, 'Service Unavailable', { 'retry-after': '0' })
    const proxy = await startFlakyProxy(t, fx().server.url, scripted([unavailable, unavailable]))
    const run = await deploy(t, {
      args: fiveArgs(service, 'Prod', '1.0.3', 'Deployed'),
      key: fx().key,
      serverUrl: proxy.url,
    })
    assertRecorded(run)
    assert.deepEqual(
      proxy.requests.map((r) => [r.method, r.path, r.action]),
      [
        ['POST', '/deploy', 'answer'],
        ['POST', '/deploy', 'answer'],
        ['POST', '/deploy', 'forward'],
      ],
    )
    assertOneIdempotencyKey(proxy)
    assert.equal(proxy.requests[2]?.upstream?.status, 201)
    await onlyEventOf(service)
  },
)

for (const loss of ['the connection is dropped', 'a 502 comes back'] as const) {
  test(
    `the server stores the event but ${loss}: the retry replays it, one stored event`,
    TEST_TIMEOUT,
    async (t) => {
      const service = uniqueService('lost')
      const first =
        loss === 'the connection is dropped'
          ? ({ kind: 'forward-then-drop' } as const)
          : badGatewayAfterForward()
      const proxy = await startFlakyProxy(t, fx().server.url, scripted([first]))
      const run = await deploy(t, {
        args: fiveArgs(service, 'Prod', '1.0.3', 'Deployed'),
        key: fx().key,
        serverUrl: proxy.url,
      })
      assertRecorded(run)
      assert.equal(proxy.requests.length, 2, `one lost answer, one retry: ${describeRun(run)}`)
      assertOneIdempotencyKey(proxy)
      const [lost, retry] = proxy.requests
      assert.equal(lost?.upstream?.status, 201, 'the first attempt was stored by the server')
      assert.equal(retry?.upstream?.status, 200, 'the retry is answered from the idempotency record')
      assert.equal(retry?.upstream?.headers['idempotent-replayed'], 'true')
      await onlyEventOf(service)
    },
  )
}

/** What a load balancer says when it loses the server's answer: an HTML 502. */
function badGatewayAfterForward(): ProxyAction {
  return {
    kind: 'forward-then-answer',
    status: 502,
    headers: { 'content-type': 'text/html' },
    body: '<html><body><h1>502 Bad Gateway</h1></body></html>',
  }
}

test(
  '429 with Retry-After: 1 is honoured: the next attempt comes at least a second later',
  TEST_TIMEOUT,
  async (t) => {
    const service = uniqueService('limited')
    const limited = problemAnswer(429, 'Too Many Requests', {
      'retry-after': '1',
      'ratelimit-limit': '600',
      'ratelimit-remaining': '0',
      'ratelimit-reset': '1',
    })
    const proxy = await startFlakyProxy(t, fx().server.url, scripted([limited]))
    const run = await deploy(t, {
      args: fiveArgs(service, 'Prod', '1.0.3', 'Deployed'),
      key: fx().key,
      serverUrl: proxy.url,
    })
    assertRecorded(run)
    const [refused, retried] = proxy.requests
    assert.equal(proxy.requests.length, 2)
    if (!refused || !retried) throw new Error('unreachable')
    const gap = retried.at - refused.at
    // The 429 leaves the proxy right after `refused.at`; the wrapper then waits ≥ 1000 ms. A few ms
    // of slack for timer granularity; the upper bound only says it did not wait for something else.
    assert.ok(gap >= 980, `the retry came ${Math.round(gap)} ms after the 429`)
    assert.ok(gap < 10_000, `the retry came ${Math.round(gap)} ms after the 429`)
    assertOneIdempotencyKey(proxy)
    await onlyEventOf(service)
  },
)

// ---------------------------------------------------------------------------------------------
// Unreachable.

/** Ports fetch refuses to connect to (WHATWG Fetch "bad port"); a test must not pick one. */
const FETCH_BAD_PORTS = new Set([
  1, 7, 9, 11, 13, 15, 17, 19, 20, 21, 22, 23, 25, 37, 42, 43, 53, 69, 77, 79, 87, 95, 101, 102, 103, 104,
  109, 110, 111, 113, 115, 117, 119, 123, 135, 137, 139, 143, 161, 179, 389, 427, 465, 512, 513, 514, 515,
  526, 530, 531, 532, 540, 548, 554, 556, 563, 587, 601, 636, 989, 990, 993, 995, 1719, 1720, 1723, 2049,
  3659, 4045, 4190, 5060, 5061, 6000, 6566, 6665, 6666, 6667, 6668, 6669, 6679, 6697, 10080,
])

/** A port on 127.0.0.1 that nothing listens on (it was free a moment ago and is not bound again). */
async function closedPort(): Promise<number> {
  for (;;) {
    const port = await freePort()
    if (!FETCH_BAD_PORTS.has(port)) return port
  }
}

test('an unreachable server with SHIPLOG_TIMEOUT=3 exits 4 within a few seconds', TEST_TIMEOUT, async (t) => {
  const port = await closedPort()
  const run = await deploy(t, {
    args: fiveArgs(uniqueService('unreachable'), 'Prod', '1.0.3', 'Deployed'),
    key: fx().key,
    serverUrl: `http://127.0.0.1:${port}`,
    env: { SHIPLOG_TIMEOUT: '3' },
  })
  assert.equal(run.code, 4, describeRun(run))
  assert.equal(run.stdout, '', describeRun(run))
  assert.match(
    run.stderr,
    new RegExp(`127\\.0\\.0\\.1:${port}`),
    `stderr names the server: ${describeRun(run)}`,
  )
  assert.match(run.stderr, /ECONNREFUSED/, `stderr says why: ${describeRun(run)}`)
  // 3 s of retrying plus process start-up on a slow, shared machine.
  assert.ok(run.elapsedMs < 7_000, describeRun(run))
})

test('a server that keeps failing is retried for the whole SHIPLOG_TIMEOUT before exit 4', {
  ...TEST_TIMEOUT,
}, async (t) => {
  // Every attempt gets a 503 at once, so the attempts show when the wrapper tried and when it gave up.
  const proxy = await startFlakyProxy(t, fx().server.url, () => problemAnswer(503, 'Service Unavailable'))
  const run = await deploy(t, {
    args: fiveArgs(uniqueService('patience'), 'Prod', '1.0.3', 'Deployed'),
    key: fx().key,
    serverUrl: proxy.url,
    env: { SHIPLOG_TIMEOUT: '3' },
  })
  assert.equal(run.code, 4, describeRun(run))
  const first = proxy.requests[0]
  if (!first) throw new Error('the wrapper sent nothing')
  // The deadline starts when the wrapper starts, a little before its first attempt reaches the
  // proxy (connecting takes a moment, more on a busy machine). A wrapper that keeps trying until the
  // deadline exits about 3000 ms after the first attempt; one that gave up early (after its
  // backoff schedule, say) exits well before. 500 ms of slack for that first connection: 300 ms
  // were once 1 ms short while the whole suite ran on both cores.
  const tried = run.exitedAt - first.at
  assert.ok(
    tried >= 2_500,
    `gave up ${Math.round(tried)} ms after the first attempt, with a 3 s budget (attempts at ${proxy.requests
      .map((r) => Math.round(r.at - first.at))
      .join(', ')} ms)`,
  )
  assert.ok(run.elapsedMs < 7_000, describeRun(run))
})

// ---------------------------------------------------------------------------------------------
// --help, --version.

test('--help exits 0 and explains the five arguments and the exit codes', TEST_TIMEOUT, async (t) => {
  for (const flag of ['--help', '-h']) {
    // No SHIPLOG_URL: help needs no server.
    const run = await deploy(t, { args: [flag], key: fx().key, serverUrl: null })
    assert.equal(run.code, 0, describeRun(run))
    assert.equal(run.stderr, '', describeRun(run))
    assert.match(run.stdout, /<API_KEY>\s+<app>\s+<env>\s+<version>\s+<status>/)
    for (const word of [
      'API_KEY',
      'app',
      'env',
      'version',
      'status',
      'SHIPLOG_URL',
      'Deploying',
      'Deployed',
      'Failed',
    ]) {
      assert.ok(run.stdout.includes(word), `--help mentions ${word}`)
    }
    assert.match(run.stdout, /exit codes/i)
    assert.match(run.stdout, /\b0 recorded\b/)
    assert.match(run.stdout, /\b2 usage error\b/)
    assert.match(run.stdout, /\b3 rejected\b/)
    assert.match(run.stdout, /\b4 server unreachable\b/)
  }
})

test('--version prints the version from package.json', TEST_TIMEOUT, async (t) => {
  for (const flag of ['--version', '-v']) {
    const run = await deploy(t, { args: [flag], key: fx().key, serverUrl: null })
    assert.equal(run.code, 0, describeRun(run))
    assert.equal(run.stdout, `${PACKAGE_VERSION}\n`)
    assert.equal(run.stderr, '')
  }
})

// ---------------------------------------------------------------------------------------------
// Optional fields: GitHub Actions and flags.

const GITHUB_ENV = {
  GITHUB_ACTIONS: 'true',
  GITHUB_SHA: '4d0r98wa1c2b3a4d5e6f708192a3b4c5d6e7f809',
  GITHUB_SERVER_URL: 'https://github.example.com',
  GITHUB_REPOSITORY: 'acme/shop',
  GITHUB_RUN_ID: '9876543210',
  GITHUB_ACTOR: 'octocat',
}

test('on GitHub Actions the run page and GITHUB_SHA fill url and commit', TEST_TIMEOUT, async (t) => {
  const service = uniqueService('gha')
  const run = await deploy(t, {
    args: fiveArgs(service, 'Prod', '1.0.3', 'Deployed'),
    key: fx().key,
    serverUrl: fx().server.url,
    env: GITHUB_ENV,
  })
  assertRecorded(run)
  const row = await onlyEventOf(service)
  assert.equal(row.url, 'https://github.example.com/acme/shop/actions/runs/9876543210')
  assert.equal(row.commit_sha, GITHUB_ENV.GITHUB_SHA)
  assert.equal(row.deployer, 'octocat')
  assert.equal(row.description, null)
})

test('GITHUB_* variables are ignored unless GITHUB_ACTIONS=true', TEST_TIMEOUT, async (t) => {
  const service = uniqueService('not-gha')
  const { GITHUB_ACTIONS: _ignored, ...rest } = GITHUB_ENV
  const run = await deploy(t, {
    args: fiveArgs(service, 'Prod', '1.0.3', 'Deployed'),
    key: fx().key,
    serverUrl: fx().server.url,
    env: rest,
  })
  assertRecorded(run)
  const row = await onlyEventOf(service)
  assert.equal(row.url, null)
  assert.equal(row.commit_sha, null)
  assert.equal(row.deployer, null)
})

test(
  '--url, --commit, --description and --deployer map to the optional fields and win over CI defaults',
  TEST_TIMEOUT,
  async (t) => {
    const service = uniqueService('flags')
    const description = 'Rolled out by the test: 50% → 100%, "quoted" & <b>bold</b>'
    const run = await deploy(t, {
      args: [
        '--url',
        'https://ci.example.com/builds/7?tab=log&x=1',
        '--commit=abc1234',
        ...fiveArgs(service, 'Prod', '1.0.3', 'Deployed'),
        '--description',
        description,
        '--deployer',
        'Zoë',
      ],
      key: fx().key,
      serverUrl: fx().server.url,
      env: GITHUB_ENV,
    })
    assertRecorded(run)
    const row = await onlyEventOf(service)
    assert.equal(row.url, 'https://ci.example.com/builds/7?tab=log&x=1')
    assert.equal(row.commit_sha, 'abc1234')
    assert.equal(row.description, description)
    assert.equal(row.deployer, 'Zoë')
    assert.equal(row.version, '1.0.3')
  },
)

// ---------------------------------------------------------------------------------------------
// The original image's script (README, "Switching from the original image"): it pastes the five
// arguments into a GET /put URL without encoding them and runs curl without -f. Shiplog cannot
// repair what such a URL loses; these are the outcomes the README documents, value by value.

/** The original wrapper's request, as the review reproduced it: curl on an unencoded URL. */
const ORIGINAL_SCRIPT = 'curl -s -H "X-API-Key: $1" "$SHIPLOG_URL/put?app=$2&env=$3&version=$4&status=$5"'

async function originalScript(
  t: Cleanup,
  args: [string, string, string, string],
): Promise<{ code: number | null; stdout: string }> {
  const child = spawn('sh', ['-c', ORIGINAL_SCRIPT, 'original-deploy', fx().key, ...args], {
    env: processEnv(undefined, { SHIPLOG_URL: fx().server.url }),
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  t.after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  })
  let stdout = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk
  })
  child.stderr.resume()
  const code = await withTimeout(
    new Promise<number | null>((resolve, reject) => {
      child.once('error', reject)
      child.once('close', (exitCode) => resolve(exitCode))
    }),
    RUN_TIMEOUT_MS,
    'the original script did not finish',
  )
  return { code, stdout }
}

test('the original image’s unencoded URL: what arrives intact, what is changed, what is lost (as the README says)', {
  ...TEST_TIMEOUT,
}, async (t) => {
  const cases: Array<{
    version: string
    /** What the database holds afterwards: the version as stored, or null for nothing. */
    stored: string | null
    /** The script's exit code: curl's, so 0 even when the server refused. */
    code: number
    answer?: RegExp
  }> = [
    // Letters, digits and - . _ ~ : / = ? @ ! $ ' ( ) * , ; arrive unchanged.
    { version: 'master:4d0r98wa', stored: 'master:4d0r98wa', code: 0 },
    { version: 'release/2026-11_rc.1~a', stored: 'release/2026-11_rc.1~a', code: 0 },
    { version: "v=1?(a),b;c@d!e$f'g*", stored: "v=1?(a),b;c@d!e$f'g*", code: 0 },
    // + means a space in a query string (SPEC §1.1): the server cannot tell it was meant as +.
    { version: '1.0.3+build.7', stored: '1.0.3 build.7', code: 0 },
    // & starts the next parameter: the version is cut there.
    { version: 'R&D', stored: 'R', code: 0 },
    // %XX is decoded; a lone % is refused (400) and the script still exits 0.
    { version: '50%25', stored: '50%', code: 0 },
    { version: '100%', stored: null, code: 0, answer: /"status":400/ },
    // # starts the fragment, which curl does not send: status goes missing, 422, exit 0.
    { version: 'v1#2', stored: null, code: 0, answer: /"status":422/ },
    // Raw UTF-8 in the request line is not HTTP/1.1: 400, exit 0.
    { version: 'Déploiement', stored: null, code: 0, answer: /"status":400/ },
    // curl's own URL rules: {…} and […] are globbing patterns, a space makes the URL invalid.
    { version: '{x}', stored: 'x', code: 0 },
    { version: '[x]', stored: null, code: 3 },
    { version: '1.0 final', stored: null, code: 3 },
  ]
  const report: string[] = []
  for (const c of cases) {
    const service = uniqueService('original')
    const run = await originalScript(t, [service, 'Prod', c.version, 'Deployed'])
    const rows = await eventsOf(service)
    report.push(`${c.version} -> exit ${run.code}, stored ${JSON.stringify(rows.map((r) => r.version))}`)
    assert.equal(run.code, c.code, `${c.version}: exit code; ${run.stdout}`)
    assert.deepEqual(
      rows.map((r) => r.version),
      c.stored === null ? [] : [c.stored],
      `${c.version}: stored; ${run.stdout}`,
    )
    if (c.answer) assert.match(run.stdout, c.answer, `${c.version}: the server's answer`)
  }
  t.diagnostic(report.join('; '))

  // A status the server refuses: 422 on stdout, and the script reports success all the same.
  const service = uniqueService('original-status')
  const refused = await originalScript(t, [service, 'Prod', '1.0.3', 'Shipped'])
  assert.equal(refused.code, 0, 'no curl -f: a 422 still exits 0')
  assert.match(refused.stdout, /"status":422/)
  assert.deepEqual(await eventsOf(service), [])

  // The drop-in image's command, same five arguments, carries every one of them intact.
  for (const c of cases.filter((c) => c.stored !== c.version)) {
    const dropIn = uniqueService('dropin')
    const run = await deploy(t, {
      args: fiveArgs(dropIn, 'Prod', c.version, 'Deployed'),
      key: fx().key,
      serverUrl: fx().server.url,
    })
    assertRecorded(run)
    assert.equal((await onlyEventOf(dropIn)).version, c.version)
  }
})
