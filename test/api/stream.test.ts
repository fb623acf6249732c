// GET /api/v1/stream over a real socket: new events and their deployments arrive live, a client
// that resumes with Last-Event-ID gets exactly what it missed, only readers of the account see
// them, another instance on the same PostgreSQL database hears them too, a client that reads
// nothing is dropped, and closing the server ends the streams.
import assert from 'node:assert/strict'
import { type TestContext, test } from 'node:test'
import { sql } from 'kysely'
import { createApiKey, type KeyScope } from '../../src/domain/keys.js'
import { buildTestApp, freshDatabaseUrl, type TestApp, testConfig, testDialect } from '../helper.js'
import { listen, openStream, until } from '../support/sse.js'
import { deploy, userSession } from '../support/ui.js'

async function keyWith(ctx: TestApp, scopes: KeyScope[], accountId = ctx.tenant.account.id): Promise<string> {
  const { key } = await createApiKey(ctx.database.db, {
    accountId,
    name: scopes.join('+'),
    createdBy: 'test',
    scopes,
  })
  return key
}

const event = (version: string, status = 'Deployed', service = 'api') => ({
  service,
  environment: 'prod',
  version,
  status,
})

async function started(t: TestContext, env: Record<string, string> = {}) {
  const ctx = await buildTestApp(t, { env })
  const base = await listen(ctx.app)
  const reader = await keyWith(ctx, ['read'])
  return { ctx, base, reader }
}

test('new events and the deployments they change arrive, each once, with resumable ids', async (t) => {
  const { ctx, base, reader } = await started(t)
  const stream = await openStream(base, { 'x-api-key': reader })
  t.after(() => stream.close())
  assert.equal(stream.status, 200)
  assert.match(String(stream.headers['content-type']), /^text\/event-stream/)
  assert.equal(stream.headers['cache-control'], 'no-store')

  const sent = Date.now()
  const one = await deploy(ctx.app, ctx.tenant.key, event('1.0', 'Deploying'))
  assert.equal(one.status, 201)
  const [first, firstDeployment] = await stream.waitFor(2)
  // Usually ~150 ms; the bound leaves room for a loaded CI machine.
  assert.ok(Date.now() - sent < 4000, `arrived after ${Date.now() - sent} ms`)
  t.diagnostic(`arrived after ${Date.now() - sent} ms`)
  assert.equal(first?.event, 'event')
  assert.equal(first?.id, undefined, 'the id goes on the last message of the event')
  assert.equal(first?.data.id, one.body.id)
  assert.equal(first?.data.version, '1.0')
  assert.equal(firstDeployment?.event, 'deployment')
  assert.equal(firstDeployment?.id, String(one.body.id))
  assert.equal(firstDeployment?.data.outcome, 'in_progress')
  assert.deepEqual(firstDeployment?.data.event_ids, [one.body.id])

  const two = await deploy(ctx.app, ctx.tenant.key, event('1.0', 'Deployed'))
  const messages = await stream.waitFor(4)
  assert.equal(messages[2]?.data.id, two.body.id)
  assert.equal(messages[3]?.data.outcome, 'succeeded')
  assert.deepEqual(messages[3]?.data.event_ids, [one.body.id, two.body.id])
  // Nothing more (no repeat on the next wake-ups).
  await new Promise((resolve) => setTimeout(resolve, 2500))
  assert.equal(stream.messages.length, 4)
})

test('a client resuming with Last-Event-ID gets exactly what it missed, then live events', async (t) => {
  const { ctx, base, reader } = await started(t)
  const first = await openStream(base, { 'x-api-key': reader })
  const a = await deploy(ctx.app, ctx.tenant.key, event('1'))
  await first.waitFor(2)
  const lastId = first.messages.at(-1)?.id
  assert.equal(lastId, String(a.body.id))
  first.close()

  const missed: unknown[] = []
  for (const v of ['2', '3', '4']) missed.push((await deploy(ctx.app, ctx.tenant.key, event(v))).body.id)
  await ctx.app.deployments.current()

  const resumed = await openStream(base, { 'x-api-key': reader, 'last-event-id': String(lastId) })
  t.after(() => resumed.close())
  const replay = await resumed.waitFor(6)
  assert.deepEqual(
    replay.filter((m) => m.event === 'event').map((m) => m.data.id),
    missed,
  )
  const live = await deploy(ctx.app, ctx.tenant.key, event('5'))
  await resumed.waitFor(8)
  assert.equal(resumed.messages[6]?.data.id, live.body.id)

  // The query parameter works for clients that cannot set headers; the header wins over it.
  const byQuery = await openStream(base, { 'x-api-key': reader }, `/api/v1/stream?lastEventId=${missed[1]}`)
  t.after(() => byQuery.close())
  const fromQuery = await byQuery.waitFor(4)
  assert.deepEqual(
    fromQuery.filter((m) => m.event === 'event').map((m) => m.data.id),
    [missed[2], live.body.id],
  )

  for (const bad of ['abc', '-1', '1.5', '9'.repeat(20)]) {
    const res = await ctx.app.inject({
      url: '/api/v1/stream',
      headers: { 'x-api-key': reader, 'last-event-id': bad },
    })
    assert.equal(res.statusCode, 422, bad)
    assert.match(String(res.headers['content-type']), /^application\/problem\+json/)
    assert.match(res.json().errors[0].message, /Last-Event-ID/)
  }
})

test('an event that commits late, below ids already sent, still arrives once, and Last-Event-ID never goes back', async (t) => {
  const { ctx, base, reader } = await started(t)
  const stream = await openStream(base, { 'x-api-key': reader })
  t.after(() => stream.close())
  const at = Date.UTC(2026, 0, 2)
  // An event with an id chosen here, as a transaction that was handed it earlier would commit it
  // (another instance's slower transaction on PostgreSQL).
  const insert = async (id: number, status: string, receivedAt: number) => {
    await sql`insert into events (id, account_id, service, environment, version, status, source, api_key_name, received_at, occurred_at)
      ${sql.raw(ctx.database.dialect === 'postgres' ? 'overriding system value' : '')}
      values (${id}, ${ctx.tenant.account.id}, 'api', 'prod', '1.0', ${status}, 'deploy', 'ci', ${receivedAt}, ${receivedAt})`.execute(
      ctx.database.db,
    )
  }
  await insert(1000, 'Deploying', at)
  await insert(1002, 'Deployed', at + 2000)
  await ctx.app.deployments.current()
  ctx.app.live.hub.wake()
  await stream.waitFor(4)
  assert.deepEqual(
    stream.messages.filter((m) => m.event === 'event').map((m) => m.data.id),
    [1000, 1002],
  )
  await insert(1001, 'Deploying', at + 1000)
  await ctx.app.deployments.current()
  ctx.app.live.hub.wake()
  const messages = await stream.waitFor(6)
  assert.equal(messages[4]?.event, 'event')
  assert.equal(messages[4]?.data.id, 1001, 'the late event arrives')
  assert.equal(messages[5]?.event, 'deployment')
  assert.equal(messages[5]?.id, '1002', 'its id is the highest sent, so a reconnect replays nothing twice')
  // Nothing more, and nothing twice, on the next wake-ups.
  ctx.app.live.hub.wake()
  await new Promise((resolve) => setTimeout(resolve, 2500))
  assert.equal(stream.messages.length, 6)
})

test('more missed events than a replay sends get a reset message', async (t) => {
  const { ctx, base, reader } = await started(t, { SHIPLOG_RATE_LIMIT: '100000' })
  const first = await deploy(ctx.app, ctx.tenant.key, event('0'))
  const statements = []
  for (let i = 1; i <= 1001; i++) statements.push(deploy(ctx.app, ctx.tenant.key, event(String(i))))
  for (const res of await Promise.all(statements)) assert.equal(res.status, 201)
  await ctx.app.deployments.current()
  const stream = await openStream(base, { 'x-api-key': reader, 'last-event-id': String(first.body.id) })
  t.after(() => stream.close())
  const [reset] = await stream.waitFor(1)
  assert.equal(reset?.event, 'reset')
  assert.equal(typeof reset?.data.through, 'number')
  assert.equal(reset?.id, String(reset?.data.through))
  const next = await deploy(ctx.app, ctx.tenant.key, event('next'))
  await stream.waitFor(3)
  assert.equal(stream.messages[1]?.data.id, next.body.id)
})

test('a Last-Event-ID above the newest event (a restored backup) gets a reset, then every new event', async (t) => {
  const { ctx, base, reader } = await started(t)
  const first = await deploy(ctx.app, ctx.tenant.key, event('1'))
  await ctx.app.deployments.current()
  // A tab that followed the database before it was restored from an older backup.
  const ahead = Number(first.body.id) + 500
  const stream = await openStream(base, { 'x-api-key': reader, 'last-event-id': String(ahead) })
  t.after(() => stream.close())
  const [reset] = await stream.waitFor(1)
  assert.equal(reset?.event, 'reset')
  assert.match(String(reset?.data.reason), /newest event/)
  const through = Number(reset?.data.through)
  assert.ok(through >= Number(first.body.id) && through < ahead, `through ${through}`)
  assert.equal(reset?.id, String(through), 'the client resumes from here, not from the id it had')
  const next = await deploy(ctx.app, ctx.tenant.key, event('2'))
  await stream.waitFor(3)
  assert.equal(stream.messages[1]?.data.id, next.body.id, 'the next event is sent, not skipped')
  assert.equal(stream.messages[2]?.id, String(next.body.id))
  // Resuming from the newest event is no reset: it follows on.
  const again = await openStream(base, { 'x-api-key': reader, 'last-event-id': String(next.body.id) })
  t.after(() => again.close())
  const later = await deploy(ctx.app, ctx.tenant.key, event('3'))
  const [firstAgain] = await again.waitFor(2)
  assert.equal(firstAgain?.event, 'event')
  assert.equal(firstAgain?.data.id, later.body.id)
})

test('only readers of the account: 401 without credentials, 403 for an ingest key, own events only', async (t) => {
  const { ctx, base, reader } = await started(t)
  const none = await openStream(base, {})
  assert.equal(none.status, 401)
  const ingestOnly = await openStream(base, { 'x-api-key': ctx.tenant.key })
  assert.equal(ingestOnly.status, 403)
  const bad = await openStream(base, { 'x-api-key': 'sl_nonsense' })
  assert.equal(bad.status, 401)

  const other = await ctx.addTenant('Other')
  const otherReader = await keyWith(ctx, ['read'], other.account.id)
  const mine = await openStream(base, { 'x-api-key': reader })
  const theirs = await openStream(base, { 'x-api-key': otherReader })
  // A logged-in member reads with the session cookie, as EventSource does.
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'member@example.com', 'member')
  const bySession = await openStream(base, { cookie: browser.cookieHeader() })
  t.after(() => {
    mine.close()
    theirs.close()
    bySession.close()
  })
  assert.equal(bySession.status, 200)
  const ours = await deploy(ctx.app, ctx.tenant.key, event('ours'))
  const foreign = await deploy(ctx.app, other.key, event('theirs'))
  await mine.waitFor(2)
  await theirs.waitFor(2)
  await bySession.waitFor(2)
  await new Promise((resolve) => setTimeout(resolve, 500))
  assert.deepEqual(
    mine.messages.map((m) => m.data.id),
    [ours.body.id, ours.body.id],
  )
  assert.deepEqual(
    bySession.messages.map((m) => m.data.id),
    [ours.body.id, ours.body.id],
  )
  assert.deepEqual(
    theirs.messages.map((m) => m.data.id),
    [foreign.body.id, foreign.body.id],
  )
})

test('streams per account are capped (429) and a closed stream frees its place', async (t) => {
  const { ctx, base, reader } = await started(t, { SHIPLOG_STREAMS_PER_ACCOUNT: '2' })
  const a = await openStream(base, { 'x-api-key': reader })
  const b = await openStream(base, { 'x-api-key': reader })
  const refused = await openStream(base, { 'x-api-key': reader })
  assert.equal(refused.status, 429)
  assert.match(String(refused.headers['content-type']), /^application\/problem\+json/)
  await until(() => ctx.app.live.hub.clients() === 2)
  a.close()
  await until(() => ctx.app.live.hub.clients() === 1)
  const c = await openStream(base, { 'x-api-key': reader })
  assert.equal(c.status, 200)
  b.close()
  c.close()
})

test('one key or session holds at most its own share of the streams (429); other keys and sessions still connect', async (t) => {
  assert.equal(testConfig('sqlite::memory:').streamsPerCredential, 10, "the default, below the account's 50")
  const { ctx, base, reader } = await started(t, {
    SHIPLOG_STREAMS_PER_CREDENTIAL: '2',
    SHIPLOG_STREAMS_PER_ACCOUNT: '6',
  })
  const streams = [
    await openStream(base, { 'x-api-key': reader }),
    await openStream(base, { 'x-api-key': reader }),
  ]
  t.after(() => {
    for (const s of streams) s.close()
  })
  const refused = await openStream(base, { 'x-api-key': reader })
  assert.equal(refused.status, 429)
  assert.match(String(refused.headers['content-type']), /^application\/problem\+json/)
  assert.equal(refused.headers['retry-after'], '30')
  const problem = JSON.parse(refused.body ?? '') as Record<string, unknown>
  assert.equal(problem.type, 'urn:shiplog:problem:too-many-streams', 'the shape of the account cap')
  assert.match(String(problem.detail), /This API key already has 2 live streams open/)
  // The account has room left, for another key and for a browser.
  const otherKey = await openStream(base, { 'x-api-key': await keyWith(ctx, ['read']) })
  streams.push(otherKey)
  assert.equal(otherKey.status, 200)
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'member@example.com', 'member')
  for (const expected of [200, 200, 429]) {
    const bySession = await openStream(base, { cookie: browser.cookieHeader() })
    streams.push(bySession)
    assert.equal(bySession.status, expected)
  }
  // A closed stream frees its place for its own key.
  streams[0]?.close()
  await until(() => ctx.app.live.hub.clients() === 4)
  const freed = await openStream(base, { 'x-api-key': reader })
  streams.push(freed)
  assert.equal(freed.status, 200)
})

test('a client that reads nothing is dropped once its buffer bound is reached', async (t) => {
  const { ctx, base, reader } = await started(t, {
    SHIPLOG_STREAM_BUFFER_BYTES: String(64 * 1024),
    SHIPLOG_RATE_LIMIT: '100000',
  })
  const slow = await openStream(base, { 'x-api-key': reader })
  t.after(() => slow.close())
  // Stop reading: the kernel buffers fill, then the server's queue.
  slow.response.pause()
  slow.response.socket.pause()
  const long = { description: 'd'.repeat(500), url: `https://example.com/${'u'.repeat(2000)}` }
  const hub = ctx.app.live.hub
  await until(() => hub.clients() === 1)
  const deadline = Date.now() + 60_000
  let sent = 0
  while (hub.clients() > 0) {
    assert.ok(Date.now() < deadline, `still connected after ${sent} events`)
    const batch = []
    for (let i = 0; i < 50; i++)
      batch.push(deploy(ctx.app, ctx.tenant.key, { ...event(String(sent + i)), ...long }))
    for (const res of await Promise.all(batch)) assert.equal(res.status, 201)
    sent += 50
    await new Promise((resolve) => setTimeout(resolve, 150))
  }
  // It was dropped, not buffered: what the server still holds for it is nothing.
  assert.equal(hub.clients(), 0)
  assert.ok(sent > 0 && sent < 5000, `sent ${sent}`)
  t.diagnostic(`dropped after ${sent} events`)
})

test('closing the server ends open streams promptly', async (t) => {
  const ctx = await buildTestApp(t)
  const base = await listen(ctx.app)
  const reader = await keyWith(ctx, ['read'])
  const streams = [
    await openStream(base, { 'x-api-key': reader }),
    await openStream(base, { 'x-api-key': reader }),
  ]
  const started = Date.now()
  await ctx.app.close()
  await Promise.all(streams.map((s) => s.ended))
  assert.ok(Date.now() - started < 3000, `close took ${Date.now() - started} ms`)
  t.diagnostic(`closed in ${Date.now() - started} ms`)
})

test('an event sent to one instance appears on a stream of another (by notice on PostgreSQL, by polling on SQLite)', async (t) => {
  const databaseUrl = await freshDatabaseUrl(t)
  const one = await buildTestApp(t, { databaseUrl })
  // On PostgreSQL instance two polls once a minute: only the notice can bring the event within
  // seconds. SQLite has no channel between processes, so there the fallback poll must find it.
  const pollMs = testDialect === 'postgres' ? '60000' : '200'
  const two = await buildTestApp(t, { databaseUrl, env: { SHIPLOG_STREAM_POLL_MS: pollMs } })
  const base = await listen(two.app)
  const reader = await keyWith(one, ['read'])
  const stream = await openStream(base, { 'x-api-key': reader })
  t.after(() => stream.close())
  assert.equal(stream.status, 200)
  const sent = Date.now()
  const res = await deploy(one.app, one.tenant.key, event('elsewhere'))
  assert.equal(res.status, 201)
  await stream.waitFor(2)
  t.diagnostic(`arrived after ${Date.now() - sent} ms`)
  assert.equal(stream.messages[0]?.data.id, res.body.id)
  assert.equal(stream.messages[1]?.event, 'deployment')
})
