// Deployments next to real processes: `shiplog deployments rebuild` on a live server (pipelines keep
// sending events while it empties the derived deployments and derives them again), and a server
// killed at random moments while it derives. Afterwards the stored deployments equal the plain rules
// over every stored event. Both databases.
import assert from 'node:assert/strict'
import { type TestContext, test } from 'node:test'
import { parseDatabaseUrl } from '../../src/config.js'
import { openDatabase } from '../../src/db/connect.js'
import { deploymentsBehind } from '../../src/domain/deployments/store.js'
import { freshDatabaseUrl } from '../helper.js'
import { expectedDeployments, storedDeployments } from '../support/deployments.js'
import { processEnv, runCli, sleep, startServer } from '../support/processes.js'

const STATUSES = ['Deploying', 'Deploying', 'Deployed', 'Failed'] as const

const SERVER_ENV = { SHIPLOG_RATE_LIMIT: '10000000' }

/** A fresh database with account Acme, its admin and an API key, made with the CLI. */
async function accountWithKey(t: TestContext) {
  const databaseUrl = await freshDatabaseUrl(t)
  const env = processEnv(databaseUrl)
  const created = await runCli(
    t,
    ['users', 'create', '--account', 'Acme', '--email', 'ada@example.com', '--password-stdin'],
    { env, stdin: 'correct horse battery staple\n' },
  )
  assert.equal(created.code, 0, created.stderr)
  const keyRun = await runCli(t, ['keys', 'create', '--account', 'Acme', '--name', 'ci'], { env })
  assert.equal(keyRun.code, 0, keyRun.stderr)
  return { databaseUrl, env, key: keyRun.stdout.trim() }
}

async function send(url: string, key: string, i: number): Promise<void> {
  const response = await fetch(`${url}/deploy`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key },
    body: JSON.stringify({
      service: `svc-${i % 7}`,
      environment: ['staging', 'prod'][i % 2],
      version: `1.${Math.floor(i / 5) % 4}`,
      status: STATUSES[(i * 7) % STATUSES.length],
    }),
    signal: AbortSignal.timeout(10_000),
  })
  assert.equal(response.status, 201, await response.text())
}

test('rebuilding deployments while a server ingests leaves them equal to the rules over all events', async (t) => {
  const { databaseUrl, env, key } = await accountWithKey(t)
  const server = await startServer(t, { databaseUrl, env: SERVER_ENV })

  for (let i = 0; i < 300; i++) await send(server.url, key, i)
  // Pipelines go on sending while the rebuild runs.
  let sending = true
  const sender = (async () => {
    let i = 300
    while (sending) await send(server.url, key, i++)
    return i
  })()
  const rebuild = await runCli(t, ['deployments', 'rebuild'], { env })
  sending = false
  const sent = await sender
  assert.equal(rebuild.code, 0, rebuild.stderr)
  assert.match(rebuild.stderr, /^deployments rebuilt from \d+ events in [\d.]+ s\n$/)
  for (let i = sent; i < sent + 20; i++) await send(server.url, key, i)

  const database = openDatabase(parseDatabaseUrl(databaseUrl))
  t.after(() => database.close())
  // The server's background task derives what arrived after the rebuild.
  for (let waited = 0; await deploymentsBehind(database.db); waited += 100) {
    assert.ok(waited < 15_000, 'the server did not derive the new events')
    await sleep(100)
  }
  assert.deepEqual(await storedDeployments(database), await expectedDeployments(database))
  assert.ok(server.isRunning())
})

test('a server killed while it derives leaves deployments equal to the rules once it runs again', async (t) => {
  const { databaseUrl, key } = await accountWithKey(t)
  let next = 0
  for (let round = 0; round < 3; round++) {
    const server = await startServer(t, { databaseUrl, env: SERVER_ENV })
    // Eight pipelines at once, so derivation runs while events keep arriving; the kill comes at a
    // different moment each round.
    const stopAt = next + 150 + round * 70
    const pipelines = Array.from({ length: 8 }, async () => {
      while (next < stopAt) await send(server.url, key, next++).catch(() => {})
    })
    await Promise.all(pipelines)
    server.signal('SIGKILL')
    await server.waitForExit(10_000)
  }
  const server = await startServer(t, { databaseUrl, env: SERVER_ENV })
  await send(server.url, key, next)
  const database = openDatabase(parseDatabaseUrl(databaseUrl))
  t.after(() => database.close())
  for (let waited = 0; await deploymentsBehind(database.db); waited += 100) {
    assert.ok(waited < 15_000, 'the restarted server did not derive the events')
    await sleep(100)
  }
  assert.deepEqual(await storedDeployments(database), await expectedDeployments(database))
})

test('deployments rebuild refuses arguments it does not know', async (t) => {
  const databaseUrl = await freshDatabaseUrl(t)
  const result = await runCli(t, ['deployments', 'rebuild', '--all'], { env: processEnv(databaseUrl) })
  assert.equal(result.code, 2, result.stderr)
  assert.match(result.stderr, /^shiplog: .*--all.*\n$/)
})
