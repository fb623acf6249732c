// Each request form, sent as real clients send it over a socket, records the event and answers 201.
import assert from 'node:assert/strict'
import type { AddressInfo } from 'node:net'
import { test } from 'node:test'
import { buildTestApp, type TestApp } from '../helper.js'
import { rawRequest } from '../support/raw-http.js'

async function listening(t: Parameters<typeof buildTestApp>[0]): Promise<TestApp & { port: number }> {
  const ctx = await buildTestApp(t)
  await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  return { ...ctx, port: (ctx.app.server.address() as AddressInfo).port }
}

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

function assertCreated(
  res: { status: number; headers: Record<string, string>; json(): unknown },
  expected: Record<string, unknown>,
) {
  assert.equal(res.status, 201, JSON.stringify(res.json()))
  assert.match(res.headers['content-type'] ?? '', /^application\/json/)
  const body = res.json() as Record<string, unknown>
  assert.equal(typeof body.id, 'number')
  assert.ok(Number.isInteger(body.id) && (body.id as number) > 0)
  assert.match(String(body.received_at), ISO_MS)
  for (const [k, v] of Object.entries(expected)) assert.deepEqual(body[k], v, `field ${k}`)
  return body
}

async function storedRow(ctx: TestApp, id: number) {
  return ctx.database.db.selectFrom('events').selectAll().where('id', '=', id).executeTakeFirstOrThrow()
}

test('GET /put: "+" and %20 both mean space, header name in any case', async (t) => {
  const ctx = await listening(t)
  const res = await rawRequest(ctx.port, [
    'GET /put?app=My+App&env=Prod%20EU&version=master%3A4d0r98wa&status=Deployed HTTP/1.1',
    `X-Api-KEY: ${ctx.tenant.key}`,
    'User-Agent: curl/8.5.0',
    'Accept: */*',
  ])
  const body = assertCreated(res, {
    service: 'My App',
    environment: 'Prod EU',
    version: 'master:4d0r98wa',
    status: 'Deployed',
    source: 'put-get',
    api_key_name: 'ci',
    url: null,
    commit: null,
  })
  const row = await storedRow(ctx, body.id as number)
  assert.equal(row.service, 'My App')
  assert.equal(row.account_id, ctx.tenant.account.id)
  assert.equal(row.api_key_id, ctx.tenant.keyId)
  assert.equal(new Date(row.received_at).toISOString(), body.received_at)
})

test('GET /put: a literal "+" survives when sent as %2B', async (t) => {
  const ctx = await listening(t)
  const res = await rawRequest(ctx.port, [
    'GET /put?app=api&env=prod&version=1.0.0%2Bbuild.5&status=deploying HTTP/1.1',
    `X-API-Key: ${ctx.tenant.key}`,
  ])
  assertCreated(res, { version: '1.0.0+build.5', status: 'Deploying' })
})

test('POST /put: curl -d sends JSON labelled application/x-www-form-urlencoded', async (t) => {
  const ctx = await listening(t)
  const res = await rawRequest(
    ctx.port,
    [
      'POST /put HTTP/1.1',
      `X-API-Key: ${ctx.tenant.key}`,
      'User-Agent: curl/8.5.0',
      'Accept: */*',
      'Content-Type: application/x-www-form-urlencoded',
    ],
    '{"app":"App1","env":"Prod","version":"1.0.3","status":"Deployed"}',
  )
  const body = assertCreated(res, {
    service: 'App1',
    environment: 'Prod',
    version: '1.0.3',
    status: 'Deployed',
    source: 'put-post',
  })
  assert.equal((await storedRow(ctx, body.id as number)).source, 'put-post')
})

for (const contentType of ['application/json', 'application/json; charset=utf-8', 'text/plain', null]) {
  test(`POST /put: a JSON body with ${contentType ?? 'no'} content type`, async (t) => {
    const ctx = await listening(t)
    const head = ['POST /put HTTP/1.1', `x-api-key: ${ctx.tenant.key}`]
    if (contentType) head.push(`Content-Type: ${contentType}`)
    const res = await rawRequest(
      ctx.port,
      head,
      '{"app":"App1","env":"Staging","version":"2.0","status":"FAILED"}',
    )
    assertCreated(res, { service: 'App1', environment: 'Staging', version: '2.0', status: 'Failed' })
  })
}

test('POST /put: real form fields', async (t) => {
  const ctx = await listening(t)
  const res = await rawRequest(
    ctx.port,
    ['POST /put HTTP/1.1', `X-API-Key: ${ctx.tenant.key}`, 'Content-Type: application/x-www-form-urlencoded'],
    'app=My+App&env=Prod&version=feature%2Fa%26b%3Dc&status=Deployed',
  )
  assertCreated(res, { service: 'My App', version: 'feature/a&b=c', source: 'put-post' })
})

test('POST /deploy: application/json with x-api-key', async (t) => {
  const ctx = await listening(t)
  const res = await rawRequest(
    ctx.port,
    ['POST /deploy HTTP/1.1', 'Content-Type: application/json', `x-api-key: ${ctx.tenant.key}`],
    JSON.stringify({ service: 'billing', environment: 'production', status: 'Deploying', version: 'v42' }),
  )
  const body = assertCreated(res, {
    service: 'billing',
    environment: 'production',
    version: 'v42',
    status: 'Deploying',
    source: 'deploy',
  })
  assert.equal((await storedRow(ctx, body.id as number)).source, 'deploy')
})

test('POST /deploy: JSON sent by curl -d as form-encoded, key as Authorization: Bearer', async (t) => {
  const ctx = await listening(t)
  const res = await rawRequest(
    ctx.port,
    [
      'POST /deploy HTTP/1.1',
      'Content-Type: application/x-www-form-urlencoded',
      `Authorization: Bearer ${ctx.tenant.key}`,
    ],
    '{"service":"billing","environment":"production","status":"Deployed","version":"v42"}',
  )
  assertCreated(res, { service: 'billing', status: 'Deployed', source: 'deploy' })
})

test('the same body shape answers all three forms', async (t) => {
  const ctx = await listening(t)
  const key = `X-API-Key: ${ctx.tenant.key}`
  const a = await rawRequest(ctx.port, ['GET /put?app=a&env=e&version=1&status=Deployed HTTP/1.1', key])
  const b = await rawRequest(
    ctx.port,
    ['POST /put HTTP/1.1', key, 'Content-Type: application/json'],
    '{"app":"a","env":"e","version":"1","status":"Deployed"}',
  )
  const c = await rawRequest(
    ctx.port,
    ['POST /deploy HTTP/1.1', key, 'Content-Type: application/json'],
    '{"service":"a","environment":"e","version":"1","status":"Deployed"}',
  )
  const keys = (r: typeof a) => Object.keys(r.json() as object).sort()
  assert.deepEqual(keys(a), keys(b))
  assert.deepEqual(keys(b), keys(c))
  const [ida, idb, idc] = [a, b, c].map((r) => (r.json() as { id: number }).id)
  assert.ok(ida !== undefined && idb !== undefined && idc !== undefined)
  assert.ok(ida < idb && idb < idc, `ids increase in arrival order: ${[ida, idb, idc]}`)
})

test('values are trimmed, status canonicalised, extras stored, unknown fields ignored', async (t) => {
  const ctx = await buildTestApp(t)
  const res = await ctx.app.inject({
    method: 'POST',
    url: '/deploy',
    headers: { 'x-api-key': ctx.tenant.key, 'content-type': 'application/json' },
    payload: {
      service: '  api  ',
      environment: '\tprod\n',
      version: ' 1.2.3 ',
      status: 'dEpLoYeD',
      url: 'https://ci.example.com/runs/7',
      commit: '4d0r98wa0123',
      description: 'Hotfix for login',
      deployer: 'ana',
      team: 'ignored',
    },
  })
  assert.equal(res.statusCode, 201)
  const body = res.json()
  assert.equal(body.service, 'api')
  assert.equal(body.environment, 'prod')
  assert.equal(body.version, '1.2.3')
  assert.equal(body.status, 'Deployed')
  assert.equal(body.url, 'https://ci.example.com/runs/7')
  assert.equal(body.commit, '4d0r98wa0123')
  assert.equal(body.description, 'Hotfix for login')
  assert.equal(body.deployer, 'ana')
  assert.equal('team' in body, false)
  const row = await storedRow(ctx, body.id)
  assert.equal(row.commit_sha, '4d0r98wa0123')
  assert.equal(row.status, 'Deployed')
})

test('hostile and non-Latin text is stored verbatim', async (t) => {
  const ctx = await buildTestApp(t)
  const values = {
    service: '<script>alert(1)</script>',
    environment: '"><img src=x onerror=alert(1)>',
    version: '=HYPERLINK("http://evil";"x") \' OR 1=1; DROP TABLE events; --',
    status: 'Failed',
    description: 'Déploiement ✓ 部署 🚀',
  }
  const res = await ctx.app.inject({
    method: 'POST',
    url: '/deploy',
    headers: { 'x-api-key': ctx.tenant.key },
    payload: values,
  })
  assert.equal(res.statusCode, 201)
  const row = await storedRow(ctx, res.json().id)
  assert.equal(row.service, values.service)
  assert.equal(row.environment, values.environment)
  assert.equal(row.version, values.version)
  assert.equal(row.description, values.description)
})

test('limits count characters, not bytes: 100 emoji are a valid service name', async (t) => {
  const ctx = await buildTestApp(t)
  const res = await ctx.app.inject({
    method: 'POST',
    url: '/deploy',
    headers: { 'x-api-key': ctx.tenant.key },
    payload: {
      service: '🚀'.repeat(100),
      environment: 'e'.repeat(100),
      version: 'v'.repeat(200),
      status: 'Deployed',
    },
  })
  assert.equal(res.statusCode, 201, res.body)
})

test('Idempotency-Key: a repeat returns 200 with the original event and stores nothing', async (t) => {
  const ctx = await buildTestApp(t)
  const send = (version: string, idem = 'run-123-step-4') =>
    ctx.app.inject({
      method: 'POST',
      url: '/deploy',
      headers: { 'x-api-key': ctx.tenant.key, 'idempotency-key': idem },
      payload: { service: 'api', environment: 'prod', version, status: 'Deployed' },
    })
  const first = await send('1.0.0')
  assert.equal(first.statusCode, 201)
  assert.equal(first.headers['idempotent-replayed'], undefined)
  const again = await send('1.0.0')
  assert.equal(again.statusCode, 200)
  assert.equal(again.headers['idempotent-replayed'], 'true')
  assert.deepEqual(again.json(), first.json())
  assert.equal(await ctx.eventCount(), 1)

  // Another key value records a new event; the same value in another account is independent.
  assert.equal((await send('1.0.0', 'run-124')).statusCode, 201)
  const other = await ctx.addTenant('Other')
  const foreign = await ctx.app.inject({
    method: 'GET',
    url: '/put?app=api&env=prod&version=1.0.0&status=Deployed',
    headers: { 'x-api-key': other.key, 'idempotency-key': 'run-123-step-4' },
  })
  assert.equal(foreign.statusCode, 201)
  assert.notEqual(foreign.json().id, first.json().id)
  assert.equal(await ctx.eventCount(), 3)
})

test('Idempotency-Key: concurrent repeats store exactly one event', async (t) => {
  const ctx = await buildTestApp(t)
  const responses = await Promise.all(
    Array.from({ length: 20 }, () =>
      ctx.app.inject({
        method: 'POST',
        url: '/put',
        headers: { 'x-api-key': ctx.tenant.key, 'idempotency-key': 'same' },
        payload: { app: 'api', env: 'prod', version: '9', status: 'Deployed' },
      }),
    ),
  )
  assert.equal(responses.filter((r) => r.statusCode === 201).length, 1)
  assert.equal(responses.filter((r) => r.statusCode === 200).length, 19)
  assert.equal(new Set(responses.map((r) => r.json().id)).size, 1)
  assert.equal(await ctx.eventCount(), 1)
})

test('Idempotency-Key: a record older than 24 h no longer replays', async (t) => {
  const ctx = await buildTestApp(t)
  const send = () =>
    ctx.app.inject({
      method: 'POST',
      url: '/deploy',
      headers: { 'x-api-key': ctx.tenant.key, 'idempotency-key': 'old' },
      payload: { service: 'api', environment: 'prod', version: '1', status: 'Deployed' },
    })
  assert.equal((await send()).statusCode, 201)
  await ctx.database.db
    .updateTable('idempotency_keys')
    .set({ created_at: Date.now() - 25 * 3600 * 1000 })
    .execute()
  assert.equal((await send()).statusCode, 201)
  assert.equal(await ctx.eventCount(), 2)
})

test('concurrent requests are all stored with distinct ids (group commit)', async (t) => {
  const ctx = await buildTestApp(t)
  const n = 300
  const responses = await Promise.all(
    Array.from({ length: n }, (_, i) =>
      ctx.app.inject({
        method: 'POST',
        url: '/deploy',
        headers: { 'x-api-key': ctx.tenant.key },
        payload: { service: `svc-${i % 7}`, environment: 'prod', version: `v${i}`, status: 'Deployed' },
      }),
    ),
  )
  assert.deepEqual(
    responses.map((r) => r.statusCode),
    Array(n).fill(201),
  )
  const ids = responses.map((r) => r.json().id as number)
  assert.equal(new Set(ids).size, n)
  assert.equal(await ctx.eventCount(), n)
  for (const [i, r] of responses.entries()) {
    const row = await storedRow(ctx, r.json().id)
    assert.equal(row.version, `v${i}`)
  }
})

test('last-used time of a key is recorded without a write per request', async (t) => {
  const ctx = await buildTestApp(t)
  const before = Date.now()
  const res = await ctx.app.inject({
    method: 'GET',
    url: '/put?app=a&env=b&version=c&status=Deployed',
    headers: { 'x-api-key': ctx.tenant.key },
  })
  assert.equal(res.statusCode, 201)
  const pending = await ctx.database.db
    .selectFrom('api_keys')
    .select('last_used_at')
    .where('id', '=', ctx.tenant.keyId)
    .executeTakeFirstOrThrow()
  assert.equal(pending.last_used_at, null)
  await ctx.app.keyUsage.flush()
  const row = await ctx.database.db
    .selectFrom('api_keys')
    .select('last_used_at')
    .where('id', '=', ctx.tenant.keyId)
    .executeTakeFirstOrThrow()
  assert.ok(row.last_used_at !== null && row.last_used_at >= before)
})
