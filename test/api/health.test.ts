// Liveness and readiness endpoints.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { buildTestApp } from '../helper.js'

test('/healthz answers without touching the database; /readyz checks it accepts writes', async (t) => {
  const { app, database } = await buildTestApp(t)
  const health = await app.inject({ method: 'GET', url: '/healthz' })
  assert.equal(health.statusCode, 200)
  assert.deepEqual(health.json(), { status: 'ok' })
  const ready = await app.inject({ method: 'GET', url: '/readyz' })
  assert.equal(ready.statusCode, 200)
  assert.equal(ready.json().database, database.dialect)
  const probe = await database.db
    .selectFrom('settings')
    .selectAll()
    .where('name', '=', 'readiness_probe')
    .execute()
  if (database.dialect === 'postgres') {
    // PostgreSQL refuses a write at the insert, so the probe's row is rolled back: nothing is left.
    assert.deepEqual(probe, [])
  } else {
    // SQLite only meets a full or read-only disk at commit, so its probe commits one row, reused.
    await app.inject({ method: 'GET', url: '/readyz' })
    const again = await database.db
      .selectFrom('settings')
      .selectAll()
      .where('name', '=', 'readiness_probe')
      .execute()
    assert.equal(probe.length, 1)
    assert.equal(again.length, 1)
  }
})
