// The group-commit writer: many requests share a transaction, and one bad row fails alone.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { EventWriter, type PendingEvent, WriterClosedError } from '../../src/domain/event-writer.js'
import { buildTestApp } from '../helper.js'

function pending(accountId: number, apiKeyId: number, version: string): PendingEvent {
  return {
    accountId,
    apiKeyId,
    apiKeyName: 'ci',
    source: 'deploy',
    input: {
      service: 'api',
      environment: 'prod',
      version,
      status: 'Deployed',
      url: null,
      commit: null,
      description: null,
      deployer: null,
    },
    idempotencyKey: null,
    receivedAt: Date.now(),
  }
}

test('a row the database refuses fails alone; its batch neighbours are stored', async (t) => {
  const { database, tenant } = await buildTestApp(t)
  const writer = new EventWriter(database.db)
  const { id: accountId } = tenant.account
  const items = [
    pending(accountId, tenant.keyId, 'a'),
    pending(accountId, tenant.keyId, 'b'),
    // No such account: the foreign key refuses this row inside the shared transaction.
    pending(999_999, tenant.keyId, 'bad'),
    { ...pending(accountId, tenant.keyId, 'c'), idempotencyKey: 'k1' },
    pending(accountId, tenant.keyId, 'd'),
  ]
  const results = await Promise.allSettled(items.map((item) => writer.record(item)))
  await writer.close()
  assert.deepEqual(
    results.map((r) => r.status),
    ['fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'fulfilled'],
  )
  const stored = await database.db.selectFrom('events').select(['id', 'version']).orderBy('id').execute()
  assert.deepEqual(
    stored.map((r) => r.version),
    ['a', 'b', 'c', 'd'],
  )
  for (const [i, r] of results.entries()) {
    if (r.status === 'fulfilled') assert.equal(r.value.event.version, items[i]?.input.version)
  }
})

test('requests arriving together are committed in few transactions, ids in arrival order', async (t) => {
  const { database, tenant } = await buildTestApp(t)
  const grouped = new EventWriter(database.db)
  const outcomes = await Promise.all(
    Array.from({ length: 500 }, (_, i) => grouped.record(pending(tenant.account.id, tenant.keyId, `v${i}`))),
  )
  await grouped.close()
  const commits = grouped.stats.batches
  assert.equal(grouped.stats.events, 500)
  assert.ok(commits >= 1 && commits <= 5, `500 concurrent events took ${commits} transactions`)
  const ids = outcomes.map((o) => o.event.id)
  assert.deepEqual(
    ids,
    [...ids].sort((a, b) => a - b),
  )
  assert.deepEqual(
    outcomes.map((o) => o.event.version),
    outcomes.map((_, i) => `v${i}`),
  )
})

test('after close, new events are refused and queued ones were answered', async (t) => {
  const { database, tenant } = await buildTestApp(t)
  const writer = new EventWriter(database.db)
  const queued = writer.record(pending(tenant.account.id, tenant.keyId, 'last'))
  await writer.close()
  assert.equal((await queued).event.version, 'last')
  await assert.rejects(writer.record(pending(tenant.account.id, tenant.keyId, 'late')), WriterClosedError)
})
