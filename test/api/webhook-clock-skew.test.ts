// Webhooks never report a negative duration: a deployment whose end was received with an earlier time
// than its start (two instances' clocks disagree) gets no Duration in Slack, and a Grafana region
// that does not end before it starts. Both databases.
import assert from 'node:assert/strict'
import { mock, test } from 'node:test'
import { createWebhook } from '../../src/domain/webhooks/queries.js'
import { buildTestApp, TEST_SECRET, type TestApp } from '../helper.js'
import { deploy } from '../support/ui.js'
import { startReceiver } from '../support/webhook-receiver.js'

const ENV = {
  SHIPLOG_WEBHOOK_ALLOW_PRIVATE: '1',
  SHIPLOG_WEBHOOK_TIMEOUT_MS: '3000',
  SHIPLOG_WEBHOOK_RETRY_BASE_MS: '1',
}

/** Records one event with the server's clock at `at` (another instance's clock, as it were). */
async function sendAt(ctx: TestApp, at: number, status: string): Promise<void> {
  mock.timers.enable({ apis: ['Date'], now: at })
  try {
    const res = await deploy(ctx.app, ctx.tenant.key, {
      service: 'web',
      environment: 'prod',
      version: '2.0',
      status,
    })
    assert.equal(res.status, 201, JSON.stringify(res.body))
  } finally {
    mock.timers.reset()
  }
}

async function hook(ctx: TestApp, url: string, format: string, grafanaToken: string | null = null) {
  await createWebhook(
    ctx.database.db,
    TEST_SECRET,
    {
      accountId: ctx.tenant.account.id,
      url,
      format,
      statuses: [],
      outcomes: ['succeeded', 'failed'],
      environments: [],
      services: [],
      grafanaToken,
      createdBy: 'test',
    },
    { allowPrivate: true },
  )
}

test('an end received before its start: no Duration in Slack, a Grafana region that does not run backwards', async (t) => {
  const ctx = await buildTestApp(t, { env: ENV })
  const slack = await startReceiver(t)
  const grafana = await startReceiver(t, (_req, res) => {
    res.setHeader('content-type', 'application/json')
    res.end(JSON.stringify({ message: 'Annotation added', id: 7 }))
  })
  await hook(ctx, slack.url, 'slack')
  await hook(ctx, `${grafana.url}/grafana/`, 'grafana', 'glsa_token')
  const start = Date.now()
  await sendAt(ctx, start, 'Deploying')
  await sendAt(ctx, start - 10 * 60_000, 'Deployed')
  await ctx.app.deployments.current()
  const end = Date.now() + 5000
  while (Date.now() < end && (slack.received.length < 1 || grafana.received.length < 1)) {
    await ctx.app.webhooks.runOnce()
    await new Promise((r) => setTimeout(r, 20))
  }
  assert.equal(slack.received.length, 1)
  const message = JSON.parse(slack.received[0]?.body ?? '{}') as {
    attachments: { fields: { title: string; value: string }[] }[]
  }
  const fields = message.attachments[0]?.fields ?? []
  assert.deepEqual(
    fields.map((f) => f.title),
    ['Service', 'Environment', 'Version'],
    `no Duration: ${JSON.stringify(fields)}`,
  )
  const annotations = grafana.received.map((r) => JSON.parse(r.body) as { time: number; timeEnd?: number })
  const region = annotations.find((a) => a.timeEnd !== undefined)
  assert.ok(region, JSON.stringify(annotations))
  assert.ok(
    (region.timeEnd ?? 0) >= region.time,
    `the region ends at or after its start: ${JSON.stringify(region)}`,
  )
})
