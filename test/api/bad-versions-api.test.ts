// /api/v1/bad-versions (issue 27, SPEC §11 "bad versions … API"): a read key or session lists them,
// an ingest key (a pipeline after a failed smoke test) or an admin's JSON session marks one bad and
// takes the mark off; each change audited with who did it, the check and recording see it at once,
// and bad input is a 422 naming each field with nothing stored. Both databases.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { createApiKey, type KeyScope } from '../../src/domain/keys.js'
import { buildTestApp, type TestApp } from '../helper.js'
import { createUserIn, deploy, login } from '../support/ui.js'

async function keyWith(ctx: TestApp, scopes: KeyScope[], name: string): Promise<string> {
  const { key } = await createApiKey(ctx.database.db, {
    accountId: ctx.tenant.account.id,
    name,
    createdBy: 'test',
    scopes,
  })
  return key
}

const send = (ctx: TestApp, method: 'GET' | 'POST' | 'DELETE', url: string, key: string, body?: unknown) =>
  ctx.app.inject({
    method,
    url,
    headers: {
      'x-api-key': key,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
  })

test('mark, list, check, record and unmark through the API; audited with the key', async (t) => {
  const ctx = await buildTestApp(t)
  const ingest = ctx.tenant.key
  const read = await keyWith(ctx, ['read'], 'reader')
  assert.equal(
    (
      await deploy(ctx.app, ingest, {
        service: 'billing',
        environment: 'prod',
        version: '2.4.0',
        status: 'Deployed',
      })
    ).status,
    201,
  )

  const marked = await send(ctx, 'POST', '/api/v1/bad-versions', ingest, {
    service: 'billing',
    version: '2.4.1',
    reason: 'corrupts invoices (INC-42)',
  })
  assert.equal(marked.statusCode, 200, marked.payload)
  const body = marked.json() as Record<string, unknown>
  assert.deepEqual(
    { ...body, marked_at: typeof body.marked_at },
    {
      service: 'billing',
      version: '2.4.1',
      reason: 'corrupts invoices (INC-42)',
      marked_by: 'ci',
      marked_at: 'string',
      replaced: false,
    },
  )
  // A read key may not mark; an ingest key may not list.
  assert.equal(
    (await send(ctx, 'POST', '/api/v1/bad-versions', read, { service: 'billing', version: '1', reason: 'x' }))
      .statusCode,
    403,
  )
  assert.equal((await send(ctx, 'GET', '/api/v1/bad-versions', ingest)).statusCode, 403)
  const listed = await send(ctx, 'GET', '/api/v1/bad-versions?service=billing', read)
  assert.equal(listed.statusCode, 200)
  assert.deepEqual(
    (listed.json() as { bad_versions: { version: string }[] }).bad_versions.map((b) => b.version),
    ['2.4.1'],
  )
  assert.deepEqual((await send(ctx, 'GET', '/api/v1/bad-versions?service=other', read)).json(), {
    bad_versions: [],
  })

  // The check and recording see the mark at once.
  const check = await send(ctx, 'GET', '/api/v1/check?service=billing&environment=prod&version=2.4.1', read)
  assert.deepEqual(
    (check.json() as { reasons: { rule: string }[] }).reasons.map((r) => r.rule),
    ['bad_version'],
  )
  const recorded = await deploy(ctx.app, ingest, {
    service: 'billing',
    environment: 'prod',
    version: '2.4.1',
    status: 'Deployed',
  })
  assert.deepEqual(recorded.body.guardrails, ['bad_version'])

  // Again: a new reason.
  const again = await send(ctx, 'POST', '/api/v1/bad-versions', ingest, {
    service: 'billing',
    version: '2.4.1',
    reason: 'and loses refunds',
  })
  assert.equal((again.json() as { replaced: boolean }).replaced, true)

  const good = await send(ctx, 'DELETE', '/api/v1/bad-versions?service=billing&version=2.4.1', ingest)
  assert.equal(good.statusCode, 200, good.payload)
  assert.deepEqual(good.json(), { service: 'billing', version: '2.4.1', reason: 'and loses refunds' })
  assert.equal(
    (await send(ctx, 'DELETE', '/api/v1/bad-versions?service=billing&version=2.4.1', ingest)).statusCode,
    404,
  )
  const after = await deploy(ctx.app, ingest, {
    service: 'billing',
    environment: 'prod',
    version: '2.4.1',
    status: 'Deployed',
  })
  assert.deepEqual(after.body.guardrails, [])

  const audit = await ctx.database.db
    .selectFrom('audit_entries')
    .select(['action', 'actor_kind', 'actor', 'target'])
    .where('action', 'in', ['version.marked_bad', 'version.marked_good'])
    .orderBy('id')
    .execute()
  assert.deepEqual(
    audit.map((a) => `${a.action} ${a.actor_kind} ${a.actor} ${a.target}`),
    [
      `version.marked_bad key ci billing 2.4.1`,
      `version.marked_bad key ci billing 2.4.1`,
      `version.marked_good key ci billing 2.4.1`,
    ],
  )
})

test('bad input: every field named, nothing stored; a session writes only as an admin and as JSON', async (t) => {
  const ctx = await buildTestApp(t)
  const ingest = ctx.tenant.key
  assert.equal(
    (
      await deploy(ctx.app, ingest, {
        service: 'billing',
        environment: 'prod',
        version: '1',
        status: 'Deployed',
      })
    ).status,
    201,
  )
  const bad = await send(ctx, 'POST', '/api/v1/bad-versions', ingest, {
    service: '',
    version: 'x'.repeat(201),
    reason: 'a\u0007b',
  })
  assert.equal(bad.statusCode, 422)
  assert.deepEqual(
    (bad.json() as { errors: { field: string }[] }).errors.map((e) => e.field),
    ['service', 'version', 'reason'],
  )
  const unknown = await send(ctx, 'POST', '/api/v1/bad-versions', ingest, {
    service: 'nope',
    version: '1',
    reason: 'x',
  })
  assert.equal(unknown.statusCode, 422)
  assert.match(unknown.payload, /no service \\"nope\\"/)
  const missing = await send(ctx, 'DELETE', '/api/v1/bad-versions', ingest)
  assert.equal(missing.statusCode, 422)
  assert.equal(
    await ctx.database.db
      .selectFrom('bad_versions')
      .selectAll()
      .execute()
      .then((r) => r.length),
    0,
  )

  await createUserIn(ctx.database, ctx.tenant.account.id, 'member@example.com', { role: 'member' })
  await createUserIn(ctx.database, ctx.tenant.account.id, 'admin@example.com', { role: 'admin' })
  const member = await login(ctx.app, 'member@example.com')
  const admin = await login(ctx.app, 'admin@example.com')
  const asSession = (browser: typeof admin, type: string, payload: string) =>
    ctx.app.inject({
      method: 'POST',
      url: '/api/v1/bad-versions',
      headers: { cookie: browser.cookieHeader(), 'content-type': type },
      payload,
    })
  const fields = JSON.stringify({ service: 'billing', version: '1', reason: 'x' })
  assert.equal((await asSession(member, 'application/json', fields)).statusCode, 403)
  assert.equal(
    (await asSession(admin, 'application/x-www-form-urlencoded', 'service=billing&version=1&reason=x'))
      .statusCode,
    415,
  )
  const ok = await asSession(admin, 'application/json', fields)
  assert.equal(ok.statusCode, 200, ok.payload)
  assert.equal((ok.json() as { marked_by: string }).marked_by, 'admin@example.com')
  // The member may read the list.
  const list = await ctx.app.inject({
    url: '/api/v1/bad-versions',
    headers: { cookie: member.cookieHeader() },
  })
  assert.equal(list.statusCode, 200)
})
