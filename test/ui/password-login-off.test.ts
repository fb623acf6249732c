// Turning password login off (Settings or `shiplog accounts password-login`) ends every session a
// password opened in the account, the acting admin's too; single sign-on sessions and other
// accounts stay, and nothing more can be done with the ended ones (no key made afterwards).
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { buildTestApp, databaseForServers } from '../helper.js'
import { processEnv, runCli } from '../support/processes.js'
import { ssoSignIn, ssoWorld } from '../support/sso.js'
import { assertRedirect, Browser, countRows, createUserIn, login } from '../support/ui.js'

test('turning password login off ends the password sessions of the account; single sign-on sessions and other accounts stay', async (t) => {
  const w = await ssoWorld(t)
  const { db } = w.ctx.database
  const acme = w.ctx.tenant.account.id
  // Another admin of the account, signed in with a password.
  await createUserIn(w.ctx.database, acme, 'ops@acme.example')
  const ops = await login(w.ctx.app, 'ops@acme.example')
  const opsToken = await ops.csrf('/settings/')
  const beta = await w.ctx.addTenant('Beta')
  await createUserIn(w.ctx.database, beta.account.id, 'bea@beta.example')
  const bea = await login(w.ctx.app, 'bea@beta.example')
  const admin = new Browser(w.ctx.app)
  const ssoMember = new Browser(w.ctx.app)
  const groups = { email_verified: true, groups: ['shiplog-admins'] }
  assertRedirect(
    await ssoSignIn(w, admin, 'owner-idp', { email: 'owner@acme.example', ...groups }),
    '/logs/',
    303,
  )
  assertRedirect(
    await ssoSignIn(w, ssoMember, 'member-idp', { email: 'member@acme.example', email_verified: true }),
    '/logs/',
    303,
  )
  // The admin turns it off from a password session of their own: it ends too.
  const ownerPassword = await login(w.ctx.app, 'owner@acme.example')
  const res = await ownerPassword.submit('/settings/', '/settings/sign-in', { password_login: 'off' })
  assertRedirect(res, '/login?bye=password-off', 303)
  assert.ok(!ownerPassword.jar.has('shiplog_session'), 'the cookie is cleared')
  assert.match((await ownerPassword.get('/login?bye=password-off')).payload, /Password login is now off/)

  // The other admin's password session is gone: no page, and no key made with it afterwards.
  assertRedirect(await ops.get('/settings/'), '/login', 303)
  const keysBefore = await countRows(w.ctx.database, 'api_keys')
  const made = await ops.post('/settings/keys', { _csrf: opsToken, name: 'after', scope: 'read' })
  assert.notEqual(made.statusCode, 200)
  assert.equal(await countRows(w.ctx.database, 'api_keys'), keysBefore, 'no key was created')
  // Single sign-on sessions of the account, and another account's password sessions, stay.
  assert.equal((await admin.get('/settings/')).statusCode, 200)
  assert.equal((await ssoMember.get('/logs/')).statusCode, 200)
  assert.equal((await bea.get('/settings/')).statusCode, 200)
  const left = await db
    .selectFrom('sessions')
    .innerJoin('users', 'users.id', 'sessions.user_id')
    .select(['users.email', 'sessions.id_token'])
    .orderBy('users.email')
    .execute()
  assert.deepEqual(
    left.map((r) => [r.email, r.id_token === null ? 'password' : 'sso']),
    [
      ['bea@beta.example', 'password'],
      ['member@acme.example', 'sso'],
      ['owner@acme.example', 'sso'],
    ],
  )
})

test('the operator turning password login off from the command line ends password sessions too', async (t) => {
  const { databaseUrl } = await databaseForServers(t)
  const ctx = await buildTestApp(t, { databaseUrl })
  const acme = await ctx.database.db
    .selectFrom('accounts')
    .select('id')
    .where('name', '=', 'Acme')
    .executeTakeFirstOrThrow()
  await createUserIn(ctx.database, acme.id, 'ada@acme.example')
  const ada = await login(ctx.app, 'ada@acme.example')
  const run = await runCli(t, ['accounts', 'password-login', '--account', 'Acme', 'off'], {
    env: processEnv(databaseUrl),
  })
  assert.equal(run.code, 0, run.stderr)
  assertRedirect(await ada.get('/settings/'), '/login', 303)
  assert.equal(await countRows(ctx.database, 'sessions'), 0)
})
