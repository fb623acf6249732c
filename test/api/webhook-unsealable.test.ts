// A webhook whose signing secret was sealed with another app secret (data moved without its secret)
// shows as failing in Settings, and the sender records a plain failed attempt instead of leaving
// the delivery queued with a raw crypto error (issue 28, point 1). Both databases.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { createWebhook } from '../../src/domain/webhooks/queries.js'
import { buildTestApp } from '../helper.js'
import { deploy, userSession } from '../support/ui.js'
import { startReceiver } from '../support/webhook-receiver.js'

test('a webhook sealed with another secret shows as failing in Settings, and the sender marks it failing with a plain message', async (t) => {
  const ctx = await buildTestApp(t)
  const receiver = await startReceiver(t)
  const { webhook } = await createWebhook(
    ctx.database.db,
    'another-secret-0123456789abcdef0123456789',
    {
      accountId: ctx.tenant.account.id,
      url: `${receiver.url}/hook`,
      format: 'json',
      statuses: ['Deployed'],
      outcomes: [],
      environments: [],
      services: [],
      grafanaToken: null,
      createdBy: 'test',
    },
    { allowPrivate: true },
  )
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'ada@example.com')
  const list = await browser.get('/settings/webhooks/')
  assert.equal(list.statusCode, 200)
  assert.match(
    list.payload,
    /<span><span class="webhook-state failing">failing: cannot sign<\/span><br><span class="hint">its signing secret cannot be unsealed with this server&#39;s secret/,
  )
  assert.doesNotMatch(list.payload, /webhook-state active/)
  const detail = await browser.get(`/settings/webhooks/${webhook.id}/`)
  assert.match(
    detail.payload,
    /<span><span class="webhook-state failing">failing: cannot sign<\/span><br><span class="hint">its signing secret cannot be unsealed/,
  )

  const res = await deploy(ctx.app, ctx.tenant.key, {
    service: 'api',
    environment: 'prod',
    version: '1',
    status: 'Deployed',
  })
  assert.equal(res.status, 201)
  await ctx.app.deployments.current()
  await ctx.app.webhooks.runOnce()
  assert.equal(receiver.received.length, 0, 'nothing is sent unsigned')
  const delivery = await ctx.database.db
    .selectFrom('webhook_deliveries')
    .select(['attempts', 'state', 'last_error'])
    .executeTakeFirstOrThrow()
  assert.equal(Number(delivery.attempts), 1, 'the attempt counts')
  assert.equal(delivery.state, 'pending', 'retried with backoff like any failure')
  assert.match(
    String(delivery.last_error),
    /^not sent: its signing secret cannot be unsealed with this server's secret/,
  )
  const row = await ctx.database.db
    .selectFrom('webhooks')
    .select('failing_since')
    .where('id', '=', webhook.id)
    .executeTakeFirstOrThrow()
  assert.notEqual(row.failing_since, null, 'the webhook is failing')
})
