// `shiplog verify` against a real server process: the chain catches up with a burst of events while
// ingest runs, verify passes and confirms a head from an API answer, then names an event changed in
// the database and exits non-zero; bad --head arguments are refused in one line. Both databases.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { sql } from 'kysely'
import { parseDatabaseUrl } from '../../src/config.js'
import { openDatabase } from '../../src/db/connect.js'
import { chainLag } from '../../src/domain/chain/chainer.js'
import { databaseForServers } from '../helper.js'
import { processEnv, runCli, sleep, startServer } from '../support/processes.js'

const BURST = 400
const CONCURRENCY = 16

test('the chain catches up right after a burst of ingest; verify passes, confirms a kept head, then names a changed event', async (t) => {
  const { databaseUrl, key } = await databaseForServers(t)
  const server = await startServer(t, { databaseUrl, env: { SHIPLOG_RATE_LIMIT: '100000' } })
  const env = processEnv(databaseUrl)
  const database = openDatabase(parseDatabaseUrl(databaseUrl))
  t.after(() => database.close())

  const reader = await runCli(
    t,
    ['keys', 'create', '--account', 'Acme', '--name', 'reader', '--scope', 'read'],
    {
      env,
    },
  )
  assert.equal(reader.code, 0, reader.stderr)
  const readKey = reader.stdout.trim()

  // The burst: BURST events over CONCURRENCY connections; the chain is sampled meanwhile (reported).
  let sent = 0
  let chainedDuringIngest = 0
  const sampler = (async () => {
    while (sent < BURST) {
      const head = await database.db
        .selectFrom('chain_heads')
        .select('through')
        .where('stream', '=', 'events')
        .executeTakeFirstOrThrow()
      chainedDuringIngest = Math.max(chainedDuringIngest, Number(head.through))
      await sleep(50)
    }
  })()
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (sent < BURST) {
        sent++
        const res = await fetch(`${server.url}/deploy`, {
          method: 'POST',
          headers: { 'x-api-key': key, 'content-type': 'application/json' },
          body: JSON.stringify({
            service: 'api',
            environment: 'prod',
            version: `1.0.${sent}`,
            status: 'Deployed',
          }),
        })
        assert.equal(res.status, 201, await res.text())
      }
    }),
  )
  await sampler
  const ingestDone = Date.now()
  for (;;) {
    const lag = await chainLag(database)
    if (lag.events === 0) break
    assert.ok(Date.now() - ingestDone < 10_000, `the chain is still ${lag.events} events behind after 10 s`)
    await sleep(50)
  }
  // Whether it also advanced during the burst depends on how busy the server's event loop was:
  // the chain waits while a burst saturates it (at most 30 s), so only catching up is asserted.
  t.diagnostic(`chained during the burst: through ${chainedDuringIngest} of ${BURST}`)

  const page = await fetch(`${server.url}/api/v1/events?limit=5`, { headers: { 'x-api-key': readKey } })
  assert.equal(page.status, 200)
  const head = page.headers.get('shiplog-chain-head') ?? ''
  assert.match(head, /^events:\d+:[0-9a-f]{64}$/)

  const intact = await runCli(t, ['verify'], { env })
  assert.equal(intact.code, 0, intact.stdout + intact.stderr)
  assert.match(
    intact.stdout,
    new RegExp(`^events: ${BURST} rows checked, 0 pruned by retention, 0 not chained yet; head events:`, 'm'),
  )
  assert.match(intact.stdout, /^verify: intact$/m)
  const kept = await runCli(t, ['verify', '--head', head], { env })
  assert.equal(kept.code, 0, kept.stdout + kept.stderr)
  assert.match(kept.stdout, new RegExp(`^head ${head.split(':').slice(0, 2).join(':')} matches$`, 'm'))

  for (const [args, message] of [
    [['verify', '--head', 'events:12'], /is not a chain head \(expected events:ID:HEX/],
    [['verify', '--head'], /argument missing/],
    [['verify', 'now'], /unexpected argument "now"/],
    [['verify', '--heads', head], /Unknown option '--heads'/],
  ] as const) {
    const bad = await runCli(t, [...args], { env })
    assert.equal(bad.code, 2, `${args.join(' ')}: ${bad.stderr}`)
    assert.match(bad.stderr, message)
    assert.equal(bad.stderr.trim().split('\n').length, 1, 'one line')
  }

  // Someone with database access edits one event.
  const { rows } = await sql<{ id: number }>`select id from events order by id limit 1 offset 100`.execute(
    database.db,
  )
  const victim = Number(rows[0]?.id)
  await sql`update events set version = '6.6.6' where id = ${victim}`.execute(database.db)
  const tampered = await runCli(t, ['verify', '--head', head], { env })
  assert.equal(tampered.code, 1, tampered.stdout + tampered.stderr)
  assert.match(tampered.stdout, new RegExp(`^PROBLEM: event ${victim} changed$`, 'm'))
  assert.match(tampered.stdout, /^verify: FAILED$/m)
  assert.match(tampered.stderr, /verification FAILED/)
})
