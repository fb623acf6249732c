// C1 controls and bidirectional overrides and isolates are refused wherever text is accepted: the
// three ingest forms (422 listing every bad field, the contract's shape), and the admin forms. Both
// databases.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { sql } from 'kysely'
import { buildTestApp, type TestApp } from '../helper.js'
import { insertEvents, userSession } from '../support/ui.js'

const HOSTILE = ['\u0085', '\u009b', '\u202a', '\u202e', '\u2066', '\u2069'] as const

async function eventCount(ctx: TestApp): Promise<number> {
  const { rows } = await sql<{ n: number | string }>`select count(*) as n from events`.execute(
    ctx.database.db,
  )
  return Number(rows[0]?.n)
}

test('each ingest form refuses C1 and bidi characters, listing every bad field', async (t) => {
  const ctx = await buildTestApp(t)
  const key = { 'x-api-key': ctx.tenant.key }
  for (const ch of HOSTILE) {
    const deploy = await ctx.app.inject({
      method: 'POST',
      url: '/deploy',
      headers: key,
      payload: { service: `api${ch}`, environment: `prod${ch}`, version: `1.0${ch}x`, status: 'Deployed' },
    })
    assert.equal(deploy.statusCode, 422, JSON.stringify(ch))
    assert.match(String(deploy.headers['content-type']), /^application\/problem\+json/)
    const fields = (deploy.json() as { errors: { field: string }[] }).errors.map((e) => e.field).sort()
    assert.deepEqual(fields, ['environment', 'service', 'version'])

    const post = await ctx.app.inject({
      method: 'POST',
      url: '/put',
      headers: key,
      payload: {
        app: 'api',
        env: 'prod',
        version: '1',
        status: 'Deployed',
        deployer: `x${ch}y`,
        commit: `${ch}a`,
      },
    })
    assert.equal(post.statusCode, 422)
    const postFields = (post.json() as { errors: { field: string }[] }).errors.map((e) => e.field).sort()
    assert.deepEqual(postFields, ['commit', 'deployer'])

    const get = await ctx.app.inject({
      method: 'GET',
      url: `/put?${new URLSearchParams({ app: `a${ch}`, env: 'prod', version: '1', status: 'Deployed' })}`,
      headers: key,
    })
    assert.equal(get.statusCode, 422)
    assert.deepEqual(
      (get.json() as { errors: { field: string }[] }).errors.map((e) => e.field),
      ['app'],
    )
  }
  assert.equal(await eventCount(ctx), 0)
})

test('admin forms refuse C1 and bidi characters and store nothing', async (t) => {
  const ctx = await buildTestApp(t, { env: { SHIPLOG_WEBHOOK_ALLOW_PRIVATE: '1' } })
  await insertEvents(ctx.database, ctx.tenant.account.id, [{ service: 'api', environment: 'prod' }])
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'ada@example.com', 'admin')
  const rows = async () => {
    const { rows } = await sql<Record<string, number | string>>`
      select (select count(*) from services) as s, (select count(*) from webhooks) as w,
        (select count(*) from users) as u, (select count(*) from api_keys) as k,
        (select count(*) from audit_entries) as a
    `.execute(ctx.database.db)
    return JSON.stringify(rows[0], (_k, v) => (typeof v === 'string' ? Number(v) : v))
  }
  const before = await rows()
  for (const ch of ['\u0085', '\u202e', '\u2067']) {
    const cases: [string, string, Record<string, string>][] = [
      ['/settings/', '/settings/keys', { name: `ci${ch}` }],
      ['/settings/', '/settings/users', { email: `mel${ch}@example.com`, role: 'member' }],
      ['/services/api/', '/services/api/meta', { team: `core${ch}` }],
      ['/services/api/', '/services/api/meta', { description: `one\r\ntwo ${ch}` }],
      [
        '/settings/webhooks/',
        '/settings/webhooks',
        { url: 'https://hooks.example.com/', format: 'json', status: 'Deployed', services: `api${ch}` },
      ],
      ['/settings/', '/settings/environments', { action: 'hide', environment: `qa${ch}` }],
    ]
    for (const [page, action, form] of cases) {
      const res = await browser.submit(page, action, form)
      assert.equal(res.statusCode, 422, `${action} ${JSON.stringify(form)}: ${res.payload.slice(0, 200)}`)
      assert.match(res.payload, /control characters/)
    }
  }
  assert.equal(await rows(), before)
  // A description keeps its line breaks.
  const kept = await browser.submit('/services/api/', '/services/api/meta', { description: 'one\r\ntwo' })
  assert.equal(kept.statusCode, 303)
})
