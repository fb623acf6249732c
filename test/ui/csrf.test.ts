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
    assert.equal(ok.statusCode, 201)
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
    assert.equal(ok.statusCode, 201)
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
