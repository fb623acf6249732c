// The pure parts of webhooks without a database: the SSRF guard (at creation and on the resolved
// address), which events queue which deliveries, the retry schedule and the signature recipe.
import assert from 'node:assert/strict'
import { createHmac } from 'node:crypto'
import { test } from 'node:test'
import type { DeploymentRow } from '../../src/db/schema.js'
import {
  candidateStatuses,
  cursorBound,
  nextAttemptDelay,
  nextCursor,
  plannedDeliveries,
  RETRY_WINDOW_MS,
  signatureHeader,
  type WebhookTrigger,
} from '../../src/domain/webhooks/rules.js'
import { sendRequest } from '../../src/domain/webhooks/sender.js'
import { checkWebhookUrl, guardedLookup, refusedAddress } from '../../src/domain/webhooks/ssrf.js'

test('internal addresses are refused, in every spelling', () => {
  for (const address of [
    '127.0.0.1',
    '10.1.2.3',
    '172.16.0.1',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '0.0.0.0',
    '224.0.0.1',
    '::1',
    '::',
    'fe80::1',
    'fc00::1',
    'fd00:ec2::254',
    'ff02::1',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '::ffff:a9fe:a9fe',
    '[::ffff:192.168.0.1]',
    // IPv4 inside IPv6: compatible, NAT64 (well-known and local-use), 6to4, Teredo (inverted).
    '::127.0.0.1',
    '64:ff9b::10.0.0.1',
    '64:ff9b:1::a00:1',
    '2002:7f00:1::1',
    '2002:a9fe:a9fe::',
    '2001:0:4136:e378:8000:63bf:80ff:fffe',
  ]) {
    assert.ok(refusedAddress(address), address)
  }
  for (const address of [
    '8.8.8.8',
    '1.1.1.1',
    '2606:4700:4700::1111',
    '::ffff:8.8.8.8',
    '2002:808:808::1',
    '2001:0:4136:e378:8000:63bf:f7f7:f7f7',
  ]) {
    assert.equal(refusedAddress(address), null, address)
  }
  assert.match(String(checkWebhookUrl('http://[::ffff:127.0.0.1]:8080/', false)), /loopback, private/)
  assert.match(String(checkWebhookUrl('http://0x7f.1/', false)), /loopback, private/)
  assert.match(String(checkWebhookUrl('http://2130706433/', false)), /loopback, private/)
  assert.equal(checkWebhookUrl('https://hooks.slack.com/services/T/B/X', false), null)
  assert.equal(checkWebhookUrl('http://127.0.0.1:9/', true), null)
  assert.match(String(checkWebhookUrl('javascript:alert(1)', true)), /http:\/\/ or https:\/\//)
})

test('a refused internal target names the setting that allows it (SHIPLOG_WEBHOOK_ALLOW_PRIVATE)', async () => {
  for (const url of [
    'http://10.0.0.5/hook',
    'http://[::1]:8080/',
    'http://localhost:9000/',
    'http://169.254.169.254/',
  ]) {
    assert.match(String(checkWebhookUrl(url, false)), /SHIPLOG_WEBHOOK_ALLOW_PRIVATE=1/, url)
  }
  // Refusals for other reasons say nothing about it.
  assert.doesNotMatch(String(checkWebhookUrl('ftp://example.com/', false)), /ALLOW_PRIVATE/)
  // At delivery too, when a name resolves to an internal address.
  const error = await new Promise<Error | null>((resolve) =>
    guardedLookup(false)('localhost', { all: true }, (err) => resolve(err as Error | null)),
  )
  assert.match(String(error?.message), /SHIPLOG_WEBHOOK_ALLOW_PRIVATE=1/)
})

test('at delivery, a name resolving to loopback is refused before connecting', async () => {
  const lookup = guardedLookup(false)
  const error = await new Promise<Error | null>((resolve) =>
    lookup('localhost', { all: true }, (err) => resolve(err as Error | null)),
  )
  assert.match(String(error?.message), /refused: localhost resolves to/)
  const allowed = await new Promise<Error | null>((resolve) =>
    guardedLookup(true)('localhost', { all: true }, (err) => resolve(err as Error | null)),
  )
  assert.equal(allowed, null)
  // And the sender checks an address literal again at each delivery.
  const attempt = await sendRequest(new URL('http://127.0.0.1:9/'), 'POST', {}, '{}', {
    timeoutMs: 500,
    allowPrivate: false,
  })
  assert.equal(attempt.status, null)
  assert.match(String(attempt.error), /^refused: /)
})

const hook = (over: Partial<WebhookTrigger> = {}): WebhookTrigger => ({
  id: 1,
  accountId: 7,
  statuses: [],
  outcomes: [],
  environments: [],
  services: [],
  sinceEventId: 0,
  ...over,
})

function deployment(id: number, eventIds: number[], result: 'succeeded' | 'failed' | null): DeploymentRow {
  return {
    id,
    account_id: 7,
    service: 'api',
    environment: 'prod',
    version: '1',
    started_at: 0,
    finished_at: result ? 1 : null,
    result,
    instant: 0,
    finish_event_id: result ? (eventIds.at(-1) ?? null) : null,
    rollback: 0,
    rolled_back: 0,
    deployer: null,
    api_key_name: null,
    commit_time: null,
    event_ids: eventIds.join(','),
  }
}

test('statuses, outcomes, filters and the creation point decide the deliveries', () => {
  const batch = [
    { id: 10, accountId: 7, service: 'api', environment: 'prod', status: 'Deploying' as const },
    { id: 11, accountId: 7, service: 'api', environment: 'prod', status: 'Deployed' as const },
    { id: 12, accountId: 8, service: 'api', environment: 'prod', status: 'Deployed' as const },
  ]
  const deployments = [deployment(10, [10, 11], 'succeeded')]
  const kinds = (w: WebhookTrigger) =>
    plannedDeliveries(batch, deployments, [w], 0).map((d) => `${d.event_id}:${d.kind}:${d.deployment_id}`)
  assert.deepEqual(kinds(hook({ statuses: ['Deploying'] })), ['10:status:10'])
  assert.deepEqual(kinds(hook({ outcomes: ['succeeded'] })), ['11:outcome:10'])
  assert.deepEqual(kinds(hook({ outcomes: ['failed'] })), [])
  assert.deepEqual(kinds(hook({ statuses: ['Deployed'], outcomes: ['succeeded'] })), [
    '11:status:10',
    '11:outcome:10',
  ])
  assert.deepEqual(kinds(hook({ statuses: ['Deploying'], sinceEventId: 10 })), [])
  assert.deepEqual(kinds(hook({ statuses: ['Deploying'], environments: ['staging'] })), [])
  assert.deepEqual(kinds(hook({ statuses: ['Deploying'], services: ['api'] })), ['10:status:10'])
  const ids = plannedDeliveries(
    batch,
    deployments,
    [hook({ statuses: ['Deployed'], outcomes: ['succeeded'] })],
    0,
  )
  assert.equal(new Set(ids.map((d) => d.delivery_id)).size, ids.length, 'each delivery its own id')
})

test('a top-up reads only the statuses that can trigger, and its cursor never passes a gap', () => {
  const base: WebhookTrigger = {
    id: 1,
    accountId: 1,
    statuses: [],
    outcomes: [],
    environments: [],
    services: [],
    sinceEventId: 0,
  }
  assert.deepEqual(candidateStatuses({ ...base, statuses: ['Deploying'] }), ['Deploying'])
  assert.deepEqual(candidateStatuses({ ...base, outcomes: ['succeeded'] }), ['Deployed'])
  assert.deepEqual(candidateStatuses({ ...base, outcomes: ['failed'] }), ['Failed'])
  assert.deepEqual(
    candidateStatuses({ ...base, statuses: ['Deploying'], outcomes: ['succeeded', 'failed'] }),
    ['Deploying', 'Deployed', 'Failed'],
  )
  assert.deepEqual(candidateStatuses(base), [])

  assert.equal(cursorBound(100, null), 100)
  assert.equal(cursorBound(100, 60), 59, 'short of the first id derivation still waits for')
  assert.equal(cursorBound(100, 101), 100)

  // A full read may have left matches behind its last event; a short one saw all up to the bound.
  assert.equal(nextCursor(10, 100, [{ id: 11 }, { id: 40 }], 2), 40)
  assert.equal(nextCursor(10, 100, [{ id: 11 }], 2), 100)
  assert.equal(nextCursor(10, 100, [], 2), 100)
  assert.equal(nextCursor(50, 40, [], 2), 50, 'never backwards (a rebuild starts derivation again)')
})

test('retries back off with full jitter and stop a day after the first attempt', () => {
  assert.equal(
    nextAttemptDelay(1, 0, 1000, 10_000, () => 0.999999),
    19_999,
  )
  assert.equal(
    nextAttemptDelay(3, 0, 1000, 10_000, () => 0.5),
    40_000,
  )
  assert.equal(
    nextAttemptDelay(30, 0, 1000, 10_000, () => 0.999999),
    3_599_996,
  )
  assert.equal(nextAttemptDelay(5, 0, RETRY_WINDOW_MS, 10_000), null)
  assert.equal(
    nextAttemptDelay(20, 0, RETRY_WINDOW_MS - 10, 10_000, () => 0.99),
    10,
  )
})

test('the signature is HMAC-SHA256 of "<t>.<body>" with the secret', () => {
  const header = signatureHeader('whsec_x', '{"a":1}', 1_700_000_000_500)
  const expected = createHmac('sha256', 'whsec_x').update('1700000000.{"a":1}').digest('hex')
  assert.equal(header, `t=1700000000,v1=${expected}`)
})
