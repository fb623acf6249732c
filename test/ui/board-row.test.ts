// GET /board/row: the one board row the live board fetches, drawn as the page draws it (sender,
// drift marks, alerts), and refused clearly for a missing or malformed service.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { buildTestApp } from '../helper.js'
import { insertEvents, userSession } from '../support/ui.js'

test('the row is the board page’s own row, with sender and ≠ marks', async (t) => {
  const ctx = await buildTestApp(t)
  const now = Date.now()
  await insertEvents(ctx.database, ctx.tenant.account.id, [
    { service: 'api', environment: 'prod', version: '1.0', deployer: 'ada', received_at: now - 30_000 },
    {
      service: 'api',
      environment: 'staging',
      version: '1.1',
      deployer: 'grace <ops>',
      received_at: now - 20_000,
    },
    { service: 'api', environment: 'prod', version: '1.2', status: 'Failed', received_at: now - 10_000 },
    { service: 'web', environment: 'prod', version: '9', received_at: now },
  ])
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'a@example.com', 'member')
  const row = await browser.get('/board/row?service=api')
  assert.equal(row.statusCode, 200)
  assert.match(String(row.headers['content-type']), /^text\/html/)
  assert.equal(row.headers['cache-control'], 'no-store')
  assert.match(row.payload, /^<tr data-service="api">/)
  assert.doesNotMatch(row.payload, /web/)
  const staging = /<td class="cell" data-environment="staging">(.*?)<\/td>/.exec(row.payload)?.[1] ?? ''
  assert.match(staging, /<span class="version mono">1\.1<\/span><\/div>/)
  assert.match(staging, /<\/time> · grace &lt;ops&gt;<\/div>$/)
  const prod =
    /<td class="cell attention failed" data-environment="prod">(.*?)<\/td>/.exec(row.payload)?.[1] ?? ''
  assert.match(
    prod,
    /<span class="version mono">1\.0<\/span> <span class="drift" title="Differs from staging, which runs 1\.1: waiting to be promoted">/,
  )
  assert.match(prod, /<\/time> · ada<\/div><div class="alert failed">/)
  // The board page draws the same row, time words aside.
  const page = (await browser.get('/services/')).payload
  const fromPage = /<tr data-service="api">[\s\S]*?<\/tr>/.exec(page)?.[0]
  const words = (s: string | undefined) => s?.replace(/data-relative>[^<]*</g, 'data-relative><')
  assert.equal(words(fromPage), words(row.payload.trim()))
})

test('a missing, malformed or unknown service is refused, and a visitor must sign in', async (t) => {
  const ctx = await buildTestApp(t)
  await insertEvents(ctx.database, ctx.tenant.account.id, [
    { service: 'api', environment: 'prod', version: '1' },
  ])
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'a@example.com', 'member')
  for (const url of ['/board/row', '/board/row?service=', '/board/row?service=a%01b']) {
    const res = await browser.get(url)
    assert.equal(res.statusCode, 422, url)
    assert.match(res.payload, /The &quot;service&quot; (is empty|must not contain control characters)/, url)
  }
  assert.equal((await browser.get('/board/row?service=nope')).statusCode, 404)
  assert.equal((await browser.get('/board/row?service=API')).statusCode, 404)
  const anonymous = await ctx.app.inject({ method: 'GET', url: '/board/row?service=api' })
  assert.equal(anonymous.statusCode, 303)
  assert.match(String(anonymous.headers.location), /^\/login/)
})
