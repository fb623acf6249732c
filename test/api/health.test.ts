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
  // The probe's write is rolled back: nothing is left behind.
  const probe = await database.db
    .selectFrom('settings')
    .selectAll()
    .where('name', '=', 'readiness_probe')
    .execute()
  assert.deepEqual(probe, [])
})
