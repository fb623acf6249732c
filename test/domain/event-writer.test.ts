// The group-commit writer: many requests share a transaction, and one bad row fails alone.
import assert from 'node:assert/strict'
import { type TestContext, test } from 'node:test'
import { eventStoreFor } from '../../src/domain/events/store.js'
import { EventWriter, type PendingEvent, WriterClosedError } from '../../src/domain/events/writer.js'
import { buildTestApp, testDialect } from '../helper.js'

/**
 * Where the writer stores: the suite's database (a SQLite file, whose write connection fsyncs after
 * each commit, or PostgreSQL), and on SQLite also a private in-memory database, which a
 * `sqlite::memory:` configuration gets: one connection does everything there.
 */
const TARGETS =
  testDialect === 'sqlite' ? (['file', 'in-memory (one connection)'] as const) : (['postgres'] as const)

async function setUp(t: TestContext, target: string) {
  const ctx = await buildTestApp(
    t,
    target === 'in-memory (one connection)' ? { databaseUrl: 'sqlite::memory:' } : {},
  )
  return { ...ctx, store: eventStoreFor(ctx.database) }
}

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
      occurredAt: null,
      commitTime: null,
    },
    idempotencyKey: null,
    receivedAt: Date.now(),
  }
}

for (const target of TARGETS) {
  test(`${target}: a row the database refuses fails alone, with its code; its batch neighbours are stored`, async (t) => {
    const { database, tenant, store } = await setUp(t, target)
    const writer = new EventWriter(store)
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
    const refused = results[2]
    assert.ok(refused?.status === 'rejected')
    // The code is what tells a refused row (400-class) from an outage (503).
    assert.match(String((refused.reason as { code?: string }).code), /^(SQLITE_CONSTRAINT|23503)/)
    const stored = await database.db.selectFrom('events').select(['id', 'version']).orderBy('id').execute()
    assert.deepEqual(
      stored.map((r) => r.version),
      ['a', 'b', 'c', 'd'],
    )
    for (const [i, r] of results.entries()) {
      if (r.status === 'fulfilled') assert.equal(r.value.event.version, items[i]?.input.version)
    }
  })

  test(`${target}: each answer is the row as stored; a repeated Idempotency-Key gets the first one`, async (t) => {
    const { database, tenant, store } = await setUp(t, target)
    const writer = new EventWriter(store)
    const full: PendingEvent = {
      ...pending(tenant.account.id, tenant.keyId, '2.0.0'),
      input: {
        service: 'svc ü',
        environment: 'prod',
        version: '2.0.0',
        status: 'Failed',
        url: 'https://ci.example/1',
        commit: 'abc123',
        description: 'first "try"',
        deployer: 'ada',
        occurredAt: null,
        commitTime: null,
      },
      idempotencyKey: 'same',
    }
    const first = await writer.record(full)
    // A true retry: same values, later, through another form (the form is not part of the event).
    const again = await writer.record({ ...full, source: 'put-post', receivedAt: Date.now() + 5 })
    const reused = await writer.record({
      ...full,
      input: { ...full.input, version: '9.9.9' },
      receivedAt: Date.now() + 10,
    })
    const plain = await writer.record(pending(tenant.account.id, tenant.keyId, 'plain'))
    await writer.close()
    assert.equal(first.kind, 'stored')
    assert.equal(again.kind, 'replayed')
    assert.equal(reused.kind, 'key-reused')
    assert.equal(plain.kind, 'stored')
    const rows = await database.db.selectFrom('events').selectAll().orderBy('id').execute()
    assert.equal(rows.length, 2)
    assert.deepEqual(first.event, rows[0])
    assert.deepEqual(again.event, rows[0])
    assert.deepEqual(reused.event, rows[0])
    assert.deepEqual(plain.event, rows[1])
  })

  test(`${target}: one Idempotency-Key several times in one batch: one event, replays, and refusals for other values`, async (t) => {
    const { database, tenant, store } = await setUp(t, target)
    const writer = new EventWriter(store)
    const keyed = (version: string, description: string | null = null): PendingEvent => ({
      ...pending(tenant.account.id, tenant.keyId, version),
      input: { ...pending(tenant.account.id, tenant.keyId, version).input, description },
      idempotencyKey: 'batch-key',
    })
    // Recorded in the same turn of the event loop, so the writer commits them as one batch.
    const outcomes = await Promise.all([
      writer.record(pending(tenant.account.id, tenant.keyId, 'before')),
      writer.record(keyed('1.0.0')),
      writer.record(keyed('1.0.0')),
      writer.record(keyed('1.0.1')),
      writer.record(keyed('1.0.0', 'a note')),
      writer.record(keyed('1.0.0')),
      writer.record(pending(tenant.account.id, tenant.keyId, 'after')),
    ])
    await writer.close()
    assert.equal(writer.stats.batches, 1, 'the seven requests were one batch')
    assert.deepEqual(
      outcomes.map((o) => o.kind),
      ['stored', 'stored', 'replayed', 'key-reused', 'key-reused', 'replayed', 'stored'],
    )
    const rows = await database.db.selectFrom('events').selectAll().orderBy('id').execute()
    assert.deepEqual(
      rows.map((r) => [r.version, r.description]),
      [
        ['before', null],
        ['1.0.0', null],
        ['after', null],
      ],
    )
    for (const o of outcomes.slice(1, 6)) assert.deepEqual(o.event, rows[1])
  })

  test(`${target}: requests arriving together are committed in few transactions, ids in arrival order`, async (t) => {
    const { tenant, store } = await setUp(t, target)
    const grouped = new EventWriter(store)
    const outcomes = await Promise.all(
      Array.from({ length: 500 }, (_, i) =>
        grouped.record(pending(tenant.account.id, tenant.keyId, `v${i}`)),
      ),
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

  test(`${target}: after close, new events are refused and queued ones were answered`, async (t) => {
    const { tenant, store } = await setUp(t, target)
    const writer = new EventWriter(store)
    const queued = writer.record(pending(tenant.account.id, tenant.keyId, 'last'))
    await writer.close()
    assert.equal((await queued).event.version, 'last')
    await assert.rejects(writer.record(pending(tenant.account.id, tenant.keyId, 'late')), WriterClosedError)
  })
}
