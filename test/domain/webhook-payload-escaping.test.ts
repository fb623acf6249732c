// Webhook payloads without a database: event values reach Grafana's HTML annotation text and
// Slack's fallback escaped, so a version like `<img src=x>` is shown as text, never as markup; and
// the guardrails an event broke, with its override, reach all three formats (SPEC §11).
import assert from 'node:assert/strict'
import { test } from 'node:test'
import {
  grafanaRequest,
  grafanaTags,
  jsonPayload,
  type PayloadInput,
  slackPayload,
} from '../../src/domain/webhooks/rules.js'

const IMG = '<img src=x onerror=alert(1)>'
const AMP = 'a&b"c\'d'

function input(over: Partial<PayloadInput['event']> = {}, serviceUrl: string | null = null): PayloadInput {
  return {
    deliveryId: 'd1',
    kind: 'status',
    event: {
      id: 1,
      service: 'web',
      environment: 'prod',
      version: '1.0',
      status: 'Deployed',
      receivedAt: '2026-11-21T10:00:00.000Z',
      deployer: null,
      url: null,
      commit: null,
      description: null,
      guardrails: [],
      overrideReason: null,
      ...over,
    },
    deployment: null,
    serviceUrl,
  }
}

test('grafana annotation text escapes service, version and environment as HTML', () => {
  const { body } = grafanaRequest(input({ service: AMP, version: IMG, environment: `${IMG}env` }), null)
  const text = String(body.text)
  assert.ok(!text.includes('<img'), text)
  assert.ok(text.includes('&lt;img src=x onerror=alert(1)&gt;'), text)
  assert.ok(text.includes('a&amp;b&quot;c&#39;d'), text)
  // Tags are plain strings Grafana shows as text: they stay verbatim.
  assert.ok((body.tags as string[]).includes(`service:${AMP}`))
})

test('grafana annotation keeps its own link, its address escaped inside the attribute', () => {
  const { body } = grafanaRequest(input({}, 'https://shiplog.example/services/a"b<c/'), null)
  const text = String(body.text)
  assert.match(text, /<a href="https:\/\/shiplog\.example\/services\/a&quot;b&lt;c\/">Shiplog<\/a>$/)
})

test('slack fallback is escaped like every other text of the message', () => {
  const payload = slackPayload(input({ version: IMG, service: 'a&b' }))
  const attachment = (payload.attachments as Record<string, unknown>[])[0]
  assert.ok(attachment)
  const fallback = String(attachment.fallback)
  assert.ok(!fallback.includes('<'), fallback)
  assert.ok(!fallback.includes('>'), fallback)
  assert.equal(fallback, 'a&amp;b deployed &lt;img src=x onerror=alert(1)&gt; to prod')
  assert.equal(payload.text, fallback)
})

test('an event that broke guardrails says so in every format; an override reason is shown escaped', () => {
  const broke = input({ guardrails: ['lock', 'freeze'], overrideReason: 'fix <INC-42> & co' })
  const json = jsonPayload(broke)
  assert.deepEqual((json.event as Record<string, unknown>).guardrails, ['lock', 'freeze'])
  assert.equal((json.event as Record<string, unknown>).overrideReason, 'fix <INC-42> & co')

  const slack = slackPayload(broke)
  assert.equal(
    slack.text,
    'web deployed 1.0 to prod while locked, during a freeze (override: fix &lt;INC-42&gt; &amp; co)',
  )
  const fields = (slack.attachments as { fields: { title: string; value: string }[] }[])[0]?.fields ?? []
  assert.deepEqual(
    fields.filter((f) => f.title === 'Guardrails' || f.title === 'Override').map((f) => f.value),
    ['lock, freeze', 'fix &lt;INC-42&gt; &amp; co'],
  )
  assert.deepEqual(grafanaTags(broke).slice(-3), ['guardrail:lock', 'guardrail:freeze', 'override'])
  const { body } = grafanaRequest(broke, null)
  assert.equal(
    body.text,
    'web 1.0 to prod while locked, during a freeze (override: fix &lt;INC-42&gt; &amp; co)',
  )

  // Nothing broken, nothing said.
  const plain = input()
  assert.equal(slackPayload(plain).text, 'web deployed 1.0 to prod')
  assert.deepEqual(grafanaTags(plain), ['shiplog', 'deployment', 'service:web', 'environment:prod'])
  assert.deepEqual((jsonPayload(plain).event as Record<string, unknown>).guardrails, [])
  assert.equal((jsonPayload(plain).event as Record<string, unknown>).overrideReason, null)
  assert.equal(
    slackPayload(input({ guardrails: ['bad_version', 'promotion'] })).text,
    'web deployed 1.0 to prod though marked bad, ahead of its promotion rule',
  )
})
