// A user of account B can neither see nor change anything of account A: events, exports, keys, users.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { buildTestApp } from '../helper.js'
import {
  assertRedirect,
  Browser,
  createUserIn,
  deploy,
  insertEvents,
  login,
  sharedFixture,
  shownVersions,
  userRow,
  userSession,
} from '../support/ui.js'

// Built once for the file: every test here only reads, or tries changes that must fail.
const twoAccounts = sharedFixture(async (cleanup) => {
  const ctx = await buildTestApp(cleanup)
  const a = ctx.tenant
  const b = await ctx.addTenant('Beta Corp', 'beta-ci')
  const aSecondKey = await ctx.addTenant('Acme', 'acme-secret-pipeline')
  const aAdmin = await createUserIn(ctx.database, a.account.id, 'alice@acme.example')
  const aMember = await createUserIn(ctx.database, a.account.id, 'arnold@acme.example', { role: 'member' })
  const aIds = await insertEvents(
    ctx.database,
    a.account.id,
    Array.from({ length: 30 }, (_, i) => ({
      service: i % 2 ? 'shared-name' : 'acme-only',
      version: `acme-${i}`,
      api_key_name: 'acme-secret-pipeline',
    })),
  )
  // Same service name in both accounts, so filters cannot tell them apart by name alone.
  const bIds = await insertEvents(
    ctx.database,
    b.account.id,
    Array.from({ length: 5 }, (_, i) => ({
      service: 'shared-name',
      version: `beta-${i}`,
      api_key_name: 'beta-ci',
    })),
  )
  const { browser: bAdmin } = await userSession(ctx, b.account.id, 'bob@beta.example')
  return { ctx, a, b, aSecondKey, aAdmin, aMember, aIds, bIds, bAdmin }
})

test("B's log, filters and pages show none of A's events", async () => {
  const { aIds, bAdmin } = await twoAccounts()
  const bVersions = ['beta-4', 'beta-3', 'beta-2', 'beta-1', 'beta-0']
  const urls = [
    '/logs/',
    '/logs/?service=shared-name',
    '/logs/?service=acme-only',
    '/logs/?version=acme',
    '/logs/?status=Deployed&environment=prod',
    `/logs/?before=${Math.max(...aIds) + 1}`,
    `/logs/?after=${Math.min(...aIds) - 1}`,
    '/logs/?after=0',
    '/logs/?limit=500',
  ]
  for (const url of urls) {
    const res = await bAdmin.get(url)
    assert.equal(res.statusCode, 200, url)
    const shown = shownVersions(res.payload)
    assert.ok(
      shown.every((v) => v.startsWith('beta-')),
      `${url} shows only B's events: ${shown}`,
    )
    // (The filter form echoes what was typed, so look for A's data, not for the query text.)
    assert.doesNotMatch(res.payload, /acme-\d|acme-secret-pipeline|alice@|arnold@|Acme/, url)
    assert.doesNotMatch(res.payload, /<option value="acme-only">/, `${url}: suggestions come from B only`)
  }
  assert.deepEqual(shownVersions((await bAdmin.get('/logs/')).payload), bVersions)
})

test("B's CSV and JSON exports contain only B's events, with and without filters", async () => {
  const { bIds, bAdmin } = await twoAccounts()
  const expected = [...bIds].reverse()
  for (const query of ['', '?service=shared-name', '?service=acme-only', '?version=acme']) {
    const csv = await bAdmin.get(`/logs/export.csv${query}`)
    assert.equal(csv.statusCode, 200)
    assert.doesNotMatch(csv.payload, /acme/, `CSV ${query}`)
    const json = await bAdmin.get(`/logs/export.json${query}`)
    const ids = (json.json() as { id: number }[]).map((e) => e.id)
    assert.deepEqual(ids, query.includes('acme') ? [] : expected, `JSON ${query}`)
  }
})

test("B cannot revoke A's key: 404, and the key still records events", async () => {
  const { ctx, a, aSecondKey, bAdmin } = await twoAccounts()
  for (const id of [a.keyId, aSecondKey.keyId]) {
    const res = await bAdmin.submit('/settings/', `/settings/keys/${id}/revoke`, {})
    assert.equal(res.statusCode, 404, `revoke key ${id}`)
    const row = await ctx.database.db
      .selectFrom('api_keys')
      .select('revoked_at')
      .where('id', '=', id)
      .executeTakeFirstOrThrow()
    assert.equal(row.revoked_at, null)
  }
  const still = await deploy(ctx.app, a.key, {
    service: 'api',
    environment: 'prod',
    version: '9',
    status: 'Deployed',
  })
  assert.equal(still.status, 201)
  const second = await deploy(ctx.app, aSecondKey.key, {
    service: 'api',
    environment: 'prod',
    version: '10',
    status: 'Deployed',
  })
  assert.equal(second.status, 201)
  assert.equal(second.body.api_key_name, 'acme-secret-pipeline')
})

test("B cannot change the role of, or remove, A's users: 404 and nothing changes", async () => {
  const { ctx, aAdmin, aMember, bAdmin } = await twoAccounts()
  const aliceBrowser = await login(ctx.app, 'alice@acme.example')
  const attempts: [string, Record<string, string>][] = [
    [`/settings/users/${aMember.id}/role`, { role: 'admin' }],
    [`/settings/users/${aAdmin.id}/role`, { role: 'member' }],
    [`/settings/users/${aMember.id}/remove`, {}],
    [`/settings/users/${aAdmin.id}/remove`, {}],
  ]
  for (const [url, form] of attempts) {
    const res = await bAdmin.submit('/settings/', url, form)
    assert.equal(res.statusCode, 404, `POST ${url}`)
    assert.doesNotMatch(res.payload, /alice@|arnold@/)
  }
  assert.deepEqual(await userRow(ctx.database, aAdmin.id), aAdmin)
  assert.deepEqual(await userRow(ctx.database, aMember.id), aMember)
  assert.equal((await aliceBrowser.get('/logs/')).statusCode, 200, "A's admin is still logged in")
})

test("A's key names and users never appear on B's /settings/, and B's never on A's", async () => {
  const { ctx, bAdmin } = await twoAccounts()
  const bPage = await bAdmin.get('/settings/')
  assert.equal(bPage.statusCode, 200)
  assert.match(bPage.payload, /beta-ci/)
  assert.match(bPage.payload, /bob@beta\.example/)
  assert.doesNotMatch(bPage.payload, /acme-secret-pipeline|alice@acme|arnold@acme|Acme/)
  assert.doesNotMatch(bPage.payload, /<td>ci<\/td>/, "A's key named ci is not listed")

  const aliceBrowser = await login(ctx.app, 'alice@acme.example')
  const aPage = await aliceBrowser.get('/settings/')
  assert.match(aPage.payload, /acme-secret-pipeline/)
  assert.match(aPage.payload, /arnold@acme\.example/)
  assert.doesNotMatch(aPage.payload, /beta-ci|bob@beta|Beta Corp/)
})

test('one address in two accounts: login opens the account whose password it is, asks which only when both match, and never names an account to a wrong password (issue 10.6)', async (t) => {
  const ctx = await buildTestApp(t)
  const acme = ctx.tenant
  const beta = await ctx.addTenant('Beta Corp', 'beta-ci')
  const gamma = await ctx.addTenant('Gamma Ltd', 'gamma-ci')
  await createUserIn(ctx.database, acme.account.id, 'sam@example.com', { password: 'acme password here' })
  await createUserIn(ctx.database, beta.account.id, 'sam@example.com', { password: 'shared password here' })
  await createUserIn(ctx.database, gamma.account.id, 'sam@example.com', { password: 'shared password here' })
  await insertEvents(ctx.database, beta.account.id, [{ service: 'beta-service', version: 'beta-1' }])

  const attempt = async (password: string, account?: number) => {
    const browser = new Browser(ctx.app)
    const form: Record<string, string> = {
      _csrf: await browser.csrf('/login'),
      email: 'Sam@Example.com',
      password,
    }
    if (account !== undefined) form.account = String(account)
    return { browser, res: await browser.post('/login', form) }
  }

  // Only Acme's password: straight into Acme, no question asked.
  const one = await attempt('acme password here')
  assertRedirect(one.res, '/logs/', 303)
  assert.match((await one.browser.get('/settings/')).payload, /<td>ci<\/td>/)

  // A wrong password: the same refusal as for an unknown address, naming no account.
  const wrong = await attempt("not anybody's password")
  assert.equal(wrong.res.statusCode, 401)
  for (const name of ['Acme', 'Beta Corp', 'Gamma Ltd']) assert.ok(!wrong.res.payload.includes(name), name)

  // The shared password opens two accounts: the page asks which, naming only those two.
  const both = await attempt('shared password here')
  assert.equal(both.res.statusCode, 200)
  assert.equal(both.browser.jar.has('shiplog_session'), false, 'not logged in yet')
  assert.match(both.res.payload, /several accounts/)
  assert.match(both.res.payload, new RegExp(`name="account" value="${beta.account.id}"`))
  assert.match(both.res.payload, new RegExp(`name="account" value="${gamma.account.id}"`))
  assert.ok(!both.res.payload.includes('>Acme<'), 'an account the password does not open is not named')

  const chosen = await attempt('shared password here', beta.account.id)
  assertRedirect(chosen.res, '/logs/', 303)
  const log = await chosen.browser.get('/logs/')
  assert.deepEqual(shownVersions(log.payload), ['beta-1'])
  assert.match((await chosen.browser.get('/settings/')).payload, /<td>beta-ci<\/td>/)

  // Choosing an account the password does not open, or one the address is not in: refused alike.
  assert.equal((await attempt('shared password here', acme.account.id)).res.statusCode, 401)
  assert.equal((await attempt('acme password here', beta.account.id)).res.statusCode, 401)
  assert.equal((await attempt('shared password here', 999999)).res.statusCode, 401)
})

test('adding an address that exists in another account succeeds as a separate user; twice in one account is 409 (issue 10.6)', async (t) => {
  const ctx = await buildTestApp(t)
  const beta = await ctx.addTenant('Beta Corp', 'beta-ci')
  const victim = await createUserIn(ctx.database, ctx.tenant.account.id, 'victim@acme.example')
  const { browser: bAdmin } = await userSession(ctx, beta.account.id, 'bob@beta.example')
  const token = await bAdmin.csrf('/settings/')
  const first = await bAdmin.post('/settings/users', {
    _csrf: token,
    email: 'Victim@Acme.example',
    role: 'member',
  })
  assertRedirect(first, '/settings/', 303)
  const again = await bAdmin.post('/settings/users', {
    _csrf: await bAdmin.csrf('/settings/'),
    email: 'victim@acme.example',
    role: 'member',
  })
  assert.equal(again.statusCode, 409)
  assert.match(again.payload, /This account already has a user with that email/)
  assert.deepEqual(await userRow(ctx.database, victim.id), victim, "A's user is untouched")
  // And A can still add the address it "lost" nothing to: A's own copy logs in with A's password.
  const acmeLogin = await login(ctx.app, 'victim@acme.example')
  assert.match((await acmeLogin.get('/settings/')).payload, /<td>ci<\/td>/)
})
