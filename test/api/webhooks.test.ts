// Webhook deliveries end to end against a real receiver on 127.0.0.1: signatures, the three formats,
// retries, hostile targets, and exactly one queued delivery per event and trigger. Both databases.
import assert from 'node:assert/strict'
import { Writable } from 'node:stream'
import { test } from 'node:test'
import { sql } from 'kysely'
import { buildApp } from '../../src/app.js'
import { openDatabase } from '../../src/db/connect.js'
import type { DeliveryRow } from '../../src/db/schema.js'
import { rebuildDeployments } from '../../src/domain/deployments/store.js'
import { topUpWebhooks } from '../../src/domain/webhooks/cursor.js'
import { createWebhook, deliveryLog, redeliver } from '../../src/domain/webhooks/queries.js'
import { buildTestApp, freshDatabaseUrl, TEST_SECRET, type TestApp } from '../helper.js'
import { deploy } from '../support/ui.js'
import { startReceiver, verifySignature } from '../support/webhook-receiver.js'

interface JsonDelivery {
  type: string
  deliveryId: string
  event: { id: number; status: string; version: string }
  deployment: { result: string; version: string } | null
  serviceUrl: string | null
}
interface SlackMessage {
  text: string
  attachments: { color: string; title_link?: string; fields: { title: string }[] }[]
}
interface Annotation {
  time: number
  timeEnd?: number
  tags: string[]
}

const ENV = {
  SHIPLOG_WEBHOOK_ALLOW_PRIVATE: '1',
  SHIPLOG_WEBHOOK_TIMEOUT_MS: '3000',
  SHIPLOG_WEBHOOK_RETRY_BASE_MS: '1',
  SHIPLOG_PUBLIC_URL: 'https://shiplog.example',
}

async function hook(
  ctx: TestApp,
  url: string,
  fields: {
    format?: string
    statuses?: string[]
    outcomes?: string[]
    grafanaToken?: string
    services?: string[]
  } = {},
) {
  return createWebhook(
    ctx.database.db,
    TEST_SECRET,
    {
      accountId: ctx.tenant.account.id,
      url,
      format: fields.format ?? 'json',
      statuses: fields.statuses ?? [],
      outcomes: fields.outcomes ?? [],
      environments: [],
      services: fields.services ?? [],
      grafanaToken: fields.grafanaToken ?? null,
      createdBy: 'test',
    },
    { allowPrivate: true },
  )
}

async function send(ctx: TestApp, service: string, version: string, status: string): Promise<void> {
  const res = await deploy(ctx.app, ctx.tenant.key, { service, environment: 'prod', version, status })
  assert.ok(res.status < 300, JSON.stringify(res.body))
}

/** Derives what waits and runs the sender until nothing is due (or the time is up). */
/**
 * Runs the delivery queue until `until` holds, or, without one, until nothing is pending. Not done
 * within `ms` is a failure: a drain that gave up quietly would leave the assertions after it to
 * fail with a less telling message, or to pass on a half-run queue.
 */
async function drain(ctx: TestApp, until?: () => boolean | Promise<boolean>, ms = 15_000): Promise<void> {
  await ctx.app.deployments.current()
  const end = Date.now() + ms
  let pending = 0
  for (;;) {
    const claimed = await ctx.app.webhooks.runOnce()
    if (until && (await until())) return
    if (claimed === 0) {
      const row = await ctx.database.db
        .selectFrom('webhook_deliveries')
        .select((eb) => eb.fn.countAll<number | string>().as('n'))
        .where('state', '=', 'pending')
        .executeTakeFirstOrThrow()
      pending = Number(row.n)
      if (pending === 0 && !until) return
      await new Promise((r) => setTimeout(r, 20))
    }
    if (Date.now() >= end) {
      assert.fail(
        until
          ? `drain: after ${ms} ms what the test waits for has not happened (${pending} deliveries pending)`
          : `drain: after ${ms} ms, ${pending} deliveries are still pending`,
      )
    }
  }
}

async function deliveries(ctx: TestApp): Promise<DeliveryRow[]> {
  return ctx.database.db.selectFrom('webhook_deliveries').selectAll().orderBy('id').execute()
}

test('json deliveries are signed, carry the event and the deployment it ended, once each', async (t) => {
  const ctx = await buildTestApp(t, { env: ENV })
  const receiver = await startReceiver(t)
  await send(ctx, 'api', '0.9', 'Deployed') // before the webhook: never sent
  await ctx.app.deployments.current()
  const { secret } = await hook(ctx, `${receiver.url}/in`, {
    statuses: ['Deploying'],
    outcomes: ['succeeded', 'failed'],
  })
  await send(ctx, 'api', '1.0', 'Deploying')
  await send(ctx, 'api', '1.0', 'Deployed')
  await drain(ctx)
  assert.equal(receiver.received.length, 2)
  // Deliveries go out a few at a time: the order they arrive in is not promised.
  const [start, end] = receiver.received
    .map((r) => ({ ...r, json: JSON.parse(r.body) as JsonDelivery }))
    .sort((a, b) => a.json.event.id - b.json.event.id)
  assert.ok(start && end)
  for (const r of [start, end]) {
    assert.ok(verifySignature(secret, r.headers['shiplog-signature'] as string, r.body), 'signature verifies')
    assert.equal(r.method, 'POST')
    assert.equal(r.url, '/in')
    assert.match(String(r.headers['user-agent']), /^Shiplog\/\d/)
    assert.equal(r.headers['shiplog-delivery'], r.json.deliveryId)
  }
  assert.ok(!verifySignature(`${secret}x`, start.headers['shiplog-signature'] as string, start.body))
  assert.equal(start.json.type, 'event')
  assert.equal(start.json.event.status, 'Deploying')
  assert.equal(start.json.event.version, '1.0')
  assert.equal(start.json.deployment, null)
  assert.equal(end.json.type, 'deployment.finished')
  assert.equal(end.json.event.status, 'Deployed')
  assert.equal(end.json.deployment?.result, 'succeeded')
  assert.equal(end.json.deployment?.version, '1.0')
  assert.equal(end.json.serviceUrl, 'https://shiplog.example/services/api')
  assert.equal(end.headers['shiplog-event'], String(end.json.event.id))

  // Deriving everything again queues nothing new and sends nothing again.
  await rebuildDeployments(ctx.database)
  await drain(ctx)
  assert.equal((await deliveries(ctx)).length, 2)
  assert.equal(receiver.received.length, 2)
})

test('slack messages and grafana annotations (a point, then the region)', async (t) => {
  const ctx = await buildTestApp(t, { env: ENV })
  const slack = await startReceiver(t)
  const grafana = await startReceiver(t, (req, res) => {
    res.setHeader('content-type', 'application/json')
    res.end(
      JSON.stringify(
        req.method === 'POST' ? { message: 'Annotation added', id: 41 } : { message: 'Annotation patched' },
      ),
    )
  })
  await hook(ctx, slack.url, { format: 'slack', outcomes: ['succeeded', 'failed'] })
  await hook(ctx, `${grafana.url}/grafana/`, { format: 'grafana', grafanaToken: 'glsa_token123' })
  await send(ctx, 'web', '2.0', 'Deploying')
  await drain(ctx, () => grafana.received.length >= 1)
  await send(ctx, 'web', '2.0', 'Failed')
  await drain(ctx, () => grafana.received.length >= 2 && slack.received.length >= 1)

  assert.equal(slack.received.length, 1)
  const message = JSON.parse(slack.received[0]?.body ?? '{}') as SlackMessage
  assert.equal(message.text, 'web failed to deploy 2.0 to prod')
  const attachment = message.attachments[0]
  assert.ok(attachment)
  assert.equal(attachment.color, 'danger')
  assert.equal(attachment.title_link, 'https://shiplog.example/services/web')
  assert.deepEqual(
    attachment.fields.map((f) => f.title),
    ['Service', 'Environment', 'Version', 'Duration'],
  )

  assert.equal(grafana.received.length, 2)
  const [point, region] = grafana.received
  assert.ok(point && region)
  assert.equal(point.method, 'POST')
  assert.equal(point.url, '/grafana/api/annotations')
  assert.equal(point.headers.authorization, 'Bearer glsa_token123')
  const pointBody = JSON.parse(point.body) as Annotation
  assert.equal(typeof pointBody.time, 'number')
  assert.equal(pointBody.timeEnd, undefined)
  assert.ok(pointBody.tags.includes('service:web'))
  assert.equal(region.method, 'PATCH')
  assert.equal(region.url, '/grafana/api/annotations/41')
  const regionBody = JSON.parse(region.body) as Annotation
  assert.equal(regionBody.time, pointBody.time)
  assert.ok((regionBody.timeEnd ?? 0) >= regionBody.time)
  assert.ok(regionBody.tags.includes('outcome:failed'))
})

test('a receiver that fails three times then succeeds gets exactly one success', async (t) => {
  const ctx = await buildTestApp(t, { env: ENV })
  const receiver = await startReceiver(t, (_req, res, n) => {
    res.statusCode = n <= 3 ? 503 : 204
    res.end(n <= 3 ? 'busy' : '')
  })
  await hook(ctx, receiver.url, { statuses: ['Deployed'] })
  await send(ctx, 'api', '1.0', 'Deployed')
  // The app's own sender runs beside drain's and may be between recording the success and clearing
  // failing_since when drain looks: both are waited for (and a drain that times out fails).
  const webhookRow = () => ctx.database.db.selectFrom('webhooks').selectAll().executeTakeFirstOrThrow()
  await drain(
    ctx,
    async () =>
      (await deliveries(ctx))[0]?.state === 'succeeded' && (await webhookRow()).failing_since === null,
  )
  const [row] = await deliveries(ctx)
  assert.equal(row?.state, 'succeeded')
  assert.equal(Number(row?.attempts), 4)
  assert.equal(receiver.received.length, 4)
  assert.equal(
    new Set(receiver.received.map((r) => r.headers['shiplog-delivery'])).size,
    1,
    'one delivery id',
  )
  assert.equal((await webhookRow()).failing_since, null)
  // /metrics counts the attempts by outcome, and nothing waits any more.
  const scraped = (await ctx.app.inject({ method: 'GET', url: '/metrics' })).payload
  const sample = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(scraped)?.[1])
  assert.equal(sample('shiplog_webhook_deliveries_total\\{outcome="failed"\\}'), 3)
  assert.equal(sample('shiplog_webhook_deliveries_total\\{outcome="delivered"\\}'), 1)
  assert.equal(sample('shiplog_webhook_queue_depth_deliveries'), 0)

  // A redelivery sends the same delivery id again.
  assert.equal(await redeliver(ctx.database.db, ctx.tenant.account.id, Number(row?.id)), true)
  await drain(ctx, () => receiver.received.length >= 5)
  assert.equal(receiver.received.length, 5)
  assert.equal(
    receiver.received[4]?.headers['shiplog-delivery'],
    receiver.received[0]?.headers['shiplog-delivery'],
  )
  const other = await ctx.addTenant('Other')
  assert.equal(await redeliver(ctx.database.db, other.account.id, Number(row?.id)), false)
})

test('redirects, huge, slow and silent answers are failures in the log and the queue goes on', async (t) => {
  // Retries far off, so the log shows each target's first attempt; a timeout a busy machine meets.
  const ctx = await buildTestApp(t, {
    env: { ...ENV, SHIPLOG_WEBHOOK_TIMEOUT_MS: '1500', SHIPLOG_WEBHOOK_RETRY_BASE_MS: '3600000' },
  })
  const receiver = await startReceiver(t, (req, res) => {
    if (req.url === '/redirect') {
      res.statusCode = 302
      res.setHeader('location', '/ok')
      res.end()
    } else if (req.url === '/huge') {
      res.statusCode = 500
      const chunk = Buffer.alloc(1024 * 1024, 'x')
      let sent = 0
      const write = () => {
        while (sent < 10 && res.write(chunk)) sent++
        if (sent < 10) res.once('drain', write)
        else res.end()
      }
      res.on('error', () => {})
      write()
    } else if (req.url === '/slow') {
      setTimeout(() => res.end('late'), 5000)
    } else if (req.url === '/silent') {
      // never answers
    } else res.end('fine')
  })
  const urls = ['/redirect', '/huge', '/slow', '/silent', '/ok']
  for (const path of urls) await hook(ctx, `${receiver.url}${path}`, { statuses: ['Deployed'] })
  await send(ctx, 'api', '1.0', 'Deployed')
  await ctx.app.deployments.current()
  // The app's own background sender may take some of them first: wait until each was tried once.
  let rows = await deliveries(ctx)
  const tried = () =>
    rows.length === 5 && rows.every((r) => Number(r.attempts) >= 1 && r.lease_until === null)
  for (let i = 0; i < 100 && !tried(); i++) {
    await ctx.app.webhooks.runOnce()
    rows = await deliveries(ctx)
    await new Promise((r) => setTimeout(r, 50))
  }
  assert.equal(rows.length, 5)
  const byPath = new Map<string, DeliveryRow>()
  const hooks = await ctx.database.db.selectFrom('webhooks').select(['id', 'url']).execute()
  for (const r of rows) {
    const url = hooks.find((h) => Number(h.id) === Number(r.webhook_id))?.url ?? ''
    byPath.set(new URL(url).pathname, r)
  }
  assert.equal(byPath.get('/ok')?.state, 'succeeded')
  assert.equal(byPath.get('/redirect')?.state, 'pending')
  assert.equal(Number(byPath.get('/redirect')?.last_status), 302)
  assert.match(String(byPath.get('/redirect')?.last_error), /redirect/)
  assert.equal(Number(byPath.get('/huge')?.last_status), 500)
  assert.equal(byPath.get('/huge')?.response_head?.length, 512)
  assert.match(String(byPath.get('/slow')?.last_error), /no answer within 1500 ms/)
  assert.match(String(byPath.get('/silent')?.last_error), /no answer within 1500 ms/)
  for (const r of rows) assert.ok(Number(r.attempts) >= 1)
  assert.equal(Number(byPath.get('/ok')?.attempts), 1)
  assert.ok(!receiver.received.some((r) => r.url === '/ok' && r.method !== 'POST'))
  const failing = await ctx.database.db
    .selectFrom('webhooks')
    .select('failing_since')
    .where('failing_since', 'is not', null)
    .execute()
  assert.equal(failing.length, 4)
  const log = await deliveryLog(
    ctx.database.db,
    ctx.tenant.account.id,
    Number(byPath.get('/redirect')?.webhook_id),
    null,
  )
  assert.equal(log.deliveries.length, 1)
})

test('a webhook that only failed for a day is disabled and gets no new deliveries', async (t) => {
  const ctx = await buildTestApp(t, { env: ENV })
  const receiver = await startReceiver(t, (_q, res) => {
    res.statusCode = 500
    res.end()
  })
  const { webhook } = await hook(ctx, receiver.url, { statuses: ['Deployed'] })
  await send(ctx, 'api', '1.0', 'Deployed')
  await ctx.database.db
    .updateTable('webhooks')
    .set({ failing_since: Date.now() - 25 * 3600_000 })
    .execute()
  await drain(ctx, () => receiver.received.length >= 1)
  const after = await ctx.database.db
    .selectFrom('webhooks')
    .selectAll()
    .where('id', '=', webhook.id)
    .executeTakeFirstOrThrow()
  assert.equal(Number(after.enabled), 0)
  assert.ok(after.disabled_at !== null)
  // The audit log says Shiplog turned it off, and why, once.
  const audit = await ctx.database.db
    .selectFrom('audit_entries')
    .selectAll()
    .where('action', '=', 'webhook.disabled')
    .execute()
  assert.equal(audit.length, 1)
  assert.equal(audit[0]?.actor_kind, 'system')
  assert.equal(Number(audit[0]?.account_id), ctx.tenant.account.id)
  assert.equal(audit[0]?.target, new URL(receiver.url).origin)
  assert.match(String(audit[0]?.details), /failed for 24 hours/)
  await send(ctx, 'api', '1.1', 'Deployed')
  await ctx.app.deployments.current()
  await topUpWebhooks(ctx.database)
  assert.equal((await deliveries(ctx)).length, 1)
})

test('an event that commits late, below ids already derived, still triggers its webhooks once', async (t) => {
  const ctx = await buildTestApp(t, { env: ENV })
  const receiver = await startReceiver(t, (_req, res) => {
    res.statusCode = 204
    res.end()
  })
  await hook(ctx, receiver.url, { statuses: ['Deploying', 'Deployed'], outcomes: ['succeeded'] })
  const at = Date.UTC(2026, 0, 2)
  // An event with an id chosen here, as a transaction that was handed it earlier would commit it.
  const insert = async (id: number, status: string, receivedAt: number) => {
    const row = { account: ctx.tenant.account.id, service: 'api', environment: 'prod', version: '1.0' }
    await sql`insert into events (id, account_id, service, environment, version, status, source, api_key_name, received_at, occurred_at)
      ${sql.raw(ctx.database.dialect === 'postgres' ? 'overriding system value' : '')}
      values (${id}, ${row.account}, ${row.service}, ${row.environment}, ${row.version}, ${status}, 'deploy', 'ci', ${receivedAt}, ${receivedAt})`.execute(
      ctx.database.db,
    )
  }
  // Ids 1 and 3 commit first and are derived; 2 commits only afterwards (another instance's slower
  // transaction on PostgreSQL). Until it does, the webhook's cursor waits below it.
  await insert(1, 'Deploying', at)
  await insert(3, 'Deployed', at + 2000)
  await ctx.app.deployments.current()
  await topUpWebhooks(ctx.database)
  const cursor = async () =>
    Number(
      (await ctx.database.db.selectFrom('webhooks').select('queued_through').executeTakeFirstOrThrow())
        .queued_through,
    )
  assert.equal(await cursor(), 1, 'the cursor stops short of the gap')
  await insert(2, 'Deploying', at + 1000)
  await ctx.app.deployments.current()
  await topUpWebhooks(ctx.database)
  assert.equal(await cursor(), 3)
  const rows = await deliveries(ctx)
  assert.deepEqual(
    rows.map((r) => [Number(r.event_id), r.kind]),
    [
      [1, 'status'],
      [2, 'status'],
      [3, 'status'],
      [3, 'outcome'],
    ],
    'the late Deploying is queued like the others, in event order, and nothing twice',
  )
})

test('a failing webhook is logged once, without its path, and once more when it delivers again', async (t) => {
  const lines: Array<{ level: number; msg: string }> = []
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n').filter(Boolean)) lines.push(JSON.parse(line))
      done()
    },
  })
  // A database of its own, opened again for an app whose log this test reads.
  const ctx = await buildTestApp(t, { env: ENV, databaseUrl: await freshDatabaseUrl(t) })
  // Only the app below may send (the helper's own app would say nothing in this log).
  await ctx.app.close()
  const database = openDatabase(ctx.config.database)
  t.after(() => database.close())
  const app = await buildApp({ config: ctx.config, database, logger: { level: 'info', stream } })
  t.after(() => app.close())
  const receiver = await startReceiver(t, (_req, res, n) => {
    res.statusCode = n <= 3 ? 500 : 200
    res.end()
  })
  // A Slack-like URL: its path is the secret, and must not reach the log.
  await hook(ctx, `${receiver.url}/services/T0/B0/secret-path-zq7`, { statuses: ['Deployed'] })
  const res = await deploy(app, ctx.tenant.key, {
    service: 'api',
    environment: 'prod',
    version: '1',
    status: 'Deployed',
  })
  assert.equal(res.status, 201)
  await app.deployments.current()
  for (let i = 0; i < 200 && receiver.received.length < 4; i++) {
    await app.webhooks.runOnce()
    await new Promise((r) => setTimeout(r, 20))
  }
  assert.equal(receiver.received.length, 4)
  const said = lines.filter((l) => /^webhook \d+ /.test(l.msg))
  assert.deepEqual(
    said.map((l) => [l.level, l.msg.replace(/ \(.*$/, '').replace(/;.*$/, '')]),
    [
      [40, `webhook ${said[0]?.msg.split(' ')[1]} is failing`],
      [30, `webhook ${said[0]?.msg.split(' ')[1]} delivers again`],
    ],
  )
  assert.ok(
    !lines.some((l) => JSON.stringify(l).includes('secret-path-zq7')),
    'the path stays out of the log',
  )
})
