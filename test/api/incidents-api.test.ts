// POST and DELETE /api/v1/deployments/{id}/incident (issue 27): who may write (an ingest key, an
// admin's JSON session), 422 naming every bad field, 404 for an unknown id, the audit entry with
// the key's name, and the read API's answers: `incident` on each deployment, `incidents_marked` and
// the figures of /api/v1/metrics, byte for byte the same once the marks are gone. Both databases.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { KeyScope } from '../../src/domain/keys.js'
import { createApiKey } from '../../src/domain/keys.js'
import { buildTestApp, type TestApp } from '../helper.js'
import { createUserIn, deploy, login } from '../support/ui.js'

const MIN = 60_000
const DAY = 24 * 60 * MIN

async function keyWith(ctx: TestApp, scopes: KeyScope[], name: string): Promise<string> {
  const { key } = await createApiKey(ctx.database.db, {
    accountId: ctx.tenant.account.id,
    name,
    createdBy: 'test',
    scopes,
  })
  return key
}

/**
 * api in prod, placed in time by occurred_at from `base` (minutes): 1.0 at 0, 1.1 failed at 60,
 * 1.2 at 120 (restores 1.1 after 60 min), 1.3 at 180, 1.4 at 270; 1.0 in staging at 10.
 */
async function history(ctx: TestApp, base: number): Promise<number[]> {
  const ids: number[] = []
  const sent: [string, string, string, number][] = [
    ['prod', '1.0', 'Deployed', 0],
    ['prod', '1.1', 'Failed', 60],
    ['prod', '1.2', 'Deployed', 120],
    ['prod', '1.3', 'Deployed', 180],
    ['prod', '1.4', 'Deployed', 270],
    ['staging', '1.0', 'Deployed', 10],
  ]
  for (const [environment, version, status, minute] of sent) {
    const res = await deploy(ctx.app, ctx.tenant.key, {
      service: 'api',
      environment,
      version,
      status,
      occurred_at: new Date(base + minute * MIN).toISOString(),
    })
    assert.equal(res.status, 201, JSON.stringify(res.body))
    ids.push(Number(res.body.id))
  }
  return ids
}

const json = (ctx: TestApp, method: 'POST' | 'DELETE', url: string, key: string | null, body?: unknown) =>
  ctx.app.inject({
    method,
    url,
    headers: {
      ...(key === null ? {} : { 'x-api-key': key }),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
  })

test('marks through the API: scopes, 404, 422 per field, audit, and the read API before, with and after', async (t) => {
  const ctx = await buildTestApp(t)
  const base = Math.floor((Date.now() - 10 * DAY) / MIN) * MIN
  const [a, b, c, d, e, staging] = (await history(ctx, base)) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ]
  const ingest = ctx.tenant.key
  const read = await keyWith(ctx, ['read'], 'reader')
  const from = new Date(base - DAY).toISOString()
  const to = new Date(base + DAY).toISOString()
  const metricsUrl = `/api/v1/metrics?environment=prod&from=${from}&to=${to}`
  const metrics = async () => {
    const res = await ctx.app.inject({ url: metricsUrl, headers: { 'x-api-key': read } })
    assert.equal(res.statusCode, 200, res.payload)
    return res
  }
  const before = await metrics()
  const plain = before.json() as Record<string, unknown>
  assert.equal(plain.change_failure_rate, 1 / 5)
  assert.deepEqual(plain.time_to_restore_ms, { median: 60 * MIN, p90: 60 * MIN, count: 1 })
  assert.equal(plain.incidents_marked, 0)

  const url = `/api/v1/deployments/${d}/incident`
  // Who may write: no key 401, a read-only key 403 (insufficient scope), the ingest key 200.
  assert.equal((await json(ctx, 'POST', url, null, {})).statusCode, 401)
  const readOnly = await json(ctx, 'POST', url, read, {})
  assert.equal(readOnly.statusCode, 403)
  assert.equal((readOnly.json() as { type: string }).type, 'urn:shiplog:problem:insufficient-scope')

  // An unknown or malformed id: 404, even with bad fields.
  for (const id of ['999999', 'abc', '0']) {
    const res = await json(ctx, 'POST', `/api/v1/deployments/${id}/incident`, ingest, { link: 'nope' })
    assert.equal(res.statusCode, 404, `${id}: ${res.payload}`)
  }
  assert.equal((await json(ctx, 'DELETE', '/api/v1/deployments/999999/incident', ingest)).statusCode, 404)
  assert.equal((await json(ctx, 'DELETE', url, ingest)).statusCode, 404, 'not marked yet')

  // Every bad field named at once; nothing stored.
  const bad = await json(ctx, 'POST', url, ingest, {
    link: 'javascript:alert(1)',
    note: 'x'.repeat(501),
    fixed_by: 'soon',
  })
  assert.equal(bad.statusCode, 422, bad.payload)
  assert.deepEqual(
    (bad.json() as { errors: { field: string }[] }).errors.map((x) => x.field),
    ['link', 'note', 'fixed_by'],
  )
  for (const [fix, why] of [
    [c, 'finished before'],
    [b, 'did not succeed'],
    [staging, 'the fix must be a deployment of api in prod'],
    [d, 'cannot fix itself'],
    [999_999, 'no deployment'],
  ] as const) {
    const res = await json(ctx, 'POST', url, ingest, { fixed_by: fix })
    assert.equal(res.statusCode, 422, res.payload)
    const body = res.json() as { errors: { field: string; message: string }[] }
    assert.deepEqual(
      body.errors.map((x) => x.field),
      ['fixed_by'],
    )
    assert.match(body.errors[0]?.message ?? '', new RegExp(why))
  }
  assert.equal((await metrics()).payload, before.payload, 'nothing was stored')

  // Marked with its fix, 90 minutes later: CFR 2/5; TTR 60 and 90 min (median 75, p90 90).
  const marked = await json(ctx, 'POST', url, ingest, {
    link: 'https://status.example.com/incidents/42',
    note: 'checkout 500s',
    fixed_by: e,
  })
  assert.equal(marked.statusCode, 200, marked.payload)
  assert.deepEqual(marked.json(), {
    id: d,
    incident: { link: 'https://status.example.com/incidents/42', note: 'checkout 500s', fixed_by: e },
  })
  const withMark = (await metrics()).json() as Record<string, unknown>
  assert.equal(withMark.change_failure_rate, 2 / 5)
  assert.deepEqual(withMark.time_to_restore_ms, { median: 75 * MIN, p90: 90 * MIN, count: 2 })
  assert.equal(withMark.incidents_marked, 1)
  assert.equal(withMark.deployments_succeeded, 4, 'a marked success still succeeded')
  // Only the figures the marks touch changed.
  const changed = Object.keys(plain).filter((k) => JSON.stringify(plain[k]) !== JSON.stringify(withMark[k]))
  assert.deepEqual(changed, ['change_failure_rate', 'time_to_restore_ms', 'incidents_marked'])

  // An update sends one field and keeps the others; null clears.
  const updated = await json(ctx, 'POST', url, ingest, { note: null })
  assert.deepEqual(updated.json(), {
    id: d,
    incident: { link: 'https://status.example.com/incidents/42', note: null, fixed_by: e },
  })

  // GET /api/v1/deployments: every key as before, then `incident`.
  const listed = await ctx.app.inject({
    url: '/api/v1/deployments?environment=prod',
    headers: { 'x-api-key': read },
  })
  assert.equal(listed.statusCode, 200, listed.payload)
  const rows = (listed.json() as { deployments: Record<string, unknown>[] }).deployments
  assert.deepEqual(Object.keys(rows[0] ?? {}), [
    'id',
    'service',
    'environment',
    'version',
    'outcome',
    'started_at',
    'finished_at',
    'duration_ms',
    'clock_skew',
    'rollback',
    'rolled_back',
    'deployer',
    'api_key_name',
    'event_ids',
    'incident',
  ])
  assert.deepEqual(
    rows.map((r) => [r.id, r.incident]),
    [
      [e, null],
      [d, { link: 'https://status.example.com/incidents/42', note: null, fixed_by: e }],
      [c, null],
      [b, null],
      [a, null],
    ],
  )

  // The audit log names the key.
  const entries = await ctx.database.db
    .selectFrom('audit_entries')
    .select(['action', 'actor', 'actor_kind', 'target'])
    .where('action', 'like', 'deployment.%')
    .orderBy('id')
    .execute()
  assert.deepEqual(
    entries.map((x) => [x.action, x.actor_kind, x.actor]),
    [
      ['deployment.incident_marked', 'key', 'ci'],
      ['deployment.incident_marked', 'key', 'ci'],
    ],
  )

  // Removed: the answer is byte for byte the one before any mark.
  const removed = await json(ctx, 'DELETE', url, ingest)
  assert.equal(removed.statusCode, 200, removed.payload)
  assert.deepEqual(removed.json(), { id: d, incident: null })
  assert.equal((await metrics()).payload, before.payload)
})

test('a session writes only as an admin, and only as JSON', async (t) => {
  const ctx = await buildTestApp(t)
  const base = Math.floor((Date.now() - 5 * DAY) / MIN) * MIN
  const ids = await history(ctx, base)
  const d = ids[3] as number
  await createUserIn(ctx.database, ctx.tenant.account.id, 'member@example.com', { role: 'member' })
  await createUserIn(ctx.database, ctx.tenant.account.id, 'admin@example.com', { role: 'admin' })
  const member = await login(ctx.app, 'member@example.com')
  const admin = await login(ctx.app, 'admin@example.com')
  const send = (browser: typeof admin, method: 'POST' | 'DELETE', type: string | null, payload?: string) =>
    ctx.app.inject({
      method,
      url: `/api/v1/deployments/${d}/incident`,
      headers: { cookie: browser.cookieHeader(), ...(type === null ? {} : { 'content-type': type }) },
      ...(payload === undefined ? {} : { payload }),
    })
  const asMember = await send(member, 'POST', 'application/json', '{}')
  assert.equal(asMember.statusCode, 403)
  assert.equal((asMember.json() as { type: string }).type, 'urn:shiplog:problem:admin-only')
  // A form post (what a page elsewhere could send) is refused before anything is read.
  const form = await send(admin, 'POST', 'application/x-www-form-urlencoded', 'note=x')
  assert.equal(form.statusCode, 415, form.payload)
  const plainText = await send(admin, 'POST', 'text/plain', '{"note":"x"}')
  assert.equal(plainText.statusCode, 415)
  const ok = await send(admin, 'POST', 'application/json', JSON.stringify({ note: 'seen on the dashboard' }))
  assert.equal(ok.statusCode, 200, ok.payload)
  const entry = await ctx.database.db
    .selectFrom('audit_entries')
    .select(['actor', 'actor_kind', 'address'])
    .where('action', '=', 'deployment.incident_marked')
    .executeTakeFirstOrThrow()
  assert.deepEqual([entry.actor_kind, entry.actor], ['user', 'admin@example.com'])
  assert.equal((await send(member, 'DELETE', null)).statusCode, 403)
  assert.equal((await send(admin, 'DELETE', null)).statusCode, 200)
  // Wrong methods: 405 with Allow.
  const get = await ctx.app.inject({
    url: `/api/v1/deployments/${d}/incident`,
    headers: { 'x-api-key': ctx.tenant.key },
  })
  assert.equal(get.statusCode, 405)
  assert.equal(get.headers.allow, 'POST, DELETE, OPTIONS')
})
