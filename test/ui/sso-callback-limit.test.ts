// Nothing unauthenticated grows the audit log without bound: junk single sign-on callbacks are
// limited per address like the start (429 beyond the limit, counted in /metrics, no audit entry),
// and so are failed password logins. Both databases.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { UNCLAIMED_AUDIT_PER_WINDOW } from '../../src/http/ui/unclaimed-audit.js'
import { buildTestApp, type TestApp } from '../helper.js'
import { startTestProvider } from '../support/oidc-provider.js'
import { createUserIn } from '../support/ui.js'

async function auditCount(ctx: TestApp): Promise<number> {
  const row = await ctx.database.db
    .selectFrom('audit_entries')
    .select((eb) => eb.fn.countAll().as('n'))
    .executeTakeFirstOrThrow()
  return Number(row.n)
}

const SHIPLOG = 'http://shiplog.test'

async function limitedCount(ctx: TestApp, route: string): Promise<number> {
  const res = await ctx.app.inject({ url: '/metrics' })
  assert.equal(res.statusCode, 200)
  const escaped = route.replace(/[/.]/g, (c) => `\\${c}`)
  const line = new RegExp(`^shiplog_rate_limited_requests_total\\{route="${escaped}"\\} (\\d+)$`, 'm').exec(
    res.payload,
  )
  return Number(line?.[1] ?? 0)
}

test('300 junk callbacks: 429 beyond the per-address limit, a bounded number of audit entries', async (t) => {
  const provider = await startTestProvider(t, { shiplogUrl: SHIPLOG })
  const ctx = await buildTestApp(t, { env: provider.env })
  await createUserIn(ctx.database, ctx.tenant.account.id, 'owner@acme.example')
  const before = await auditCount(ctx)
  const statuses = new Map<number, number>()
  for (let i = 0; i < 300; i++) {
    const res = await ctx.app.inject({
      url: `/login/oidc/callback?state=junk${i}`,
      remoteAddress: '203.0.113.7',
    })
    statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1)
  }
  const limited = statuses.get(429) ?? 0
  assert.ok(limited >= 250, `most were refused over the limit: ${JSON.stringify([...statuses])}`)
  assert.equal((statuses.get(400) ?? 0) + limited, 300, JSON.stringify([...statuses]))
  const written = (await auditCount(ctx)) - before
  assert.ok(written <= 50, `${written} audit entries for 300 junk callbacks`)
  assert.equal(written, 300 - limited, 'one entry per callback answered, none per refusal over the limit')
  assert.equal(await limitedCount(ctx, '/login/oidc/callback'), limited, 'the refusals are counted')
  // Another address is not held back by the first one's flood.
  const other = await ctx.app.inject({
    url: '/login/oidc/callback?state=junk',
    remoteAddress: '198.51.100.9',
  })
  assert.equal(other.statusCode, 400)
})

test('300 failed password logins from one address: bounded audit entries, refusals counted', async (t) => {
  const ctx = await buildTestApp(t)
  await createUserIn(ctx.database, ctx.tenant.account.id, 'owner@acme.example')
  const page = await ctx.app.inject({ url: '/login', remoteAddress: '203.0.113.7' })
  const csrf = /name="_csrf" value="([^"]+)"/.exec(page.payload)?.[1] ?? ''
  const cookie = (
    Array.isArray(page.headers['set-cookie'])
      ? page.headers['set-cookie']
      : [String(page.headers['set-cookie'])]
  )
    .map((c) => c.split(';')[0])
    .join('; ')
  const before = await auditCount(ctx)
  let limited = 0
  for (let i = 0; i < 300; i++) {
    const res = await ctx.app.inject({
      method: 'POST',
      url: '/login',
      remoteAddress: '203.0.113.7',
      headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams({
        _csrf: csrf,
        email: `nobody${i}@example.com`,
        password: 'wrong',
      }).toString(),
    })
    if (res.statusCode === 429) limited++
    else assert.equal(res.statusCode, 401, res.payload.slice(0, 300))
  }
  const written = (await auditCount(ctx)) - before
  assert.ok(limited >= 200, `${limited} refused over the limit`)
  assert.equal(written, 300 - limited)
  assert.equal(await limitedCount(ctx, '/login'), limited)
})

async function droppedCount(ctx: TestApp): Promise<number> {
  const res = await ctx.app.inject({ url: '/metrics' })
  const line = /^shiplog_audit_entries_dropped_total\{action="login\.failed"\} (\d+)$/m.exec(res.payload)
  return Number(line?.[1] ?? 0)
}

test('junk callbacks from many addresses: the entries of no account stop at the installation budget, the rest counted', async (t) => {
  const provider = await startTestProvider(t, { shiplogUrl: SHIPLOG })
  const ctx = await buildTestApp(t, { env: provider.env })
  const before = await auditCount(ctx)
  const sent = UNCLAIMED_AUDIT_PER_WINDOW + 40
  for (let i = 0; i < sent; i++) {
    // A fresh address each time (an IPv6 block holds plenty): no per-address limit is reached.
    const res = await ctx.app.inject({
      url: `/login/oidc/callback?state=junk${i}`,
      remoteAddress: `2001:db8::${i.toString(16)}`,
    })
    assert.equal(res.statusCode, 400)
  }
  const written = (await auditCount(ctx)) - before
  assert.equal(written, UNCLAIMED_AUDIT_PER_WINDOW, `${written} audit entries for ${sent} junk callbacks`)
  assert.equal(await droppedCount(ctx), 40, 'the callbacks past the budget are counted')
  // An entry of an account is not held back by the spent budget: a wrong password for a real user
  // is written (per-email limits bound those).
  await createUserIn(ctx.database, ctx.tenant.account.id, 'owner@acme.example')
  const page = await ctx.app.inject({ url: '/login', remoteAddress: '198.51.100.20' })
  const csrf = /name="_csrf" value="([^"]+)"/.exec(page.payload)?.[1] ?? ''
  const setCookie = page.headers['set-cookie']
  const cookie = (Array.isArray(setCookie) ? setCookie : [String(setCookie)])
    .map((c) => c.split(';')[0])
    .join('; ')
  const login = await ctx.app.inject({
    method: 'POST',
    url: '/login',
    remoteAddress: '198.51.100.20',
    headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
    payload: new URLSearchParams({ _csrf: csrf, email: 'owner@acme.example', password: 'wrong' }).toString(),
  })
  assert.equal(login.statusCode, 401)
  const ofAccount = await ctx.database.db
    .selectFrom('audit_entries')
    .select('id')
    .where('account_id', '=', ctx.tenant.account.id)
    .where('action', '=', 'login.failed')
    .execute()
  assert.equal(ofAccount.length, 1)
})
