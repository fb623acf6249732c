// The original interface's read endpoints (SPEC §7): GET|POST /get and GET|POST /get/logs with a
// read key; app and env from the query or a JSON body under any content type; bounded answers.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { createApiKey } from '../../src/domain/keys.js'
import { buildTestApp } from '../helper.js'
import { insertEvents, SEED_EPOCH, sharedFixture } from '../support/ui.js'

const ODD = 'a/b %2F ü <i>'

const seeded = sharedFixture(async (cleanup) => {
  const ctx = await buildTestApp(cleanup)
  const account = ctx.tenant.account.id
  const ids = await insertEvents(ctx.database, account, [
    { service: 'App1', environment: 'Staging', version: '1.0.2', status: 'Deployed' },
    { service: 'App1', environment: 'Prod', version: '1.0.1', status: 'Deployed' },
    { service: 'App1', environment: 'Prod', version: '1.0.2', status: 'Deploying' },
    { service: 'App1', environment: 'Prod', version: '1.0.2', status: 'Failed' },
    { service: ODD, environment: 'Prod', version: 'x', status: 'Deployed' },
    ...Array.from({ length: 250 }, (_, i) => ({
      service: 'Busy',
      environment: 'Prod',
      version: `b${i}`,
      status: 'Deployed' as const,
      received_at: SEED_EPOCH + 3_600_000 + i,
    })),
  ])
  const { key } = await createApiKey(ctx.database.db, {
    accountId: account,
    name: 'r',
    createdBy: 't',
    scopes: ['read'],
  })
  return { ctx, ids, key }
})

test('/get: every app with its running version per environment, in order', async () => {
  const { ctx, key } = await seeded()
  for (const method of ['GET', 'POST'] as const) {
    const res = await ctx.app.inject({ method, url: '/get', headers: { 'x-api-key': key } })
    assert.equal(res.statusCode, 200, res.payload)
    const body = res.json() as {
      environments: string[]
      apps: { app: string; environments: Record<string, { version: string; deployed_at: string }> }[]
    }
    assert.deepEqual(body.environments, ['Staging', 'Prod'])
    const app1 = body.apps.find((a) => a.app === 'App1')
    assert.deepEqual(Object.keys(app1?.environments ?? {}), ['Staging', 'Prod'])
    assert.equal(app1?.environments.Prod?.version, '1.0.1', 'the failed 1.0.2 is not running')
    assert.equal(app1?.environments.Staging?.version, '1.0.2')
    assert.equal(body.apps.find((a) => a.app === ODD)?.environments.Prod?.version, 'x')
  }
})

test('/get/logs: one app and environment, newest first, bounded, from the query or a body', async () => {
  const { ctx, ids, key } = await seeded()
  const headers = { 'x-api-key': key }
  const res = await ctx.app.inject({ url: '/get/logs?app=App1&env=Prod', headers })
  assert.equal(res.statusCode, 200, res.payload)
  const body = res.json() as {
    app: string
    env: string
    logs: { id: number; version: string; status: string }[]
    next_cursor: string | null
  }
  assert.equal(body.app, 'App1')
  assert.deepEqual(
    body.logs.map((e) => e.id),
    [ids[3], ids[2], ids[1]],
  )
  assert.equal(body.next_cursor, null)

  // An encoded odd name, and the same through POST bodies (curl -d sends JSON form-encoded).
  const odd = await ctx.app.inject({ url: `/get/logs?app=${encodeURIComponent(ODD)}&env=Prod`, headers })
  assert.deepEqual(
    (odd.json() as typeof body).logs.map((e) => e.version),
    ['x'],
  )
  for (const contentType of [
    'application/json',
    'application/x-www-form-urlencoded',
    'text/plain',
    undefined,
  ]) {
    const posted = await ctx.app.inject({
      method: 'POST',
      url: '/get/logs',
      headers: { ...headers, ...(contentType ? { 'content-type': contentType } : {}) },
      payload: JSON.stringify({ app: 'App1', env: 'Prod', limit: 2 }),
    })
    assert.equal(posted.statusCode, 200, `${contentType}: ${posted.payload}`)
    assert.deepEqual(
      (posted.json() as typeof body).logs.map((e) => e.id),
      [ids[3], ids[2]],
    )
  }
  const form = await ctx.app.inject({
    method: 'POST',
    url: '/get/logs',
    headers: { ...headers, 'content-type': 'application/x-www-form-urlencoded' },
    payload: 'app=App1&env=Prod',
  })
  assert.equal((form.json() as typeof body).logs.length, 3)

  // Bounded: 100 by default, at most 1000; the rest by next_cursor.
  const busy = (await ctx.app.inject({ url: '/get/logs?app=Busy&env=Prod', headers })).json() as typeof body
  assert.equal(busy.logs.length, 100)
  assert.equal(busy.logs[0]?.version, 'b249')
  assert.ok(busy.next_cursor)
  const rest = (
    await ctx.app.inject({
      url: `/get/logs?app=Busy&env=Prod&limit=1000&cursor=${busy.next_cursor}`,
      headers,
    })
  ).json() as typeof body
  assert.equal(rest.logs.length, 150)
  assert.equal(rest.next_cursor, null)
})

test('/get/logs: missing app or env and bad limits are 422, each named', async () => {
  const { ctx, key } = await seeded()
  const fields = async (method: 'GET' | 'POST', url: string, payload?: string) => {
    const res = await ctx.app.inject({
      method,
      url,
      headers: { 'x-api-key': key },
      ...(payload ? { payload } : {}),
    })
    assert.equal(res.statusCode, 422, `${method} ${url}: ${res.payload}`)
    return (res.json() as { errors: { field: string }[] }).errors.map((e) => e.field).sort()
  }
  assert.deepEqual(await fields('GET', '/get/logs'), ['app', 'env'])
  assert.deepEqual(await fields('GET', '/get/logs?app=App1'), ['env'])
  assert.deepEqual(await fields('POST', '/get/logs', JSON.stringify({ env: 'Prod' })), ['app'])
  assert.deepEqual(await fields('GET', '/get/logs?app=App1&env=Prod&limit=0'), ['limit'])
  assert.deepEqual(await fields('GET', '/get/logs?app=App1&env=Prod&limit=1001'), ['limit'])
  assert.deepEqual(await fields('GET', '/get/logs?app=&env=&limit=abc&cursor=x'), [
    'app',
    'cursor',
    'env',
    'limit',
  ])
  const broken = await ctx.app.inject({
    method: 'POST',
    url: '/get/logs',
    headers: { 'x-api-key': key },
    payload: '{"app":',
  })
  assert.equal(broken.statusCode, 400)
  const wrongMethod = await ctx.app.inject({
    method: 'DELETE',
    url: '/get/logs',
    headers: { 'x-api-key': key },
  })
  assert.equal(wrongMethod.statusCode, 405)
  assert.match(String(wrongMethod.headers.allow), /GET, POST/)
})
