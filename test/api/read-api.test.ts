// The read API (SPEC §7) over a known history: key scopes on every route, session reads, the 401s
// identical to ingest's, deployments and the board (now and at a past instant), metrics, and a
// 422 naming every bad parameter.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { KeyScope } from '../../src/domain/keys.js'
import { createApiKey } from '../../src/domain/keys.js'
import { buildTestApp, type TestApp } from '../helper.js'
import { createUserIn, deploy, insertEvents, login, sharedFixture } from '../support/ui.js'

const MIN = 60_000
const HOUR = 60 * MIN
const DAY = 24 * HOUR
const WEB = 'web/app %<b>'

async function keyWith(ctx: TestApp, scopes: KeyScope[], name = scopes.join('+')): Promise<string> {
  const { key } = await createApiKey(ctx.database.db, {
    accountId: ctx.tenant.account.id,
    name,
    createdBy: 'test',
    scopes,
  })
  return key
}

const seeded = sharedFixture(async (cleanup) => {
  const ctx = await buildTestApp(cleanup)
  const now = Date.now()
  const t0 = now - 10 * DAY
  const account = ctx.tenant.account.id
  const ids = await insertEvents(ctx.database, account, [
    {
      service: WEB,
      environment: 'prod',
      version: '1.0',
      status: 'Deploying',
      received_at: t0,
      deployer: 'ann',
    },
    { service: WEB, environment: 'prod', version: '1.0', status: 'Deployed', received_at: t0 + MIN },
    { service: WEB, environment: 'prod', version: '1.1', status: 'Failed', received_at: t0 + HOUR },
    {
      service: 'api',
      environment: 'staging',
      version: '2.0',
      status: 'Deployed',
      received_at: t0 + 2 * HOUR,
    },
    { service: WEB, environment: 'prod', version: '1.2', status: 'Deploying', received_at: now - 2 * HOUR },
    { service: 'api', environment: 'prod', version: '2.0', status: 'Deploying', received_at: now - MIN },
  ])
  await ctx.database.db
    .insertInto('services')
    .values({
      account_id: account,
      name: WEB,
      team: 'core',
      description: null,
      repository_url: null,
      runbook_url: null,
      dashboard_url: null,
      updated_at: now,
    })
    .execute()
  const read = await keyWith(ctx, ['read'])
  return { ctx, now, t0, ids, read }
})

const get = async (ctx: TestApp, url: string, key?: string) =>
  ctx.app.inject({ url, headers: key === undefined ? {} : { 'x-api-key': key } })

test('deployments: values of a known history (succeeded, instant failed, stalled, in progress)', async () => {
  const { ctx, t0, ids, read } = await seeded()
  const res = await get(ctx, '/api/v1/deployments', read)
  assert.equal(res.statusCode, 200, res.payload)
  assert.equal(res.headers['cache-control'], 'no-store')
  const body = res.json() as { deployments: Record<string, unknown>[]; next_cursor: string | null }
  assert.equal(body.next_cursor, null)
  assert.equal(res.headers.link, undefined)
  const byVersion = (service: string, env: string, version: string) =>
    body.deployments.find((d) => d.service === service && d.environment === env && d.version === version)
  assert.deepEqual(byVersion(WEB, 'prod', '1.0'), {
    id: ids[0],
    service: WEB,
    environment: 'prod',
    version: '1.0',
    outcome: 'succeeded',
    started_at: new Date(t0).toISOString(),
    finished_at: new Date(t0 + MIN).toISOString(),
    duration_ms: MIN,
    clock_skew: false,
    rollback: false,
    rolled_back: false,
    deployer: 'ann',
    api_key_name: 'ci',
    event_ids: [ids[0], ids[1]],
    incident: null,
  })
  const failed = byVersion(WEB, 'prod', '1.1')
  assert.equal(failed?.outcome, 'failed')
  assert.equal(failed?.duration_ms, null, 'an instant deployment has no duration')
  assert.equal(failed?.started_at, failed?.finished_at)
  const stalled = byVersion(WEB, 'prod', '1.2')
  assert.equal(stalled?.outcome, 'stalled', 'open for 2 h with the default stall time of 60 min')
  assert.equal(stalled?.finished_at, null)
  assert.equal(stalled?.duration_ms, null)
  const open = byVersion('api', 'prod', '2.0')
  assert.equal(open?.outcome, 'in_progress')
  // Newest first.
  assert.deepEqual(
    body.deployments.map((d) => d.id),
    [...body.deployments.map((d) => d.id as number)].sort((a, b) => b - a),
  )

  // Filters: outcome, service, environment, and a window on started_at.
  const stalledOnly = (await get(ctx, '/api/v1/deployments?outcome=stalled', read)).json() as typeof body
  assert.deepEqual(
    stalledOnly.deployments.map((d) => d.version),
    ['1.2'],
  )
  const web = (
    await get(ctx, `/api/v1/deployments?service=${encodeURIComponent(WEB)}&environment=prod`, read)
  ).json() as typeof body
  assert.deepEqual(
    web.deployments.map((d) => d.version),
    ['1.2', '1.1', '1.0'],
  )
  const from = new Date(t0 + 30 * MIN).toISOString()
  const to = new Date(t0 + 3 * HOUR).toISOString()
  const windowed = (await get(ctx, `/api/v1/deployments?from=${from}&to=${to}`, read)).json() as typeof body
  assert.deepEqual(
    windowed.deployments.map((d) => `${d.service} ${d.version}`),
    ['api 2.0', `${WEB} 1.1`],
  )
})

test('services: the board now and at a past instant, environments in order, team', async () => {
  const { ctx, t0, ids, read, now: seededAt } = await seeded()
  const now = (await get(ctx, '/api/v1/services', read)).json() as {
    at: string
    environments: string[]
    services: {
      service: string
      team: string | null
      environments: Record<string, Record<string, unknown>>
    }[]
  }
  assert.deepEqual(now.environments, ['staging', 'prod'])
  assert.deepEqual(
    now.services.map((s) => s.service),
    ['api', WEB],
  )
  const web = now.services.find((s) => s.service === WEB)
  assert.equal(web?.team, 'core')
  assert.deepEqual(web?.environments.prod, {
    version: '1.0',
    since: new Date(t0 + MIN).toISOString(),
    deployment_id: ids[0],
    latest: {
      version: '1.2',
      outcome: 'stalled',
      started_at: new Date(seededAt - 2 * HOUR).toISOString(),
    },
  })
  const api = now.services.find((s) => s.service === 'api')
  assert.equal(api?.team, null)
  assert.deepEqual(Object.keys(api?.environments ?? {}), ['staging', 'prod'])
  assert.equal(api?.environments.prod?.version, null)
  assert.deepEqual(api?.environments.prod?.latest, {
    version: '2.0',
    outcome: 'in_progress',
    started_at: new Date(seededAt - MIN).toISOString(),
  })

  const at = new Date(t0 + 30 * MIN).toISOString()
  const past = await get(ctx, `/api/v1/services?at=${encodeURIComponent(at)}`, read)
  assert.equal(past.statusCode, 200, past.payload)
  const then = past.json() as typeof now
  assert.equal(then.at, at)
  assert.deepEqual(
    then.services.map((s) => s.service),
    [WEB],
  )
  assert.deepEqual(then.services[0]?.environments.prod, {
    version: '1.0',
    since: new Date(t0 + MIN).toISOString(),
    deployment_id: ids[0],
    latest: { version: '1.0', outcome: 'succeeded', started_at: new Date(t0).toISOString() },
  })

  // Hidden environments are left out.
  await ctx.database.db
    .insertInto('environment_settings')
    .values({ account_id: ctx.tenant.account.id, name: 'staging', position: 0, hidden: 1 })
    .execute()
  try {
    const hidden = (await get(ctx, '/api/v1/services', read)).json() as typeof now
    assert.deepEqual(hidden.environments, ['prod'])
    assert.deepEqual(Object.keys(hidden.services.find((s) => s.service === 'api')?.environments ?? {}), [
      'prod',
    ])
  } finally {
    await ctx.database.db.deleteFrom('environment_settings').execute()
  }
})

test('metrics: default environment is the last in order; unknown names are a 404', async () => {
  const { ctx, t0, read } = await seeded()
  const from = new Date(t0 - DAY).toISOString()
  const res = await get(ctx, `/api/v1/metrics?from=${from}`, read)
  assert.equal(res.statusCode, 200, res.payload)
  const m = res.json() as Record<string, unknown>
  assert.equal(m.environment, 'prod')
  assert.equal(m.service, null)
  assert.equal(m.from, from)
  assert.equal(m.deployments_succeeded, 1)
  assert.equal(m.deployments_failed, 1)
  assert.equal(m.rolled_back, 0)
  assert.equal(m.change_failure_rate, 0.5)
  assert.deepEqual(m.duration_ms, { median: MIN, p90: MIN, count: 1 })
  // One success over the default window, which runs to the moment of the request: SPEC §6.2's
  // succeeded deployments ÷ days in the window, with the days from the answer's own bounds.
  const windowDays = (Date.parse(m.to as string) - Date.parse(from)) / DAY
  assert.ok(windowDays > 11 && windowDays < 11.01, `the window runs to now: ${windowDays} days`)
  assert.equal(m.deployment_frequency_per_day, 1 / windowDays)
  // 1.0 started at t0 (its first start anywhere) and succeeded a minute later.
  assert.deepEqual(m.lead_time_ms, { median: MIN, p90: MIN, count: 1 })
  assert.deepEqual(m.lead_time_from, { commit: 0, first_deployment: 1 })
  assert.equal((m.time_to_restore_ms as unknown) ?? null, null, 'the failure was not restored yet')

  const staging = (
    await get(ctx, `/api/v1/metrics?environment=staging&service=api&from=${from}`, read)
  ).json() as Record<string, unknown>
  assert.equal(staging.deployments_succeeded, 1)
  assert.equal(staging.service, 'api')

  const unknownEnv = await get(ctx, '/api/v1/metrics?environment=nowhere', read)
  assert.equal(unknownEnv.statusCode, 404)
  assert.equal(unknownEnv.json().type, 'urn:shiplog:problem:unknown-environment')
  assert.match(unknownEnv.json().detail, /nowhere/)
  const unknownService = await get(ctx, '/api/v1/metrics?service=ghost', read)
  assert.equal(unknownService.statusCode, 404)
  assert.equal(unknownService.json().type, 'urn:shiplog:problem:unknown-service')
})

test('metrics: deployment frequency, lead time (from the commit or the first start), duration and failure rate, computed by hand from the events sent', async (t) => {
  const ctx = await buildTestApp(t)
  const read = await keyWith(ctx, ['read'])
  // Twenty days back (inside the default 30 days an event's time may lie in the past), on a minute.
  const base = Math.floor((Date.now() - 20 * DAY) / MIN) * MIN
  const at = (ms: number) => new Date(base + ms).toISOString()
  const sent: [string, string, string, string, number, number?][] = [
    // service, environment, version, status, occurred_at (from base), commit_time (from base)
    ['api', 'prod', '0', 'Deployed', -2 * DAY], // before the window
    ['api', 'staging', '1', 'Deploying', 0],
    ['api', 'staging', '1', 'Deployed', 10 * MIN],
    ['api', 'prod', '1', 'Deploying', 2 * HOUR],
    ['api', 'prod', '1', 'Deployed', 2 * HOUR + 20 * MIN],
    ['api', 'prod', '2', 'Deploying', DAY, DAY - 3 * HOUR],
    ['api', 'prod', '2', 'Deployed', DAY + 15 * MIN, DAY - 3 * HOUR],
    ['api', 'prod', '3', 'Deployed', 2 * DAY, 2 * DAY - 30 * MIN],
    ['api', 'prod', '4', 'Failed', 3 * DAY, 3 * DAY - HOUR],
    ['web', 'prod', '9', 'Deploying', 4 * DAY, 3 * DAY],
    ['web', 'prod', '9', 'Deployed', 4 * DAY + 5 * MIN, 3 * DAY],
  ]
  for (const [service, environment, version, status, occurred, commit] of sent) {
    const fields: Record<string, string> = {
      service,
      environment,
      version,
      status,
      occurred_at: at(occurred),
    }
    if (commit !== undefined) fields.commit_time = at(commit)
    const res = await deploy(ctx.app, ctx.tenant.key, fields)
    assert.equal(res.status, 201, JSON.stringify(res.body))
  }
  // The window: from a day before base, eight days long.
  const from = at(-DAY)
  const to = at(7 * DAY)
  const metrics = async (query: string) => {
    const res = await get(ctx, `/api/v1/metrics?from=${from}&to=${to}${query}`, read)
    assert.equal(res.statusCode, 200, res.payload)
    return res.json() as Record<string, unknown>
  }

  // Production: api 1, 2, 3 and web 9 succeeded in the window (api 0 finished before it), api 4
  // failed. Lead times: api 1 from its first start anywhere (staging, at base) to its production
  // success, 2 h 20 min; api 2 from its commit, 3 h 15 min; api 3 (instant) from its commit, 30 min;
  // web 9 from its commit, 24 h 5 min. The failure has none.
  const prod = await metrics('&environment=prod')
  assert.equal(prod.deployments_succeeded, 4)
  assert.equal(prod.deployments_failed, 1)
  assert.equal(prod.days_in_window, 8)
  assert.equal(prod.deployment_frequency_per_day, 4 / 8)
  assert.equal(prod.change_failure_rate, 1 / 5)
  // Sorted: 30, 140, 195, 1445 min; the median of four is the mean of the middle two, the p90 the
  // value at rank ⌈0.9 × 4⌉ = 4.
  assert.deepEqual(prod.lead_time_ms, { median: ((140 + 195) / 2) * MIN, p90: 1445 * MIN, count: 4 })
  assert.deepEqual(prod.lead_time_from, { commit: 3, first_deployment: 1 })
  // Durations of the non-instant successes: 20, 15 and 5 min.
  assert.deepEqual(prod.duration_ms, { median: 15 * MIN, p90: 20 * MIN, count: 3 })

  // One service: api 1, 2 and 3 (30, 140, 195 min; p90 at rank ⌈2.7⌉ = 3).
  const api = await metrics('&environment=prod&service=api')
  assert.equal(api.deployment_frequency_per_day, 3 / 8)
  assert.deepEqual(api.lead_time_ms, { median: 140 * MIN, p90: 195 * MIN, count: 3 })
  assert.deepEqual(api.lead_time_from, { commit: 2, first_deployment: 1 })

  // Staging: api 1 alone, 10 min from its own start, which is the first start of the version.
  const staging = await metrics('&environment=staging')
  assert.equal(staging.deployment_frequency_per_day, 1 / 8)
  assert.deepEqual(staging.lead_time_ms, { median: 10 * MIN, p90: 10 * MIN, count: 1 })
  assert.deepEqual(staging.lead_time_from, { commit: 0, first_deployment: 1 })
  assert.equal(staging.change_failure_rate, 0)
})

test('scopes: ingest-only keys are refused on every read route, read-only keys on every ingest form', async (t) => {
  const ctx = await buildTestApp(t)
  const ingestOnly = ctx.tenant.key
  const readOnly = await keyWith(ctx, ['read'])
  const both = await keyWith(ctx, ['ingest', 'read'])
  const readRoutes: { method: 'GET' | 'POST'; url: string }[] = [
    { method: 'GET', url: '/api/v1/events' },
    { method: 'GET', url: '/api/v1/deployments' },
    { method: 'GET', url: '/api/v1/services' },
    { method: 'GET', url: '/api/v1/metrics' },
    { method: 'GET', url: '/get' },
    { method: 'POST', url: '/get' },
    { method: 'GET', url: '/get/logs?app=a&env=b' },
    { method: 'POST', url: '/get/logs?app=a&env=b' },
  ]
  for (const route of readRoutes) {
    for (const header of ['x-api-key', 'authorization']) {
      const value = header === 'authorization' ? `Bearer ${ingestOnly}` : ingestOnly
      const res = await ctx.app.inject({ ...route, headers: { [header]: value } })
      assert.equal(res.statusCode, 403, `${route.method} ${route.url} with an ingest-only key`)
      assert.match(String(res.headers['content-type']), /^application\/problem\+json/)
      assert.equal(res.json().type, 'urn:shiplog:problem:insufficient-scope')
    }
  }
  const ingestForms = [
    { method: 'GET' as const, url: '/put?app=a&env=b&version=1&status=Deployed' },
    {
      method: 'POST' as const,
      url: '/put',
      payload: { app: 'a', env: 'b', version: '1', status: 'Deployed' },
    },
    {
      method: 'POST' as const,
      url: '/deploy',
      payload: { service: 'a', environment: 'b', version: '1', status: 'Deployed' },
    },
  ]
  for (const form of ingestForms) {
    const res = await ctx.app.inject({ ...form, headers: { 'x-api-key': readOnly } })
    assert.equal(res.statusCode, 403, `${form.method} ${form.url} with a read-only key`)
    assert.equal(res.json().type, 'urn:shiplog:problem:insufficient-scope')
  }
  assert.equal(await ctx.eventCount(), 0, 'a read-only key stored nothing')

  for (const form of ingestForms) {
    const res = await ctx.app.inject({ ...form, headers: { 'x-api-key': both } })
    assert.equal(res.statusCode, 201, `${form.method} ${form.url} with an ingest+read key`)
  }
  for (const route of readRoutes) {
    const res = await ctx.app.inject({ ...route, headers: { 'x-api-key': both } })
    assert.ok(
      [200, 404].includes(res.statusCode),
      `${route.method} ${route.url} with both: ${res.statusCode} ${res.payload}`,
    )
  }
  const events = (await get(ctx, '/api/v1/events', readOnly)).json() as { events: { id: number }[] }
  assert.equal(events.events.length, 3, 'the read-only key reads what the other key recorded')
})

test("401 for a missing or bad key is the ingest routes' own answer; a session may read /api/v1", async (t) => {
  const ctx = await buildTestApp(t)
  const ingestNoKey = await ctx.app.inject({ method: 'POST', url: '/deploy', payload: {} })
  const ingestBadKey = await ctx.app.inject({
    method: 'POST',
    url: '/deploy',
    payload: {},
    headers: { 'x-api-key': `shl_${'x'.repeat(40)}` },
  })
  assert.equal(ingestNoKey.statusCode, 401)
  for (const url of [
    '/api/v1/events',
    '/api/v1/deployments',
    '/api/v1/services',
    '/api/v1/metrics',
    '/get',
    '/get/logs',
  ]) {
    const none = await get(ctx, url)
    assert.equal(none.statusCode, 401, url)
    assert.deepEqual(none.json(), ingestNoKey.json(), `${url} without a key`)
    assert.equal(none.headers['www-authenticate'], ingestNoKey.headers['www-authenticate'])
    for (const bad of [`shl_${'x'.repeat(40)}`, 'not-a-key']) {
      const res = await get(ctx, url, bad)
      assert.equal(res.statusCode, 401, `${url} with ${bad}`)
      assert.deepEqual(res.json(), ingestBadKey.json())
      assert.equal(res.headers['www-authenticate'], ingestBadKey.headers['www-authenticate'])
    }
  }
  // A revoked read key: the same 401.
  const read = await keyWith(ctx, ['read'])
  assert.equal((await get(ctx, '/api/v1/events', read)).statusCode, 200)
  await ctx.database.db
    .updateTable('api_keys')
    .set({ revoked_at: Date.now() })
    .where('scopes', '=', 'read')
    .execute()
  ctx.app.keyVerifier.clear()
  assert.deepEqual((await get(ctx, '/api/v1/events', read)).json(), ingestBadKey.json())

  // A logged-in member reads the API with the session cookie alone.
  await createUserIn(ctx.database, ctx.tenant.account.id, 'member@example.com', { role: 'member' })
  const browser = await login(ctx.app, 'member@example.com')
  for (const url of ['/api/v1/events', '/api/v1/deployments', '/api/v1/services']) {
    const res = await browser.get(url)
    assert.equal(res.statusCode, 200, `${url} with a session: ${res.payload}`)
  }
  // /get is the original interface's, for keys only.
  assert.equal((await browser.get('/get')).statusCode, 401)
  // A key, when sent, decides alone: a session does not rescue a bad one.
  assert.equal((await browser.get('/api/v1/events', { 'x-api-key': 'shl_bad' })).statusCode, 401)
})

test('422 lists every bad parameter; unknown ones are ignored; nothing is a 500', async () => {
  const { ctx, read } = await seeded()
  const fields = async (url: string) => {
    const res = await get(ctx, url, read)
    assert.equal(res.statusCode, 422, `${url}: ${res.payload}`)
    assert.match(String(res.headers['content-type']), /^application\/problem\+json/)
    const body = res.json() as { type: string; errors: { field: string; message: string }[] }
    assert.equal(body.type, 'urn:shiplog:problem:invalid-parameters')
    return body.errors.map((e) => e.field).sort()
  }
  for (const limit of ['0', '1001', 'abc', '-1', '1.5', '']) {
    if (limit === '') continue
    assert.deepEqual(await fields(`/api/v1/events?limit=${limit}`), ['limit'], `limit=${limit}`)
    assert.deepEqual(await fields(`/api/v1/deployments?limit=${limit}`), ['limit'], `limit=${limit}`)
  }
  assert.equal((await get(ctx, '/api/v1/events?limit=1000', read)).statusCode, 200)
  assert.equal((await get(ctx, '/api/v1/events?limit=1', read)).statusCode, 200)
  // Several at once, each named.
  assert.deepEqual(await fields('/api/v1/events?status=Nope&limit=0&from=yesterday&cursor=!!'), [
    'cursor',
    'from',
    'limit',
    'status',
  ])
  assert.deepEqual(await fields('/api/v1/deployments?outcome=done&to=2026-13-01&limit=x'), [
    'limit',
    'outcome',
    'to',
  ])
  // from >= to, and windows over five years.
  assert.deepEqual(await fields('/api/v1/events?from=2026-11-21T10:00:00Z&to=2026-11-21T10:00:00Z'), ['to'])
  assert.deepEqual(await fields('/api/v1/events?from=2026-11-22&to=2026-11-21'), ['to'])
  assert.deepEqual(await fields('/api/v1/deployments?from=2020-01-01&to=2025-01-02'), ['to'])
  assert.equal((await get(ctx, '/api/v1/events?from=2020-01-01&to=2025-01-01', read)).statusCode, 200)
  assert.deepEqual(await fields('/api/v1/metrics?from=2030-01-01'), ['from'])
  assert.deepEqual(await fields('/api/v1/metrics?from=2000-01-01&to=2026-01-01'), ['to'])
  // Odd ISO strings.
  for (const odd of [
    '2026-02-30',
    '2026-11-21T24:00Z',
    '2026-11-21T10:60Z',
    '2026-11-21T10:00:60Z',
    '2026-11-21T10:00+25:00',
    '21/11/2026',
    'now',
    '2026-1-1',
    '2026-11-21T10',
    '1700000000000',
    '2026-11-21T10:00:00Zjunk',
    '+002026-11-21',
    '2026-11-21 10:00',
  ]) {
    assert.deepEqual(await fields(`/api/v1/events?from=${encodeURIComponent(odd)}`), ['from'], odd)
    assert.deepEqual(await fields(`/api/v1/services?at=${encodeURIComponent(odd)}`), ['at'], odd)
  }
  for (const fine of [
    '2026-11-21',
    '2026-11-21T10:00Z',
    '2026-11-21T10:00:00.123456+02:00',
    '2026-11-21t10:00:00z',
    '2026-11-21T10:00-0530',
  ]) {
    assert.equal(
      (await get(ctx, `/api/v1/events?from=${encodeURIComponent(fine)}`, read)).statusCode,
      200,
      fine,
    )
  }
  // A repeated parameter is refused rather than one copy picked.
  assert.deepEqual(await fields('/api/v1/events?service=a&service=b'), ['service'])
  // Cursors: not ours, another listing's, tampered, or naming no event of the account.
  const events = (await get(ctx, '/api/v1/events?limit=1', read)).json() as { next_cursor: string }
  const deployments = (await get(ctx, '/api/v1/deployments?limit=1', read)).json() as { next_cursor: string }
  const tampered = `${events.next_cursor.slice(0, -1)}${events.next_cursor.endsWith('A') ? 'B' : 'A'}`
  for (const cursor of [
    'abc',
    tampered,
    deployments.next_cursor,
    Buffer.from('e1:999999').toString('base64url'),
    `${Buffer.from('e1:2').toString('base64url')}.${events.next_cursor.split('.')[1]}`,
    `${events.next_cursor.split('.')[0]}.${'A'.repeat(16)}`,
    `${events.next_cursor}=`,
    'x'.repeat(300),
  ]) {
    assert.deepEqual(await fields(`/api/v1/events?cursor=${encodeURIComponent(cursor)}`), ['cursor'], cursor)
  }
  assert.deepEqual(await fields(`/api/v1/deployments?cursor=${encodeURIComponent(events.next_cursor)}`), [
    'cursor',
  ])
  // Unknown parameters are ignored.
  const ignored = await get(ctx, '/api/v1/events?color=blue&page[x]=1', read)
  assert.equal(ignored.statusCode, 200)
  assert.equal((await get(ctx, '/api/v1/services?foo=bar', read)).statusCode, 200)
})

test('events: the 201 shape, filters, and the window [from, to)', async () => {
  const { ctx, t0, ids, read } = await seeded()
  const all = (await get(ctx, '/api/v1/events', read)).json() as {
    events: Record<string, unknown>[]
    next_cursor: null
  }
  assert.equal(all.events.length, 6)
  assert.deepEqual(
    all.events.map((e) => e.id),
    [...ids].reverse(),
  )
  assert.deepEqual(Object.keys(all.events[0] ?? {}), [
    'id',
    'received_at',
    'occurred_at',
    'service',
    'environment',
    'version',
    'status',
    'url',
    'commit',
    'commit_time',
    'description',
    'deployer',
    'source',
    'guardrails',
    'override_reason',
    'api_key_name',
  ])
  const failed = (await get(ctx, '/api/v1/events?status=failed', read)).json() as typeof all
  assert.deepEqual(
    failed.events.map((e) => e.version),
    ['1.1'],
  )
  const web = (
    await get(ctx, `/api/v1/events?service=${encodeURIComponent(WEB.toUpperCase())}&version=1.`, read)
  ).json() as typeof all
  assert.equal(web.events.length, 4)
  // [from, to): an event at exactly `to` is out, one at exactly `from` is in.
  const from = new Date(t0 + MIN).toISOString()
  const to = new Date(t0 + 2 * HOUR).toISOString()
  const windowed = (await get(ctx, `/api/v1/events?from=${from}&to=${to}`, read)).json() as typeof all
  assert.deepEqual(
    windowed.events.map((e) => e.id),
    [ids[2], ids[1]],
  )
})
