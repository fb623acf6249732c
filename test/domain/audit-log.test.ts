// The audit log's storage: entries are appended with the change they record, and nothing edits
// or deletes them, whatever code tries (the table refuses it on both databases).
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { cliActor, recordAudit } from '../../src/domain/audit/log.js'
import { buildTestApp } from '../helper.js'

test('an entry is written with its change and rolled back with it', async (t) => {
  const { database, tenant } = await buildTestApp(t)
  const db = database.db
  await recordAudit(db, {
    accountId: tenant.account.id,
    actor: cliActor(),
    address: null,
    action: 'settings.changed',
    target: 'stall minutes',
    details: { from: 60, to: 30 },
  })
  await assert.rejects(
    db.transaction().execute(async (trx) => {
      await recordAudit(trx, {
        accountId: tenant.account.id,
        actor: { kind: 'user', id: 1, name: 'ada@example.com' },
        address: '203.0.113.9',
        action: 'key.created',
        target: 'deploy',
      })
      throw new Error('the change failed')
    }),
    /the change failed/,
  )
  const rows = await db.selectFrom('audit_entries').selectAll().execute()
  assert.equal(rows.length, 1)
  assert.equal(rows[0]?.action, 'settings.changed')
  assert.equal(rows[0]?.actor_kind, 'cli')
  assert.deepEqual(JSON.parse(rows[0]?.details ?? ''), { from: 60, to: 30 })
})

test('entries cannot be edited or deleted, and details refuse secret-looking fields', async (t) => {
  const { database, tenant } = await buildTestApp(t)
  const db = database.db
  await recordAudit(db, {
    accountId: tenant.account.id,
    actor: { kind: 'anonymous', id: null, name: 'nobody@example.com' },
    address: '198.51.100.4',
    action: 'login.failed',
  })
  await assert.rejects(
    db.updateTable('audit_entries').set({ actor: 'someone else' }).execute(),
    /append-only/,
  )
  await assert.rejects(db.deleteFrom('audit_entries').execute(), /append-only/)
  assert.equal(
    (await db.selectFrom('audit_entries').select('actor').executeTakeFirstOrThrow()).actor,
    'nobody@example.com',
  )
  await assert.rejects(
    recordAudit(db, {
      accountId: tenant.account.id,
      actor: cliActor(),
      address: null,
      action: 'key.created',
      details: { password: 'hunter2' },
    }),
    /must not hold a secret/,
  )
})
