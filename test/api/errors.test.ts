// Every row of the SPEC §1.2 error table: status, problem+json body, and nothing stored.
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { test } from 'node:test'
import type { InjectOptions, LightMyRequestResponse } from 'fastify'
import { pino } from 'pino'
import { buildApp } from '../../src/app.js'
import { openDatabase } from '../../src/db/connect.js'
import { migrateToLatest } from '../../src/db/migrate.js'
import { revokeApiKey } from '../../src/domain/keys.js'
import { openResources } from '../../src/resources.js'
import {
  addTenant,
  buildTestApp,
  freshDatabaseUrl,
  type TestApp,
  testConfig,
  testDialect,
} from '../helper.js'
import { TcpProxy } from '../support/tcp-proxy.js'

type Form = 'put-get' | 'put-post' | 'deploy'
const FORMS: Form[] = ['put-get', 'put-post', 'deploy']

const VALID = { service: 'api', environment: 'prod', version: '1.0.0', status: 'Deployed' }

/** Builds the request for one form from service/environment/version/status values. */
function request(
  form: Form,
  values: Record<string, unknown>,
  headers: Record<string, string>,
): InjectOptions {
  const legacy: Record<string, unknown> = { ...values }
  if ('service' in values) {
    legacy.app = values.service
    delete legacy.service
  }
  if ('environment' in values) {
    legacy.env = values.environment
    delete legacy.environment
  }
  if (form === 'put-get') {
    const qs = new URLSearchParams(legacy as Record<string, string>).toString()
    return { method: 'GET', url: `/put?${qs}`, headers }
  }
  return {
    method: 'POST',
    url: form === 'deploy' ? '/deploy' : '/put',
    headers: { 'content-type': 'application/json', ...headers },
    payload: JSON.stringify(form === 'deploy' ? values : legacy),
  }
}

function assertProblem(res: LightMyRequestResponse, status: number) {
  assert.equal(res.statusCode, status, res.body)
  assert.match(String(res.headers['content-type']), /^application\/problem\+json/)
  const body = res.json()
  assert.equal(body.status, status)
  assert.equal(typeof body.type, 'string')
  assert.equal(typeof body.title, 'string')
  assert.equal(typeof body.detail, 'string')
  return body
}

async function assertNothingStored(ctx: TestApp) {
  assert.equal(await ctx.eventCount(), 0)
}

for (const form of FORMS) {
  test(`${form}: no key header → 401`, async (t) => {
    const ctx = await buildTestApp(t)
    const res = await ctx.app.inject(request(form, VALID, {}))
    const body = assertProblem(res, 401)
    assert.match(body.detail, /API key/)
    assert.ok(res.headers['www-authenticate'])
    await assertNothingStored(ctx)
  })

  test(`${form}: unknown, malformed and revoked keys get one identical 401`, async (t) => {
    const ctx = await buildTestApp(t)
    const revoked = await ctx.addTenant('Acme', 'old')
    await revokeApiKey(ctx.database.db, revoked.account.id, String(revoked.keyId))
    const unknown = `shl_${randomBytes(30).toString('hex').slice(0, 40)}`
    const answers = []
    for (const key of [unknown, 'not-a-key', 'shl_short', revoked.key]) {
      const res = await ctx.app.inject(request(form, VALID, { 'x-api-key': key }))
      answers.push({ status: res.statusCode, body: res.body, type: res.headers['content-type'] })
    }
    const bearer = await ctx.app.inject(request(form, VALID, { authorization: `Bearer ${revoked.key}` }))
    answers.push({ status: bearer.statusCode, body: bearer.body, type: bearer.headers['content-type'] })
    assertProblem(await ctx.app.inject(request(form, VALID, { 'x-api-key': unknown })), 401)
    for (const a of answers) assert.deepEqual(a, answers[0])
    await assertNothingStored(ctx)
  })

  test(`${form}: every bad field is listed in one 422`, async (t) => {
    const ctx = await buildTestApp(t)
    const res = await ctx.app.inject(
      request(
        form,
        { service: '   ', environment: 'e'.repeat(101), version: 'a\u0007b', status: 'Done' },
        { 'x-api-key': ctx.tenant.key },
      ),
    )
    const body = assertProblem(res, 422)
    const service = form === 'deploy' ? 'service' : 'app'
    const environment = form === 'deploy' ? 'environment' : 'env'
    assert.deepEqual(
      body.errors.map((e: { field: string }) => e.field).sort(),
      [environment, service, 'status', 'version'].sort(),
    )
    const statusError = body.errors.find((e: { field: string }) => e.field === 'status')
    assert.match(statusError.message, /Deploying, Deployed, Failed/)
    await assertNothingStored(ctx)
  })

  test(`${form}: missing fields → 422 naming each`, async (t) => {
    const ctx = await buildTestApp(t)
    const res = await ctx.app.inject(request(form, { version: '1' }, { 'x-api-key': ctx.tenant.key }))
    const body = assertProblem(res, 422)
    assert.equal(body.errors.length, 3)
    await assertNothingStored(ctx)
  })
}

test('422 for each kind of bad value, limits at the edge', async (t) => {
  const ctx = await buildTestApp(t)
  const cases: Array<[Record<string, unknown>, string]> = [
    [{ ...VALID, service: 's'.repeat(101) }, 'service'],
    [{ ...VALID, environment: '' }, 'environment'],
    [{ ...VALID, version: 'v'.repeat(201) }, 'version'],
    [{ ...VALID, version: 'tab\there' }, 'version'],
    [{ ...VALID, service: 'nul\u0000' }, 'service'],
    [{ ...VALID, service: 'del\u007f' }, 'service'],
    [{ ...VALID, status: 'deployed!' }, 'status'],
    [{ ...VALID, version: 1.2 }, 'version'],
    [{ ...VALID, service: ['a'] }, 'service'],
    [{ ...VALID, environment: null }, 'environment'],
    [{ ...VALID, description: 'd'.repeat(501) }, 'description'],
    [{ ...VALID, url: 'javascript:alert(1)' }, 'url'],
    [{ ...VALID, version: '\ud800' }, 'version'],
  ]
  for (const [values, field] of cases) {
    const res = await ctx.app.inject({
      method: 'POST',
      url: '/deploy',
      headers: { 'x-api-key': ctx.tenant.key, 'content-type': 'application/json' },
      payload: JSON.stringify(values),
    })
    const body = assertProblem(res, 422)
    assert.deepEqual(
      body.errors.map((e: { field: string }) => e.field),
      [field],
      `${JSON.stringify(values)} → ${res.body}`,
    )
  }
  await assertNothingStored(ctx)
})

test('GET /put: a repeated query parameter is refused', async (t) => {
  const ctx = await buildTestApp(t)
  const res = await ctx.app.inject({
    method: 'GET',
    url: '/put?app=a&app=b&env=e&version=1&status=Deployed',
    headers: { 'x-api-key': ctx.tenant.key },
  })
  const body = assertProblem(res, 422)
  assert.equal(body.errors[0].field, 'app')
  await assertNothingStored(ctx)
})

for (const [label, payload, contentType] of [
  ['truncated JSON', '{"service":"api",', 'application/json'],
  ['a JSON array', '[1,2]', 'application/json'],
  ['a JSON string', '"hello"', 'text/plain'],
  ['form-encoded broken JSON', '{"service": nope}', 'application/x-www-form-urlencoded'],
  ['invalid UTF-8', Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d]), 'application/json'],
] as const) {
  test(`body not parseable (${label}) → 400`, async (t) => {
    const ctx = await buildTestApp(t)
    for (const url of ['/put', '/deploy']) {
      const res = await ctx.app.inject({
        method: 'POST',
        url,
        headers: { 'x-api-key': ctx.tenant.key, 'content-type': contentType },
        payload,
      })
      assertProblem(res, 400)
    }
    await assertNothingStored(ctx)
  })
}

test('GET /put and form bodies: a broken or non-UTF-8 %-escape → 400, not stored as text', async (t) => {
  const ctx = await buildTestApp(t)
  for (const qs of ['app=%FF&env=e&version=1&status=Deployed', 'app=a%2&env=e&version=1&status=Deployed']) {
    const res = await ctx.app.inject({
      method: 'GET',
      url: `/put?${qs}`,
      headers: { 'x-api-key': ctx.tenant.key },
    })
    assert.match(assertProblem(res, 400).detail, /%-escape/)
    const form = await ctx.app.inject({
      method: 'POST',
      url: '/put',
      headers: { 'x-api-key': ctx.tenant.key, 'content-type': 'application/x-www-form-urlencoded' },
      payload: qs,
    })
    assertProblem(form, 400)
  }
  await assertNothingStored(ctx)
})

test('a body over 16 KiB → 413', async (t) => {
  const ctx = await buildTestApp(t)
  const big = JSON.stringify({ ...VALID, description: 'x'.repeat(17 * 1024) })
  for (const url of ['/put', '/deploy']) {
    const res = await ctx.app.inject({
      method: 'POST',
      url,
      headers: { 'x-api-key': ctx.tenant.key, 'content-type': 'application/json' },
      payload: big,
    })
    assertProblem(res, 413)
  }
  await assertNothingStored(ctx)
})

test('Idempotency-Key longer than 200 characters → 422', async (t) => {
  const ctx = await buildTestApp(t)
  const res = await ctx.app.inject(
    request('deploy', VALID, { 'x-api-key': ctx.tenant.key, 'idempotency-key': 'k'.repeat(201) }),
  )
  assert.deepEqual(
    assertProblem(res, 422).errors.map((e: { field: string }) => e.field),
    ['Idempotency-Key'],
  )
  // Listed together with the fields' own problems.
  const both = await ctx.app.inject(
    request('deploy', { ...VALID, status: 'nope' }, { 'x-api-key': ctx.tenant.key, 'idempotency-key': ' ' }),
  )
  assert.deepEqual(
    assertProblem(both, 422).errors.map((e: { field: string }) => e.field),
    ['status', 'Idempotency-Key'],
  )
  await assertNothingStored(ctx)
})

for (const store of ['memory', 'redis'] as const) {
  test(`rate limit per key (${store}): 429 with Retry-After and RateLimit-* headers, shared by all forms`, async (t) => {
    const env: Record<string, string> = { SHIPLOG_RATE_LIMIT: '3' }
    if (store === 'redis') env.REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'
    const ctx = await buildTestApp(t, { env })
    const key = { 'x-api-key': ctx.tenant.key }
    const first = await ctx.app.inject(request('put-get', VALID, key))
    assert.equal(first.statusCode, 201)
    assert.equal(first.headers['ratelimit-limit'], '3')
    assert.equal(first.headers['ratelimit-remaining'], '2')
    assert.equal((await ctx.app.inject(request('put-post', VALID, key))).statusCode, 201)
    assert.equal((await ctx.app.inject(request('deploy', VALID, key))).statusCode, 201)
    const limited = await ctx.app.inject(request('deploy', VALID, key))
    assertProblem(limited, 429)
    const retryAfter = Number(limited.headers['retry-after'])
    assert.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After ${limited.headers['retry-after']}`)
    assert.equal(limited.headers['ratelimit-remaining'], '0')
    assert.ok(limited.headers['ratelimit-reset'])
    assert.equal(await ctx.eventCount(), 3)
    // Another key has its own budget.
    const other = await ctx.addTenant('Acme', 'second')
    assert.equal((await ctx.app.inject(request('deploy', VALID, { 'x-api-key': other.key }))).statusCode, 201)
  })
}

test('wrong method on a known path → 405 with Allow, whatever the key', async (t) => {
  const ctx = await buildTestApp(t)
  const cases: Array<[InjectOptions['method'], string, string]> = [
    ['DELETE', '/put', 'GET, POST'],
    ['PUT', '/put', 'GET, POST'],
    ['HEAD', '/put', 'GET, POST'],
    ['GET', '/deploy', 'POST'],
    ['PATCH', '/deploy', 'POST'],
    ['DELETE', '/deploy', 'POST'],
  ]
  for (const [method, url, allow] of cases) {
    const res = await ctx.app.inject({ method, url })
    assert.equal(res.statusCode, 405, `${method} ${url}`)
    assert.match(String(res.headers.allow), new RegExp(`^${allow}`))
    if (method !== 'HEAD') assertProblem(res, 405)
  }
  const options = await ctx.app.inject({ method: 'OPTIONS', url: '/deploy' })
  assert.equal(options.statusCode, 204)
  assert.equal(options.headers.allow, 'POST, OPTIONS')
  await assertNothingStored(ctx)
})

test('unknown path → 404 problem', async (t) => {
  const ctx = await buildTestApp(t)
  assertProblem(await ctx.app.inject({ method: 'GET', url: '/nope' }), 404)
})

test('database unavailable → 503, and the service recovers by itself', async (t) => {
  let cut: () => Promise<void>
  let restore: () => Promise<void>
  let ctx: TestApp
  if (testDialect === 'postgres') {
    const url = new URL(await freshDatabaseUrl(t))
    const proxy = new TcpProxy(url.hostname, Number(url.port || 5432))
    await proxy.start()
    t.after(() => proxy.stop())
    url.hostname = '127.0.0.1'
    url.port = String(proxy.port)
    ctx = await buildTestApp(t, { databaseUrl: url.toString() })
    cut = () => proxy.stop()
    restore = () => proxy.start()
  } else {
    ctx = await buildTestApp(t)
    assert.ok(ctx.database.dialect === 'sqlite')
    const database = ctx.database
    // A database that cannot be written (read-only or full disk) answers like one that is away: the
    // write connection, borrowed from its owner's queue, is told to refuse writes.
    const setQueryOnly = async (on: boolean) => {
      const hold = await database.hold()
      try {
        hold.sql.execute(`PRAGMA query_only = ${on ? 'ON' : 'OFF'}`, [])
      } finally {
        hold.release()
      }
    }
    cut = () => setQueryOnly(true)
    restore = () => setQueryOnly(false)
  }
  const key = { 'x-api-key': ctx.tenant.key }
  assert.equal((await ctx.app.inject(request('deploy', VALID, key))).statusCode, 201)

  await cut()
  const started = Date.now()
  const down = await Promise.all([
    ctx.app.inject(request('deploy', { ...VALID, version: 'lost-1' }, key)),
    ctx.app.inject(request('put-get', { ...VALID, version: 'lost-2' }, key)),
  ])
  for (const res of down) {
    const body = assertProblem(res, 503)
    assert.doesNotMatch(JSON.stringify(body), /ECONN|SQLITE|stack/i)
  }
  assert.ok(Date.now() - started < 12_000, 'a 503 comes in bounded time')
  assert.ok(down[0].headers['retry-after'])
  assertProblem(await ctx.app.inject({ method: 'GET', url: '/readyz' }), 503)
  assert.equal((await ctx.app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200)

  await restore()
  const back = await ctx.app.inject(request('deploy', { ...VALID, version: 'after' }, key))
  assert.equal(back.statusCode, 201, back.body)
  assert.equal((await ctx.app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200)
  const versions = (await ctx.database.db.selectFrom('events').select('version').orderBy('id').execute()).map(
    (r) => r.version,
  )
  assert.deepEqual(versions, ['1.0.0', 'after'])
})

test('a URL that does not decode (GET /%ff) → 400 problem+json with the security headers, the URL not echoed', async (t) => {
  const ctx = await buildTestApp(t)
  for (const url of ['/%ff', '/put/%ff?app=a', '/logs/%E0%A4%A', '/deploy%c0']) {
    for (const method of ['GET', 'POST'] as const) {
      const res = await ctx.app.inject({ method, url, headers: { 'x-api-key': ctx.tenant.key } })
      const body = assertProblem(res, 400)
      assert.equal(body.type, 'urn:shiplog:problem:malformed-url', url)
      assert.doesNotMatch(
        res.body,
        /%ff|%c0|%E0|FST_ERR/i,
        `${url}: the URL and Fastify's code are not echoed`,
      )
      assert.equal(res.headers['x-content-type-options'], 'nosniff', url)
      assert.match(String(res.headers['content-security-policy']), /frame-ancestors 'none'/, url)
      assert.equal(res.headers['x-frame-options'], 'DENY', url)
    }
  }
  await assertNothingStored(ctx)
})

test('Redis unreachable: one warning without a stack, failures counted, requests allowed, one line when it is back', async (t) => {
  const redisUrl = new URL(process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379')
  const proxy = new TcpProxy(redisUrl.hostname, Number(redisUrl.port || 6379))
  await proxy.start()
  t.after(() => proxy.stop())
  const lines: Array<{ level: number; msg: string; [field: string]: unknown }> = []
  const stream = {
    write(line: string) {
      lines.push(JSON.parse(line))
    },
  }
  const databaseUrl = await freshDatabaseUrl(t)
  const config = testConfig(databaseUrl, { REDIS_URL: `redis://127.0.0.1:${proxy.port}`, LOG_LEVEL: 'info' })
  const database = openDatabase(config.database)
  t.after(() => database.close())
  await migrateToLatest(database)
  const log = pino({ level: 'info' }, stream)
  const resources = await openResources(config, database, log)
  t.after(() => resources.close())
  const app = await buildApp({ config, database, resources, loggerInstance: log })
  t.after(() => app.close())
  const { key } = await addTenant(database, 'Acme')
  const send = () =>
    app.inject({ method: 'POST', url: '/deploy', headers: { 'x-api-key': key }, payload: VALID })
  assert.ok((await send()).headers['ratelimit-limit'], 'counted in Redis while it is there')

  await proxy.stop()
  // ioredis tries again about every second; each try used to log a warning with a stack trace.
  const until = Date.now() + 4000
  while (Date.now() < until) {
    const res = await send()
    assert.equal(res.statusCode, 201, 'requests are allowed while Redis is away')
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
  const redisLines = () => lines.filter((l) => /redis|rate limit/i.test(l.msg))
  const down = redisLines()
  assert.equal(down.length, 1, `one line while Redis is away:\n${down.map((l) => l.msg).join('\n')}`)
  assert.equal(down[0]?.level, 40, 'a warning')
  assert.match(down[0]?.msg ?? '', /redis unavailable/)
  assert.doesNotMatch(JSON.stringify(down), /"stack"|\bat [\w.]+ \(/, 'no stack trace')

  await proxy.start()
  const deadline = Date.now() + 10_000
  while (!lines.some((l) => /redis available again/.test(l.msg)) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  const back = redisLines().slice(1)
  assert.equal(back.length, 1, `one line when it is back: ${back.map((l) => l.msg).join('\n')}`)
  assert.equal(back[0]?.level, 30)
  assert.ok(Number(back[0]?.failures) >= 2, 'the failures meanwhile were counted')
  assert.ok((await send()).headers['ratelimit-limit'], 'counted in Redis again')
})
