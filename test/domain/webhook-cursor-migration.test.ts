// Migration 0012: existing webhooks get a cursor where derivation (which queued their deliveries
// until then) stands, short of a gap it still waits on, and never below their creation point: nothing
// is replayed and nothing is lost. Both databases.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { parseDatabaseUrl } from '../../src/config.js'
import { openDatabase } from '../../src/db/connect.js'
import { migrateTo, migrateToLatest } from '../../src/db/migrate.js'
import { ensureAccount } from '../../src/domain/accounts.js'
import { freshDatabaseUrl } from '../helper.js'

test('existing webhooks start at derivation’s progress, short of its first gap, never before their creation', async (t) => {
  const database = openDatabase(parseDatabaseUrl(await freshDatabaseUrl(t)))
  t.after(() => database.close())
  await migrateTo(database, '2026_11_26_0011_oidc')
  const { db } = database
  const account = await ensureAccount(db, 'Acme')
  const hook = (sinceEventId: number) =>
    db
      .insertInto('webhooks')
      .values({
        account_id: account.id,
        url: 'https://hooks.example.com/x',
        format: 'json',
        statuses: '["Deployed"]',
        outcomes: '[]',
        environments: '[]',
        services: '[]',
        secret: 'sealed',
        grafana_token: null,
        since_event_id: sinceEventId,
        disabled_at: null,
        failing_since: null,
        created_by: 'test',
        created_at: Date.now(),
      })
      .returning('id')
      .executeTakeFirstOrThrow()
  const early = await hook(3)
  const late = await hook(12)
  const cursors = async () =>
    (await db.selectFrom('webhooks').select(['id', 'queued_through']).orderBy('id').execute()).map((w) => [
      Number(w.id),
      Number(w.queued_through),
    ])

  // Derived through 10, id 6 still missing (a transaction that has not committed yet).
  await db.updateTable('deployments_progress').set({ through: 10 }).where('id', '=', 1).execute()
  await db.insertInto('deployment_gaps').values({ from_id: 6, to_id: 6, seen_at: Date.now() }).execute()
  await migrateToLatest(database)
  assert.deepEqual(await cursors(), [
    [Number(early.id), 5],
    [Number(late.id), 12],
  ])
})

test('without a gap the cursor is derivation’s progress', async (t) => {
  const database = openDatabase(parseDatabaseUrl(await freshDatabaseUrl(t)))
  t.after(() => database.close())
  await migrateTo(database, '2026_11_26_0011_oidc')
  await database.db.updateTable('deployments_progress').set({ through: 42 }).where('id', '=', 1).execute()
  const account = await ensureAccount(database.db, 'Acme')
  await database.db
    .insertInto('webhooks')
    .values({
      account_id: account.id,
      url: 'https://hooks.example.com/x',
      format: 'json',
      statuses: '["Deployed"]',
      outcomes: '[]',
      environments: '[]',
      services: '[]',
      secret: 'sealed',
      grafana_token: null,
      since_event_id: 0,
      disabled_at: null,
      failing_since: null,
      created_by: 'test',
      created_at: Date.now(),
    })
    .execute()
  await migrateToLatest(database)
  const row = await database.db.selectFrom('webhooks').select('queued_through').executeTakeFirstOrThrow()
  assert.equal(Number(row.queued_through), 42)
})
