// Settings → Webhooks in the browser's terms: an admin adds a webhook and sees its secret once, bad
// input is refused with a clear message and stores nothing, a member only reads, and a delivery is
// resent from the log (post/redirect/get). Both databases.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { buildTestApp } from '../helper.js'
import { createUserIn, deploy, login, textOfId } from '../support/ui.js'
import { startReceiver } from '../support/webhook-receiver.js'

test('admins add, resend and delete webhooks; bad input changes nothing; members read only', async (t) => {
  const ctx = await buildTestApp(t, {
    env: { SHIPLOG_WEBHOOK_ALLOW_PRIVATE: '1', SHIPLOG_WEBHOOK_RETRY_BASE_MS: '1' },
  })
  await createUserIn(ctx.database, ctx.tenant.account.id, 'ada@example.com')
  await createUserIn(ctx.database, ctx.tenant.account.id, 'mel@example.com', { role: 'member' })
  const admin = await login(ctx.app, 'ada@example.com')
  const count = async () => (await ctx.database.db.selectFrom('webhooks').select('id').execute()).length

  const settings = await admin.get('/settings/')
  assert.ok(settings.payload.includes('href="/settings/webhooks/"'), 'Settings links to Webhooks')

  const bad: [Record<string, string>, string][] = [
    [
      { url: 'not a url', format: 'json', status: 'Deployed' },
      'URL refused: the URL is not a valid absolute URL.',
    ],
    [{ url: 'https://h.example.com/', format: 'json' }, 'Choose at least one status or deployment outcome'],
    [
      { url: 'https://h.example.com/', format: 'xml', status: 'Deployed' },
      'Format must be one of json, slack, grafana.',
    ],
    [
      { url: 'https://h.example.com/', format: 'grafana' },
      'A Grafana webhook needs a Grafana service account token.',
    ],
    [
      { url: 'https://h.example.com/', format: 'json', status: 'Gone' },
      'Status must be one of Deploying, Deployed, Failed.',
    ],
  ]
  for (const [form, message] of bad) {
    const res = await admin.submit('/settings/webhooks/', '/settings/webhooks', form)
    assert.equal(res.statusCode, 422, JSON.stringify(form))
    assert.ok(res.payload.includes(message), `${message} in ${res.payload.slice(0, 2000)}`)
    assert.ok(res.payload.includes('role="alert"'))
  }
  assert.equal(await count(), 0, 'nothing refused was stored')
  // Without the allow flag the same app would refuse a loopback target; here a public-looking one is kept.
  const receiver = await startReceiver(t)
  const made = await admin.submit('/settings/webhooks/', '/settings/webhooks', {
    url: `${receiver.url}/hook`,
    format: 'json',
    status: 'Deployed',
    environments: 'prod, staging',
  })
  assert.equal(made.statusCode, 303)
  assert.equal(made.headers.location, '/settings/webhooks/')
  const page = await admin.get('/settings/webhooks/')
  const secret = textOfId(page.payload, 'new-webhook-secret')
  assert.match(String(secret), /^whsec_/)
  assert.ok(page.payload.includes('prod, staging'))
  assert.ok(page.payload.includes('>active<'))
  assert.equal(
    textOfId((await admin.get('/settings/webhooks/')).payload, 'new-webhook-secret'),
    undefined,
    'shown once',
  )

  await deploy(ctx.app, ctx.tenant.key, {
    service: 'api',
    environment: 'prod',
    version: '1',
    status: 'Deployed',
  })
  await ctx.app.deployments.current()
  await ctx.app.webhooks.runOnce()
  assert.equal(receiver.received.length, 1)
  const hook = await ctx.database.db.selectFrom('webhooks').select('id').executeTakeFirstOrThrow()
  const delivery = await ctx.database.db
    .selectFrom('webhook_deliveries')
    .select('id')
    .executeTakeFirstOrThrow()
  const log = await admin.get(`/settings/webhooks/${hook.id}/`)
  assert.equal(log.statusCode, 200)
  assert.ok(log.payload.includes('delivered'))
  assert.ok(log.payload.includes('<code class="response-head">ok</code>'))

  const member = await login(ctx.app, 'mel@example.com')
  const memberView = await member.get(`/settings/webhooks/${hook.id}/`)
  assert.equal(memberView.statusCode, 200)
  assert.ok(!memberView.payload.includes('Redeliver'), 'members read only')
  assert.ok(!(await member.get('/settings/webhooks/')).payload.includes('Add webhook'))
  const refused = await member.submit(
    '/settings/webhooks/',
    `/settings/webhooks/${hook.id}/deliveries/${delivery.id}/redeliver`,
    {},
  )
  assert.equal(refused.statusCode, 403)

  const resent = await admin.submit(
    `/settings/webhooks/${hook.id}/`,
    `/settings/webhooks/${hook.id}/deliveries/${delivery.id}/redeliver`,
    {},
  )
  assert.equal(resent.statusCode, 303)
  assert.equal(resent.headers.location, `/settings/webhooks/${hook.id}/`)
  await ctx.app.webhooks.runOnce()
  assert.equal(receiver.received.length, 2)
  assert.equal(
    receiver.received[1]?.headers['shiplog-delivery'],
    receiver.received[0]?.headers['shiplog-delivery'],
  )

  assert.equal((await admin.get(`/settings/webhooks/${hook.id}/?before=x`)).statusCode, 400)
  assert.equal((await admin.get('/settings/webhooks/99999/')).statusCode, 404)
  const deleted = await admin.submit('/settings/webhooks/', `/settings/webhooks/${hook.id}/delete`, {})
  assert.equal(deleted.statusCode, 303)
  assert.equal(await count(), 0)
})
