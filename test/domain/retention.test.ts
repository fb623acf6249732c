// Retention: pruning removes exactly the events of old deployments (never a service and
// environment's running or latest one), with their deliveries and idempotency keys, while ingest
// goes on; deployments, the board, version firsts and the read API agree with what is kept.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { parseDatabaseUrl } from '../../src/config.js'
import { openDatabase } from '../../src/db/connect.js'
import { migrateToLatest } from '../../src/db/migrate.js'
import { createApiKey } from '../../src/domain/keys.js'
import {
  DAY_MS,
  parseRetention,
  pruneExpiredEvents,
  retentionTask,
  setRetention,
} from '../../src/domain/operations/retention.js'
import { addTenant, buildTestApp, freshDatabaseUrl } from '../helper.js'
import { expectedDeployments, storedDeployments } from '../support/deployments.js'
import { processEnv, runCli } from '../support/processes.js'
import { deploy, type EventSeed, insertEvents } from '../support/ui.js'

test('parseRetention takes whole days or forever and says why not otherwise', () => {
  assert.equal(parseRetention('30'), 30)
  assert.equal(parseRetention(' Forever '), null)
  for (const bad of ['', ' ', '0', '-3', '1.5', 'ten', '36501', '9999999']) {
    const parsed = parseRetention(bad)
    assert.ok(parsed !== null && typeof parsed === 'object', `"${bad}" is refused`)
  }
})

test('pruning removes exactly the old deployments and their events while ingest runs', {
  timeout: 60_000,
}, async (t) => {
  const ctx = await buildTestApp(t)
  const account = ctx.tenant.account.id
  const now = Date.now()
  const old = now - 40 * DAY_MS
  const at = (minutes: number) => old + minutes * 60_000
  const seeds: EventSeed[] = [
    // svc-a/prod: v1 (two events, pruned), v2 running (kept), v3 failed, the latest (kept).
    { service: 'svc-a', environment: 'prod', version: 'v1', status: 'Deploying', received_at: at(0) },
    { service: 'svc-a', environment: 'prod', version: 'v1', status: 'Deployed', received_at: at(1) },
    { service: 'svc-a', environment: 'prod', version: 'v2', status: 'Deployed', received_at: at(2) },
    { service: 'svc-a', environment: 'prod', version: 'v3', status: 'Failed', received_at: at(3) },
    // svc-a/staging: v1 alone, kept: it becomes v1's first deployment (lead time).
    { service: 'svc-a', environment: 'staging', version: 'v1', status: 'Deployed', received_at: at(4) },
    // svc-b/prod: v1 running; v9 open, with an event after the cut-off below (kept); v2 latest.
    { service: 'svc-b', environment: 'prod', version: 'v1', status: 'Deployed', received_at: at(5) },
    { service: 'svc-b', environment: 'prod', version: 'v9', status: 'Deploying', received_at: at(6) },
    { service: 'svc-b', environment: 'prod', version: 'v2', status: 'Failed', received_at: at(7) },
  ]
  // svc-old/prod: 30 old deployments; the last is running and latest.
  for (let i = 0; i < 30; i++) {
    seeds.push({
      service: 'svc-old',
      environment: 'prod',
      version: `o${i}`,
      status: 'Deployed',
      received_at: at(10 + i),
    })
  }
  const ids = await insertEvents(ctx.database, account, seeds)
  const id = (i: number) => ids[i] as number
  // A recent event of the open v9 deployment.
  const recent = await deploy(ctx.app, ctx.tenant.key, {
    service: 'svc-b',
    environment: 'prod',
    version: 'v9',
    status: 'Deploying',
  })
  assert.equal(recent.status, 201)
  await ctx.app.deployments.current()

  // Another account with the same old history keeps everything (no retention set there).
  const other = await ctx.addTenant('Other')
  const otherIds = await insertEvents(ctx.database, other.account.id, seeds.slice(0, 4))

  // Dependents of a pruned event (id(0)) and of a kept one (id(2)).
  const webhook = await ctx.database.db
    .insertInto('webhooks')
    .values({
      account_id: account,
      url: 'https://hooks.example/x',
      format: 'json',
      statuses: '[]',
      outcomes: '[]',
      environments: '[]',
      services: '[]',
      secret: 'sealed',
      grafana_token: null,
      since_event_id: 0,
      disabled_at: null,
      failing_since: null,
      created_by: 'test',
      created_at: now,
    })
    .returning('id')
    .executeTakeFirstOrThrow()
  for (const [n, eventId] of [id(0), id(2)].entries()) {
    await ctx.database.db
      .insertInto('webhook_deliveries')
      .values({
        webhook_id: webhook.id,
        account_id: account,
        event_id: eventId,
        deployment_id: eventId,
        kind: 'status',
        delivery_id: `d-${n}`,
        state: 'succeeded',
        next_attempt_at: now,
        lease_until: null,
        last_status: 200,
        last_error: null,
        response_head: null,
        latency_ms: 1,
        remote_id: null,
        created_at: now,
        first_attempt_at: now,
        last_attempt_at: now,
        finished_at: now,
      })
      .execute()
    await ctx.database.db
      .insertInto('idempotency_keys')
      .values({ account_id: account, idem_key: `k-${n}`, event_id: eventId, created_at: old })
      .execute()
  }

  await setRetention(ctx.database.db, account, 30)
  const pruned = new Set([id(0), id(1), ...ids.slice(8, 8 + 29)])

  // Ingest keeps going while the prune runs in many small transactions.
  const acknowledged: number[] = []
  let pruning = true
  const ingest = (async () => {
    for (let i = 0; pruning || i < 5; i++) {
      const res = await deploy(ctx.app, ctx.tenant.key, {
        service: `svc-new-${i % 3}`,
        environment: 'prod',
        version: `n${i}`,
        status: i % 2 === 0 ? 'Deploying' : 'Deployed',
      })
      assert.equal(res.status, 201)
      acknowledged.push(res.body.id as number)
    }
  })()
  const run = await pruneExpiredEvents(ctx.database, now, { batchEvents: 4, pauseMs: 5 })
  pruning = false
  await ingest
  assert.equal(run.accounts, 1)
  assert.equal(run.events, pruned.size)
  assert.equal(run.deployments, 1 + 29)
  assert.equal(run.deliveries, 1)
  assert.ok(acknowledged.length >= 5)

  const left = new Set(
    (await ctx.database.db.selectFrom('events').select('id').execute()).map((r) => Number(r.id)),
  )
  const expectedLeft = [
    ...ids.filter((i) => !pruned.has(i)),
    recent.body.id as number,
    ...otherIds,
    ...acknowledged,
  ]
  assert.deepEqual(
    [...left].sort((a, b) => a - b),
    expectedLeft.sort((a, b) => a - b),
    'exactly the old events went',
  )

  // Deployments, derived again by the server, equal the rules applied to the events kept.
  await ctx.app.deployments.current()
  assert.deepEqual(await storedDeployments(ctx.database), await expectedDeployments(ctx.database))

  const deliveries = await ctx.database.db.selectFrom('webhook_deliveries').select('event_id').execute()
  assert.deepEqual(
    deliveries.map((d) => Number(d.event_id)),
    [id(2)],
  )
  const keys = await ctx.database.db.selectFrom('idempotency_keys').select('idem_key').execute()
  assert.deepEqual(
    keys.map((k) => k.idem_key),
    ['k-1'],
  )
  const firsts = await ctx.database.db
    .selectFrom('version_firsts')
    .select(['version', 'deployment_id'])
    .where('account_id', '=', account)
    .where('service', '=', 'svc-a')
    .orderBy('version')
    .execute()
  assert.deepEqual(
    firsts.map((f) => [f.version, Number(f.deployment_id)]),
    [
      ['v1', id(4)],
      ['v2', id(2)],
      ['v3', id(3)],
    ],
    "v1's first deployment moved to the earliest one kept",
  )

  // The board shows what runs now and what happened last, as before.
  const { key: readKey } = await createApiKey(ctx.database.db, {
    accountId: account,
    name: 'reader',
    createdBy: 'test',
    scopes: ['read'],
  })
  const board = await ctx.app.inject({ url: '/api/v1/services', headers: { 'x-api-key': readKey } })
  assert.equal(board.statusCode, 200)
  const services = (
    board.json() as {
      services: Array<{
        service: string
        environments: Record<string, { version: string; latest: { version: string; outcome: string } }>
      }>
    }
  ).services
  const cell = (service: string, env: string) =>
    services.find((s) => s.service === service)?.environments[env]
  assert.equal(cell('svc-a', 'prod')?.version, 'v2')
  assert.deepEqual(
    [cell('svc-a', 'prod')?.latest.version, cell('svc-a', 'prod')?.latest.outcome],
    ['v3', 'failed'],
  )
  assert.equal(cell('svc-old', 'prod')?.version, 'o29')
  assert.equal(cell('svc-b', 'prod')?.version, 'v1')

  // The read API lists none of the pruned events.
  const listed = await ctx.app.inject({ url: '/api/v1/events?limit=500', headers: { 'x-api-key': readKey } })
  assert.equal(listed.statusCode, 200)
  const listedIds = (listed.json() as { events: Array<{ id: number }> }).events.map((e) => e.id)
  assert.equal(listedIds.filter((i) => pruned.has(i)).length, 0)
  assert.equal(listedIds.length, [...left].filter((i) => !otherIds.includes(i)).length)

  // A second run finds nothing more to do.
  const again = await pruneExpiredEvents(ctx.database, now)
  assert.deepEqual([again.events, again.deployments], [0, 0])
})

test('the background task logs one line per run with its counts; nothing when no account has a retention', async (t) => {
  const ctx = await buildTestApp(t)
  const lines: string[] = []
  const log = {
    debug: () => {},
    warn: () => {},
    info: (_: unknown, message: string) => void lines.push(message),
  }
  const task = retentionTask(ctx.database, log)
  assert.equal(task.name, 'retention')
  await task.run()
  assert.deepEqual(lines, [])
  const old = Date.now() - 10 * DAY_MS
  await insertEvents(ctx.database, ctx.tenant.account.id, [
    { version: 'a', received_at: old },
    { version: 'b', received_at: old + 1 },
    { version: 'c', received_at: old + 2 },
  ])
  await ctx.app.deployments.current()
  await setRetention(ctx.database.db, ctx.tenant.account.id, 7)
  await task.run()
  assert.equal(lines.length, 1)
  assert.match(
    lines[0] ?? '',
    /^retention: pruned 2 events, 2 deployments and 0 webhook deliveries in 1 account \(\d+ ms\)$/,
  )
})

test('shiplog retention set and show; bad input is one line and changes nothing', {
  timeout: 60_000,
}, async (t) => {
  const databaseUrl = await freshDatabaseUrl(t)
  const database = openDatabase(parseDatabaseUrl(databaseUrl))
  try {
    await migrateToLatest(database)
    await addTenant(database, 'Acme')
    await addTenant(database, 'Beta')
  } finally {
    await database.close()
  }
  const env = processEnv(databaseUrl)
  const set = await runCli(t, ['retention', 'set', '--account', 'Acme', '--days', '30'], { env })
  assert.equal(set.code, 0, set.stderr)
  assert.match(
    set.stderr,
    /^account "Acme" keeps events for 30 days; older ones are pruned by the server in the background\n$/,
  )
  const show = await runCli(t, ['retention', 'show'], { env })
  assert.equal(show.stdout, 'ACCOUNT  KEEP EVENTS\nAcme     30 days\nBeta     forever\n')
  for (const [args, code, message] of [
    [['--account', 'Acme', '--days', '0'], 2, /^shiplog: --days must be between 1 and 36500 days/],
    [
      ['--account', 'Acme', '--days', 'soon'],
      2,
      /^shiplog: --days must be a whole number of days or "forever"/,
    ],
    [['--account', 'Acme'], 2, /^shiplog: --days is required/],
    [['--account', 'Nobody', '--days', '5'], 1, /^shiplog: account "Nobody" does not exist\n$/],
  ] as const) {
    const bad = await runCli(t, ['retention', 'set', ...args], { env })
    assert.equal(bad.code, code, bad.stderr)
    assert.match(bad.stderr, message)
    assert.equal(bad.stderr.split('\n').length, 2, 'one line')
  }
  const forever = await runCli(t, ['retention', 'set', '--account', 'Acme', '--days', 'forever'], { env })
  assert.equal(forever.code, 0)
  const after = await runCli(t, ['retention', 'show', '--account', 'Acme'], { env })
  assert.equal(after.stdout, 'ACCOUNT  KEEP EVENTS\nAcme     forever\n')
})
