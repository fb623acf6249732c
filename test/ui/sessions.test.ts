// Logout (and a password change) end sessions on the server, and logins are throttled per email.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Migrator, sql } from 'kysely'
import { parseDatabaseUrl } from '../../src/config.js'
import { openDatabase } from '../../src/db/connect.js'
import { migrateToLatest } from '../../src/db/migrate.js'
import { initialSchema } from '../../src/db/migrations/2026_11_21_0001_initial.js'
import { sessionsSchema } from '../../src/db/migrations/2026_11_22_0002_sessions.js'
import { versionSearchIndex } from '../../src/db/migrations/2026_11_22_0003_version_search.js'
import { createUser, UserExistsError } from '../../src/domain/accounts.js'
import { findSession } from '../../src/domain/sessions.js'
import { buildTestApp, freshDatabaseUrl } from '../helper.js'
import {
  assertRedirect,
  Browser,
  countRows,
  createUserIn,
  login,
  PASSWORD,
  setCookies,
} from '../support/ui.js'

test('POST /logout ends the session server-side: the old cookie no longer opens /logs/', async (t) => {
  const ctx = await buildTestApp(t)
  await createUserIn(ctx.database, ctx.tenant.account.id, 'ada@example.com')
  const browser = await login(ctx.app, 'ada@example.com')
  const stolen = browser.copy()
  assert.equal((await stolen.get('/logs/')).statusCode, 200, 'the copied cookie works before logout')
  assert.equal(await countRows(ctx.database, 'sessions'), 1)

  const token = await browser.csrf('/logs/')
  const out = await browser.post('/logout', { _csrf: token })
  assertRedirect(out, '/login', 303)
  const cleared = setCookies(out).find((c) => c.name === 'shiplog_session')
  assert.ok(cleared, 'the logout answer clears the cookie in the browser')
  assert.equal(browser.jar.has('shiplog_session'), false)
  assert.equal(await countRows(ctx.database, 'sessions'), 0, 'the session row is gone')

  assertRedirect(await browser.get('/logs/'), '/login')
  // The replayed cookie (as an attacker who copied it would send it) is refused too.
  assertRedirect(await stolen.get('/logs/'), '/login')
  assertRedirect(await stolen.get('/settings/'), '/login')
  assertRedirect(await stolen.get('/logs/export.csv'), '/login')
})

test('logging out ends only that session; another browser of the same user stays in', async (t) => {
  const ctx = await buildTestApp(t)
  await createUserIn(ctx.database, ctx.tenant.account.id, 'ada@example.com')
  const laptop = await login(ctx.app, 'ada@example.com')
  const phone = await login(ctx.app, 'ada@example.com')
  const token = await laptop.csrf('/logs/')
  assert.equal((await laptop.post('/logout', { _csrf: token })).statusCode, 303)
  assertRedirect(await laptop.get('/logs/'), '/login')
  assert.equal((await phone.get('/logs/')).statusCode, 200)
})

test('ten login attempts per email are allowed; the 11th within the window gets 429 with Retry-After, even with the right password', async (t) => {
  const ctx = await buildTestApp(t)
  await createUserIn(ctx.database, ctx.tenant.account.id, 'ada@example.com')
  const attacker = new Browser(ctx.app)
  const token = await attacker.csrf('/login')
  for (let i = 1; i <= 9; i++) {
    // The same address in other spellings counts against the same limit.
    const email = i % 2 === 0 ? 'ada@example.com' : ' ADA@Example.com'
    const res = await attacker.post('/login', { _csrf: token, email, password: `wrong-${i}-password` })
    assert.equal(res.statusCode, 401, `attempt ${i}`)
  }
  const tenth = await attacker.post('/login', { _csrf: token, email: 'ada@example.com', password: PASSWORD })
  assertRedirect(tenth, '/logs/', 303)
  const sessionsAfterTen = await countRows(ctx.database, 'sessions')
  assert.equal(sessionsAfterTen, 1)

  const owner = new Browser(ctx.app)
  const ownerToken = await owner.csrf('/login')
  const eleventh = await owner.post('/login', {
    _csrf: ownerToken,
    email: 'ada@example.com',
    password: PASSWORD,
  })
  assert.equal(eleventh.statusCode, 429)
  const retryAfter = Number(eleventh.headers['retry-after'])
  assert.ok(
    Number.isInteger(retryAfter) && retryAfter > 0 && retryAfter <= 15 * 60,
    `Retry-After ${retryAfter}`,
  )
  assert.match(eleventh.payload, /Too many login attempts/)
  assert.equal(
    setCookies(eleventh).some((c) => c.name === 'shiplog_session'),
    false,
  )
  assert.equal(owner.jar.has('shiplog_session'), false)
  assert.equal(await countRows(ctx.database, 'sessions'), sessionsAfterTen, 'no session was created')

  // The limit is per email: someone else can still log in.
  await createUserIn(ctx.database, ctx.tenant.account.id, 'bob@example.com')
  const bob = await login(ctx.app, 'bob@example.com')
  assert.equal((await bob.get('/logs/')).statusCode, 200)
})

test('changing the password ends the other sessions of that user, not the current one', async (t) => {
  const ctx = await buildTestApp(t)
  await createUserIn(ctx.database, ctx.tenant.account.id, 'ada@example.com')
  const laptop = await login(ctx.app, 'ada@example.com')
  const phone = await login(ctx.app, 'ada@example.com')
  const changed = await laptop.submit('/account/password', '/account/password', {
    current: PASSWORD,
    password: 'another long password',
    confirm: 'another long password',
  })
  assertRedirect(changed, '/settings/', 303)
  // A confirmation at the top of the page it lands on, once (issue 10.23).
  const landed = await laptop.get('/settings/')
  assert.equal(landed.statusCode, 200)
  assert.match(landed.payload, /<div class="notice" role="status"><p>Your password is changed\./)
  assert.doesNotMatch((await laptop.get('/settings/')).payload, /Your password is changed/, 'shown once')
  assert.equal((await laptop.get('/logs/')).statusCode, 200)
  assertRedirect(await phone.get('/logs/'), '/login')
})

test('changing the password has the login limits: a stolen session cannot guess the current password (10 tries, then 429 even when right)', async (t) => {
  const ctx = await buildTestApp(t)
  const ada = await createUserIn(ctx.database, ctx.tenant.account.id, 'ada@example.com')
  const thief = await login(ctx.app, 'ada@example.com')
  const token = await thief.csrf('/account/password')
  const attempt = (current: string) =>
    thief.post('/account/password', {
      _csrf: token,
      current,
      password: 'taken over for good',
      confirm: 'taken over for good',
    })
  // The login above was one attempt on this address within the window.
  for (let i = 2; i <= 10; i++) {
    assert.equal((await attempt(`guess number ${i}`)).statusCode, 422, `guess ${i}`)
  }
  const blocked = await attempt(PASSWORD)
  assert.equal(blocked.statusCode, 429)
  assert.match(blocked.payload, /Too many password attempts/)
  const retryAfter = Number(blocked.headers['retry-after'])
  assert.ok(
    Number.isInteger(retryAfter) && retryAfter > 0 && retryAfter <= 15 * 60,
    `Retry-After ${retryAfter}`,
  )
  const row = await ctx.database.db
    .selectFrom('users')
    .select('password_hash')
    .where('id', '=', ada.id)
    .executeTakeFirstOrThrow()
  assert.equal(row.password_hash, ada.password_hash, 'the password is unchanged')
  // Logging in with that address is throttled too: the same budget.
  const owner = new Browser(ctx.app)
  const res = await owner.post('/login', {
    _csrf: await owner.csrf('/login'),
    email: 'ada@example.com',
    password: PASSWORD,
  })
  assert.equal(res.statusCode, 429)
})

test('the Log out button on an error page works', async (t) => {
  const ctx = await buildTestApp(t)
  await createUserIn(ctx.database, ctx.tenant.account.id, 'ada@example.com')
  const browser = await login(ctx.app, 'ada@example.com')
  const notFound = await browser.submit('/settings/', '/settings/keys/987654/revoke', {})
  assert.equal(notFound.statusCode, 404)
  assert.match(notFound.payload, /action="\/logout"/, 'the error page offers Log out')
  const token = /<input type="hidden" name="_csrf" value="([^"]*)">/.exec(notFound.payload)?.[1] ?? ''
  const out = await browser.post('/logout', { _csrf: token })
  assertRedirect(out, '/login', 303)
  assertRedirect(await browser.get('/logs/'), '/login')
})

test('fifty login attempts per address in the window; the 51st from that address gets 429 whatever the email, other addresses are unaffected', async (t) => {
  const ctx = await buildTestApp(t)
  await createUserIn(ctx.database, ctx.tenant.account.id, 'ada@example.com')
  const attacker = new Browser(ctx.app)
  const token = await attacker.csrf('/login')
  // Password spraying: a different email each time, so only the per-address limit can stop it.
  const attempt = (remoteAddress: string, email: string, password: string) =>
    ctx.app.inject({
      method: 'POST',
      url: '/login',
      remoteAddress,
      headers: { cookie: attacker.cookieHeader(), 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams({ _csrf: token, email, password }).toString(),
    })
  for (let i = 1; i <= 50; i++) {
    const res = await attempt('203.0.113.7', `user${i}@example.com`, 'a guessed password')
    assert.equal(res.statusCode, 401, `attempt ${i}`)
  }
  const blocked = await attempt('203.0.113.7', 'ada@example.com', PASSWORD)
  assert.equal(blocked.statusCode, 429, 'even the right password, from the throttled address')
  assert.ok(Number(blocked.headers['retry-after']) > 0)
  assert.equal(await countRows(ctx.database, 'sessions'), 0)

  const elsewhere = await attempt('198.51.100.9', 'ada@example.com', PASSWORD)
  assertRedirect(elsewhere, '/logs/', 303)
})

test('a session cookie with a tampered token or signature opens nothing', async (t) => {
  const ctx = await buildTestApp(t)
  await createUserIn(ctx.database, ctx.tenant.account.id, 'ada@example.com')
  const browser = await login(ctx.app, 'ada@example.com')
  const cookie = browser.jar.get('shiplog_session') ?? ''
  const [token = '', signature = ''] = decodeURIComponent(cookie).split('.')
  const flip = (s: string) => `${s.slice(0, -1)}${s.endsWith('A') ? 'B' : 'A'}`
  for (const [label, value] of [
    ['token changed, signature kept', `${flip(token)}.${signature}`],
    ['signature changed', `${token}.${flip(signature)}`],
    ['signature removed', token],
    ['unsigned token of another length', `${token}x`],
  ]) {
    const forged = new Browser(ctx.app)
    forged.jar.set('shiplog_session', encodeURIComponent(value ?? ''))
    const res = await forged.get('/logs/')
    assert.equal(res.statusCode, 303, label)
    assert.match(String(res.headers.location), /^\/login\b/, label)
  }
  assert.equal((await browser.get('/logs/')).statusCode, 200, 'the genuine cookie still works')
})

test('upgrading to per-account emails (migration 0004) keeps users, their sessions, key creators and ids never reused', async (t) => {
  const database = openDatabase(parseDatabaseUrl(await freshDatabaseUrl(t)))
  t.after(() => database.close())
  const { db } = database
  // The schema as it was before: the first three migrations only.
  const schema =
    database.dialect === 'postgres'
      ? (await sql<{ s: string }>`select current_schema() as s`.execute(db)).rows[0]?.s
      : undefined
  const before = await new Migrator({
    db,
    provider: {
      getMigrations: async () => ({
        '2026_11_21_0001_initial': initialSchema(database.dialect),
        '2026_11_22_0002_sessions': sessionsSchema(),
        '2026_11_22_0003_version_search': versionSearchIndex(database.dialect),
      }),
    },
    ...(schema ? { migrationTableSchema: schema } : {}),
  }).migrateToLatest()
  assert.equal(before.error, undefined)

  const now = Date.now()
  const account = await db
    .insertInto('accounts')
    .values({ name: 'Acme', created_at: now })
    .returningAll()
    .executeTakeFirstOrThrow()
  const other = await db
    .insertInto('accounts')
    .values({ name: 'Beta', created_at: now })
    .returningAll()
    .executeTakeFirstOrThrow()
  const user = { account_id: account.id, password_hash: 'x', role: 'admin' as const, created_at: now }
  const ada = await db
    .insertInto('users')
    .values({ ...user, email: 'ada@example.com' })
    .returningAll()
    .executeTakeFirstOrThrow()
  const gone = await db
    .insertInto('users')
    .values({ ...user, email: 'gone@example.com' })
    .returningAll()
    .executeTakeFirstOrThrow()
  await db.deleteFrom('users').where('id', '=', gone.id).execute()
  await db
    .insertInto('sessions')
    .values({
      id: 'f'.repeat(64),
      user_id: ada.id,
      created_at: now,
      last_seen_at: now,
      expires_at: now + 60_000,
    })
    .execute()
  await db
    .insertInto('api_keys')
    .values({
      account_id: account.id,
      name: 'ci',
      prefix: 'shl_x',
      digest: 'd'.repeat(64),
      created_at: now,
      created_by: ada.email,
      created_by_user_id: ada.id,
    })
    .execute()

  // Later migrations run after it too; 0004 is the one under test.
  const { applied } = await migrateToLatest(database)
  assert.equal(applied[0], '2026_11_23_0004_account_emails')

  assert.deepEqual(await db.selectFrom('users').selectAll().execute(), [{ ...ada, must_change_password: 0 }])
  const sessions = await db.selectFrom('sessions').select(['id', 'user_id', 'flash']).execute()
  assert.deepEqual(sessions, [{ id: 'f'.repeat(64), user_id: ada.id, flash: null }], 'nobody is logged out')
  const key = await db.selectFrom('api_keys').select('created_by_user_id').executeTakeFirstOrThrow()
  assert.equal(key.created_by_user_id, ada.id, 'the key still knows who made it')
  // The same address in another account is allowed now; twice in one account is not.
  const copy = await createUser(db, {
    accountId: other.id,
    email: 'ada@example.com',
    password: PASSWORD,
    role: 'admin',
  })
  assert.ok(copy.id > gone.id, `a new id (${copy.id}) never reuses a deleted one (${gone.id})`)
  await assert.rejects(
    createUser(db, { accountId: account.id, email: 'ADA@example.com', password: PASSWORD, role: 'member' }),
    UserExistsError,
  )
  await assert.rejects(
    db
      .insertInto('users')
      .values({ ...user, email: 'ada@example.com' })
      .execute(),
    'the database itself refuses a second ada@example.com in Acme',
  )
  // Deleting the user still cascades to their sessions (the foreign keys point at the new table).
  await db.deleteFrom('users').where('id', '=', copy.id).execute()
  await db.deleteFrom('users').where('id', '=', ada.id).execute()
  assert.deepEqual(await db.selectFrom('sessions').select('id').execute(), [])
  assert.equal(await findSession(db, 'f'.repeat(43)), undefined)
})
