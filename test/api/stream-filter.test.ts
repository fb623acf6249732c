// GET /api/v1/stream with the filters of /api/v1/events (issue 28, point 9): a filtered /logs/ page
// is told only of the events it would list. Events left out still move Last-Event-ID on, and a bad
// filter is a 422 naming the parameter.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { createApiKey } from '../../src/domain/keys.js'
import { buildTestApp } from '../helper.js'
import { listen, openStream } from '../support/sse.js'
import { deploy } from '../support/ui.js'

async function started(t: Parameters<typeof buildTestApp>[0]) {
  const ctx = await buildTestApp(t)
  const base = await listen(ctx.app)
  const { key: reader } = await createApiKey(ctx.database.db, {
    accountId: ctx.tenant.account.id,
    name: 'reader',
    createdBy: 'test',
    scopes: ['read'],
  })
  const send = async (service: string, environment: string, version: string, status: string) => {
    const res = await deploy(ctx.app, ctx.tenant.key, { service, environment, version, status })
    assert.equal(res.status, 201)
    return Number(res.body.id)
  }
  return { ctx, base, reader, send }
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 1500))

test('a filtered stream sends only matching events (names ignoring case, status, version text)', async (t) => {
  const { base, reader, send } = await started(t)
  const stream = await openStream(
    base,
    { 'x-api-key': reader },
    '/api/v1/stream?service=API&environment=Prod&status=deploying&version=rc',
  )
  t.after(() => stream.close())
  assert.equal(stream.status, 200)
  const first = await send('web', 'prod', '1.0-rc1', 'Deploying') // another service
  await send('api', 'staging', '1.0-rc1', 'Deploying') // another environment
  await send('api', 'prod', '1.0-rc1', 'Deployed') // another status
  await send('api', 'prod', '1.0.0', 'Deploying') // version without "rc"
  const matched = await send('api', 'prod', '1.1-RC2', 'Deploying')
  const after = await send('web', 'prod', '2.0', 'Deployed')
  const [event, deployment] = await stream.waitFor(2)
  assert.equal(event?.event, 'event')
  assert.equal(event?.data.id, matched)
  assert.equal(deployment?.event, 'deployment')
  assert.equal(deployment?.id, String(matched))
  await settle()
  assert.equal(stream.messages.length, 2, JSON.stringify(stream.messages))
  // The event after it was left out, but the id moved past it: a reconnect replays nothing.
  assert.equal(stream.lastEventId, String(after))

  // Unfiltered, the same stream carries every event.
  const all = await openStream(base, { 'x-api-key': reader }, `/api/v1/stream?lastEventId=${first - 1}`)
  t.after(() => all.close())
  const replay = await all.waitFor(12)
  assert.equal(replay.filter((m) => m.event === 'event').length, 6)
})

test('the time range of a filtered stream: events outside it are not sent', async (t) => {
  const { base, reader, send } = await started(t)
  const past = '2020-01-01T00:00:00Z'
  const ended = await openStream(base, { 'x-api-key': reader }, `/api/v1/stream?to=${past}`)
  t.after(() => ended.close())
  const open = await openStream(
    base,
    { 'x-api-key': reader },
    `/api/v1/stream?from=${encodeURIComponent('2020-01-01T00:00:00+01:00')}`,
  )
  t.after(() => open.close())
  await send('api', 'prod', '1', 'Deployed')
  await open.waitFor(2)
  await settle()
  assert.equal(ended.messages.length, 0)
})

test('a bad filter is a 422 that names the parameter, and no stream opens', async (t) => {
  const { ctx, reader } = await started(t)
  for (const [query, field] of [
    ['status=Shipped', 'status'],
    ['from=yesterday', 'from'],
    ['from=2026-02-01&to=2026-01-01', 'to'],
    [`service=${'x'.repeat(101)}`, 'service'],
  ] as const) {
    const res = await ctx.app.inject({ url: `/api/v1/stream?${query}`, headers: { 'x-api-key': reader } })
    assert.equal(res.statusCode, 422, query)
    assert.match(String(res.headers['content-type']), /^application\/problem\+json/)
    assert.equal(res.json().errors[0].field, field, query)
  }
})
