// Event time (SPEC §1.2): `occurred_at` and `commit_time` on the three ingest forms, their bounds,
// what the answer and the read API carry, and that a retry with other times is another event.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { createApiKey } from '../../src/domain/keys.js'
import { buildTestApp, type TestApp } from '../helper.js'

const DAY = 86_400_000

async function send(
  ctx: TestApp,
  form: 'get' | 'put' | 'put-form' | 'deploy',
  fields: Record<string, string>,
  headers: Record<string, string> = {},
) {
  const key = { 'x-api-key': ctx.tenant.key, ...headers }
  const legacy: Record<string, string> = {}
  for (const [k, v] of Object.entries(fields)) {
    legacy[k === 'service' ? 'app' : k === 'environment' ? 'env' : k] = v
  }
  if (form === 'get') {
    return ctx.app.inject({ method: 'GET', url: `/put?${new URLSearchParams(legacy)}`, headers: key })
  }
  if (form === 'put') {
    return ctx.app.inject({ method: 'POST', url: '/put', headers: key, payload: JSON.stringify(legacy) })
  }
  if (form === 'put-form') {
    return ctx.app.inject({
      method: 'POST',
      url: '/put',
      headers: { ...key, 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams(legacy).toString(),
    })
  }
  return ctx.app.inject({
    method: 'POST',
    url: '/deploy',
    headers: { ...key, 'content-type': 'application/json' },
    payload: JSON.stringify(fields),
  })
}

const base = { service: 'api', environment: 'prod', version: '1.0', status: 'Deployed' }

for (const form of ['get', 'put', 'put-form', 'deploy'] as const) {
  test(`${form}: occurred_at and commit_time are stored and answered; received_at stays the clock`, async (t) => {
    const ctx = await buildTestApp(t)
    const before = Date.now()
    // A zone other than UTC, and a date-time without zone (read as UTC).
    const res = await send(ctx, form, {
      ...base,
      occurred_at: '2026-01-10T12:30:00+02:00',
      commit_time: '2026-01-10T09:15:00',
    })
    assert.equal(res.statusCode, 201, res.body)
    const body = res.json()
    assert.equal(body.occurred_at, '2026-01-10T10:30:00.000Z')
    assert.equal(body.commit_time, '2026-01-10T09:15:00.000Z')
    assert.ok(Date.parse(body.received_at) >= before, 'received_at is the arrival')
    const row = await ctx.database.db
      .selectFrom('events')
      .selectAll()
      .where('id', '=', body.id)
      .executeTakeFirstOrThrow()
    assert.equal(Number(row.occurred_at), Date.UTC(2026, 0, 10, 10, 30))
    assert.equal(Number(row.commit_time), Date.UTC(2026, 0, 10, 9, 15))
    assert.ok(Number(row.received_at) >= before)
  })
}

test('without times: occurred_at equals received_at and commit_time is null, in the answer and the read API', async (t) => {
  const ctx = await buildTestApp(t)
  const res = await send(ctx, 'deploy', base)
  assert.equal(res.statusCode, 201)
  const body = res.json()
  assert.equal(body.occurred_at, body.received_at)
  assert.equal(body.commit_time, null)
  const { key } = await createApiKey(ctx.database.db, {
    accountId: ctx.tenant.account.id,
    name: 'reader',
    createdBy: 'test',
    scopes: ['read'],
  })
  const read = await ctx.app.inject({ method: 'GET', url: '/api/v1/events', headers: { 'x-api-key': key } })
  assert.equal(read.statusCode, 200, read.body)
  const [event] = read.json().events
  assert.equal(event.occurred_at, body.received_at)
  assert.equal(event.commit_time, null)
})

test('bad times: 422 naming each field, nothing stored', async (t) => {
  const ctx = await buildTestApp(t, { env: { SHIPLOG_MAX_EVENT_AGE_DAYS: '30' } })
  const now = Date.now()
  const cases: [Record<string, string>, string[]][] = [
    [{ occurred_at: 'yesterday' }, ['occurred_at']],
    [{ occurred_at: '2026-02-30T10:00:00Z' }, ['occurred_at']],
    [{ occurred_at: new Date(now + 10 * 60_000).toISOString() }, ['occurred_at']],
    [{ occurred_at: new Date(now - 31 * DAY).toISOString() }, ['occurred_at']],
    [{ commit_time: new Date(now + 10 * 60_000).toISOString() }, ['commit_time']],
    [{ occurred_at: '2026-01-10 10:00:00Z', commit_time: 'x' }, ['occurred_at', 'commit_time']],
  ]
  for (const [extra, fields] of cases) {
    for (const form of ['get', 'put', 'deploy'] as const) {
      const res = await send(ctx, form, { ...base, ...extra })
      assert.equal(res.statusCode, 422, `${form} ${JSON.stringify(extra)}: ${res.body}`)
      const named = (res.json().errors as { field: string }[]).map((e) => e.field)
      assert.deepEqual(named, fields, JSON.stringify(res.json()))
    }
  }
  assert.equal(await ctx.eventCount(), 0)
  // Within the bounds: 29 days back, and 4 minutes ahead (clock drift).
  for (const at of [now - 29 * DAY, now + 4 * 60_000]) {
    const ok = await send(ctx, 'deploy', { ...base, occurred_at: new Date(at).toISOString() })
    assert.equal(ok.statusCode, 201, ok.body)
  }
})

test('idempotency: the same key with another occurred_at or commit_time is refused; the same times replay', async (t) => {
  const ctx = await buildTestApp(t)
  const at = new Date(Date.now() - 3 * DAY).toISOString()
  const first = await send(ctx, 'deploy', { ...base, occurred_at: at }, { 'idempotency-key': 'k1' })
  assert.equal(first.statusCode, 201)
  const replay = await send(ctx, 'deploy', { ...base, occurred_at: at }, { 'idempotency-key': 'k1' })
  assert.equal(replay.statusCode, 200)
  assert.equal(replay.json().id, first.json().id)
  const moved = await send(
    ctx,
    'deploy',
    { ...base, occurred_at: new Date(Date.parse(at) + 1000).toISOString() },
    { 'idempotency-key': 'k1' },
  )
  assert.equal(moved.statusCode, 422)
  const withCommit = await send(
    ctx,
    'deploy',
    { ...base, occurred_at: at, commit_time: at },
    { 'idempotency-key': 'k1' },
  )
  assert.equal(withCommit.statusCode, 422)
  // Sent without a time, then retried without one: a replay although the clock moved on.
  const plain = await send(ctx, 'deploy', base, { 'idempotency-key': 'k2' })
  await new Promise((r) => setTimeout(r, 5))
  const plainAgain = await send(ctx, 'deploy', base, { 'idempotency-key': 'k2' })
  assert.equal(plainAgain.statusCode, 200)
  assert.equal(plainAgain.json().id, plain.json().id)
  // Sent without a time first; a retry that names one is another event.
  const named = await send(ctx, 'deploy', { ...base, occurred_at: at }, { 'idempotency-key': 'k2' })
  assert.equal(named.statusCode, 422)
  assert.equal(await ctx.eventCount(), 2)
})
