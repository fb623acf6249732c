// Every POST form refuses a missing, forged, foreign or cookie-less CSRF token with 403 and changes nothing.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { buildTestApp, type TestApp } from '../helper.js'
import {
  type Browser,
  Browser as Client,
  countRows,
  createUserIn,
  login,
  PASSWORD,
  setCookies,
  userRow,
} from '../support/ui.js'

interface BadToken {
  label: string
  /** The browser to send from and the token to put in the form (undefined: no field at all). */
  prepare(
    browser: Browser,
    valid: string,
    tokenPage: string,
  ): Promise<{ from: Browser; token: string | undefined }>
}

const BAD_TOKENS: BadToken[] = [
  { label: 'no _csrf field', prepare: async (browser) => ({ from: browser, token: undefined }) },
  { label: 'an empty _csrf', prepare: async (browser) => ({ from: browser, token: '' }) },
  {
    label: 'a made-up _csrf',
    prepare: async (browser) => ({ from: browser, token: 'rGbYtKkf-3wYx3n9HyN1yYhM1ZbYxZ3bEKZd0xFtPkI' }),
  },
  {
    label: 'a token that belongs to another browser',
    prepare: async (browser, _valid, tokenPage) => {
      // A token an attacker fetched for themself: real, but tied to the attacker's secret cookie.
      const other = new Client(browser.app)
      return { from: browser, token: await other.csrf(tokenPage === '/setup' ? '/setup' : '/login') }
    },
  },
  {
    label: 'a valid token without its secret cookie',
    prepare: async (browser, valid) => {
      const stripped = browser.copy()
      stripped.jar.delete('shiplog_csrf')
      return { from: stripped, token: valid }
    },
  },
]

async function refusedEveryWay(
  browser: Browser,
  tokenPage: string,
  url: string,
  form: Record<string, string>,
  state: () => Promise<unknown>,
): Promise<void> {
  const before = await state()
  const valid = await browser.csrf(tokenPage)
  for (const bad of BAD_TOKENS) {
    const { from, token } = await bad.prepare(browser, valid, tokenPage)
    const res = await from.post(url, token === undefined ? form : { ...form, _csrf: token })
    assert.equal(res.statusCode, 403, `POST ${url} with ${bad.label}: ${res.payload.slice(0, 300)}`)
    assert.match(String(res.headers['content-type']), /^text\/html/)
    assert.match(res.payload, /This form has expired/)
    assert.deepEqual(await state(), before, `POST ${url} with ${bad.label} changed nothing`)
  }
}

async function keyRow(ctx: TestApp, id: number) {
  return ctx.database.db.selectFrom('api_keys').selectAll().where('id', '=', id).executeTakeFirstOrThrow()
}

async function sessionsOf(ctx: TestApp, userId: number): Promise<string[]> {
  const rows = await ctx.database.db
    .selectFrom('sessions')
    .select('id')
    .where('user_id', '=', userId)
    .execute()
  return rows.map((r) => r.id).sort()
}

test('POST /setup without a valid CSRF token is refused and creates nobody', async (t) => {
  const ctx = await buildTestApp(t)
  const browser = new Client(ctx.app)
  const form = { account: 'Team', email: 'first@example.com', password: PASSWORD, confirm: PASSWORD }
  await refusedEveryWay(browser, '/setup', '/setup', form, () => countRows(ctx.database, 'users'))
  assert.equal(await countRows(ctx.database, 'users'), 0)
  // The same form with its token works, so the token was the only thing missing.
  const ok = await browser.post('/setup', { ...form, _csrf: await browser.csrf('/setup') })
  assert.equal(ok.statusCode, 303)
  assert.equal(await countRows(ctx.database, 'users'), 1)
})

test('every other POST form route refuses a request without a valid CSRF token', async (t) => {
  const ctx = await buildTestApp(t)
  const accountId = ctx.tenant.account.id
  const ada = await createUserIn(ctx.database, accountId, 'ada@example.com')
  const mel = await createUserIn(ctx.database, accountId, 'mel@example.com', { role: 'member' })
  const admin = await login(ctx.app, 'ada@example.com')

  await t.test('/login', async () => {
    const anonymous = new Client(ctx.app)
    const form = { email: 'mel@example.com', password: PASSWORD }
    await refusedEveryWay(anonymous, '/login', '/login', form, () => sessionsOf(ctx, mel.id))
    assert.equal(anonymous.jar.has('shiplog_session'), false)
    const ok = await anonymous.post('/login', { ...form, _csrf: await anonymous.csrf('/login') })
    assert.equal(ok.statusCode, 303)
  })

  await t.test('/logout', async () => {
    const leaver = await login(ctx.app, 'mel@example.com')
    await refusedEveryWay(leaver, '/logs/', '/logout', {}, () => sessionsOf(ctx, mel.id))
    assert.equal((await leaver.get('/logs/')).statusCode, 200, 'still logged in')
    const ok = await leaver.post('/logout', { _csrf: await leaver.csrf('/logs/') })
    assert.equal(ok.statusCode, 303)
    assert.equal((await leaver.get('/logs/')).statusCode, 303)
  })

  await t.test('/settings/keys', async () => {
    await refusedEveryWay(admin, '/settings/', '/settings/keys', { name: 'sneaky' }, () =>
      countRows(ctx.database, 'api_keys'),
    )
    const ok = await admin.post('/settings/keys', { name: 'sneaky', _csrf: await admin.csrf() })
    assert.equal(ok.statusCode, 303)
  })

  await t.test('/settings/keys/:id/revoke', async () => {
    const url = `/settings/keys/${ctx.tenant.keyId}/revoke`
    await refusedEveryWay(admin, '/settings/', url, {}, () => keyRow(ctx, ctx.tenant.keyId))
    assert.equal((await keyRow(ctx, ctx.tenant.keyId)).revoked_at, null)
    const ok = await admin.post(url, { _csrf: await admin.csrf() })
    assert.equal(ok.statusCode, 303)
    assert.notEqual((await keyRow(ctx, ctx.tenant.keyId)).revoked_at, null)
  })

  await t.test('/settings/users', async () => {
    const form = { email: 'eve@example.com', role: 'admin' }
    await refusedEveryWay(admin, '/settings/', '/settings/users', form, () =>
      countRows(ctx.database, 'users'),
    )
    const ok = await admin.post('/settings/users', { ...form, _csrf: await admin.csrf() })
    assert.equal(ok.statusCode, 303)
  })

  await t.test('/settings/users/:id/password', async () => {
    const url = `/settings/users/${mel.id}/password`
    await refusedEveryWay(admin, '/settings/', url, {}, () => userRow(ctx.database, mel.id))
    const ok = await admin.post(url, { _csrf: await admin.csrf() })
    assert.equal(ok.statusCode, 303)
    assert.equal((await userRow(ctx.database, mel.id))?.must_change_password, 1)
  })

  await t.test('/settings/users/:id/role', async () => {
    const url = `/settings/users/${mel.id}/role`
    await refusedEveryWay(admin, '/settings/', url, { role: 'admin' }, () => userRow(ctx.database, mel.id))
    assert.equal((await userRow(ctx.database, mel.id))?.role, 'member')
    const ok = await admin.post(url, { role: 'admin', _csrf: await admin.csrf() })
    assert.equal(ok.statusCode, 303)
    assert.equal((await userRow(ctx.database, mel.id))?.role, 'admin')
  })

  await t.test('/settings/users/:id/remove', async () => {
    const url = `/settings/users/${mel.id}/remove`
    await refusedEveryWay(admin, '/settings/', url, {}, () => userRow(ctx.database, mel.id))
    assert.ok(await userRow(ctx.database, mel.id))
    const ok = await admin.post(url, { _csrf: await admin.csrf() })
    assert.equal(ok.statusCode, 303)
    assert.equal(await userRow(ctx.database, mel.id), undefined)
  })

  await t.test('/account/password', async () => {
    const form = { current: PASSWORD, password: 'a brand new password', confirm: 'a brand new password' }
    await refusedEveryWay(admin, '/account/password', '/account/password', form, () =>
      userRow(ctx.database, ada.id),
    )
    const ok = await admin.post('/account/password', {
      ...form,
      _csrf: await admin.csrf('/account/password'),
    })
    assert.equal(ok.statusCode, 303)
    assert.notEqual((await userRow(ctx.database, ada.id))?.password_hash, ada.password_hash)
  })
})

test('a GET does not change anything, so it needs no token: state-changing routes answer GET with no effect', async (t) => {
  const ctx = await buildTestApp(t)
  await createUserIn(ctx.database, ctx.tenant.account.id, 'ada@example.com')
  const admin = await login(ctx.app, 'ada@example.com')
  const res = await admin.get(`/settings/keys/${ctx.tenant.keyId}/revoke`)
  assert.notEqual(res.statusCode, 200)
  assert.notEqual(res.statusCode, 303)
  const row = await keyRow(ctx, ctx.tenant.keyId)
  assert.equal(row.revoked_at, null)
  const logout = await admin.get('/logout')
  assert.notEqual(logout.statusCode, 303)
  assert.equal((await admin.get('/logs/')).statusCode, 200)
})

/** Every route of the app with its methods, read from Fastify's own route tree (printRoutes). */
function routesOf(ctx: TestApp): Array<{ path: string; methods: string[] }> {
  const routes: Array<{ path: string; methods: string[] }> = []
  const segments: string[] = []
  for (const line of ctx.app.printRoutes({ commonPrefix: false }).split('\n')) {
    // "│   ├── keys (POST)": four characters of tree drawing per level, then the segment and methods.
    const m = /^((?:[│ ] {3})*)[├└]── (.+?)(?: \(([A-Z, ]+)\))?$/.exec(line)
    if (!m) continue
    const depth = (m[1] ?? '').length / 4
    segments.length = depth
    segments.push(m[2] ?? '')
    if (m[3]) routes.push({ path: segments.join(''), methods: m[3].split(', ') })
  }
  return routes
}

test('every state-changing route of the app, found from its route table, refuses a request without a CSRF token (or needs an API key)', async (t) => {
  const ctx = await buildTestApp(t)
  const accountId = ctx.tenant.account.id
  await createUserIn(ctx.database, accountId, 'ada@example.com')
  const mel = await createUserIn(ctx.database, accountId, 'mel@example.com', { role: 'member' })
  const admin = await login(ctx.app, 'ada@example.com')
  const state = async () => ({
    users: await ctx.database.db.selectFrom('users').selectAll().orderBy('id').execute(),
    keys: await ctx.database.db.selectFrom('api_keys').selectAll().orderBy('id').execute(),
    sessions: await sessionsOf(ctx, mel.id),
    events: await ctx.database.db.selectFrom('events').select('id').execute(),
  })
  const before = await state()

  const routes = routesOf(ctx)
  assert.ok(
    routes.some((r) => r.path === '/settings/keys/:id/revoke'),
    'the route table was read',
  )
  const forms: string[] = []
  for (const { path, methods } of routes) {
    const url = path.replace(':id', String(path.includes('/keys/') ? ctx.tenant.keyId : mel.id))
    for (const method of methods.filter((m) => !['GET', 'HEAD', 'OPTIONS'].includes(m))) {
      const res = await ctx.app.inject({
        method: method as 'POST',
        url,
        headers: { cookie: admin.cookieHeader(), 'content-type': 'application/x-www-form-urlencoded' },
        payload: 'name=x&email=eve%40example.com&role=admin&password=x',
      })
      const where = `${method} ${path} answered ${res.statusCode}: ${res.payload.slice(0, 200)}`
      if (res.statusCode === 403) {
        assert.match(res.payload, /This form has expired/, where)
        forms.push(`${method} ${path}`)
      } else if (res.statusCode === 401) {
        // The ingest API and the key-only read endpoints: no key, no entry (a browser cannot add an
        // X-API-Key to a cross-site form).
        assert.ok(['/put', '/deploy', '/get', '/get/logs'].includes(path), where)
      } else {
        // Not a route for this method (405), or one that cannot read a form at all (415).
        assert.ok([405, 415].includes(res.statusCode), where)
      }
    }
  }
  assert.deepEqual(forms.sort(), [
    'POST /account/password',
    'POST /deployments/:id/fixed',
    'POST /deployments/:id/incident',
    'POST /deployments/:id/incident/remove',
    'POST /login',
    'POST /logout',
    'POST /services/:service/delete',
    'POST /services/:service/meta',
    'POST /services/:service/rename',
    'POST /services/:service/versions/bad',
    'POST /services/:service/versions/good',
    'POST /settings/badge-token',
    'POST /settings/environments',
    'POST /settings/environments/rename',
    // --- guardrails ---
    'POST /settings/guardrails/bad-versions',
    'POST /settings/guardrails/bad-versions/good',
    'POST /settings/guardrails/freezes',
    'POST /settings/guardrails/freezes/:id/remove',
    'POST /settings/guardrails/locks',
    'POST /settings/guardrails/locks/:id/unlock',
    'POST /settings/guardrails/promotions',
    'POST /settings/guardrails/promotions/remove',
    // --- end guardrails ---
    'POST /settings/keys',
    'POST /settings/keys/:id/revoke',
    'POST /settings/retention',
    'POST /settings/stall-time',
    'POST /settings/users',
    'POST /settings/users/:id/password',
    'POST /settings/users/:id/remove',
    'POST /settings/users/:id/role',
    // --- webhooks ---
    'POST /settings/webhooks',
    'POST /settings/webhooks/:id/delete',
    'POST /settings/webhooks/:id/deliveries/:delivery/redeliver',
    'POST /settings/webhooks/:id/enable',
    // --- end webhooks ---
    'POST /setup',
  ])
  assert.deepEqual(await state(), before, 'nothing changed')
})

test('the CSRF secret cookie is signed, HttpOnly, SameSite=Lax, and Secure behind a trusted HTTPS proxy', async (t) => {
  for (const [env, headers, secure] of [
    [{}, {}, false],
    [{ SHIPLOG_TRUST_PROXY: 'true' }, { 'x-forwarded-proto': 'https' }, true],
  ] as const) {
    const ctx = await buildTestApp(t, { env })
    await createUserIn(ctx.database, ctx.tenant.account.id, 'ada@example.com')
    const res = await ctx.app.inject({ method: 'GET', url: '/login', headers })
    const cookie = setCookies(res).find((c) => c.name === 'shiplog_csrf')
    assert.ok(cookie, 'GET /login sets the CSRF secret cookie')
    assert.ok(cookie.attributes.has('httponly'), cookie.raw)
    assert.equal(cookie.attributes.get('samesite')?.toLowerCase(), 'lax', cookie.raw)
    assert.equal(cookie.attributes.get('path'), '/', cookie.raw)
    assert.equal(cookie.attributes.has('secure'), secure, cookie.raw)
    // Signed: the value carries an HMAC after a dot, so a made-up secret is refused (see above).
    assert.match(decodeURIComponent(cookie.value), /^[^.]+\.[A-Za-z0-9+/_-]+$/, cookie.raw)
  }
})

/** A cross-site form post: the victim's browser sends its cookies plus whatever the attacker planted. */
async function forged(ctx: TestApp, cookie: string, token: string) {
  return ctx.app.inject({
    method: 'POST',
    url: '/settings/keys',
    headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
    payload: new URLSearchParams({ name: 'planted', _csrf: token }).toString(),
  })
}

test('a CSRF token is bound to its session: one from an anonymous visit or another session is refused, with one or two csrf cookies', async (t) => {
  const ctx = await buildTestApp(t)
  await createUserIn(ctx.database, ctx.tenant.account.id, 'victim@example.com')
  const other = await ctx.addTenant('Mallory Inc')
  await createUserIn(ctx.database, other.account.id, 'mallory@example.com')
  const victim = await login(ctx.app, 'victim@example.com')
  const victimToken = await victim.csrf('/settings/')
  const session = `shiplog_session=${victim.jar.get('shiplog_session')}`
  const victimCsrf = `shiplog_csrf=${victim.jar.get('shiplog_csrf')}`

  // The attacker's own pair: a token and its secret cookie from a visit without a session…
  const anonymous = new Client(ctx.app)
  const anonymousToken = await anonymous.csrf('/login')
  const anonymousCsrf = `shiplog_csrf=${anonymous.jar.get('shiplog_csrf')}`
  // …and from the attacker's own logged-in session in another account.
  const mallory = await login(ctx.app, 'mallory@example.com')
  const malloryToken = await mallory.csrf('/settings/')
  const malloryCsrf = `shiplog_csrf=${mallory.jar.get('shiplog_csrf')}`

  const keysBefore = await countRows(ctx.database, 'api_keys')
  const attempts: [string, string, string][] = [
    ['anonymous pair', `${session}; ${anonymousCsrf}`, anonymousToken],
    ["another session's pair", `${session}; ${malloryCsrf}`, malloryToken],
    ['two csrf cookies, planted first', `${session}; ${anonymousCsrf}; ${victimCsrf}`, anonymousToken],
    ['two csrf cookies, planted last', `${session}; ${victimCsrf}; ${anonymousCsrf}`, anonymousToken],
    ['two csrf cookies, other session first', `${session}; ${malloryCsrf}; ${victimCsrf}`, malloryToken],
    ["the victim's cookie with an anonymous token", `${session}; ${victimCsrf}`, anonymousToken],
  ]
  for (const [label, cookie, token] of attempts) {
    const res = await forged(ctx, cookie, token)
    assert.equal(res.statusCode, 403, `${label}: ${res.payload.slice(0, 200)}`)
    assert.match(res.payload, /This form has expired/)
  }
  assert.equal(await countRows(ctx.database, 'api_keys'), keysBefore, 'no key was planted')
  // The victim's own token still works, so only the binding refused the others.
  const own = await forged(ctx, `${session}; ${victimCsrf}`, victimToken)
  assert.equal(own.statusCode, 303)

  // After logout the old session's token is worthless even with its own cookie.
  const stale = victim.copy()
  assert.equal((await victim.post('/logout', { _csrf: await victim.csrf('/settings/') })).statusCode, 303)
  const again = await stale.post('/login', {
    _csrf: victimToken,
    email: 'victim@example.com',
    password: PASSWORD,
  })
  assert.equal(again.statusCode, 403)
})

test('with an https SHIPLOG_PUBLIC_URL the session and csrf cookies are __Host- cookies (Secure, Path=/, no Domain)', async (t) => {
  const ctx = await buildTestApp(t, { env: { SHIPLOG_PUBLIC_URL: 'https://shiplog.example.com' } })
  await createUserIn(ctx.database, ctx.tenant.account.id, 'ada@example.com')
  const browser = new Client(ctx.app)
  const page = await browser.get('/login')
  const [csrfCookie] = setCookies(page)
  assert.equal(csrfCookie?.name, '__Host-shiplog_csrf')
  const token = await browser.csrf('/login')
  const res = await browser.post('/login', { _csrf: token, email: 'ada@example.com', password: PASSWORD })
  assert.equal(res.statusCode, 303, res.payload.slice(0, 200))
  const session = setCookies(res).find((c) => c.name === '__Host-shiplog_session')
  assert.ok(session, 'the session cookie has the __Host- prefix')
  for (const cookie of [csrfCookie, session]) {
    assert.ok(cookie?.attributes.has('secure'), `${cookie?.name} is Secure`)
    assert.equal(cookie?.attributes.get('path'), '/')
    assert.equal(cookie?.attributes.has('domain'), false)
  }
  assert.equal(browser.jar.has('shiplog_session'), false)
  assert.equal((await browser.get('/settings/')).statusCode, 200, 'the prefixed cookie opens the session')
  // Without an https public address the names stay plain (a __Host- cookie is dropped over http).
  const plain = await buildTestApp(t)
  await createUserIn(plain.database, plain.tenant.account.id, 'ada@example.com')
  assert.equal(setCookies(await new Client(plain.app).get('/login'))[0]?.name, 'shiplog_csrf')
})
