// GET /api/v1/check (SPEC §11): every reason that applies, each with its end computed by hand (a
// lock's end time, the end of a freeze occurrence, a recent success plus the promotion wait), the
// 422 naming each bad parameter, and the read scope (a session may read too).
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { cliSource } from '../../src/domain/audit/log.js'
import {
  addFreezeWindow,
  lockEnvironment,
  markVersionBad,
  setPromotionRule,
} from '../../src/domain/guardrails/commands.js'
import { createApiKey } from '../../src/domain/keys.js'
import { buildTestApp, type TestApp } from '../helper.js'
import { createUserIn, deploy, login } from '../support/ui.js'

const MIN = 60_000

async function seeded(t: Parameters<typeof buildTestApp>[0]) {
  const ctx = await buildTestApp(t)
  for (const environment of ['Dev', 'Staging', 'Prod']) {
    const res = await deploy(ctx.app, ctx.tenant.key, {
      service: 'App1',
      environment,
      version: '0.9.0',
      status: 'Deployed',
    })
    assert.equal(res.status, 201)
  }
  await ctx.app.deployments.current()
  const { key } = await createApiKey(ctx.database.db, {
    accountId: ctx.tenant.account.id,
    name: 'reader',
    createdBy: 'test',
    scopes: ['read'],
  })
  return { ctx, read: key }
}

async function ok(done: Promise<{ ok: boolean }>): Promise<void> {
  const result = await done
  assert.ok(result.ok, JSON.stringify(result))
}

const check = (ctx: TestApp, key: string, query: string) =>
  ctx.app.inject({ url: `/api/v1/check?${query}`, headers: { 'x-api-key': key } })

test('allowed with no reasons when nothing applies', async (t) => {
  const { ctx, read } = await seeded(t)
  const res = await check(ctx, read, 'service=App1&environment=Prod&version=1.0.0')
  assert.equal(res.statusCode, 200, res.payload)
  assert.equal(res.headers['cache-control'], 'no-store')
  assert.deepEqual(res.json(), {
    allowed: true,
    reasons: [],
    service: 'App1',
    environment: 'Prod',
    version: '1.0.0',
  })
})

test('every reason, in order, each with its until', async (t) => {
  const { ctx, read } = await seeded(t)
  const db = ctx.database.db
  const account = ctx.tenant.account.id
  const who = cliSource()
  const now = Date.now()
  const lockEnd = Date.UTC(2099, 0, 2, 3, 4, 5, 678)
  const freezeEnd = now + 90 * MIN
  await ok(
    lockEnvironment(
      db,
      account,
      { environment: 'Prod', service: null, reason: 'db move', endsAt: lockEnd },
      who,
    ),
  )
  await ok(
    lockEnvironment(
      db,
      account,
      { environment: 'Prod', service: 'App1', reason: 'audit', endsAt: null },
      who,
    ),
  )
  await ok(
    addFreezeWindow(
      db,
      account,
      {
        environment: 'Prod',
        reason: 'holidays',
        schedule: { kind: 'once', startsAt: now - 10 * MIN, endsAt: freezeEnd },
      },
      who,
    ),
  )
  await ok(markVersionBad(db, account, { service: 'App1', version: '2.0.0', reason: 'leaks memory' }, who))
  await ok(
    setPromotionRule(
      db,
      account,
      { environment: 'Prod', afterEnvironment: 'Staging', minMinutes: 30, requireGood: true },
      who,
    ),
  )
  // 2.0.0 succeeded in Staging ten minutes ago (whole seconds, so the instant is exact).
  const succeeded = Math.floor((now - 10 * MIN) / 1000) * 1000
  for (const [status, at] of [
    ['Deploying', succeeded - MIN],
    ['Deployed', succeeded],
  ] as const) {
    const res = await deploy(ctx.app, ctx.tenant.key, {
      service: 'App1',
      environment: 'Staging',
      version: '2.0.0',
      status,
      occurred_at: new Date(at).toISOString(),
    })
    assert.equal(res.status, 201, JSON.stringify(res.body))
  }

  const res = await check(ctx, read, 'service=App1&environment=Prod&version=2.0.0')
  assert.equal(res.statusCode, 200, res.payload)
  const body = res.json() as {
    allowed: boolean
    reasons: { rule: string; message: string; until: string | null }[]
  }
  assert.equal(body.allowed, false)
  assert.deepEqual(
    body.reasons.map((r) => [r.rule, r.until]),
    [
      ['lock', new Date(lockEnd).toISOString()],
      ['lock', null],
      ['freeze', new Date(freezeEnd).toISOString()],
      ['bad_version', null],
      ['promotion', new Date(succeeded + 30 * MIN).toISOString()],
      ['promotion', null],
    ],
  )
  assert.match(
    body.reasons[0]?.message ?? '',
    /^Prod is locked by cli \(.+\) until 2099-01-02T03:04:05\.678Z: db move$/,
  )
  assert.match(body.reasons[1]?.message ?? '', /^App1 is locked in Prod by .+ until it is unlocked: audit$/)
  assert.match(body.reasons[2]?.message ?? '', /freeze window until .*: holidays$/)
  assert.match(body.reasons[3]?.message ?? '', /App1 2\.0\.0 is marked bad by .+: leaks memory$/)
  assert.match(
    body.reasons[4]?.message ?? '',
    /succeeded in Staging at .*; Prod must wait 30 minutes after that/,
  )

  // Elsewhere only what applies there: Dev has none of it, but 2.0.0 is bad everywhere.
  const dev = (await check(ctx, read, 'service=App1&environment=Dev&version=2.0.0')).json()
  assert.equal(dev.allowed, false)
  assert.deepEqual(
    dev.reasons.map((r: { rule: string }) => r.rule),
    ['bad_version'],
  )
  // A version that never reached Staging: the promotion rule has no end to give.
  const fresh = (await check(ctx, read, 'service=App1&environment=Prod&version=3.0.0')).json()
  assert.deepEqual(
    fresh.reasons.map((r: { rule: string; until: string | null }) => [r.rule, r.until]),
    [
      ['lock', new Date(lockEnd).toISOString()],
      ['lock', null],
      ['freeze', new Date(freezeEnd).toISOString()],
      ['promotion', null],
    ],
  )
})

test('bad or missing parameters: one 422 naming each', async (t) => {
  const { ctx, read } = await seeded(t)
  const none = await check(ctx, read, '')
  assert.equal(none.statusCode, 422)
  assert.match(String(none.headers['content-type']), /^application\/problem\+json/)
  assert.equal(none.json().type, 'urn:shiplog:problem:invalid-parameters')
  assert.deepEqual(
    none.json().errors.map((e: { field: string }) => e.field),
    ['service', 'environment', 'version'],
  )
  const bad = await check(
    ctx,
    read,
    `service=${'s'.repeat(101)}&environment=%01&version=${'v'.repeat(201)}&unknown=ignored`,
  )
  assert.equal(bad.statusCode, 422)
  assert.deepEqual(
    bad.json().errors.map((e: { field: string; message: string }) => e.field),
    ['service', 'environment', 'version'],
  )
  const twice = await check(ctx, read, 'service=a&service=b&environment=Prod&version=%20')
  assert.deepEqual(
    twice.json().errors.map((e: { field: string; message: string }) => e.message),
    ['service must be given once, not repeated', 'version is required'],
  )
})

test('read scope: an ingest-only key gets 403, no key 401, a session may read', async (t) => {
  const { ctx } = await seeded(t)
  const query = 'service=App1&environment=Prod&version=1.0.0'
  const ingestOnly = await check(ctx, ctx.tenant.key, query)
  assert.equal(ingestOnly.statusCode, 403)
  assert.equal(ingestOnly.json().type, 'urn:shiplog:problem:insufficient-scope')
  const anonymous = await ctx.app.inject({ url: `/api/v1/check?${query}` })
  assert.equal(anonymous.statusCode, 401)
  const post = await ctx.app.inject({ method: 'POST', url: `/api/v1/check?${query}` })
  assert.equal(post.statusCode, 405)

  await createUserIn(ctx.database, ctx.tenant.account.id, 'member@example.com', { role: 'member' })
  const browser = await login(ctx.app, 'member@example.com')
  const res = await browser.get(`/api/v1/check?${query}`)
  assert.equal(res.statusCode, 200, res.payload)
  assert.equal(res.json().allowed, true)
})
