// Members read but cannot change keys or users; admins can, with one-time secrets; the last admin stays.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { digestApiKey } from '../../src/domain/keys.js'
import { buildTestApp, type TestApp } from '../helper.js'
import {
  assertRedirect,
  Browser,
  countRows,
  createUserIn,
  deploy,
  login,
  textOfId,
  userRow,
  userSession,
} from '../support/ui.js'

const EVENT = { service: 'api', environment: 'prod', version: '1.0.0', status: 'Deployed' }

async function keyRevokedAt(ctx: TestApp, id: number): Promise<number | null> {
  const row = await ctx.database.db
    .selectFrom('api_keys')
    .select('revoked_at')
    .where('id', '=', id)
    .executeTakeFirstOrThrow()
  return row.revoked_at
}

test('a member reads /logs/ and /settings/ but gets 403 for every change, and nothing changes', async (t) => {
  const ctx = await buildTestApp(t)
  const accountId = ctx.tenant.account.id
  const admin = await createUserIn(ctx.database, accountId, 'ada@example.com')
  const { browser: member, user: mel } = await userSession(ctx, accountId, 'mel@example.com', 'member')

  assert.equal((await member.get('/logs/')).statusCode, 200)
  const settings = await member.get('/settings/')
  assert.equal(settings.statusCode, 200)
  assert.match(settings.payload, /API Keys/)
  assert.match(settings.payload, /<td>ci<\/td>/, 'the key list is readable')
  // The CI snippets name the deploy image and say it must be built and published first (10.23).
  assert.match(settings.payload, /uses: docker:\/\/shiplog\/deploy:1/)
  assert.match(
    settings.payload,
    /not on a public registry: build it from this repository's <code>Dockerfile\.deploy<\/code> and publish it to your own registry first/,
  )
  assert.doesNotMatch(settings.payload, /action="\/settings\/keys"|\/revoke"|action="\/settings\/users/)

  const keysBefore = await countRows(ctx.database, 'api_keys')
  const usersBefore = await countRows(ctx.database, 'users')
  const attempts: [string, Record<string, string>][] = [
    ['/settings/keys', { name: 'member-key' }],
    [`/settings/keys/${ctx.tenant.keyId}/revoke`, {}],
    ['/settings/users', { email: 'friend@example.com', role: 'admin' }],
    [`/settings/users/${mel.id}/role`, { role: 'admin' }],
    [`/settings/users/${admin.id}/role`, { role: 'member' }],
    [`/settings/users/${admin.id}/remove`, {}],
  ]
  for (const [url, form] of attempts) {
    const res = await member.submit('/settings/', url, form)
    assert.equal(res.statusCode, 403, `member POST ${url}`)
    assert.match(res.payload, /Admins only/)
  }
  assert.equal(await countRows(ctx.database, 'api_keys'), keysBefore)
  assert.equal(await countRows(ctx.database, 'users'), usersBefore)
  assert.equal(await keyRevokedAt(ctx, ctx.tenant.keyId), null)
  assert.equal((await userRow(ctx.database, mel.id))?.role, 'member')
  assert.deepEqual(await userRow(ctx.database, admin.id), admin)
  assert.equal((await deploy(ctx.app, ctx.tenant.key, EVENT)).status, 201)
})

test('an admin creates a key shown once, which records events until it is revoked', async (t) => {
  const ctx = await buildTestApp(t)
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'ada@example.com')

  const created = await browser.submit('/settings/', '/settings/keys', { name: 'github-actions' })
  // Post/redirect/get: the key is shown on the page the browser is sent to, never in the URL.
  assertRedirect(created, '/settings/', 303)
  const shown = await browser.get('/settings/')
  assert.equal(shown.statusCode, 200)
  assert.equal(shown.headers['cache-control'], 'no-store')
  const key = textOfId(shown.payload, 'new-key')
  assert.ok(key, 'the new key is on the page')
  assert.match(key, /^shl_[0-9A-Za-z]{32,}$/)
  assert.match(shown.payload, /shown only this once/)

  const row = await ctx.database.db
    .selectFrom('api_keys')
    .selectAll()
    .where('name', '=', 'github-actions')
    .executeTakeFirstOrThrow()
  assert.equal(row.digest, digestApiKey(key), 'only the digest is stored')
  assert.ok(!Object.values(row).includes(key), 'the plaintext is stored nowhere in the row')
  assert.equal(row.created_by, 'ada@example.com')

  const later = await browser.get('/settings/')
  assert.equal(later.statusCode, 200)
  assert.ok(!later.payload.includes(key), 'the key is not shown again')
  assert.ok(!later.payload.includes(key.slice(0, 20)), 'not even most of it')
  assert.ok(later.payload.includes(`${row.prefix}…`), 'the short prefix identifies it')
  assert.match(later.payload, /<td>github-actions<\/td>/)

  const used = await deploy(ctx.app, key, EVENT)
  assert.equal(used.status, 201)
  assert.equal(used.body.api_key_name, 'github-actions')

  const revoked = await browser.submit('/settings/', `/settings/keys/${row.id}/revoke`, {})
  assertRedirect(revoked, '/settings/', 303)
  assert.notEqual(await keyRevokedAt(ctx, row.id), null)
  const refused = await deploy(ctx.app, key, EVENT)
  assert.equal(refused.status, 401, 'a revoked key is refused at once, cache or not')
  assert.equal((await deploy(ctx.app, ctx.tenant.key, EVENT)).status, 201, 'other keys are unaffected')
  const after = await browser.get('/settings/')
  assert.match(after.payload, /The key is revoked/)

  const unnamed = await browser.submit('/settings/', '/settings/keys', { name: '   ' })
  assert.equal(unnamed.statusCode, 422)
  const missing = await browser.submit('/settings/', '/settings/keys/999999/revoke', {})
  assert.equal(missing.statusCode, 404)
})

test('an added user gets a one-time password, must change it at first login, then uses the app', async (t) => {
  const ctx = await buildTestApp(t)
  const { browser: admin } = await userSession(ctx, ctx.tenant.account.id, 'ada@example.com')

  const added = await admin.submit('/settings/', '/settings/users', {
    email: 'New.Person@Example.com',
    role: 'admin',
  })
  assertRedirect(added, '/settings/', 303)
  const shown = await admin.get('/settings/')
  const oneTime = textOfId(shown.payload, 'new-password')
  assert.ok(oneTime, 'the one-time password is on the page')
  assert.ok(oneTime.length >= 12)
  const later = await admin.get('/settings/')
  assert.ok(!later.payload.includes(oneTime), 'shown only once')
  assert.match(later.payload, /new\.person@example\.com/)

  const duplicate = await admin.submit('/settings/', '/settings/users', { email: 'new.person@example.com' })
  assert.equal(duplicate.statusCode, 409)

  const newcomer = new Browser(ctx.app)
  const token = await newcomer.csrf('/login')
  const first = await newcomer.post('/login', {
    _csrf: token,
    email: 'new.person@example.com',
    password: oneTime,
  })
  assertRedirect(first, '/account/password', 303)
  for (const url of ['/logs/', '/settings/', '/logs/export.csv']) {
    assertRedirect(await newcomer.get(url), '/account/password')
  }
  // Even as an admin, nothing can be changed before the password is.
  const keysBefore = await countRows(ctx.database, 'api_keys')
  const early = await newcomer.submit('/account/password', '/settings/keys', { name: 'too-early' })
  assertRedirect(early, '/account/password')
  assert.equal(await countRows(ctx.database, 'api_keys'), keysBefore)

  const page = await newcomer.get('/account/password')
  assert.equal(page.statusCode, 200)
  assert.match(page.payload, /one-time password/)
  const changed = await newcomer.submit('/account/password', '/account/password', {
    current: oneTime,
    password: 'my own secret words',
    confirm: 'my own secret words',
  })
  assertRedirect(changed, '/settings/', 303)
  assert.match((await newcomer.get('/settings/')).payload, /Your password is changed/)
  assert.equal((await newcomer.get('/logs/')).statusCode, 200)
  assert.equal((await newcomer.get('/settings/')).statusCode, 200)

  const again = new Browser(ctx.app)
  const t2 = await again.csrf('/login')
  const stale = await again.post('/login', { _csrf: t2, email: 'new.person@example.com', password: oneTime })
  assert.equal(stale.statusCode, 401, 'the one-time password is spent')
  const fresh = await again.post('/login', {
    _csrf: t2,
    email: 'new.person@example.com',
    password: 'my own secret words',
  })
  assertRedirect(fresh, '/logs/', 303)
})

test('an admin changes roles: a promoted member can manage keys, a demoted one no longer can', async (t) => {
  const ctx = await buildTestApp(t)
  const accountId = ctx.tenant.account.id
  const { browser: admin } = await userSession(ctx, accountId, 'ada@example.com')
  const { browser: member, user: mel } = await userSession(ctx, accountId, 'mel@example.com', 'member')

  const promoted = await admin.submit('/settings/', `/settings/users/${mel.id}/role`, { role: 'admin' })
  assertRedirect(promoted, '/settings/', 303)
  assert.equal((await userRow(ctx.database, mel.id))?.role, 'admin')
  // The change applies to the session already open.
  assertRedirect(await member.submit('/settings/', '/settings/keys', { name: 'mel-key' }), '/settings/', 303)

  const demoted = await admin.submit('/settings/', `/settings/users/${mel.id}/role`, { role: 'member' })
  assertRedirect(demoted, '/settings/', 303)
  assert.equal((await userRow(ctx.database, mel.id))?.role, 'member')
  assert.equal((await member.submit('/settings/', '/settings/keys', { name: 'mel-key-2' })).statusCode, 403)

  const nonsense = await admin.submit('/settings/', `/settings/users/${mel.id}/role`, { role: 'owner' })
  assert.equal(nonsense.statusCode, 422)
  assert.equal((await userRow(ctx.database, mel.id))?.role, 'member')
})

test('removing a user ends their session at once and they cannot log in again', async (t) => {
  const ctx = await buildTestApp(t)
  const accountId = ctx.tenant.account.id
  const { browser: admin } = await userSession(ctx, accountId, 'ada@example.com')
  const { browser: member, user: mel } = await userSession(ctx, accountId, 'mel@example.com', 'member')
  assert.equal((await member.get('/logs/')).statusCode, 200)

  const removed = await admin.submit('/settings/', `/settings/users/${mel.id}/remove`, {})
  assertRedirect(removed, '/settings/', 303)
  assert.equal(await userRow(ctx.database, mel.id), undefined)
  assertRedirect(await member.get('/logs/'), '/login')
  assertRedirect(await member.get('/logs/export.json'), '/login')

  const retry = new Browser(ctx.app)
  const token = await retry.csrf('/login')
  const res = await retry.post('/login', {
    _csrf: token,
    email: 'mel@example.com',
    password: 'whatever it was',
  })
  assert.equal(res.statusCode, 401)
  assert.doesNotMatch((await admin.get('/settings/')).payload, /mel@example\.com/)
})

test('the last admin can be neither demoted nor removed', async (t) => {
  const ctx = await buildTestApp(t)
  const accountId = ctx.tenant.account.id
  const { browser: ada, user: adaRow } = await userSession(ctx, accountId, 'ada@example.com')
  const bea = await createUserIn(ctx.database, accountId, 'bea@example.com')
  await createUserIn(ctx.database, accountId, 'mel@example.com', { role: 'member' })

  // With two admins, one may step down.
  const stepDown = await ada.submit('/settings/', `/settings/users/${bea.id}/role`, { role: 'member' })
  assertRedirect(stepDown, '/settings/', 303)

  const demoteSelf = await ada.submit('/settings/', `/settings/users/${adaRow.id}/role`, { role: 'member' })
  assert.equal(demoteSelf.statusCode, 409)
  assert.match(demoteSelf.payload, /at least one admin/)
  const removeSelf = await ada.submit('/settings/', `/settings/users/${adaRow.id}/remove`, {})
  assert.equal(removeSelf.statusCode, 409)
  assert.equal((await userRow(ctx.database, adaRow.id))?.role, 'admin')

  // Bea, an admin again, removes Ada; now Bea is the last admin and cannot step down either.
  assertRedirect(
    await ada.submit('/settings/', `/settings/users/${bea.id}/role`, { role: 'admin' }),
    '/settings/',
  )
  const beaBrowser = await login(ctx.app, 'bea@example.com')
  assertRedirect(
    await beaBrowser.submit('/settings/', `/settings/users/${adaRow.id}/remove`, {}),
    '/settings/',
  )
  const last = await beaBrowser.submit('/settings/', `/settings/users/${bea.id}/role`, { role: 'member' })
  assert.equal(last.statusCode, 409)
  assert.equal((await userRow(ctx.database, bea.id))?.role, 'admin')
  const admins = await ctx.database.db
    .selectFrom('users')
    .select('id')
    .where('account_id', '=', accountId)
    .where('role', '=', 'admin')
    .execute()
  assert.deepEqual(
    admins.map((a) => a.id),
    [bea.id],
  )
})

test('two admins demoting or removing each other at the same moment still leave one admin', {}, async (t) => {
  const ctx = await buildTestApp(t)
  const accountId = ctx.tenant.account.id
  const adminsLeft: Record<string, number> = {}
  for (const action of ['role', 'remove'] as const) {
    const x = await createUserIn(ctx.database, accountId, `x-${action}@example.com`)
    const y = await createUserIn(ctx.database, accountId, `y-${action}@example.com`)
    const bx = await login(ctx.app, x.email)
    const by = await login(ctx.app, y.email)
    const [tx, ty] = await Promise.all([bx.csrf(), by.csrf()])
    const form: Record<string, string> = action === 'role' ? { role: 'member' } : {}
    await Promise.all([
      bx.post(`/settings/users/${y.id}/${action}`, { ...form, _csrf: tx }),
      by.post(`/settings/users/${x.id}/${action}`, { ...form, _csrf: ty }),
    ])
    const admins = await ctx.database.db
      .selectFrom('users')
      .select('id')
      .where('account_id', '=', accountId)
      .where('role', '=', 'admin')
      .execute()
    adminsLeft[action] = admins.length
    await ctx.database.db.deleteFrom('users').where('account_id', '=', accountId).execute()
  }
  assert.deepEqual(adminsLeft, { role: 1, remove: 1 }, 'admins left after concurrent demotions / removals')
})

/** The Settings page a browser lands on after a form: it must be the redirect target, not the answer. */
async function landing(browser: Browser, res: Awaited<ReturnType<Browser['get']>>) {
  assertRedirect(res, '/settings/', 303)
  assert.equal(String(res.headers.location), '/settings/', 'nothing of the result travels in the URL')
  return browser.get('/settings/')
}

test('every Settings form is post/redirect/get: the result shows once at the top, and refreshing repeats nothing (issue 10.15)', async (t) => {
  const ctx = await buildTestApp(t)
  const accountId = ctx.tenant.account.id
  const { browser: admin, user: ada } = await userSession(ctx, accountId, 'ada@example.com')
  const mel = await createUserIn(ctx.database, accountId, 'mel@example.com', { role: 'member' })
  const flashOf = async () =>
    (
      await ctx.database.db.selectFrom('sessions').select('flash').where('user_id', '=', ada.id).execute()
    ).map((r) => r.flash)

  // A new key: shown on the page the redirect leads to, above everything else, then never again.
  const keysBefore = await countRows(ctx.database, 'api_keys')
  const page = await landing(admin, await admin.submit('/settings/', '/settings/keys', { name: 'deploys' }))
  const key = textOfId(page.payload, 'new-key')
  assert.ok(key)
  assert.ok(page.payload.indexOf('id="new-key"') < page.payload.indexOf('id="keys-heading"'), 'at the top')
  assert.deepEqual(await flashOf(), [null], 'the secret is gone from the server once shown')
  for (let refresh = 0; refresh < 3; refresh++) {
    const again = await admin.get('/settings/')
    assert.equal(again.statusCode, 200)
    assert.ok(!again.payload.includes(key), 'a refresh does not show the key again')
  }
  assert.equal(
    await countRows(ctx.database, 'api_keys'),
    keysBefore + 1,
    'one key, however often the page is reloaded',
  )

  // A new user: the one-time password sits at the top, in the same notice pattern.
  const usersBefore = await countRows(ctx.database, 'users')
  const added = await landing(
    admin,
    await admin.submit('/settings/', '/settings/users', { email: 'new@example.com' }),
  )
  const oneTime = textOfId(added.payload, 'new-password')
  assert.ok(oneTime)
  assert.ok(
    added.payload.indexOf('id="new-password"') < added.payload.indexOf('id="keys-heading"'),
    'at the top',
  )
  assert.match(added.payload, /new@example\.com is added as member/)
  assert.ok(!(await admin.get('/settings/')).payload.includes(oneTime))
  assert.equal(await countRows(ctx.database, 'users'), usersBefore + 1)

  // Role, reset, remove and revoke: a notice once each.
  const cases: [string, Record<string, string>, RegExp][] = [
    [`/settings/users/${mel.id}/role`, { role: 'admin' }, /The role is changed/],
    [`/settings/users/${mel.id}/password`, {}, /mel@example\.com has a new one-time password/],
    [`/settings/keys/${ctx.tenant.keyId}/revoke`, {}, /The key is revoked/],
    [`/settings/users/${mel.id}/remove`, {}, /The user is removed/],
  ]
  for (const [url, form, notice] of cases) {
    const shown = await landing(admin, await admin.submit('/settings/', url, form))
    assert.match(shown.payload, notice, url)
    assert.doesNotMatch((await admin.get('/settings/')).payload, notice, `${url}: shown once`)
  }

  // Until it is shown, the new key waits in the session row sealed with a key only the cookie
  // gives: a copy of the database holds neither it nor anything that opens it.
  assertRedirect(await admin.submit('/settings/', '/settings/keys', { name: 'sealed' }), '/settings/', 303)
  const pending = (await flashOf()).filter((f) => f !== null)
  assert.equal(pending.length, 1)
  const sealedKey = textOfId((await admin.get('/settings/')).payload, 'new-key')
  assert.ok(sealedKey)
  for (const stored of pending) {
    assert.ok(
      !stored?.includes(sealedKey) && !stored?.includes('shl_') && !stored?.includes('sealed'),
      'sealed',
    )
  }

  // A flash nobody came back for is not shown later to a page of another session either.
  const other = await login(ctx.app, 'ada@example.com')
  assertRedirect(await admin.submit('/settings/', '/settings/keys', { name: 'unseen' }), '/settings/', 303)
  assert.equal(
    textOfId((await other.get('/settings/')).payload, 'new-key'),
    undefined,
    'flashes are per session',
  )
})

test("an admin resets a user's password: a new one-time password shown once, their sessions end, the old password stops working (issue 10.14)", async (t) => {
  const ctx = await buildTestApp(t)
  const accountId = ctx.tenant.account.id
  const { browser: admin, user: ada } = await userSession(ctx, accountId, 'ada@example.com')
  const { browser: member, user: mel } = await userSession(ctx, accountId, 'mel@example.com', 'member')
  const settings = await admin.get('/settings/')
  assert.match(settings.payload, new RegExp(`action="/settings/users/${mel.id}/password"`))
  assert.doesNotMatch(
    settings.payload,
    new RegExp(`action="/settings/users/${ada.id}/password"`),
    'not for oneself',
  )

  const page = await landing(
    admin,
    await admin.submit('/settings/', `/settings/users/${mel.id}/password`, {}),
  )
  const oneTime = textOfId(page.payload, 'new-password')
  assert.ok(oneTime && oneTime.length >= 20)
  assertRedirect(await member.get('/logs/'), '/login', 303)
  assert.equal((await userRow(ctx.database, mel.id))?.must_change_password, 1)

  const stale = new Browser(ctx.app)
  const old = await stale.post('/login', {
    _csrf: await stale.csrf('/login'),
    email: 'mel@example.com',
    password: 'correct horse battery staple',
  })
  assert.equal(old.statusCode, 401, 'the old password no longer works')
  const fresh = new Browser(ctx.app)
  const res = await fresh.post('/login', {
    _csrf: await fresh.csrf('/login'),
    email: 'mel@example.com',
    password: oneTime,
  })
  assertRedirect(res, '/account/password', 303)
  // Until it is replaced, the one-time password's session reads no data through the API either.
  const api = await fresh.get('/api/v1/events')
  assert.equal(api.statusCode, 403)
  assert.match(String(api.headers['content-type']), /^application\/problem\+json/)
  assert.match(api.json().detail, /\/account\/password/)

  // Oneself: refused with a reason; someone of another account or no one: 404; members: 403.
  const self = await admin.submit('/settings/', `/settings/users/${ada.id}/password`, {})
  assert.equal(self.statusCode, 409)
  assert.equal((await admin.submit('/settings/', '/settings/users/999999/password', {})).statusCode, 404)
  const { browser: plain } = await userSession(ctx, accountId, 'pat@example.com', 'member')
  const refused = await plain.submit('/settings/', `/settings/users/${ada.id}/password`, {})
  assert.equal(refused.statusCode, 403)
  assert.equal((await userRow(ctx.database, ada.id))?.password_hash, ada.password_hash)
})

test('a Settings or login form with a field sent twice gets a 400 page and changes nothing; a doubled "next" is just ignored', async (t) => {
  const ctx = await buildTestApp(t)
  const { browser: admin } = await userSession(ctx, ctx.tenant.account.id, 'ada@example.com')
  const keysBefore = await countRows(ctx.database, 'api_keys')
  const usersBefore = await countRows(ctx.database, 'users')
  const post = async (url: string, body: string) =>
    ctx.app.inject({
      method: 'POST',
      url,
      headers: { cookie: admin.cookieHeader(), 'content-type': 'application/x-www-form-urlencoded' },
      payload: `_csrf=${encodeURIComponent(await admin.csrf('/settings/'))}&${body}`,
    })
  for (const [url, body] of [
    ['/settings/keys', 'name=a&name=b'],
    ['/settings/users', 'email=x%40example.com&email=y%40example.com'],
    ['/settings/users', 'email=x%40example.com&role=admin&role=member'],
  ] as const) {
    const res = await post(url, body)
    assert.equal(res.statusCode, 400, `${url} ${body}: ${res.payload.slice(0, 200)}`)
    assert.match(String(res.headers['content-type']), /^text\/html/)
  }
  assert.equal(await countRows(ctx.database, 'api_keys'), keysBefore)
  assert.equal(await countRows(ctx.database, 'users'), usersBefore)
  const login = await ctx.app.inject({ method: 'GET', url: '/login?next=/settings/&next=//evil.example' })
  assert.equal(login.statusCode, 200)
  assert.doesNotMatch(login.payload, /name="next"/)
})
