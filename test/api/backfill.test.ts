// Backfilled history (issue 28.3/28.4): events sent with their own occurred_at build deployments at
// those times, so the board at ?at=, the metrics' windows, lead time and retention follow the events'
// times, not their arrival. Expectations computed by hand from the times below.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { createApiKey } from '../../src/domain/keys.js'
import { pruneExpiredEvents, setRetention } from '../../src/domain/operations/retention.js'
import { buildTestApp, type TestApp } from '../helper.js'

const MIN = 60_000
const HOUR = 60 * MIN
const DAY = 24 * HOUR

interface History {
  ctx: TestApp
  key: string
  now: number
  iso: (ms: number) => string
}

/**
 * api in prod: 1.0 Deploying 40 days ago, Deployed 10 minutes later (no commit time);
 * 1.1 Deploying 10 days ago, Deployed 15 minutes later, committed 2 hours before it finished.
 * Sent now, in that order, with their own times.
 */
async function history(t: Parameters<typeof buildTestApp>[0]): Promise<History> {
  const ctx = await buildTestApp(t)
  const { key } = await createApiKey(ctx.database.db, {
    accountId: ctx.tenant.account.id,
    name: 'both',
    createdBy: 'test',
    scopes: ['ingest', 'read'],
  })
  const now = Date.now()
  const iso = (ms: number) => new Date(ms).toISOString()
  const t10 = now - 10 * DAY
  const sends: Record<string, string>[] = [
    { version: '1.0', status: 'Deploying', occurred_at: iso(now - 40 * DAY) },
    { version: '1.0', status: 'Deployed', occurred_at: iso(now - 40 * DAY + 10 * MIN) },
    {
      version: '1.1',
      status: 'Deploying',
      occurred_at: iso(t10),
      commit_time: iso(t10 + 15 * MIN - 2 * HOUR),
    },
    { version: '1.1', status: 'Deployed', occurred_at: iso(t10 + 15 * MIN) },
  ]
  for (const fields of sends) {
    const res = await ctx.app.inject({
      method: 'POST',
      url: '/deploy',
      headers: { 'x-api-key': key, 'content-type': 'application/json' },
      payload: JSON.stringify({ service: 'api', environment: 'prod', ...fields }),
    })
    assert.equal(res.statusCode, 201, res.body)
  }
  return { ctx, key, now, iso }
}

async function get(h: History, url: string) {
  const res = await h.ctx.app.inject({ method: 'GET', url, headers: { 'x-api-key': h.key } })
  assert.equal(res.statusCode, 200, res.body)
  return res.json()
}

test('deployments take their times from occurred_at', async (t) => {
  const h = await history(t)
  const { deployments } = await get(h, '/api/v1/deployments?environment=prod')
  assert.deepEqual(
    deployments.map((d: Record<string, unknown>) => [d.version, d.started_at, d.finished_at, d.duration_ms]),
    [
      ['1.1', h.iso(h.now - 10 * DAY), h.iso(h.now - 10 * DAY + 15 * MIN), 15 * MIN],
      ['1.0', h.iso(h.now - 40 * DAY), h.iso(h.now - 40 * DAY + 10 * MIN), 10 * MIN],
    ],
  )
})

test('the board at ?at= follows occurred_at: 1.0 twenty days ago, nothing fifty days ago, 1.1 now', async (t) => {
  const h = await history(t)
  const at = (ms: number) => get(h, `/api/v1/services?at=${encodeURIComponent(h.iso(ms))}`)
  const then = await at(h.now - 20 * DAY)
  assert.equal(then.services[0]?.environments.prod?.version, '1.0')
  assert.equal(then.services[0]?.environments.prod?.since, h.iso(h.now - 40 * DAY + 10 * MIN))
  const before = await at(h.now - 50 * DAY)
  assert.deepEqual(before.services, [])
  const current = await get(h, '/api/v1/services')
  assert.equal(current.services[0]?.environments.prod?.version, '1.1')
})

test('metrics: a deploy 40 days ago is in a 90-day window and not in a 30-day one; lead time from the commit when sent', async (t) => {
  const h = await history(t)
  const window = (days: number) =>
    get(
      h,
      `/api/v1/metrics?environment=prod&from=${encodeURIComponent(h.iso(h.now - days * DAY))}&to=${encodeURIComponent(h.iso(h.now))}`,
    )
  const d30 = await window(30)
  assert.equal(d30.deployments_succeeded, 1)
  assert.equal(d30.deployment_frequency_per_day, 1 / 30)
  // 1.1: from its commit (2 h before it finished), not from its first start (15 min).
  assert.deepEqual(d30.lead_time_ms, { median: 2 * HOUR, p90: 2 * HOUR, count: 1 })
  assert.deepEqual(d30.lead_time_from, { commit: 1, first_deployment: 0 })
  assert.deepEqual(d30.duration_ms, { median: 15 * MIN, p90: 15 * MIN, count: 1 })

  const d90 = await window(90)
  assert.equal(d90.deployments_succeeded, 2)
  assert.equal(d90.deployment_frequency_per_day, 2 / 90)
  // 1.0 has no commit time: from its first start, 10 min. Median of 10 min and 2 h; p90 the 2nd.
  assert.deepEqual(d90.lead_time_ms, { median: (10 * MIN + 2 * HOUR) / 2, p90: 2 * HOUR, count: 2 })
  assert.deepEqual(d90.lead_time_from, { commit: 1, first_deployment: 1 })
  assert.deepEqual(d90.duration_ms, { median: (10 * MIN + 15 * MIN) / 2, p90: 15 * MIN, count: 2 })
})

test('retention deletes by occurred_at: the 40-day-old deployment goes although it arrived just now', async (t) => {
  const h = await history(t)
  // Derive first: retention prunes derived deployments.
  await get(h, '/api/v1/deployments')
  await setRetention(h.ctx.database.db, h.ctx.tenant.account.id, 30)
  const run = await pruneExpiredEvents(h.ctx.database, h.now, { pauseMs: 1 })
  assert.equal(run.events, 2)
  assert.equal(run.deployments, 1)
  const left = await h.ctx.database.db.selectFrom('events').select('version').orderBy('id').execute()
  assert.deepEqual(
    left.map((r) => r.version),
    ['1.1', '1.1'],
  )
  const { deployments } = await get(h, '/api/v1/deployments')
  assert.deepEqual(
    deployments.map((d: { version: string }) => d.version),
    ['1.1'],
  )
})
