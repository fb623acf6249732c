// A key revoked through the product (the Settings page, `shiplog keys revoke`) is refused at once by
// the instance that revoked it and by another instance sharing the database, not only after that
// instance's key cache expires. Nothing here announces a revocation itself: if Settings or the CLI
// stopped doing it, these tests would fail on PostgreSQL.
import assert from 'node:assert/strict'
import { type TestContext, test } from 'node:test'
import { buildTestApp, freshDatabaseUrl, type TestApp, testDialect } from '../helper.js'
import { processEnv, runCli } from '../support/processes.js'
import { createUserIn, login } from '../support/ui.js'

const EVENT = { service: 'api', environment: 'prod', version: '1', status: 'Deployed' }
// Long enough that only a revocation notice, not the cache's expiry, can explain a prompt refusal.
const LONG_CACHE = { SHIPLOG_KEY_CACHE_SECONDS: '120' }

function send(instance: TestApp, key: string) {
  return instance.app.inject({
    method: 'POST',
    url: '/deploy',
    headers: { 'x-api-key': key },
    payload: EVENT,
  })
}

/**
 * Waits (bounded) until the instance refuses the key; returns how long that took. It asks with an
 * empty body, which a valid key gets a 422 for and nothing stored, so that a notice still on its way
 * between instances cannot make the waiting itself record an event; then a whole event must be
 * refused too.
 */
async function refusedWithin(instance: TestApp, key: string, ms: number): Promise<number> {
  const started = Date.now()
  let status = 0
  while (Date.now() - started < ms) {
    const probe = await instance.app.inject({
      method: 'POST',
      url: '/deploy',
      headers: { 'x-api-key': key },
      payload: {},
    })
    status = probe.statusCode
    if (status === 401) {
      const took = Date.now() - started
      assert.equal((await send(instance, key)).statusCode, 401, 'a whole event with the revoked key')
      return took
    }
    assert.equal(status, 422, probe.payload)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  assert.fail(`the revoked key was still accepted (${status}) ${ms} ms after the revocation`)
}

/**
 * Two instances on one database, both holding the tenant's key in their caches. On SQLite only one
 * process may cache (there is no channel between processes), so the second one runs without.
 */
async function twoInstances(t: TestContext) {
  const databaseUrl = await freshDatabaseUrl(t)
  const one = await buildTestApp(t, { databaseUrl, env: LONG_CACHE })
  const two = await buildTestApp(t, { databaseUrl, env: testDialect === 'postgres' ? LONG_CACHE : {} })
  const { key, account, keyId } = one.tenant
  assert.equal((await send(one, key)).statusCode, 201)
  assert.equal((await send(two, key)).statusCode, 201)
  return { databaseUrl, one, two, key, account, keyId }
}

test('a key revoked in Settings is refused at once by this instance and by another one with a long key cache', async (t) => {
  const { one, two, key, account, keyId } = await twoInstances(t)
  await createUserIn(one.database, account.id, 'ada@example.com')
  const admin = await login(one.app, 'ada@example.com')
  const revoked = await admin.submit('/settings/', `/settings/keys/${keyId}/revoke`, {})
  assert.equal(revoked.statusCode, 303, revoked.payload)
  assert.equal((await send(one, key)).statusCode, 401, 'the instance that revoked it forgot it at once')
  await refusedWithin(two, key, 3000)
  assert.equal(await one.eventCount(), 2, 'nothing was recorded with the revoked key')
})

test('a key revoked with `shiplog keys revoke` is refused at once by a running instance with a long key cache', async (t) => {
  const { databaseUrl, two, key, keyId } = await twoInstances(t)
  const cli = await runCli(t, ['keys', 'revoke', '--account', 'Acme', String(keyId)], {
    env: processEnv(databaseUrl),
  })
  assert.equal(cli.code, 0, cli.stderr)
  assert.match(cli.stderr, new RegExp(`revoked key ${keyId}\\b`))
  await refusedWithin(two, key, 3000)
  assert.equal(await two.eventCount(), 2, 'nothing was recorded with the revoked key')
})
