// `shiplog webhooks create|list|delete`, and deliveries across real server processes: a SIGKILL
// with deliveries pending loses none and sends none twice; two instances on one database deliver
// each event once. Both databases.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { parseDatabaseUrl } from '../../src/config.js'
import { openDatabase } from '../../src/db/connect.js'
import { databaseForServers, freshDatabaseUrl } from '../helper.js'
import { processEnv, runCli, sleep, startServer } from '../support/processes.js'
import { startReceiver, verifySignature } from '../support/webhook-receiver.js'

const SECRET_LINE = /^whsec_[0-9A-Za-z_-]{32}\n$/
const SERVER_ENV = {
  SHIPLOG_WEBHOOK_ALLOW_PRIVATE: '1',
  SHIPLOG_WEBHOOK_RETRY_BASE_MS: '50',
  SHIPLOG_WEBHOOK_TIMEOUT_MS: '2000',
  SHIPLOG_RATE_LIMIT: '100000',
}

async function countRows(databaseUrl: string, table: 'webhooks' | 'webhook_deliveries'): Promise<number> {
  const database = openDatabase(parseDatabaseUrl(databaseUrl))
  try {
    const row = await database.db
      .selectFrom(table)
      .select((eb) => eb.fn.countAll<number | string>().as('n'))
      .executeTakeFirstOrThrow()
    return Number(row.n)
  } finally {
    await database.close()
  }
}

test('webhooks create prints the secret once; bad input and internal targets are refused', async (t) => {
  const databaseUrl = await freshDatabaseUrl(t)
  const env = processEnv(databaseUrl)
  const cli = (args: string[], stdin?: string) =>
    runCli(t, args, { env, ...(stdin === undefined ? {} : { stdin }) })
  const made = await cli(
    ['users', 'create', '--account', 'Acme', '--email', 'ada@example.com', '--password-stdin'],
    'correct horse battery staple\n',
  )
  assert.equal(made.code, 0, made.stderr)
  const created = await cli([
    'webhooks',
    'create',
    '--account',
    'Acme',
    '--url',
    'https://hooks.example.com/shiplog',
    '--format',
    'slack',
    '--outcome',
    'succeeded,failed',
    '--environment',
    'prod',
  ])
  assert.equal(created.code, 0, created.stderr)
  assert.match(created.stdout, SECRET_LINE)

  const refusals: [string[], RegExp][] = [
    [
      ['--url', 'http://127.0.0.1:9/x', '--format', 'json', '--status', 'Deployed'],
      /URL refused: 127\.0\.0\.1 is a loopback/,
    ],
    [
      ['--url', 'http://localhost/x', '--format', 'json', '--status', 'Deployed'],
      /URL refused: localhost is a loopback name/,
    ],
    [['--url', 'http://169.254.169.254/latest', '--format', 'json', '--status', 'Deployed'], /URL refused/],
    [['--url', 'http://[::ffff:10.0.0.1]/', '--format', 'json', '--status', 'Deployed'], /URL refused/],
    [['--url', 'http://[fd00:ec2::254]/', '--format', 'json', '--status', 'Deployed'], /URL refused/],
    [['--url', 'http://100.64.0.1/', '--format', 'json', '--status', 'Deployed'], /URL refused/],
    [
      ['--url', 'https://user:pw@hooks.example.com/', '--format', 'json', '--status', 'Deployed'],
      /user name or password/,
    ],
    [
      ['--url', 'ftp://hooks.example.com/', '--format', 'json', '--status', 'Deployed'],
      /http:\/\/ or https:\/\//,
    ],
    [
      ['--url', `https://hooks.example.com/${'a'.repeat(2048)}`, '--format', 'json', '--status', 'Deployed'],
      /longer than 2048/,
    ],
    [
      ['--url', 'https://hooks.example.com/', '--format', 'xml', '--status', 'Deployed'],
      /format must be one of/,
    ],
    [
      ['--url', 'https://hooks.example.com/', '--format', 'json'],
      /at least one status or deployment outcome/,
    ],
    [
      ['--url', 'https://hooks.example.com/', '--format', 'json', '--status', 'Done'],
      /status must be one of/,
    ],
    [['--url', 'https://grafana.example.com/', '--format', 'grafana'], /Grafana service account token/],
  ]
  for (const [args, message] of refusals) {
    const refused = await cli(['webhooks', 'create', '--account', 'Acme', ...args])
    assert.equal(refused.code, 2, `${args.join(' ')}: ${refused.stderr}`)
    assert.equal(refused.stdout, '')
    assert.match(refused.stderr, message)
  }
  assert.equal(await countRows(databaseUrl, 'webhooks'), 1, 'nothing refused was stored')

  const list = await cli(['webhooks', 'list', '--account', 'Acme'])
  assert.equal(list.code, 0, list.stderr)
  assert.match(list.stdout, /^ID +FORMAT +URL/)
  assert.match(
    list.stdout,
    /\n1 +slack +https:\/\/hooks\.example\.com\/shiplog +- +succeeded,failed +prod +all +active\n/,
  )
  assert.ok(!list.stdout.includes('whsec_'), 'the secret is never listed')
  // Listed by an installation with another secret (a database moved without its secret): the
  // webhook cannot sign, and the list says so rather than "active", as Settings does (issue 28.1).
  const elsewhere = await runCli(t, ['webhooks', 'list', '--account', 'Acme'], {
    env: { ...env, SHIPLOG_SECRET: 'another-secret-of-at-least-32-characters!!' },
  })
  assert.equal(elsewhere.code, 0, elsewhere.stderr)
  assert.match(elsewhere.stdout, /\n1 +slack +.* +failing: cannot sign \(see README "The secret"\)\n/)
  assert.doesNotMatch(elsewhere.stdout, / active\n/)

  const missing = await cli(['webhooks', 'delete', '--account', 'Acme', '99'])
  assert.equal(missing.code, 1)
  assert.match(missing.stderr, /has no webhook 99/)
  const deleted = await cli(['webhooks', 'delete', '--account', 'Acme', '1'])
  assert.equal(deleted.code, 0, deleted.stderr)
  assert.equal(await countRows(databaseUrl, 'webhooks'), 0)
})

async function post(url: string, key: string, version: string): Promise<void> {
  const res = await fetch(`${url}/deploy`, {
    method: 'POST',
    headers: { 'x-api-key': key, 'content-type': 'application/json' },
    body: JSON.stringify({ service: 'api', environment: 'prod', version, status: 'Deployed' }),
  })
  assert.equal(res.status, 201, await res.text())
}

async function createHook(
  t: Parameters<typeof runCli>[0],
  databaseUrl: string,
  url: string,
): Promise<string> {
  const made = await runCli(
    t,
    ['webhooks', 'create', '--account', 'Acme', '--url', url, '--format', 'json', '--status', 'Deployed'],
    { env: processEnv(databaseUrl, { SHIPLOG_WEBHOOK_ALLOW_PRIVATE: '1' }) },
  )
  assert.equal(made.code, 0, made.stderr)
  return made.stdout.trim()
}

async function waitFor(check: () => boolean, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await sleep(50)
  }
}

test('kill -9 with deliveries pending loses none and duplicates none after the restart', async (t) => {
  const { databaseUrl, key } = await databaseForServers(t)
  let up = false
  const receiver = await startReceiver(t, (_req, res) => {
    res.statusCode = up ? 200 : 503
    res.end()
  })
  const secret = await createHook(t, databaseUrl, `${receiver.url}/hook`)
  const first = await startServer(t, { databaseUrl, env: SERVER_ENV })
  const EVENTS = 20
  for (let i = 0; i < EVENTS; i++) await post(first.url, key, `1.${i}`)
  await waitFor(() => receiver.received.length >= EVENTS, 20_000, 'first attempts')
  first.signal('SIGKILL')
  await first.waitForExit(10_000)
  assert.equal(await countRows(databaseUrl, 'webhook_deliveries'), EVENTS, 'each event queued once')

  up = true
  const answered = receiver.received.length
  const second = await startServer(t, { databaseUrl, env: SERVER_ENV })
  const okIds = () => receiver.received.slice(answered).map((r) => String(r.headers['shiplog-delivery']))
  // Deliveries the killed server had claimed wait for its lease (30 s at least) to run out.
  await waitFor(() => new Set(okIds()).size >= EVENTS, 90_000, 'every delivery after the restart')
  await sleep(500)
  const ids = okIds()
  assert.equal(ids.length, EVENTS, 'no delivery sent twice once it succeeded')
  assert.equal(new Set(ids).size, EVENTS)
  for (const r of receiver.received)
    assert.ok(verifySignature(secret, String(r.headers['shiplog-signature']), r.body))
  second.signal('SIGTERM')
  await second.waitForExit(15_000)
})

test('two instances on one database deliver each event once', async (t) => {
  const { databaseUrl, key } = await databaseForServers(t)
  const receiver = await startReceiver(t, (_req, res) => {
    // A little slow, so both instances have deliveries due at the same time.
    setTimeout(() => res.end('ok'), 30)
  })
  await createHook(t, databaseUrl, `${receiver.url}/hook`)
  const a = await startServer(t, { databaseUrl, env: SERVER_ENV })
  const b = await startServer(t, { databaseUrl, env: SERVER_ENV })
  const EVENTS = 40
  for (let i = 0; i < EVENTS; i++) await post(i % 2 === 0 ? a.url : b.url, key, `2.${i}`)
  await waitFor(() => receiver.received.length >= EVENTS, 30_000, 'every delivery')
  await sleep(1500)
  const ids = receiver.received.map((r) => String(r.headers['shiplog-delivery']))
  assert.equal(ids.length, EVENTS)
  assert.equal(new Set(ids).size, EVENTS)
  assert.equal(new Set(receiver.received.map((r) => JSON.parse(r.body).event.id)).size, EVENTS)
})
