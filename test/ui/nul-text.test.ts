// U+0000 and other characters no text may hold, in path parameters and form fields: PostgreSQL
// cannot store NUL in text and answered 500; now a 404 (a path naming what cannot exist) or a 422
// (the form re-shown with its error), never a 5xx and never a change. Both databases.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { sql } from 'kysely'
import { ensureBadgeToken } from '../../src/domain/board/settings.js'
import { buildTestApp, type TestApp } from '../helper.js'
import { insertEvents, userSession } from '../support/ui.js'

async function world(t: Parameters<typeof buildTestApp>[0]) {
  const ctx = await buildTestApp(t, { env: { SHIPLOG_WEBHOOK_ALLOW_PRIVATE: '1' } })
  await insertEvents(ctx.database, ctx.tenant.account.id, [
    { service: 'billing', environment: 'prod', version: '1.0', status: 'Deployed' },
  ])
  const token = await ensureBadgeToken(ctx.database.db, ctx.tenant.account.id)
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'ada@example.com', 'admin')
  return { ctx, token, browser }
}

/** Row counts of the tables an admin form writes: equal before and after means nothing changed. */
async function snapshot(ctx: TestApp): Promise<string> {
  const { rows } = await sql<Record<string, number | string>>`
    select (select count(*) from services) as services, (select count(*) from webhooks) as webhooks,
      (select count(*) from users) as users, (select count(*) from audit_entries) as audit
  `.execute(ctx.database.db)
  return JSON.stringify(rows[0], (_k, v) => (typeof v === 'string' ? Number(v) : v))
}

test('NUL in a badge, service or webhook path is a 404, never a 500', async (t) => {
  const { ctx, token, browser } = await world(t)
  for (const url of [
    `/badge/${token}/billing/%00.svg`,
    `/badge/${token}/billing/prod%00.json`,
    `/badge/${token}/bil%00ling/prod.svg`,
    `/badge/%00${token.slice(1)}/billing/prod.svg`,
  ]) {
    const res = await ctx.app.inject({ method: 'GET', url })
    assert.equal(res.statusCode, 404, `${url}: ${res.payload.slice(0, 300)}`)
  }
  for (const url of ['/services/%00/', '/services/%00', '/services/a%01b/', '/settings/webhooks/%00/']) {
    const res = await browser.get(url)
    assert.equal(res.statusCode, 404, `${url}: ${res.payload.slice(0, 300)}`)
  }
})

test('NUL in an admin form field re-shows the form with a 422 and changes nothing', async (t) => {
  const { ctx, browser } = await world(t)
  const before = await snapshot(ctx)
  const cases: [string, string, Record<string, string>][] = [
    ['/services/billing/', '/services/billing/meta', { team: 'core', description: 'a\u0000b' }],
    ['/services/billing/', '/services/billing/meta', { team: 'co\u0000re', description: '' }],
    ['/services/billing/', '/services/billing/meta', { repository_url: 'https://git.example/\u0000' }],
    [
      '/settings/webhooks/',
      '/settings/webhooks',
      { url: 'https://hooks.example.com/\u0000', format: 'json', status: 'Deployed' },
    ],
    [
      '/settings/webhooks/',
      '/settings/webhooks',
      { url: 'https://hooks.example.com/', format: 'json', status: 'Deployed', environments: 'prod\u0000' },
    ],
    ['/settings/', '/settings/users', { email: 'mel\u0000@example.com', role: 'member' }],
    ['/settings/', '/settings/keys', { name: 'ci\u0000' }],
    ['/settings/', '/settings/environments', { action: 'hide', environment: 'qa\u0000' }],
  ]
  for (const [page, action, form] of cases) {
    const res = await browser.submit(page, action, form)
    assert.equal(res.statusCode, 422, `${action} ${JSON.stringify(form)}: ${res.payload.slice(0, 300)}`)
  }
  assert.equal(await snapshot(ctx), before, 'nothing was stored')
})
