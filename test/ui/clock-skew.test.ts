// A deployment whose end was received with an earlier time than its start (two instances whose
// clocks disagree) has no duration anywhere: null and clock_skew in the API, "clock skew" on the
// service page and the lists, and left out of every duration figure. Both databases.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { createApiKey } from '../../src/domain/keys.js'
import { buildTestApp } from '../helper.js'
import { insertEvents, sharedFixture, unescapeHtml, userSession } from '../support/ui.js'

const MIN = 60_000
const HOUR = 60 * MIN
const DAY = 24 * HOUR

const seeded = sharedFixture(async (cleanup) => {
  const ctx = await buildTestApp(cleanup)
  const account = ctx.tenant.account.id
  const t0 = Date.now() - 2 * DAY
  // 1.0: started at t0 + 10 min on one instance, its end received at t0 on another (10 min "early").
  // 1.1: an ordinary 5-minute deployment. 2.0: first started in staging at t0 + 3 h, succeeded in
  // prod "before" that (a negative lead time).
  const ids = await insertEvents(ctx.database, account, [
    { service: 'api', version: '1.0', status: 'Deploying', received_at: t0 + 10 * MIN },
    { service: 'api', version: '1.0', status: 'Deployed', received_at: t0 },
    { service: 'api', version: '1.1', status: 'Deploying', received_at: t0 + HOUR },
    { service: 'api', version: '1.1', status: 'Deployed', received_at: t0 + HOUR + 5 * MIN },
    {
      service: 'api',
      environment: 'staging',
      version: '2.0',
      status: 'Deploying',
      received_at: t0 + 3 * HOUR,
    },
    { service: 'api', version: '2.0', status: 'Deployed', received_at: t0 + 2 * HOUR },
  ])
  const { key } = await createApiKey(ctx.database.db, {
    accountId: account,
    name: 'reader',
    createdBy: 'test',
    scopes: ['read'],
  })
  const { browser } = await userSession(ctx, account, 'ada@example.com', 'member')
  return { ctx, t0, ids, key, browser }
})

/** A page's text, tags removed and white space folded. */
function text(page: string): string {
  return unescapeHtml(page.replace(/<[^>]+>/g, ' '))
    .replace(/\s+/g, ' ')
    .trim()
}

test('the API gives a skewed deployment no duration and marks it; the others keep theirs', async () => {
  const { ctx, ids, key } = await seeded()
  const res = await ctx.app.inject({
    url: '/api/v1/deployments?environment=prod',
    headers: { 'x-api-key': key },
  })
  assert.equal(res.statusCode, 200, res.payload)
  const { deployments } = res.json() as { deployments: Record<string, unknown>[] }
  const byId = new Map(deployments.map((d) => [d.id, d]))
  const skewed = byId.get(ids[0])
  assert.ok(skewed, 'the deployment of 1.0 is listed')
  assert.equal(skewed.outcome, 'succeeded')
  assert.equal(skewed.duration_ms, null)
  assert.equal(skewed.clock_skew, true)
  const ordinary = byId.get(ids[2])
  assert.equal(ordinary?.duration_ms, 5 * MIN)
  assert.equal(ordinary?.clock_skew, false)
  const instant = byId.get(ids[5])
  assert.equal(instant?.duration_ms, null)
  assert.equal(instant?.clock_skew, false, 'an instant deployment is not skewed')
  for (const d of deployments) assert.ok(d.duration_ms === null || (d.duration_ms as number) >= 0)
})

test('metrics leave skewed values out: duration and lead time count only what was measured forwards', async () => {
  const { ctx, t0, key } = await seeded()
  const from = new Date(t0 - DAY).toISOString()
  const res = await ctx.app.inject({
    url: `/api/v1/metrics?environment=prod&from=${from}`,
    headers: { 'x-api-key': key },
  })
  assert.equal(res.statusCode, 200, res.payload)
  const m = res.json() as Record<string, unknown>
  assert.equal(m.deployments_succeeded, 3, 'the skewed deployment still succeeded')
  assert.deepEqual(m.duration_ms, { median: 5 * MIN, p90: 5 * MIN, count: 1 })
  // 1.0's lead time (from its start, 10 min after its end) and 2.0's (its first start an hour after
  // its success here) would be negative.
  assert.deepEqual(m.lead_time_ms, { median: 5 * MIN, p90: 5 * MIN, count: 1 })
})

test('the service page, the insights page and its duration list say "clock skew", never a negative time', async () => {
  const { t0, ids, browser } = await seeded()
  const service = await browser.get('/services/api/')
  assert.equal(service.statusCode, 200)
  const row = service.payload.split('<tr').find((r) => r.includes('>1.0<'))
  assert.ok(row, 'the timeline lists 1.0')
  assert.match(text(row), /clock skew/)
  assert.doesNotMatch(text(service.payload), /−/, 'no negative duration on the page')

  const day = (ms: number) => new Date(ms).toISOString().slice(0, 10)
  const window = `environment=prod&range=custom&from=${day(t0 - DAY)}&to=${day(t0 + 2 * DAY)}&tz=UTC`
  const insights = await browser.get(`/insights/?${window}`)
  assert.equal(insights.statusCode, 200)
  const page = text(insights.payload)
  assert.match(
    page,
    /Deployment duration median 5 min p90 5 min over 1 deployment 1 deployment left out: clock skew/,
  )
  assert.match(page, /Lead time median 5 min p90 5 min over 1 succeeded deployment/)
  assert.match(page, /2 deployments left out: clock skew/)
  assert.match(page, /Median ?: the middle value .* mean of the two middle values\. p90 ?: the nearest rank/)
  assert.doesNotMatch(page, /−/, 'no negative figure')

  const list = await browser.get(`/insights/deployments?${window}&kind=succeeded`)
  assert.equal(list.statusCode, 200, list.payload.slice(0, 300))
  const listed = list.payload.split('<tr').find((r) => r.includes(`data-deployment-id="${ids[0]}"`))
  assert.ok(listed, 'the list of successes shows 1.0')
  assert.match(text(listed), /clock skew/)
})
