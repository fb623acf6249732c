// Webhook deliveries queued per webhook from a cursor: a slow receiver leaves the cursor behind, not
// rows in the queue; a crash between top-ups, or a second instance, sends nothing twice; a gap is
// never skipped; a webhook created or re-enabled later is not sent history. Both databases.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { sql } from 'kysely'
import pg from 'pg'
import { openDatabase } from '../../src/db/connect.js'
import type { EventStatus } from '../../src/db/schema.js'
import { catchUpDeployments } from '../../src/domain/deployments/store.js'
import { topUpWebhook, topUpWebhooks, webhookBacklogs } from '../../src/domain/webhooks/cursor.js'
import { createWebhook, enableWebhook, listWebhooks } from '../../src/domain/webhooks/queries.js'
import { QUEUE_WINDOW } from '../../src/domain/webhooks/rules.js'
import { WebhookSender } from '../../src/domain/webhooks/sender.js'
import { buildTestApp, freshDatabaseUrl, TEST_SECRET, type TestApp, testDialect } from '../helper.js'
import { createUserIn, login } from '../support/ui.js'
import { startReceiver } from '../support/webhook-receiver.js'

const ENV = { SHIPLOG_WEBHOOK_ALLOW_PRIVATE: '1', SHIPLOG_WEBHOOK_RETRY_BASE_MS: '1' }

/** The app, with its background tasks stopped: only what the test calls queues or sends. */
async function quietApp(t: Parameters<typeof buildTestApp>[0], databaseUrl?: string): Promise<TestApp> {
  const ctx = await buildTestApp(t, { env: ENV, ...(databaseUrl ? { databaseUrl } : {}) })
  await ctx.app.tasks.stop()
  return ctx
}

async function hook(ctx: TestApp, url: string, statuses: string[] = ['Deployed'], outcomes: string[] = []) {
  const { webhook } = await createWebhook(
    ctx.database.db,
    TEST_SECRET,
    {
      accountId: ctx.tenant.account.id,
      url,
      format: 'json',
      statuses,
      outcomes,
      environments: [],
      services: [],
      grafanaToken: null,
      createdBy: 'test',
    },
    { allowPrivate: true },
  )
  return webhook
}

/** Events straight into the table (ingest is not what is tested), then derived. */
async function events(
  ctx: TestApp,
  n: number,
  status: EventStatus = 'Deployed',
  prefix = 'v',
): Promise<number[]> {
  const ids: number[] = []
  for (let i = 0; i < n; i++) {
    const row = await ctx.database.db
      .insertInto('events')
      .values({
        account_id: ctx.tenant.account.id,
        service: 'api',
        environment: 'prod',
        version: `${prefix}${i}`,
        status,
        url: null,
        commit_sha: null,
        description: null,
        deployer: null,
        source: 'deploy',
        api_key_id: null,
        api_key_name: 'ci',
        received_at: Date.now(),
        occurred_at: Date.now(),
      })
      .returning('id')
      .executeTakeFirstOrThrow()
    ids.push(Number(row.id))
  }
  while ((await catchUpDeployments(ctx.database)).more);
  return ids
}

async function queued(ctx: TestApp): Promise<{ id: number; event_id: number; kind: string }[]> {
  const rows = await ctx.database.db
    .selectFrom('webhook_deliveries')
    .select(['id', 'event_id', 'kind'])
    .orderBy('id')
    .execute()
  return rows.map((r) => ({ id: Number(r.id), event_id: Number(r.event_id), kind: r.kind }))
}

async function cursorOf(ctx: TestApp, id: number): Promise<number> {
  const row = await ctx.database.db
    .selectFrom('webhooks')
    .select('queued_through')
    .where('id', '=', id)
    .executeTakeFirstOrThrow()
  return Number(row.queued_through)
}

function sender(ctx: TestApp, database = ctx.database): WebhookSender {
  return new WebhookSender(database, {
    appSecret: TEST_SECRET,
    allowPrivate: true,
    timeoutMs: 3000,
    retryBaseMs: 1,
    publicUrl: null,
    version: 'test',
  })
}

/** Runs a sender until the receiver has `n` requests (or the time is up). */
async function sendUntil(s: WebhookSender, received: () => number, n: number, ms = 20_000): Promise<void> {
  const end = Date.now() + ms
  while (received() < n && Date.now() < end) {
    if ((await s.runOnce()) === 0) await new Promise((r) => setTimeout(r, 10))
  }
}

test('a slow receiver leaves the cursor behind, not rows: the queue holds a window, the rest follows in order', async (t) => {
  const ctx = await quietApp(t)
  const receiver = await startReceiver(t)
  const webhook = await hook(ctx, `${receiver.url}/in`)
  const ids = await events(ctx, 80)
  const others = await events(ctx, 5, 'Deploying', 'w') // never trigger this webhook

  const first = await topUpWebhooks(ctx.database)
  assert.deepEqual(
    first.map((r) => [r.planned, r.queued]),
    [[QUEUE_WINDOW, QUEUE_WINDOW]],
  )
  // Nothing sent yet (the receiver is "slow"): topping up again queues nothing more.
  await topUpWebhooks(ctx.database)
  await topUpWebhook(ctx.database, webhook.id)
  const rows = await queued(ctx)
  assert.equal(rows.length, QUEUE_WINDOW, 'no rows beyond the window')
  assert.deepEqual(
    rows.map((r) => r.event_id),
    ids.slice(0, QUEUE_WINDOW),
  )
  assert.equal(await cursorOf(ctx, webhook.id), ids[QUEUE_WINDOW - 1])
  const backlog = await webhookBacklogs(
    ctx.database,
    await listWebhooks(ctx.database.db, ctx.tenant.account.id),
  )
  assert.equal(backlog.get(webhook.id), 80 - QUEUE_WINDOW, 'the backlog counts the matching events only')
  const scraped = (await ctx.app.inject({ method: 'GET', url: '/metrics' })).payload
  const sample = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(scraped)?.[1])
  assert.equal(sample('shiplog_webhook_queue_depth_deliveries'), QUEUE_WINDOW)
  assert.equal(sample('shiplog_webhook_backlog_events'), 80 - QUEUE_WINDOW)
  // Settings → Webhooks says so, on the list and on the webhook's delivery log.
  await createUserIn(ctx.database, ctx.tenant.account.id, 'ada@example.com')
  const admin = await login(ctx.app, 'ada@example.com')
  for (const page of ['/settings/webhooks/', `/settings/webhooks/${webhook.id}/`]) {
    const res = await admin.get(page)
    assert.equal(res.statusCode, 200)
    assert.ok(res.payload.includes(`${80 - QUEUE_WINDOW} events not yet queued`), page)
  }

  // Once the receiver takes them, everything is delivered once, queued in event order.
  await sendUntil(sender(ctx), () => receiver.received.length, 80)
  const sent = receiver.received.map((r) => (JSON.parse(r.body) as { event: { id: number } }).event.id)
  assert.equal(sent.length, 80)
  assert.deepEqual(
    [...sent].sort((a, b) => a - b),
    ids,
  )
  const all = await queued(ctx)
  assert.deepEqual(
    all.map((r) => r.event_id),
    ids,
    'rows follow the events',
  )
  assert.equal(await cursorOf(ctx, webhook.id), others.at(-1), 'past the events that do not match')
  assert.equal(
    (await webhookBacklogs(ctx.database, await listWebhooks(ctx.database.db, ctx.tenant.account.id))).get(
      webhook.id,
    ),
    0,
  )
  assert.ok(!(await admin.get('/settings/webhooks/')).payload.includes('not yet queued'))
})

test('a crash between top-ups: the restarted process sends every event once', async (t) => {
  const databaseUrl = await freshDatabaseUrl(t)
  const ctx = await quietApp(t, databaseUrl)
  const receiver = await startReceiver(t)
  const webhook = await hook(ctx, `${receiver.url}/in`, ['Deploying'], ['succeeded'])
  const deploying = await events(ctx, 30, 'Deploying')
  const deployed = await events(ctx, 30, 'Deployed') // ends each of those: an outcome each
  await topUpWebhooks(ctx.database)
  const before = await queued(ctx)
  assert.equal(before.length, QUEUE_WINDOW)
  // As if the cursor's move had been lost while its rows were kept (it cannot: one transaction):
  // topping up again from the old cursor queues nothing twice.
  await ctx.database.db.updateTable('webhooks').set({ queued_through: webhook.since_event_id }).execute()
  const again = await topUpWebhook(ctx.database, webhook.id, { window: 1000 })
  assert.equal(again.planned, 60)
  assert.equal(again.queued, 60 - QUEUE_WINDOW, 'the unique constraint drops what was queued already')
  assert.equal((await queued(ctx)).length, 60)
  // The process dies with all that queued and nothing sent; another one starts on the database.
  await ctx.app.close()
  const restarted = openDatabase(ctx.config.database)
  t.after(() => restarted.close())
  await sendUntil(sender(ctx, restarted), () => receiver.received.length, 60)
  await new Promise((r) => setTimeout(r, 200))
  const sent = receiver.received.map((r) => {
    const body = JSON.parse(r.body) as { type: string; event: { id: number } }
    return `${body.type}:${body.event.id}`
  })
  assert.equal(sent.length, 60)
  assert.equal(new Set(sent).size, 60, 'nothing sent twice')
  assert.deepEqual(
    [...sent].sort(),
    [...deploying.map((id) => `event:${id}`), ...deployed.map((id) => `deployment.finished:${id}`)].sort(),
  )
})

test('two senders on one database never queue the same events', async (t) => {
  const databaseUrl = await freshDatabaseUrl(t)
  const ctx = await quietApp(t, databaseUrl)
  const receiver = await startReceiver(t)
  const webhook = await hook(ctx, `${receiver.url}/in`, ['Deployed'], ['succeeded'])
  const ids = await events(ctx, 100)
  const other = openDatabase(ctx.config.database)
  t.after(() => other.close())
  // Both instances top up at once, again and again, with room for everything.
  const results = (
    await Promise.all(
      [ctx.database, other].map(async (database) => {
        const done = []
        for (let i = 0; i < 10; i++) done.push(...(await topUpWebhooks(database, { window: 1000 })))
        return done
      }),
    )
  ).flat()
  const rows = await queued(ctx)
  assert.equal(rows.length, 200, 'a status and an outcome delivery per event')
  assert.equal(
    results.reduce((n, r) => n + r.planned, 0),
    200,
    'no event was planned by both instances',
  )
  assert.equal(await cursorOf(ctx, webhook.id), ids.at(-1))

  if (testDialect === 'postgres') {
    // While another instance holds the webhook (its top-up in progress), a top-up skips it at once.
    const holder = new pg.Client({ connectionString: databaseUrl })
    await holder.connect()
    t.after(() => holder.end())
    await holder.query('begin')
    await holder.query('select id from webhooks where id = $1 for update', [webhook.id])
    await events(ctx, 3)
    const skipped = await topUpWebhook(other, webhook.id, { window: 1000 })
    assert.equal(skipped.ran, false)
    await holder.query('rollback')
    const ran = await topUpWebhook(other, webhook.id, { window: 1000 })
    assert.equal(ran.ran, true)
    assert.equal(ran.queued, 6)
  }
})

test('a gap is not skipped: the cursor waits below an id that commits late', async (t) => {
  const ctx = await quietApp(t)
  const receiver = await startReceiver(t)
  const webhook = await hook(ctx, receiver.url, ['Deployed'])
  const [first] = await events(ctx, 1)
  assert.ok(first !== undefined)
  // Id first+1 is handed to a transaction that commits only after first+2 was derived.
  const insert = async (id: number) =>
    sql`insert into events (id, account_id, service, environment, version, status, source, api_key_name, received_at, occurred_at)
      ${sql.raw(ctx.database.dialect === 'postgres' ? 'overriding system value' : '')}
      values (${id}, ${ctx.tenant.account.id}, 'api', 'prod', ${`late${id}`}, 'Deployed', 'deploy', 'ci', ${Date.now()}, ${Date.now()})`.execute(
      ctx.database.db,
    )
  await insert(first + 2)
  await catchUpDeployments(ctx.database)
  const gaps = await ctx.database.db.selectFrom('deployment_gaps').selectAll().execute()
  assert.deepEqual(
    gaps.map((g) => [Number(g.from_id), Number(g.to_id)]),
    [[first + 1, first + 1]],
  )
  await topUpWebhooks(ctx.database)
  assert.equal(await cursorOf(ctx, webhook.id), first, 'the cursor stops below the gap')
  assert.deepEqual(
    (await queued(ctx)).map((r) => r.event_id),
    [first],
  )
  await insert(first + 1)
  await catchUpDeployments(ctx.database)
  await topUpWebhooks(ctx.database)
  assert.equal(await cursorOf(ctx, webhook.id), first + 2)
  assert.deepEqual(
    (await queued(ctx)).map((r) => r.event_id),
    [first, first + 1, first + 2],
    'the late event is queued, in event order',
  )
})

test('a webhook created, or re-enabled, later is not sent the events before', async (t) => {
  const ctx = await quietApp(t)
  const receiver = await startReceiver(t)
  await events(ctx, 5, 'Deployed', 'old')
  const webhook = await hook(ctx, receiver.url)
  assert.deepEqual(await topUpWebhooks(ctx.database), [], 'nothing to look at yet')
  const fresh = await events(ctx, 2, 'Deployed', 'new')
  await topUpWebhooks(ctx.database)
  assert.deepEqual(
    (await queued(ctx)).map((r) => r.event_id),
    fresh,
  )
  // Disabled (a day of failures), events arrive, then an admin turns it on again.
  await ctx.database.db.updateTable('webhooks').set({ enabled: 0, disabled_at: Date.now() }).execute()
  await events(ctx, 3, 'Deployed', 'off')
  await topUpWebhooks(ctx.database)
  assert.equal((await queued(ctx)).length, 2, 'a disabled webhook queues nothing')
  assert.equal(await enableWebhook(ctx.database.db, ctx.tenant.account.id, webhook.id), true)
  const after = await events(ctx, 1, 'Deployed', 'on')
  await topUpWebhooks(ctx.database)
  assert.deepEqual(
    (await queued(ctx)).map((r) => r.event_id),
    [...fresh, ...after],
  )
  // Enabling one that is on moves nothing: its backlog stays queued.
  const more = await events(ctx, 2, 'Deployed', 'more')
  assert.equal(await enableWebhook(ctx.database.db, ctx.tenant.account.id, webhook.id), true)
  await topUpWebhooks(ctx.database)
  assert.deepEqual(
    (await queued(ctx)).map((r) => r.event_id),
    [...fresh, ...after, ...more],
  )
})
