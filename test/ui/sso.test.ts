// Single sign-on over HTTP against a real OpenID Connect provider: sign-in, provisioning, every refused answer, password login off.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { JWTPayload } from 'jose'
import { loadConfig } from '../../src/config.js'
import { buildTestApp, databaseForServers, type TestApp } from '../helper.js'
import { processEnv, runCli } from '../support/processes.js'
import { SHIPLOG, type SsoWorld, ssoSignIn, ssoStart, ssoWorld } from '../support/sso.js'
import {
  assertRedirect,
  Browser,
  countRows,
  createUserIn,
  login,
  PASSWORD,
  type Response,
  setCookies,
  unescapeHtml,
} from '../support/ui.js'

async function auditEntries(ctx: TestApp, action?: string) {
  let q = ctx.database.db.selectFrom('audit_entries').selectAll().orderBy('id')
  if (action) q = q.where('action', '=', action)
  return (await q.execute()).map((row) => ({
    ...row,
    details: JSON.parse(row.details) as Record<string, unknown>,
  }))
}

/** A refusal: the page and status, its audit entry, and nobody signed in. */
async function assertRefused(
  w: SsoWorld,
  res: Response,
  expected: { status: number; page: RegExp; reason: string; email?: string; check?: RegExp },
): Promise<void> {
  assert.equal(res.statusCode, expected.status, res.payload.slice(0, 400))
  assert.match(String(res.headers['content-type']), /^text\/html/)
  assert.match(res.payload, expected.page)
  assert.match(res.payload, /Nobody was signed in/)
  assert.ok(!setCookies(res).some((c) => c.name === 'shiplog_session' && c.value !== ''), 'no session cookie')
  assert.equal(await countRows(w.ctx.database, 'sessions'), 0, 'no session was opened')
  const failed = await auditEntries(w.ctx, 'login.failed')
  const last = failed.at(-1)
  assert.ok(last, 'the refusal is in the audit log')
  assert.equal(last.details.method, 'oidc')
  assert.equal(last.details.reason, expected.reason)
  assert.equal(last.actor_kind, 'anonymous')
  if (expected.email) assert.equal(last.target, expected.email)
  // Which check failed is recorded, so the test knows the right one did.
  if (expected.check) assert.match(String(last.details.check), expected.check)
  assert.equal((await auditEntries(w.ctx, 'login.succeeded')).length, 0)
  for (const entry of await auditEntries(w.ctx)) {
    assert.doesNotMatch(
      entry.details.check === undefined ? '' : String(entry.details.check),
      /eyJ/,
      'no token in the audit log',
    )
  }
}

/** The text of the login page's error box. */
function errorBoxOf(page: string): string {
  const box = /<div class="error-box" role="alert">([\s\S]*?)<\/div>/.exec(page)?.[1]
  assert.ok(box, 'the page has an error box')
  return unescapeHtml(box.replace(/\s+/g, ' ').trim())
}

/** Runs a sign-in whose ID token is replaced by `forge(original payload)`. */
async function forgedSignIn(w: SsoWorld, forge: (p: JWTPayload) => Promise<string>): Promise<Response> {
  w.provider.forgeNextIdToken(forge)
  return ssoSignIn(w, new Browser(w.ctx.app), 'ada@acme.example')
}

test('signing in with the provider creates the user in the mapped account, links the identity and audits it', async (t) => {
  const w = await ssoWorld(t)
  const browser = new Browser(w.ctx.app)
  const res = await ssoSignIn(w, browser, 'ada@acme.example', {
    email: 'Ada@Acme.example',
    email_verified: true,
  })
  assertRedirect(res, '/logs/', 303)
  const session = setCookies(res).find((c) => c.name === 'shiplog_session')
  assert.ok(session, 'a session cookie is set')
  assert.equal(session.attributes.get('samesite'), 'Lax')
  assert.ok(session.attributes.has('httponly'))
  const page = await browser.get('/logs/')
  assert.equal(page.statusCode, 200)
  assert.match(page.payload, /ada@acme\.example/)

  const user = await w.ctx.database.db
    .selectFrom('users')
    .selectAll()
    .where('email', '=', 'ada@acme.example')
    .executeTakeFirstOrThrow()
  assert.equal(user.account_id, w.ctx.tenant.account.id)
  assert.equal(user.role, 'member')
  assert.match(user.password_hash, /^sso-only\$/, 'no usable password')
  const identity = await w.ctx.database.db.selectFrom('user_identities').selectAll().executeTakeFirstOrThrow()
  assert.deepEqual(
    [identity.user_id, identity.issuer, identity.subject],
    [user.id, w.provider.issuer, 'ada@acme.example'],
  )
  const added = await auditEntries(w.ctx, 'user.added')
  assert.deepEqual(
    added.map((e) => [e.target, e.details]),
    [['ada@acme.example', { method: 'oidc', role: 'member' }]],
  )
  const succeeded = await auditEntries(w.ctx, 'login.succeeded')
  assert.equal(succeeded.length, 1)
  assert.deepEqual(succeeded[0]?.details, { method: 'oidc' })
  assert.equal(succeeded[0]?.account_id, w.ctx.tenant.account.id)
  // The pending login is used up.
  assert.equal((await w.ctx.database.db.selectFrom('oidc_logins').selectAll().execute()).length, 0)
})

test('the role follows the admin groups at each login, and a group mapping picks the account', async (t) => {
  const w = await ssoWorld(t)
  let res = await ssoSignIn(w, new Browser(w.ctx.app), 'bo@acme.example', {
    email: 'bo@acme.example',
    email_verified: true,
    groups: ['shiplog-admins'],
  })
  assertRedirect(res, '/logs/', 303)
  const role = async (email: string) =>
    await w.ctx.database.db
      .selectFrom('users')
      .select(['role', 'account_id'])
      .where('email', '=', email)
      .execute()
  assert.deepEqual(
    (await role('bo@acme.example')).map((r) => r.role),
    ['admin'],
  )
  res = await ssoSignIn(w, new Browser(w.ctx.app), 'bo@acme.example', {
    email: 'bo@acme.example',
    email_verified: true,
    groups: [],
  })
  assertRedirect(res, '/logs/', 303)
  assert.deepEqual(
    (await role('bo@acme.example')).map((r) => r.role),
    ['member'],
  )
  const changed = await auditEntries(w.ctx, 'user.role_changed')
  assert.deepEqual(
    changed.map((e) => e.details),
    [{ method: 'oidc', from: 'admin', to: 'member' }],
  )

  // A group mapped to Beta wins over the acme.example domain; the account is made on first use.
  res = await ssoSignIn(w, new Browser(w.ctx.app), 'cy@acme.example', {
    email: 'cy@acme.example',
    email_verified: true,
    groups: ['shiplog-beta'],
  })
  assertRedirect(res, '/logs/', 303)
  const beta = await w.ctx.database.db
    .selectFrom('accounts')
    .selectAll()
    .where('name', '=', 'Beta')
    .executeTakeFirstOrThrow()
  assert.deepEqual(
    (await role('cy@acme.example')).map((r) => r.account_id),
    [beta.id],
  )
})

test('an existing password user is matched by verified email and keeps their password', async (t) => {
  const w = await ssoWorld(t)
  const owner = await w.ctx.database.db
    .selectFrom('users')
    .selectAll()
    .where('email', '=', 'owner@acme.example')
    .executeTakeFirstOrThrow()
  const res = await ssoSignIn(w, new Browser(w.ctx.app), 'owner-at-idp', {
    email: 'owner@acme.example',
    email_verified: true,
  })
  assertRedirect(res, '/logs/', 303)
  assert.equal(await countRows(w.ctx.database, 'users'), 1, 'no second user')
  const link = await w.ctx.database.db.selectFrom('user_identities').selectAll().executeTakeFirstOrThrow()
  assert.equal(link.user_id, owner.id)
  // Not in an admin group, but the account's only admin: not demoted (an account keeps an admin).
  assert.equal(
    (
      await w.ctx.database.db
        .selectFrom('users')
        .select('role')
        .where('id', '=', owner.id)
        .executeTakeFirstOrThrow()
    ).role,
    'admin',
  )
  await login(w.ctx.app, 'owner@acme.example', PASSWORD)
  // Another person at the provider with the same address later is not let in as this user.
  const other = await ssoSignIn(w, new Browser(w.ctx.app), 'impostor', {
    email: 'owner@acme.example',
    email_verified: true,
  })
  assert.equal(other.statusCode, 403)
  assert.match(other.payload, /linked to another identity/)
  const failed = await auditEntries(w.ctx, 'login.failed')
  assert.equal(failed.at(-1)?.details.reason, 'identity_mismatch')
})

test('a token re-signed with the provider key and unchanged is accepted (the forgery hook itself is sound)', async (t) => {
  const w = await ssoWorld(t)
  const res = await forgedSignIn(w, (p) => w.provider.signAsProvider(p))
  assertRedirect(res, '/logs/', 303)
})

test('an ID token with a forged signature is refused', async (t) => {
  const w = await ssoWorld(t)
  const res = await forgedSignIn(w, (p) => w.provider.signWithForeignKey(p))
  await assertRefused(w, res, {
    status: 400,
    page: /Sign-in answer refused/,
    reason: 'invalid_response',
    check: /signature/i,
  })
})

test('a token under a key id the provider never published is refused', async (t) => {
  // (openid-client fetches the JWKS again for an unknown key id once its copy is a minute old,
  // and every five minutes anyway: that is how a provider's key rotation reaches Shiplog.)
  const w = await ssoWorld(t)
  const res = await forgedSignIn(w, (p) => w.provider.signWithForeignKey(p, 'rotated-in-by-an-attacker'))
  await assertRefused(w, res, {
    status: 400,
    page: /Sign-in answer refused/,
    reason: 'invalid_response',
    check: /no applicable keys found/,
  })
})

test('an expired ID token is refused', async (t) => {
  const w = await ssoWorld(t)
  const now = Math.floor(Date.now() / 1000)
  const res = await forgedSignIn(w, (p) =>
    w.provider.signAsProvider({ ...p, iat: now - 7200, exp: now - 3600 }),
  )
  await assertRefused(w, res, {
    status: 400,
    page: /Sign-in answer refused/,
    reason: 'invalid_response',
    check: /"exp"/,
  })
})

test('an ID token for another audience is refused', async (t) => {
  const w = await ssoWorld(t)
  const res = await forgedSignIn(w, (p) => w.provider.signAsProvider({ ...p, aud: 'some-other-app' }))
  await assertRefused(w, res, {
    status: 400,
    page: /Sign-in answer refused/,
    reason: 'invalid_response',
    check: /"aud"/,
  })
})

test('an ID token from another issuer is refused', async (t) => {
  const w = await ssoWorld(t)
  const res = await forgedSignIn(w, (p) => w.provider.signAsProvider({ ...p, iss: 'https://evil.example' }))
  await assertRefused(w, res, {
    status: 400,
    page: /Sign-in answer refused/,
    reason: 'invalid_response',
    check: /"iss"/,
  })
})

test('an ID token without the nonce is refused', async (t) => {
  const w = await ssoWorld(t)
  const res = await forgedSignIn(w, ({ nonce: _dropped, ...p }) => w.provider.signAsProvider(p))
  await assertRefused(w, res, {
    status: 400,
    page: /Sign-in answer refused/,
    reason: 'invalid_response',
    check: /nonce/,
  })
})

test('an ID token with another nonce is refused', async (t) => {
  const w = await ssoWorld(t)
  const res = await forgedSignIn(w, (p) =>
    w.provider.signAsProvider({ ...p, nonce: 'not-the-one-shiplog-sent' }),
  )
  await assertRefused(w, res, {
    status: 400,
    page: /Sign-in answer refused/,
    reason: 'invalid_response',
    check: /nonce/,
  })
})

test('a replayed state is refused, and the first sign-in stays the only one', async (t) => {
  const w = await ssoWorld(t)
  const browser = new Browser(w.ctx.app)
  w.provider.person('ada@acme.example', { email: 'ada@acme.example', email_verified: true })
  const callback = await w.provider.authorize(await ssoStart(browser), 'ada@acme.example')
  const path = `${callback.pathname}${callback.search}`
  const replayer = browser.copy()
  assertRedirect(await browser.get(path), '/logs/', 303)
  const before = await countRows(w.ctx.database, 'sessions')
  const res = await replayer.get(path)
  assert.equal(res.statusCode, 400)
  assert.match(res.payload, /already used or was never issued/)
  assert.ok(!setCookies(res).some((c) => c.name === 'shiplog_session' && c.value !== ''))
  assert.equal(await countRows(w.ctx.database, 'sessions'), before, 'no second session')
  assert.equal((await auditEntries(w.ctx, 'login.failed')).at(-1)?.details.reason, 'unknown_state')
})

test('a callback whose state was started in another browser is refused (no login CSRF)', async (t) => {
  const w = await ssoWorld(t)
  const attacker = new Browser(w.ctx.app)
  w.provider.person('mallory@acme.example', { email: 'mallory@acme.example', email_verified: true })
  const callback = await w.provider.authorize(await ssoStart(attacker), 'mallory@acme.example')
  const victim = new Browser(w.ctx.app)
  const res = await victim.get(`${callback.pathname}${callback.search}`)
  await assertRefused(w, res, { status: 400, page: /started in another browser/, reason: 'other_browser' })
})

test('a made-up state and a provider error are refused', async (t) => {
  const w = await ssoWorld(t)
  const res = await new Browser(w.ctx.app).get('/login/oidc/callback?code=abc&state=made-up')
  await assertRefused(w, res, {
    status: 400,
    page: /already used or was never issued/,
    reason: 'unknown_state',
  })
  const browser = new Browser(w.ctx.app)
  const url = new URL(await ssoStart(browser))
  const state = url.searchParams.get('state') ?? ''
  const denied = await browser.get(
    `/login/oidc/callback?error=access_denied&state=${encodeURIComponent(state)}`,
  )
  await assertRefused(w, denied, { status: 400, page: /did not sign you in/, reason: 'provider_error' })
})

test('an unverified email is refused', async (t) => {
  const w = await ssoWorld(t)
  const res = await ssoSignIn(w, new Browser(w.ctx.app), 'eve', {
    email: 'eve@acme.example',
    email_verified: false,
  })
  await assertRefused(w, res, {
    status: 403,
    page: /not verified/,
    reason: 'email_unverified',
    email: 'eve@acme.example',
  })
  assert.equal(await countRows(w.ctx.database, 'users'), 1, 'nobody was added')
})

test('an email whose domain maps to no account is refused', async (t) => {
  const w = await ssoWorld(t)
  const res = await ssoSignIn(w, new Browser(w.ctx.app), 'zed', {
    email: 'zed@elsewhere.example',
    email_verified: true,
  })
  await assertRefused(w, res, {
    status: 403,
    page: /No Shiplog account for you/,
    reason: 'no_account_mapping',
    email: 'zed@elsewhere.example',
  })
  assert.equal(await countRows(w.ctx.database, 'users'), 1, 'nobody was added')
})

test('logout of a single sign-on session ends it and offers the provider logout with id_token_hint', async (t) => {
  const w = await ssoWorld(t)
  const browser = new Browser(w.ctx.app)
  assertRedirect(await ssoSignIn(w, browser, 'ada@acme.example'), '/logs/', 303)
  const token = /name="_csrf" value="([^"]+)"/.exec((await browser.get('/logout')).payload)?.[1] ?? ''
  const res = await browser.post('/logout', { _csrf: token })
  assert.equal(res.statusCode, 200)
  assert.match(res.payload, /You are logged out of Shiplog/)
  assert.ok(!browser.jar.has('shiplog_session'), 'the session cookie is cleared')
  const href = /href="([^"]+)" id="provider-logout"/.exec(res.payload)?.[1] ?? ''
  const target = new URL(href.replace(/&amp;/g, '&'))
  assert.equal(target.origin, w.provider.issuer)
  assert.ok(target.searchParams.get('id_token_hint')?.startsWith('eyJ'))
  assert.equal(target.searchParams.get('post_logout_redirect_uri'), `${SHIPLOG}/login?bye=1`)
  assert.equal(await countRows(w.ctx.database, 'sessions'), 0, 'the Shiplog session ended')
  // A password session logs out locally as before.
  const owner = await login(w.ctx.app, 'owner@acme.example')
  const ownerToken = /name="_csrf" value="([^"]+)"/.exec((await owner.get('/logout')).payload)?.[1] ?? ''
  assertRedirect(await owner.post('/logout', { _csrf: ownerToken }), '/login?bye=1', 303)
})

test('an admin turns password login off: password sign-in is refused with a clear page, single sign-on still works', async (t) => {
  const w = await ssoWorld(t)
  const { db } = w.ctx.database
  const owner = await login(w.ctx.app, 'owner@acme.example')
  let settings = await owner.get('/settings/')
  assert.match(settings.payload, /<h2 id="sign-in-heading">Sign-in<\/h2>/)
  assert.match(settings.payload, /first sign in once with Test IdP yourself/)
  // Not before this admin has signed in with the provider: no locking oneself out.
  let res = await owner.submit('/settings/', '/settings/sign-in', { password_login: 'off' })
  assertRedirect(res, '/settings/', 303)
  assert.match((await owner.get('/settings/')).payload, /Password login stays on/)
  assert.equal(
    (
      await db
        .selectFrom('accounts')
        .select('password_login')
        .where('id', '=', w.ctx.tenant.account.id)
        .executeTakeFirstOrThrow()
    ).password_login,
    1,
  )

  const admin = new Browser(w.ctx.app)
  assertRedirect(
    await ssoSignIn(w, admin, 'owner-idp', {
      email: 'owner@acme.example',
      email_verified: true,
      groups: ['shiplog-admins'],
    }),
    '/logs/',
    303,
  )
  settings = await admin.get('/settings/')
  assert.match(settings.payload, /Turn password login off/)
  res = await admin.submit('/settings/', '/settings/sign-in', { password_login: 'off' })
  assertRedirect(res, '/settings/', 303)
  assert.match(
    (await admin.get('/settings/')).payload,
    /Password login is off: users of Acme now sign in with Test IdP/,
  )
  const changed = await auditEntries(w.ctx, 'settings.changed')
  assert.deepEqual(
    changed.map((e) => e.details),
    [{ setting: 'password_login', value: 'off', signed_out: 1 }],
  )
  // The owner's password session of a moment ago has ended with it.
  assertRedirect(await owner.get('/settings/'), '/login', 303)

  const refused = new Browser(w.ctx.app)
  const page = await refused.get('/login')
  const token = /name="_csrf" value="([^"]+)"/.exec(page.payload)?.[1] ?? ''
  const sessionsBefore = await countRows(w.ctx.database, 'sessions')
  res = await refused.post('/login', { _csrf: token, email: 'owner@acme.example', password: PASSWORD })
  const right = { status: res.statusCode, said: errorBoxOf(res.payload) }
  assert.ok(!refused.jar.has('shiplog_session'))
  assert.equal(await countRows(w.ctx.database, 'sessions'), sessionsBefore)
  const failed = await auditEntries(w.ctx, 'login.failed')
  // The account's admins see why in the audit log; the person at the form is not told.
  assert.deepEqual(failed.at(-1)?.details, { method: 'password', reason: 'password_login_off' })
  res = await refused.post('/login', {
    _csrf: token,
    email: 'owner@acme.example',
    password: 'wrong password',
  })
  const wrong = { status: res.statusCode, said: errorBoxOf(res.payload) }
  // The right password and a wrong one get the same answer: no oracle for a guesser. It still says
  // plainly that password login may be off, and what to use instead.
  assert.deepEqual(right, wrong)
  assert.equal(right.status, 401)
  assert.match(right.said, /That email and password do not match\./)
  assert.match(
    right.said,
    /If password login is turned off for your team, use "Sign in with Test IdP" below\./,
  )
  // An unknown address gets it too.
  res = await refused.post('/login', { _csrf: token, email: 'nobody@acme.example', password: PASSWORD })
  assert.deepEqual({ status: res.statusCode, said: errorBoxOf(res.payload) }, wrong)
  // Single sign-on still works, and the admin can turn passwords back on.
  assertRedirect(await ssoSignIn(w, new Browser(w.ctx.app), 'owner-idp'), '/logs/', 303)
  res = await admin.submit('/settings/', '/settings/sign-in', { password_login: 'on' })
  assertRedirect(res, '/settings/', 303)
  await login(w.ctx.app, 'owner@acme.example')
})

test('the Sign-in setting is for admins of their own account, and its forms need the CSRF token', async (t) => {
  const w = await ssoWorld(t)
  const { db } = w.ctx.database
  await createUserIn(w.ctx.database, w.ctx.tenant.account.id, 'member@acme.example', { role: 'member' })
  const member = await login(w.ctx.app, 'member@acme.example')
  assert.doesNotMatch((await member.get('/settings/')).payload, /Turn password login/)
  const res = await member.submit('/settings/', '/settings/sign-in', { password_login: 'off' })
  assert.equal(res.statusCode, 403)
  // Another account's admin changes only their own account, whatever the form says.
  const beta = await w.ctx.addTenant('Beta')
  await createUserIn(w.ctx.database, beta.account.id, 'bea@beta.example')
  await db
    .insertInto('user_identities')
    .values({
      user_id: (
        await db
          .selectFrom('users')
          .select('id')
          .where('email', '=', 'bea@beta.example')
          .executeTakeFirstOrThrow()
      ).id,
      issuer: w.provider.issuer,
      subject: 'bea',
      email: 'bea@beta.example',
      created_at: 0,
      last_login_at: 0,
    })
    .execute()
  const bea = await login(w.ctx.app, 'bea@beta.example')
  const flagsNow = async () =>
    (await db.selectFrom('accounts').select(['name', 'password_login']).orderBy('name').execute()).map(
      (a) => [a.name, a.password_login],
    )
  // Bad values and missing tokens change nothing.
  assert.equal(
    (await bea.submit('/settings/', '/settings/sign-in', { password_login: 'maybe' })).statusCode,
    400,
  )
  const forged = await bea.post('/settings/sign-in', { password_login: 'off', _csrf: 'made-up' })
  assert.equal(forged.statusCode, 403)
  assert.match(forged.payload, /This form has expired/)
  assert.equal((await bea.post('/settings/sign-in', { password_login: 'off' })).statusCode, 403)
  assert.equal((await bea.post('/login/oidc', {})).statusCode, 405, 'sign-in starts with a GET only')
  assert.deepEqual(await flagsNow(), [
    ['Acme', 1],
    ['Beta', 1],
  ])
  // Bea signed in with her password, so turning it off signs her out as well.
  assertRedirect(
    await bea.submit('/settings/', '/settings/sign-in', {
      password_login: 'off',
      account: String(w.ctx.tenant.account.id),
    }),
    '/login?bye=password-off',
    303,
  )
  assert.deepEqual(await flagsNow(), [
    ['Acme', 1],
    ['Beta', 0],
  ])
  assert.equal((await db.selectFrom('oidc_logins').selectAll().execute()).length, 0, 'no login was started')
})

test('the operator turns password login off with shiplog accounts password-login; bad input changes nothing', async (t) => {
  const { databaseUrl } = await databaseForServers(t)
  const env = processEnv(databaseUrl)
  let run = await runCli(t, ['accounts', 'password-login', '--account', 'Acme', 'off'], { env })
  assert.equal(run.code, 0, run.stderr)
  assert.equal(run.stdout, '')
  assert.match(run.stderr, /password login for account "Acme" is now off/)
  run = await runCli(t, ['accounts', 'password-login', '--account', 'Acme', 'off'], { env })
  assert.match(run.stderr, /was already off/)
  run = await runCli(t, ['accounts', 'password-login', '--account', 'Nope', 'on'], { env })
  assert.equal(run.code, 1)
  assert.match(run.stderr, /account "Nope" does not exist/)
  run = await runCli(t, ['accounts', 'password-login', '--account', 'Acme', 'maybe'], { env })
  assert.equal(run.code, 2)
  assert.match(run.stderr, /say on or off/)
  const ctx = await buildTestApp(t, { databaseUrl })
  const row = await ctx.database.db
    .selectFrom('accounts')
    .select('password_login')
    .where('name', '=', 'Acme')
    .executeTakeFirstOrThrow()
  assert.equal(row.password_login, 0)
  const audit = await auditEntries(ctx, 'settings.changed')
  assert.equal(audit.length, 1, 'one change, one entry')
  assert.equal(audit[0]?.actor_kind, 'cli')
})

test('a provider that cannot be reached is said so plainly and audited, at each attempt', async (t) => {
  const ctx = await buildTestApp(t, {
    env: {
      SHIPLOG_PUBLIC_URL: SHIPLOG,
      // Port 1 on loopback: nothing listens there, so discovery fails at once.
      SHIPLOG_OIDC_ISSUER: 'http://127.0.0.1:1',
      SHIPLOG_OIDC_CLIENT_ID: 'shiplog',
      SHIPLOG_OIDC_CLIENT_SECRET: 'secret',
      SHIPLOG_OIDC_ACCOUNT_BY_DOMAIN: 'acme.example=Acme',
    },
  })
  await createUserIn(ctx.database, ctx.tenant.account.id, 'owner@acme.example')
  for (let attempt = 1; attempt <= 2; attempt++) {
    const res = await new Browser(ctx.app).get('/login/oidc')
    assert.equal(res.statusCode, 502)
    assert.match(res.payload, /could not reach single sign-on/)
    assert.ok(!setCookies(res).some((c) => c.name === 'shiplog_session'))
  }
  const failed = await auditEntries(ctx, 'login.failed')
  assert.deepEqual(
    failed.map((e) => e.details.reason),
    ['provider_unavailable', 'provider_unavailable'],
  )
  assert.equal((await ctx.database.db.selectFrom('oidc_logins').selectAll().execute()).length, 0)
})

test('without SHIPLOG_OIDC_ISSUER there is no button and no route', async (t) => {
  const ctx = await buildTestApp(t)
  await createUserIn(ctx.database, ctx.tenant.account.id, 'owner@acme.example')
  const page = await new Browser(ctx.app).get('/login')
  assert.doesNotMatch(page.payload, /Sign in with/)
  assert.equal((await ctx.app.inject({ url: '/login/oidc/callback?state=x' })).statusCode, 404)
})

test('single sign-on configuration is checked at start with one clear message', () => {
  const base = {
    DATABASE_URL: 'sqlite::memory:',
    SHIPLOG_SECRET: 'x'.repeat(32),
    SHIPLOG_PUBLIC_URL: 'https://shiplog.example.com',
    SHIPLOG_OIDC_ISSUER: 'https://id.example.com/realms/acme',
    SHIPLOG_OIDC_CLIENT_ID: 'shiplog',
    SHIPLOG_OIDC_CLIENT_SECRET: 's3cret',
    SHIPLOG_OIDC_ACCOUNT_BY_DOMAIN: 'example.com=Acme, corp.io=Ops',
  }
  const config = loadConfig(base)
  assert.equal(config.oidc?.redirectUri, 'https://shiplog.example.com/login/oidc/callback')
  assert.deepEqual(config.oidc?.accountByDomain, [
    ['example.com', 'Acme'],
    ['corp.io', 'Ops'],
  ])
  const refused: [Record<string, string | undefined>, RegExp][] = [
    [{ SHIPLOG_PUBLIC_URL: undefined }, /needs SHIPLOG_PUBLIC_URL/],
    [{ SHIPLOG_OIDC_CLIENT_ID: '' }, /SHIPLOG_OIDC_CLIENT_ID must be set/],
    [{ SHIPLOG_OIDC_CLIENT_SECRET: '' }, /SHIPLOG_OIDC_CLIENT_SECRET must be set/],
    [{ SHIPLOG_OIDC_ISSUER: 'http://id.example.com' }, /must be an https URL/],
    [{ SHIPLOG_OIDC_ISSUER: 'not a url' }, /issuer URL/],
    [
      { SHIPLOG_OIDC_ACCOUNT_BY_DOMAIN: '' },
      /SHIPLOG_OIDC_ACCOUNT_BY_DOMAIN or SHIPLOG_OIDC_ACCOUNT_BY_GROUP/,
    ],
    [{ SHIPLOG_OIDC_ACCOUNT_BY_DOMAIN: 'example.com' }, /domain=Account pairs/],
    [{ SHIPLOG_OIDC_ACCOUNT_BY_DOMAIN: 'not a domain=Acme' }, /not an email domain/],
    [{ SHIPLOG_OIDC_ACCOUNT_BY_DOMAIN: 'a.com=A,A.com=B' }, /names "A.com" twice/],
    [{ SHIPLOG_OIDC_SCOPES: 'openid profile' }, /must include "email"/],
    [{ SHIPLOG_OIDC_ISSUER: '', SHIPLOG_OIDC_ACCOUNT_BY_DOMAIN: 'x.com=A' }, /SHIPLOG_OIDC_ISSUER is not/],
  ]
  for (const [change, message] of refused) {
    const env: Record<string, string> = {}
    for (const [name, value] of Object.entries({ ...base, ...change }))
      if (value !== undefined) env[name] = value
    assert.throws(() => loadConfig(env), message, JSON.stringify(change))
  }
  assert.equal(
    loadConfig({ ...base, SHIPLOG_OIDC_ISSUER: 'http://127.0.0.1:9000' }).oidc?.issuer,
    'http://127.0.0.1:9000',
  )
})
