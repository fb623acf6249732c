// GET /metrics (SPEC §8): Prometheus text that a parser reads, counters that move with what the
// server does, bounded label values, and the optional bearer token.
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { Writable } from 'node:stream'
import { test } from 'node:test'
import parsePrometheusTextFormat, { type PrometheusFamily } from 'parse-prometheus-text-format'
import { type App, buildApp } from '../../src/app.js'
import { ConfigError, loadConfig } from '../../src/config.js'
import { openDatabase } from '../../src/db/connect.js'
import { migrateToLatest } from '../../src/db/migrate.js'
import { TaskRunner } from '../../src/domain/tasks.js'
import { DEPLOYMENT_COUNTS_TTL_MS, Metrics, UNMATCHED_ROUTE } from '../../src/http/metrics.js'
import { buildTestApp, databaseForServers, testDialect } from '../helper.js'
import { assertBuilt, startServer } from '../support/processes.js'
import { deploy, insertEvents } from '../support/ui.js'

const TOKEN = 'metrics-token-0123456789abcdef'

// One sample line of the text format: name, optional labels, a number (the parser is lenient).
const SAMPLE_LINE =
  /^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*",?)*\})? [-+]?(\d|Inf|NaN)/i

interface Scrape {
  families: Map<string, PrometheusFamily>
  /** The value of a counter or gauge sample with exactly these labels (0 when absent). */
  value(name: string, labels?: Record<string, string>): number
  /** An unlabelled histogram's count and sum (zeros when absent). */
  histogram(name: string): { count: number; sum: number }
  /**
   * A labelled histogram's count: read from its `_count` line, since the parser folds the samples
   * of a labelled histogram into one (a limitation of parse-prometheus-text-format).
   */
  labelledCount(name: string, labels: Record<string, string>): number
  /** Every value a label takes in a family. */
  labelValues(name: string, label: string): Set<string>
}

function sameLabels(a: Record<string, string> | undefined, b: Record<string, string>): boolean {
  const x = a ?? {}
  return Object.keys(x).length === Object.keys(b).length && Object.entries(b).every(([k, v]) => x[k] === v)
}

async function scrape(app: App, headers: Record<string, string> = {}): Promise<Scrape> {
  const res = await app.inject({ url: '/metrics', headers })
  assert.equal(res.statusCode, 200, res.payload.slice(0, 300))
  assert.match(String(res.headers['content-type']), /^text\/plain; version=0\.0\.4/)
  for (const line of res.payload.split('\n')) {
    if (line === '' || line.startsWith('# HELP ') || line.startsWith('# TYPE ')) continue
    assert.match(line, SAMPLE_LINE, 'every line is a comment or a sample')
  }
  const parsed = parsePrometheusTextFormat(res.payload)
  const families = new Map(parsed.map((f) => [f.name, f]))
  assert.equal(families.size, parsed.length, 'each family appears once')
  const samples = (name: string) => families.get(name)?.metrics ?? []
  return {
    families,
    value: (name, labels = {}) => Number(samples(name).find((m) => sameLabels(m.labels, labels))?.value ?? 0),
    histogram: (name) => {
      const m = samples(name)[0]
      return { count: Number(m?.count ?? 0), sum: Number(m?.sum ?? 0) }
    },
    labelledCount: (name, labels) => {
      const wanted = Object.entries(labels)
        .map(([k, v]) => `${k}="${v}"`)
        .join(',')
      const line = res.payload.split('\n').find((l) => l.startsWith(`${name}_count{${wanted}} `))
      return Number(line?.split(' ')[1] ?? 0)
    },
    labelValues: (name, label) =>
      new Set(samples(name).flatMap((m) => (m.labels?.[label] === undefined ? [] : [m.labels[label]]))),
  }
}

test('/metrics is Prometheus text: every family named shiplog_*, with help; process metrics included', async (t) => {
  const { app } = await buildTestApp(t)
  const s = await scrape(app)
  for (const [name, family] of s.families) {
    assert.match(name, /^shiplog_/, `${name} carries the prefix`)
    assert.ok(family.help.length > 10, `${name} has a help text`)
  }
  for (const name of [
    'shiplog_http_requests_total',
    'shiplog_http_request_duration_seconds',
    'shiplog_events_recorded_total',
    'shiplog_events_idempotent_repeats_total',
    'shiplog_event_commit_batch_size_events',
    'shiplog_deployments',
    'shiplog_webhook_deliveries_total',
    'shiplog_webhook_queue_depth_deliveries',
    'shiplog_stream_clients',
    'shiplog_background_task_runs_total',
    'shiplog_process_cpu_user_seconds_total',
    'shiplog_process_resident_memory_bytes',
    'shiplog_nodejs_eventloop_lag_seconds',
  ]) {
    assert.ok(s.families.has(name), `${name} is exported`)
  }
  assert.equal(s.families.get('shiplog_event_commit_batch_size_events')?.type, 'HISTOGRAM')
  assert.equal(s.families.get('shiplog_http_requests_total')?.type, 'COUNTER')
  // Every source and status is there from the start, so rate() works from the first event.
  assert.equal(s.labelValues('shiplog_events_recorded_total', 'source').size, 3)
  // Pool use on PostgreSQL; SQLite has a single connection and no pool to show.
  if (testDialect === 'postgres') {
    assert.ok(s.value('shiplog_db_pool_connections', { state: 'total' }) >= 1)
    assert.ok(s.value('shiplog_db_pool_max_connections') >= 1)
    assert.ok(s.families.has('shiplog_db_pool_waiting_queries'))
  } else {
    assert.equal(s.families.has('shiplog_db_pool_connections'), false)
  }
})

test('requests are counted by route pattern, method and status code, with their latency', async (t) => {
  const { app } = await buildTestApp(t)
  const before = await scrape(app)
  const health = { route: '/healthz', method: 'GET', status_code: '200' }
  for (let i = 0; i < 3; i++) assert.equal((await app.inject({ url: '/healthz' })).statusCode, 200)
  // A route with parameters counts under its pattern, never under the path that was asked for.
  const badge = await app.inject({ url: '/badge/not-a-token-xyz/some-service-qq/prod.svg' })
  const wrongMethod = await app.inject({ method: 'DELETE', url: '/healthz' })
  assert.equal(wrongMethod.statusCode, 405)
  const after = await scrape(app)
  assert.equal(
    after.value('shiplog_http_requests_total', health) - before.value('shiplog_http_requests_total', health),
    3,
  )
  assert.equal(
    after.value('shiplog_http_requests_total', { route: '/healthz', method: 'DELETE', status_code: '405' }),
    1,
  )
  const routes = after.labelValues('shiplog_http_requests_total', 'route')
  assert.ok(
    routes.has('/badge/:token/:service/:file'),
    `the badge pattern is the label: ${[...routes].join(' ')}`,
  )
  assert.equal(
    after.value('shiplog_http_requests_total', {
      route: '/badge/:token/:service/:file',
      method: 'GET',
      status_code: String(badge.statusCode),
    }),
    1,
  )
  for (const route of routes) assert.doesNotMatch(route, /not-a-token|some-service/, 'no raw path as label')
  const latency = { route: '/healthz', method: 'GET' }
  assert.equal(
    after.labelledCount('shiplog_http_request_duration_seconds', latency) -
      before.labelledCount('shiplog_http_request_duration_seconds', latency),
    3,
  )
})

test('events are counted by source and status, replays and refused repeats apart, batch sizes observed', async (t) => {
  const { app, tenant } = await buildTestApp(t)
  const before = await scrape(app)
  const putGet = await app.inject({
    url: '/put?app=metrics-svc&env=prod&version=1.0&status=deploying',
    headers: { 'x-api-key': tenant.key },
  })
  assert.equal(putGet.statusCode, 201, putGet.payload)
  const putPost = await app.inject({
    method: 'POST',
    url: '/put',
    headers: { 'x-api-key': tenant.key, 'content-type': 'application/json', 'idempotency-key': 'm-1' },
    payload: JSON.stringify({ app: 'metrics-svc', env: 'prod', version: '1.0', status: 'Deployed' }),
  })
  assert.equal(putPost.statusCode, 201, putPost.payload)
  const newer = await deploy(app, tenant.key, {
    service: 'metrics-svc',
    environment: 'prod',
    version: '1.1',
    status: 'Failed',
  })
  assert.equal(newer.status, 201)
  // The same Idempotency-Key again: the same values are replayed, other values refused.
  const same = { app: 'metrics-svc', env: 'prod', version: '1.0', status: 'Deployed' }
  const headers = { 'x-api-key': tenant.key, 'content-type': 'application/json', 'idempotency-key': 'm-1' }
  const replay = await app.inject({ method: 'POST', url: '/put', headers, payload: JSON.stringify(same) })
  assert.equal(replay.statusCode, 200, replay.payload)
  const reused = await app.inject({
    method: 'POST',
    url: '/put',
    headers,
    payload: JSON.stringify({ ...same, version: '9.9' }),
  })
  assert.equal(reused.statusCode, 422, reused.payload)
  // Refused before the writer: counted as a request, not as an event.
  const invalid = await deploy(app, tenant.key, {
    service: 'x',
    environment: 'prod',
    version: '1',
    status: 'Nope',
  })
  assert.equal(invalid.status, 422)

  const after = await scrape(app)
  const moved = (labels: Record<string, string>) =>
    after.value('shiplog_events_recorded_total', labels) -
    before.value('shiplog_events_recorded_total', labels)
  assert.equal(moved({ source: 'put-get', status: 'Deploying' }), 1)
  assert.equal(moved({ source: 'put-post', status: 'Deployed' }), 1)
  assert.equal(moved({ source: 'deploy', status: 'Failed' }), 1)
  const total = [...(after.families.get('shiplog_events_recorded_total')?.metrics ?? [])].reduce(
    (sum, m) => sum + Number(m.value),
    0,
  )
  assert.equal(total, 3, 'nothing else counted as stored')
  assert.equal(after.value('shiplog_events_idempotent_repeats_total', { result: 'replayed' }), 1)
  assert.equal(after.value('shiplog_events_idempotent_repeats_total', { result: 'refused' }), 1)
  // One request at a time: five transactions of one request each.
  const batches = after.histogram('shiplog_event_commit_batch_size_events')
  assert.equal(batches.count, 5)
  assert.equal(batches.sum, 5)
  assert.equal(
    after.value('shiplog_http_requests_total', { route: '/deploy', method: 'POST', status_code: '422' }),
    1,
  )

  // Requests that arrive together share a transaction: the histogram sees the bigger batch.
  const together = await Promise.all(
    Array.from({ length: 20 }, (_, i) =>
      deploy(app, tenant.key, {
        service: 'batch',
        environment: 'prod',
        version: `b${i}`,
        status: 'Deployed',
      }),
    ),
  )
  assert.ok(together.every((r) => r.status === 201))
  const last = await scrape(app)
  const grouped = last.histogram('shiplog_event_commit_batch_size_events')
  assert.equal(grouped.sum - batches.sum, 20, 'every request of the burst observed once')
  assert.ok(grouped.count - batches.count < 20, 'the burst was written in fewer transactions than requests')
  assert.equal(last.value('shiplog_events_recorded_total', { source: 'deploy', status: 'Deployed' }), 20)
})

test('deployments by outcome: a Deploying+Deployed pair is one succeeded; open ones in progress or stalled', async (t) => {
  const { app, tenant, database } = await buildTestApp(t)
  // An open deployment from long ago is stalled (the default stall time is 60 minutes).
  await insertEvents(database, tenant.account.id, [{ service: 'old', version: 'o1', status: 'Deploying' }])
  for (const status of ['Deploying', 'Deployed']) {
    const res = await deploy(app, tenant.key, {
      service: 'pair',
      environment: 'prod',
      version: '2.0',
      status,
    })
    assert.equal(res.status, 201)
  }
  const open = await deploy(app, tenant.key, {
    service: 'running',
    environment: 'prod',
    version: '3.0',
    status: 'Deploying',
  })
  assert.equal(open.status, 201)
  const failed = await deploy(app, tenant.key, {
    service: 'broken',
    environment: 'prod',
    version: '4.0',
    status: 'Failed',
  })
  assert.equal(failed.status, 201)
  await app.deployments.current()
  const s = await scrape(app)
  assert.equal(s.value('shiplog_deployments', { outcome: 'succeeded' }), 1)
  assert.equal(s.value('shiplog_deployments', { outcome: 'failed' }), 1)
  assert.equal(s.value('shiplog_deployments', { outcome: 'in_progress' }), 1)
  assert.equal(s.value('shiplog_deployments', { outcome: 'stalled' }), 1)
  assert.ok(s.value('shiplog_deployment_events_derived_total') >= 4, 'the derived events are counted')
})

test('the deployment counts are one query per 30 s: a scrape within that reuses them', async (t) => {
  const { tenant, database, app } = await buildTestApp(t)
  let now = Date.UTC(2026, 5, 1)
  const metrics = new Metrics(database, new TaskRunner({ debug() {}, info() {}, warn() {} }), () => now)
  const outcomes = async () => {
    const text = await metrics.scrape()
    const family = parsePrometheusTextFormat(text).find((f) => f.name === 'shiplog_deployments')
    return Object.fromEntries((family?.metrics ?? []).map((m) => [m.labels?.outcome, Number(m.value)]))
  }
  assert.equal((await outcomes()).succeeded, 0)
  await insertEvents(database, tenant.account.id, [{ service: 'cached', version: 'c1', status: 'Deployed' }])
  await app.deployments.current()
  assert.equal((await outcomes()).succeeded, 0, 'within the 30 s the figures are reused')
  now += DEPLOYMENT_COUNTS_TTL_MS
  assert.equal((await outcomes()).succeeded, 1, 'after it they are read again')
})

test('SHIPLOG_METRICS_TOKEN: missing or wrong gets 401 problem+json; the right bearer token 200', async (t) => {
  const { app } = await buildTestApp(t, { env: { SHIPLOG_METRICS_TOKEN: TOKEN, SHIPLOG_RATE_LIMIT: '1' } })
  for (const headers of [
    {},
    { authorization: `Bearer ${TOKEN}x` },
    { authorization: `Bearer ${TOKEN.slice(0, -1)}` },
    { authorization: 'Bearer ' },
    { authorization: `Basic ${Buffer.from(`x:${TOKEN}`).toString('base64')}` },
    { authorization: TOKEN },
    { 'x-api-key': TOKEN },
  ]) {
    const res = await app.inject({ url: '/metrics', headers })
    assert.equal(res.statusCode, 401, JSON.stringify(headers))
    assert.match(String(res.headers['content-type']), /^application\/problem\+json/)
    assert.equal(res.json().type, 'urn:shiplog:problem:metrics-token-required')
    assert.match(String(res.headers['www-authenticate']), /^Bearer /)
    assert.doesNotMatch(res.payload, /shiplog_/, 'no metric in the refusal')
  }
  // Scrapes are not held to the per-key budget (one request a minute here).
  for (let i = 0; i < 5; i++) await scrape(app, { authorization: `Bearer ${TOKEN}` })
  await scrape(app, { authorization: `bearer ${TOKEN}` })
  const head = await app.inject({ method: 'HEAD', url: '/metrics' })
  assert.equal(head.statusCode, 401)
  const post = await app.inject({
    method: 'POST',
    url: '/metrics',
    headers: { authorization: `Bearer ${TOKEN}` },
  })
  assert.equal(post.statusCode, 405)
  assert.match(String(post.headers.allow), /GET/)
})

test('without SHIPLOG_METRICS_TOKEN /metrics is open; a token that is short or has spaces stops start-up', async (t) => {
  const { app } = await buildTestApp(t)
  await scrape(app)
  assert.equal(loadConfig({ DATABASE_URL: 'sqlite::memory:' }).metricsToken, null)
  assert.equal(loadConfig({ DATABASE_URL: 'sqlite::memory:', SHIPLOG_METRICS_TOKEN: '' }).metricsToken, null)
  assert.equal(
    loadConfig({ DATABASE_URL: 'sqlite::memory:', SHIPLOG_METRICS_TOKEN: TOKEN }).metricsToken,
    TOKEN,
  )
  for (const bad of ['short', 'has spaces in the middle of it', 'ünïcödé-token-0123456789']) {
    assert.throws(
      () => loadConfig({ DATABASE_URL: 'sqlite::memory:', SHIPLOG_METRICS_TOKEN: bad }),
      (err: unknown) => err instanceof ConfigError && /SHIPLOG_METRICS_TOKEN/.test(err.message),
    )
  }
})

test('cardinality: 200 requests to random unknown paths add at most one route label value', async (t) => {
  const { app } = await buildTestApp(t)
  await scrape(app) // so that /metrics itself is counted before the first look
  const before = (await scrape(app)).labelValues('shiplog_http_requests_total', 'route')
  for (let i = 0; i < 200; i++) {
    const path = `/${randomBytes(6).toString('hex')}/${i}?q=${i}`
    const res = await app.inject({ method: i % 2 ? 'GET' : 'POST', url: path })
    assert.equal(res.statusCode, 404)
  }
  const after = await scrape(app)
  const routes = after.labelValues('shiplog_http_requests_total', 'route')
  const added = [...routes].filter((r) => !before.has(r))
  assert.ok(added.length <= 1, `added route labels: ${added.join(' ')}`)
  assert.ok(routes.has(UNMATCHED_ROUTE))
  const series = after.families.get('shiplog_http_requests_total')?.metrics.length ?? 0
  assert.ok(series < 20, `few series in all (${series})`)
  assert.equal(
    after.value('shiplog_http_requests_total', { route: UNMATCHED_ROUTE, method: 'GET', status_code: '404' }),
    100,
  )
})

test('the other parts feed theirs: webhook deliveries, queue depth, stream clients; a failing read keeps the scrape', async (t) => {
  const { app } = await buildTestApp(t)
  const { metrics } = app
  let s = await scrape(app)
  assert.equal(s.value('shiplog_webhook_deliveries_total', { outcome: 'delivered' }), 0)
  assert.equal(s.value('shiplog_stream_clients'), 0)
  metrics.webhookDelivered('delivered')
  metrics.webhookDelivered('delivered')
  metrics.webhookDelivered('failed')
  let depth = 7
  metrics.onWebhookQueueDepth(async () => depth)
  metrics.onStreamClients(() => 3)
  s = await scrape(app)
  assert.equal(s.value('shiplog_webhook_deliveries_total', { outcome: 'delivered' }), 2)
  assert.equal(s.value('shiplog_webhook_deliveries_total', { outcome: 'failed' }), 1)
  assert.equal(s.value('shiplog_webhook_queue_depth_deliveries'), 7)
  assert.equal(s.value('shiplog_stream_clients'), 3)
  depth = 2
  assert.equal((await scrape(app)).value('shiplog_webhook_queue_depth_deliveries'), 2)
  metrics.onWebhookQueueDepth(async () => {
    throw new Error('database away')
  })
  assert.equal(
    (await scrape(app)).value('shiplog_webhook_queue_depth_deliveries'),
    2,
    'the last figure stays',
  )
})

test('scrapes are not logged at info; other requests still are', async (t) => {
  const lines: string[] = []
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(...chunk.toString('utf8').split('\n').filter(Boolean))
      done()
    },
  })
  // A private database as buildTestApp makes it, opened again for an app that logs at info.
  const { config: base } = await buildTestApp(t)
  const database = openDatabase(base.database)
  t.after(() => database.close())
  await migrateToLatest(database)
  const app = await buildApp({ config: base, database, logger: { level: 'info', stream } })
  t.after(() => app.close())
  await app.inject({ url: '/metrics' })
  await app.inject({ url: '/metrics' })
  await app.inject({ url: '/openapi.json' })
  const urls = lines.map((l) => (JSON.parse(l) as { req?: { url?: string } }).req?.url).filter(Boolean)
  assert.ok(urls.includes('/openapi.json'), `another request is logged: ${lines.join('\n')}`)
  assert.ok(!urls.includes('/metrics'), 'the scrape is not')
})

test('the real server process (the bundle) serves /metrics behind its token, and does not log scrapes', async (t) => {
  assertBuilt()
  const { databaseUrl, key } = await databaseForServers(t)
  const server = await startServer(t, {
    databaseUrl,
    env: { SHIPLOG_METRICS_TOKEN: TOKEN, LOG_LEVEL: 'info' },
  })
  const refused = await fetch(`${server.url}/metrics`)
  assert.equal(refused.status, 401)
  await refused.arrayBuffer()
  const recorded = await fetch(`${server.url}/deploy`, {
    method: 'POST',
    headers: { 'x-api-key': key, 'content-type': 'application/json' },
    body: JSON.stringify({ service: 'proc', environment: 'prod', version: '1', status: 'Deployed' }),
  })
  assert.equal(recorded.status, 201)
  await recorded.arrayBuffer()
  const res = await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })
  assert.equal(res.status, 200)
  const families = new Map(parsePrometheusTextFormat(await res.text()).map((f) => [f.name, f]))
  const stored = families
    .get('shiplog_events_recorded_total')
    ?.metrics.find((m) => m.labels?.source === 'deploy' && m.labels.status === 'Deployed')
  assert.equal(stored?.value, '1')
  assert.ok(families.has('shiplog_process_resident_memory_bytes'), 'process metrics in the bundle too')
  assert.match(server.output(), /"url":"\/deploy"/, 'requests are logged at info')
  assert.doesNotMatch(server.output(), /"url":"\/metrics"/, 'scrapes are not')
})
