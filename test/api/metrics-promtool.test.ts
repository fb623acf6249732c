// /metrics passes `promtool check metrics` (Prometheus's own linter) after traffic of every kind:
// ingest, reads, exports, webhook deliveries and a live stream. Skipped where promtool is not
// installed, except under CI=true, where a skip counts as a failure (scripts/run-tests.mjs).
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { test } from 'node:test'
import { createApiKey } from '../../src/domain/keys.js'
import { buildTestApp, type TestApp } from '../helper.js'
import { deploy, userSession } from '../support/ui.js'
import { startReceiver } from '../support/webhook-receiver.js'
import { addWebhook } from '../support/webhooks.js'

const PROMTOOL = '/usr/bin/promtool'
const ci = process.env.CI === 'true' || process.env.CI === '1'

/** Like browserSkip: runs where promtool is, and always under CI (where its absence must fail). */
function promtoolSkip(): string | false {
  if (existsSync(PROMTOOL) || ci) return false
  return `${PROMTOOL} is not installed (Debian package prometheus), so this test is skipped (it fails under CI=true)`
}

async function webhookTo(ctx: TestApp, url: string): Promise<void> {
  await addWebhook(ctx, { url })
}

test('/metrics after traffic of every kind passes promtool check metrics', {
  skip: promtoolSkip(),
}, async (t) => {
  assert.ok(existsSync(PROMTOOL), `${PROMTOOL} is needed (apt-get install prometheus); .ci/run installs it`)
  const ctx = await buildTestApp(t, {
    env: { SHIPLOG_WEBHOOK_ALLOW_PRIVATE: '1', SHIPLOG_WEBHOOK_RETRY_BASE_MS: '1' },
  })
  const { app, tenant } = ctx
  const key = { 'x-api-key': tenant.key }
  const reading = await createApiKey(ctx.database.db, {
    accountId: tenant.account.id,
    name: 'reader',
    createdBy: 'test',
    scopes: ['read'],
  })
  const readKey = { 'x-api-key': reading.key }

  // Webhooks: one target that takes deliveries, one that refuses them (a failed attempt).
  const good = await startReceiver(t)
  const bad = await startReceiver(t, (_q, res) => {
    res.statusCode = 500
    res.end('no')
  })
  await webhookTo(ctx, `${good.url}/hook`)
  await webhookTo(ctx, `${bad.url}/hook`)

  // A live stream, on a real socket: open while the events below arrive.
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as AddressInfo
  const stream = new AbortController()
  const live = await fetch(`http://127.0.0.1:${port}/api/v1/stream`, {
    headers: readKey,
    signal: stream.signal,
  })
  assert.equal(live.status, 200)
  const reader = live.body?.getReader()

  // Ingest, in all three forms, with a replay and a refusal.
  for (const status of ['Deploying', 'Deployed']) {
    const res = await deploy(app, tenant.key, { service: 'api', environment: 'prod', version: '1.0', status })
    assert.equal(res.status, 201)
  }
  const put = await app.inject({ url: '/put?app=web&env=prod&version=2&status=Deployed', headers: key })
  assert.equal(put.statusCode, 201)
  const idem = { ...key, 'idempotency-key': 'once', 'content-type': 'application/json' }
  const body = JSON.stringify({ app: 'web', env: 'prod', version: '3', status: 'Failed' })
  for (const expected of [201, 200]) {
    const res = await app.inject({ method: 'POST', url: '/put', headers: idem, payload: body })
    assert.equal(res.statusCode, expected)
  }
  assert.equal((await deploy(app, tenant.key, { service: 'api' })).status, 422)

  // Reads: the read API and the legacy ones.
  for (const url of [
    '/api/v1/events?limit=1',
    '/api/v1/deployments',
    '/api/v1/services',
    '/api/v1/metrics?environment=prod',
    '/get',
    '/get/logs?app=api&env=prod',
  ]) {
    assert.equal((await app.inject({ url, headers: readKey })).statusCode, 200, url)
  }

  // Exports, as a logged-in user.
  const { browser } = await userSession(ctx, tenant.account.id, 'ops@example.com')
  for (const url of ['/logs/export.csv', '/logs/export.json']) {
    assert.equal((await browser.get(url)).statusCode, 200, url)
  }

  // The stream delivered something; webhooks are sent (the sender runs its queue until empty).
  const first = await reader?.read()
  assert.ok(first?.value && first.value.length > 0, 'the stream sent something')
  await app.deployments.current()
  // Until both targets were called: one run may claim only one of the two deliveries.
  for (let i = 0; i < 250 && (good.received.length === 0 || bad.received.length === 0); i++) {
    await app.webhooks.runOnce()
    await new Promise((r) => setTimeout(r, 20))
  }
  assert.ok(good.received.length > 0 && bad.received.length > 0, 'both targets were called')
  // A target has the request before the sender has its answer and counts it (a background run may
  // still be on it): scrape until both outcomes are counted.
  const counted = (payload: string) =>
    ['delivered', 'failed'].every((outcome) => {
      const line = payload
        .split('\n')
        .find((l) => l.startsWith(`shiplog_webhook_deliveries_total{outcome="${outcome}"} `))
      return line !== undefined && Number(line.split(' ')[1]) > 0
    })
  let res = await app.inject({ url: '/metrics' })
  for (let i = 0; i < 250 && !counted(res.payload); i++) {
    await app.webhooks.runOnce()
    await new Promise((r) => setTimeout(r, 20))
    res = await app.inject({ url: '/metrics' })
  }
  assert.equal(res.statusCode, 200)
  stream.abort()
  await reader?.cancel().catch(() => {})
  for (const [name, labels] of [
    ['shiplog_webhook_deliveries_total', 'outcome="delivered"'],
    ['shiplog_webhook_deliveries_total', 'outcome="failed"'],
    ['shiplog_stream_clients', ''],
    ['shiplog_events_idempotent_repeats_total', 'result="replayed"'],
  ] as const) {
    const line = res.payload
      .split('\n')
      .find((l) => l.startsWith(labels ? `${name}{${labels}} ` : `${name} `))
    assert.ok(line && Number(line.split(' ')[1]) > 0, `${name}{${labels}} moved: ${line}`)
  }

  const check = spawnSync(PROMTOOL, ['check', 'metrics'], { input: res.payload, encoding: 'utf8' })
  assert.equal(`${check.stdout}${check.stderr}`, '', 'promtool has nothing to say')
  assert.equal(check.status, 0)
})
