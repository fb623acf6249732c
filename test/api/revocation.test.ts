// A key revoked on one instance is refused by another instance sharing the database at once, not
// only after the other instance's key cache expires.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { announceRevocation } from '../../src/db/revocations.js'
import { revokeApiKey } from '../../src/domain/keys.js'
import { buildTestApp, freshDatabaseUrl, testDialect } from '../helper.js'

test('revocation reaches other instances well within their key cache lifetime', async (t) => {
  const databaseUrl = await freshDatabaseUrl(t)
  const one = await buildTestApp(t, { databaseUrl })
  // A second instance on the same database. On PostgreSQL it caches verified keys for a whole
  // minute, so only the announcement can make it refuse the key in time; SQLite caches nothing.
  const env: Record<string, string> = testDialect === 'postgres' ? { SHIPLOG_KEY_CACHE_SECONDS: '60' } : {}
  const two = await buildTestApp(t, { databaseUrl, env })
  const send = () =>
    two.app.inject({
      method: 'POST',
      url: '/deploy',
      headers: { 'x-api-key': one.tenant.key },
      payload: { service: 'api', environment: 'prod', version: '1', status: 'Deployed' },
    })
  // Instance two verifies the key and keeps it in its cache.
  assert.equal((await send()).statusCode, 201)

  const row = await revokeApiKey(one.database.db, one.tenant.account.id, String(one.tenant.keyId))
  assert.ok(row)
  await announceRevocation(one.database, row.digest)
  const revokedAt = Date.now()
  let status = 0
  while (Date.now() - revokedAt < 3000) {
    status = (await send()).statusCode
    if (status === 401) break
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  assert.equal(status, 401, 'the revoked key is refused by the other instance')
  assert.ok(Date.now() - revokedAt < 3000)
})
