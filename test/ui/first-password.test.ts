// Signing in (issue 28, point 13): after a refused password the email stays and the cursor starts in
// the password field; right after signing in with a one-time password, choosing one's own does not
// ask for the one-time password again (the sign-in just proved it), but a session left open longer,
// or one single sign-on opened, still must give it.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { ONE_TIME_PROOF_MS } from '../../src/domain/sessions.js'
import { buildTestApp, type TestApp } from '../helper.js'
import { assertRedirect, Browser, textOfId, userSession } from '../support/ui.js'

const OWN = 'my own secret words'

/** An admin adds new.person@example.com; returns the one-time password shown once. */
async function addedUser(ctx: TestApp): Promise<string> {
  const { browser: admin } = await userSession(ctx, ctx.tenant.account.id, 'ada@example.com')
  assertRedirect(
    await admin.submit('/settings/', '/settings/users', { email: 'new.person@example.com' }),
    '/settings/',
    303,
  )
  const oneTime = textOfId((await admin.get('/settings/')).payload, 'new-password')
  assert.ok(oneTime)
  return oneTime
}

async function signIn(ctx: TestApp, password: string): Promise<Browser> {
  const browser = new Browser(ctx.app)
  const token = await browser.csrf('/login')
  const res = await browser.post('/login', { _csrf: token, email: 'new.person@example.com', password })
  assertRedirect(res, '/account/password', 303)
  return browser
}

test('after a wrong password the email is kept and the cursor starts in the password field', async (t) => {
  const ctx = await buildTestApp(t)
  await userSession(ctx, ctx.tenant.account.id, 'ada@example.com')
  const browser = new Browser(ctx.app)
  const fresh = await browser.get('/login')
  assert.match(fresh.payload, /<input id="email"[^>]*autofocus>/, 'a first visit starts at Email')
  const token = await browser.csrf('/login')
  const res = await browser.post('/login', { _csrf: token, email: 'ada@example.com', password: 'wrong' })
  assert.equal(res.statusCode, 401)
  assert.match(
    res.payload,
    /<input id="email" name="email" type="email" required value="ada@example.com" autocomplete="username" >/,
  )
  assert.match(
    res.payload,
    /<input id="password" name="password" type="password" required autocomplete="current-password" autofocus>/,
  )
  // Without an email there is nothing to keep: the cursor starts at Email.
  const empty = await browser.post('/login', {
    _csrf: await browser.csrf('/login'),
    email: '',
    password: 'x',
  })
  assert.match(empty.payload, /<input id="email"[^>]*autofocus>/)
})

test("right after signing in with a one-time password, choosing one's own does not ask for it again", async (t) => {
  const ctx = await buildTestApp(t)
  const oneTime = await addedUser(ctx)
  const newcomer = await signIn(ctx, oneTime)
  const page = await newcomer.get('/account/password')
  assert.equal(page.statusCode, 200)
  assert.doesNotMatch(page.payload, /name="current"/)
  assert.match(
    page.payload,
    /<input id="password" name="password" type="password" required minlength="8" autocomplete="new-password" autofocus>/,
  )
  // The one-time password itself is not a new password.
  const same = await newcomer.submit('/account/password', '/account/password', {
    password: oneTime,
    confirm: oneTime,
  })
  assert.equal(same.statusCode, 422)
  assert.match(same.payload, /different from the one-time password/)
  const changed = await newcomer.submit('/account/password', '/account/password', {
    password: OWN,
    confirm: OWN,
  })
  assertRedirect(changed, '/settings/', 303)
  assert.equal((await newcomer.get('/logs/')).statusCode, 200)
  // From now on a change asks for the current password, as always.
  const next = await newcomer.get('/account/password')
  assert.match(next.payload, /<label for="current">Current password<\/label>/)
  const without = await newcomer.submit('/account/password', '/account/password', {
    password: 'yet another password',
    confirm: 'yet another password',
  })
  assert.equal(without.statusCode, 422)
  assert.match(without.payload, /The current password is wrong/)
})

test('a session older than the proof window must give the one-time password again', async (t) => {
  const ctx = await buildTestApp(t)
  const oneTime = await addedUser(ctx)
  const newcomer = await signIn(ctx, oneTime)
  const user = await ctx.database.db
    .selectFrom('users')
    .select('id')
    .where('email', '=', 'new.person@example.com')
    .executeTakeFirstOrThrow()
  await ctx.database.db
    .updateTable('sessions')
    .set({ created_at: Date.now() - ONE_TIME_PROOF_MS - 60_000 })
    .where('user_id', '=', user.id)
    .execute()
  const page = await newcomer.get('/account/password')
  assert.match(page.payload, /<label for="current">The one-time password you signed in with<\/label>/)
  const without = await newcomer.submit('/account/password', '/account/password', {
    password: OWN,
    confirm: OWN,
  })
  assert.equal(without.statusCode, 422)
  assert.match(without.payload, /The one-time password is wrong/)
  const withIt = await newcomer.submit('/account/password', '/account/password', {
    current: oneTime,
    password: OWN,
    confirm: OWN,
  })
  assertRedirect(withIt, '/settings/', 303)
})
