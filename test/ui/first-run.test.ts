// First run creates exactly one admin; login sets a safe session cookie; anonymous pages go to /login.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import fc from 'fast-check'
import { findUsersByEmail } from '../../src/domain/accounts.js'
import { safeNext } from '../../src/http/ui/context.js'
import { buildTestApp, testDialect } from '../helper.js'
import {
  assertRedirect,
  Browser,
  countRows,
  createUserIn,
  csrfFrom,
  PASSWORD,
  setCookies,
} from '../support/ui.js'

test('first run: / and /login lead to /setup, which creates the account and its admin and logs in', async (t) => {
  const ctx = await buildTestApp(t)
  const browser = new Browser(ctx.app)
  assertRedirect(await browser.get('/'), '/setup')
  assertRedirect(await browser.get('/login'), '/setup')

  const page = await browser.get('/setup')
  assert.equal(page.statusCode, 200)
  assert.match(page.payload, /<form method="post" action="\/setup">/)
  const done = await browser.post('/setup', {
    _csrf: csrfFrom(page.payload),
    account: 'First Team',
    email: 'Founder@Example.com',
    password: PASSWORD,
    confirm: PASSWORD,
  })
  assert.equal(done.statusCode, 303, done.payload)
  assert.ok(browser.jar.has('shiplog_session'), 'logged in right away')

  const [user] = await findUsersByEmail(ctx.database.db, 'founder@example.com')
  assert.ok(user)
  assert.equal(user.role, 'admin')
  const account = await ctx.database.db
    .selectFrom('accounts')
    .selectAll()
    .where('id', '=', user.account_id)
    .executeTakeFirstOrThrow()
  assert.equal(account.name, 'First Team')

  const logs = await browser.get('/logs/')
  assert.equal(logs.statusCode, 200)
  assert.match(logs.payload, /founder@example\.com/)
  assertRedirect(await browser.get('/'), '/services/')
})

test('after set-up, /setup redirects away and cannot create a second admin', async (t) => {
  const ctx = await buildTestApp(t)
  const first = new Browser(ctx.app)
  const page = await first.get('/setup')
  const form = { account: 'First Team', email: 'one@example.com', password: PASSWORD, confirm: PASSWORD }
  assert.equal((await first.post('/setup', { ...form, _csrf: csrfFrom(page.payload) })).statusCode, 303)

  assertRedirect(await first.get('/setup'), '/logs/')
  const stranger = new Browser(ctx.app)
  assertRedirect(await stranger.get('/setup'), '/login')
  // A valid token from the login page, so only the set-up rule can refuse this.
  const token = await stranger.csrf('/login')
  const again = await stranger.post('/setup', {
    ...form,
    account: 'Intruders',
    email: 'two@example.com',
    _csrf: token,
  })
  assertRedirect(again, '/login')
  assert.equal(stranger.jar.has('shiplog_session'), false)
  assert.equal(await countRows(ctx.database, 'users'), 1)
  assert.deepEqual(await findUsersByEmail(ctx.database.db, 'two@example.com'), [])
  const intruders = await ctx.database.db
    .selectFrom('accounts')
    .select('id')
    .where('name', '=', 'Intruders')
    .executeTakeFirst()
  assert.equal(intruders, undefined)
})

test('set-up refuses a bad form with 422 and creates nothing', async (t) => {
  const ctx = await buildTestApp(t)
  const browser = new Browser(ctx.app)
  const token = await browser.csrf('/setup')
  const res = await browser.post('/setup', {
    _csrf: token,
    account: 'Team',
    email: 'not-an-email',
    password: 'short',
    confirm: 'short',
  })
  assert.equal(res.statusCode, 422)
  assert.equal(await countRows(ctx.database, 'users'), 0)
  assert.equal(browser.jar.has('shiplog_session'), false)
})

test('login: a wrong password is a 401 page and no session; the right one sets an HttpOnly, Lax cookie', async (t) => {
  const ctx = await buildTestApp(t)
  await createUserIn(ctx.database, ctx.tenant.account.id, 'ada@example.com')
  const browser = new Browser(ctx.app)
  const token = await browser.csrf('/login')
  const sessionsBefore = await countRows(ctx.database, 'sessions')

  const wrong = await browser.post('/login', {
    _csrf: token,
    email: 'ada@example.com',
    password: 'nope nope nope',
  })
  assert.equal(wrong.statusCode, 401)
  assert.match(String(wrong.headers['content-type']), /^text\/html/)
  assert.match(wrong.payload, /do not match/)
  assert.equal(
    setCookies(wrong).some((c) => c.name === 'shiplog_session'),
    false,
  )
  assert.equal(await countRows(ctx.database, 'sessions'), sessionsBefore)
  assertRedirect(await browser.get('/logs/'), '/login')

  const unknown = await browser.post('/login', {
    _csrf: token,
    email: 'nobody@example.com',
    password: PASSWORD,
  })
  assert.equal(unknown.statusCode, 401)

  const right = await browser.post('/login', { _csrf: token, email: ' ADA@example.com ', password: PASSWORD })
  assertRedirect(right, '/logs/', 303)
  const session = setCookies(right).find((c) => c.name === 'shiplog_session')
  assert.ok(session, 'session cookie set')
  assert.ok(session.attributes.has('httponly'), session.raw)
  assert.equal(session.attributes.get('samesite')?.toLowerCase(), 'lax', session.raw)
  assert.equal(session.attributes.has('secure'), false, 'no Secure over plain HTTP without a proxy')
  assert.equal(session.attributes.get('path'), '/')
  assert.equal((await browser.get('/logs/')).statusCode, 200)
})

test('login: behind a trusted proxy that says https, the session cookie is Secure', async (t) => {
  const ctx = await buildTestApp(t, { env: { SHIPLOG_TRUST_PROXY: 'true' } })
  await createUserIn(ctx.database, ctx.tenant.account.id, 'ada@example.com')
  const browser = new Browser(ctx.app, { 'x-forwarded-proto': 'https' })
  const loginToken = await browser.csrf('/login')
  const res = await browser.post('/login', {
    _csrf: loginToken,
    email: 'ada@example.com',
    password: PASSWORD,
  })
  assert.equal(res.statusCode, 303)
  const session = setCookies(res).find((c) => c.name === 'shiplog_session')
  assert.ok(session)
  assert.ok(session.attributes.has('secure'), session.raw)
  assert.ok(session.attributes.has('httponly'), session.raw)
  assert.equal(session.attributes.get('samesite')?.toLowerCase(), 'lax')

  const plain = new Browser(ctx.app, { 'x-forwarded-proto': 'http' })
  const plainToken = await plain.csrf('/login')
  const res2 = await plain.post('/login', { _csrf: plainToken, email: 'ada@example.com', password: PASSWORD })
  const cookie = setCookies(res2).find((c) => c.name === 'shiplog_session')
  assert.ok(cookie)
  assert.equal(cookie.attributes.has('secure'), false, 'plain HTTP through the proxy: not Secure')
})

test('/logs redirects permanently to /logs/, keeping the query', async (t) => {
  const ctx = await buildTestApp(t)
  const res = await ctx.app.inject({ method: 'GET', url: '/logs' })
  assertRedirect(res, '/logs/', 301)
  const withQuery = await ctx.app.inject({ method: 'GET', url: '/logs?service=api&status=Failed' })
  assert.equal(withQuery.statusCode, 301)
  assert.equal(withQuery.headers.location, '/logs/?service=api&status=Failed')
})

test('anonymous requests for /logs/, /settings/ and the exports are sent to /login', async (t) => {
  const ctx = await buildTestApp(t)
  await createUserIn(ctx.database, ctx.tenant.account.id, 'ada@example.com')
  for (const url of ['/logs/', '/settings/', '/logs/export.csv', '/logs/export.json', '/account/password']) {
    const res = await ctx.app.inject({ method: 'GET', url })
    assertRedirect(res, '/login')
    assert.doesNotMatch(res.payload, /Deployment log|API Keys/)
  }
  // A forged or garbage session cookie is no better than none.
  const forged = await ctx.app.inject({
    method: 'GET',
    url: '/logs/',
    headers: { cookie: 'shiplog_session=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA.forged' },
  })
  assertRedirect(forged, '/login')
  // Once someone has an account, / leads to the board (UI.md: its home), which sends a visitor on to /login.
  assertRedirect(await ctx.app.inject({ method: 'GET', url: '/' }), '/services/')
})

test('after login the user lands on the page they first asked for, never on another site', async (t) => {
  const ctx = await buildTestApp(t)
  await createUserIn(ctx.database, ctx.tenant.account.id, 'ada@example.com')
  const browser = new Browser(ctx.app)
  const first = await browser.get('/settings/')
  assertRedirect(first, '/login?next=%2Fsettings%2F')
  const token = await browser.csrf('/login?next=%2Fsettings%2F')
  const res = await browser.post('/login', {
    _csrf: token,
    email: 'ada@example.com',
    password: PASSWORD,
    next: '/settings/',
  })
  assertRedirect(res, '/settings/')

  const other = new Browser(ctx.app)
  const token2 = await other.csrf('/login')
  const evil = await other.post('/login', {
    _csrf: token2,
    email: 'ada@example.com',
    password: PASSWORD,
    next: '//evil.example/',
  })
  assertRedirect(evil, '/logs/')
})

test('set-up submitted from several browsers at once still creates exactly one admin', {}, async (t) => {
  // A race: try a few times so that a lucky interleaving does not hide it.
  for (let round = 0; round < (testDialect === 'postgres' ? 3 : 1); round++) {
    const ctx = await buildTestApp(t)
    const browsers = Array.from({ length: 4 }, () => new Browser(ctx.app))
    const tokens = await Promise.all(browsers.map((b) => b.csrf('/setup')))
    const answers = await Promise.all(
      browsers.map((b, i) =>
        b.post('/setup', {
          _csrf: tokens[i] ?? '',
          account: `Team ${i}`,
          email: `founder${i}@example.com`,
          password: PASSWORD,
          confirm: PASSWORD,
        }),
      ),
    )
    assert.ok(answers.every((a) => a.statusCode === 303))
    assert.equal(await countRows(ctx.database, 'users'), 1, `round ${round}: exactly one first admin`)
    assert.equal(browsers.filter((b) => b.jar.has('shiplog_session')).length, 1, 'one browser logged in')
  }
})

test('a "next" with a tab or line break cannot send the user to another site nor break the login', {}, async (t) => {
  const ctx = await buildTestApp(t)
  await createUserIn(ctx.database, ctx.tenant.account.id, 'ada@example.com')
  for (const next of ['/\t/evil.example', '/\n/evil.example', '/\r\n/evil.example', '/\\evil.example']) {
    const browser = new Browser(ctx.app)
    const token = await browser.csrf('/login')
    const res = await browser.post('/login', {
      _csrf: token,
      email: 'ada@example.com',
      password: PASSWORD,
      next,
    })
    assert.equal(res.statusCode, 303, `next ${JSON.stringify(next)}: ${res.statusCode}`)
    const location = String(res.headers.location ?? '')
    // What a browser makes of the Location: tabs and newlines are removed before parsing.
    const target = new URL(location.replace(/[\t\n\r]/g, ''), 'https://shiplog.example/')
    assert.equal(
      target.host,
      'shiplog.example',
      `next ${JSON.stringify(next)} led to ${JSON.stringify(location)}`,
    )
  }
})

/** Where a browser goes with this Location, from a page of this site (tabs and newlines dropped). */
function browserTarget(location: string): URL {
  return new URL(location.replace(/[\t\n\r]/g, ''), 'https://shiplog.example/login')
}

test('"next" that collapses to another site (/.//evil.com, /..//x, /%2e//x) is dropped: the login lands on /logs/ (issue 10.2)', async (t) => {
  const ctx = await buildTestApp(t)
  await createUserIn(ctx.database, ctx.tenant.account.id, 'ada@example.com')
  for (const next of [
    '/.//evil.com',
    '/..//x',
    '/%2e//x',
    '/%2E%2E//evil.com',
    '/./..//evil.com/a?b',
    '/a/..//evil.com',
  ]) {
    const browser = new Browser(ctx.app)
    const res = await browser.post('/login', {
      _csrf: await browser.csrf('/login'),
      email: 'ada@example.com',
      password: PASSWORD,
      next,
    })
    assertRedirect(res, '/logs/', 303)
    assert.equal(browserTarget(String(res.headers.location)).host, 'shiplog.example', `next ${next}`)
  }
  // A harmless path with dot segments still leads where it means.
  const browser = new Browser(ctx.app)
  const ok = await browser.post('/login', {
    _csrf: await browser.csrf('/login'),
    email: 'ada@example.com',
    password: PASSWORD,
    next: '/logs/./?service=api',
  })
  assertRedirect(ok, '/logs/?service=api', 303)
})

test('GET /login?next=// (also ///, //:99999) is the plain login page, not a 500 (issue 10.2)', async (t) => {
  const ctx = await buildTestApp(t)
  await createUserIn(ctx.database, ctx.tenant.account.id, 'ada@example.com')
  for (const next of ['//', '///', '//:99999', '//[', '/\\', '//evil.com:0x']) {
    const res = await ctx.app.inject({ method: 'GET', url: `/login?next=${encodeURIComponent(next)}` })
    assert.equal(res.statusCode, 200, `next ${next}: ${res.payload.slice(0, 200)}`)
    assert.doesNotMatch(res.payload, /name="next"/, `next ${next} is not carried`)
  }
  // The same written raw in the query string.
  for (const raw of ['//', '///', '//:99999']) {
    const res = await ctx.app.inject({ method: 'GET', url: `/login?next=${raw}` })
    assert.equal(res.statusCode, 200, `raw next ${raw}`)
  }
})

test('safeNext never throws and keeps only same-site paths, whatever it is given (property)', () => {
  const pieces = [
    '/',
    '//',
    '\\',
    '.',
    '..',
    '%2e',
    '%2E',
    '%2f',
    '%5c',
    ':',
    '@',
    '?',
    '#',
    '%',
    'evil.com',
    'x',
    'logs',
    ' ',
    '\t',
    '\n',
    '\u0000',
    '\u3002',
    ':99999',
    '[',
    ']',
    'https:',
    'javascript:',
    '%00',
    '~',
  ]
  const hostile = fc.oneof(
    fc.array(fc.constantFrom(...pieces), { maxLength: 12 }).map((parts) => parts.join('')),
    fc.array(fc.constantFrom(...pieces), { maxLength: 12 }).map((parts) => `/${parts.join('')}`),
    fc.string({ maxLength: 40 }),
    fc.webPath().map((p) => `/${p}`),
  )
  fc.assert(
    fc.property(hostile, (next) => {
      const kept = safeNext(next)
      if (kept === undefined) return
      assert.ok(kept.startsWith('/') && !kept.startsWith('//'), `${JSON.stringify(next)} -> ${kept}`)
      assert.ok(!/[\t\n\r\\]/.test(kept), `${JSON.stringify(next)} -> ${JSON.stringify(kept)}`)
      const target = browserTarget(kept)
      assert.equal(target.origin, 'https://shiplog.example', `${JSON.stringify(next)} -> ${kept}`)
      assert.equal(safeNext(kept), kept, 'a kept path stays the same when checked again')
    }),
    { numRuns: 5000 },
  )
  for (const next of [
    '/.//evil.com',
    '/..//x',
    '/%2e//x',
    '//',
    '///',
    '//:99999',
    '//evil.com',
    'https://evil.com',
  ]) {
    assert.equal(safeNext(next), undefined, next)
  }
  assert.equal(safeNext('/settings/?a=b'), '/settings/?a=b')
})
