// The chain and an event's own times (issue 28.3): the v1 bytes of every event without times of its
// own are unchanged (old chains keep verifying), and occurred_at / commit_time are covered once an
// event has them.
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { test } from 'node:test'
import { sql } from 'kysely'
import { parseDatabaseUrl } from '../../src/config.js'
import { openDatabase } from '../../src/db/connect.js'
import { migrateToLatest } from '../../src/db/migrate.js'
import { canonicalBytes, rowDigest, streamSpec } from '../../src/domain/chain/canonical.js'
import { chainCaughtUp } from '../../src/domain/chain/chainer.js'
import { verifyChains } from '../../src/domain/chain/verify.js'
import { addTenant, freshDatabaseUrl } from '../helper.js'

const row = {
  id: 12,
  account_id: 1,
  service: 'api',
  environment: 'prod',
  version: '1.0',
  status: 'Deployed',
  url: null,
  commit_sha: 'abc',
  description: null,
  deployer: 'ada',
  source: 'deploy',
  api_key_id: 3,
  api_key_name: 'ci',
  received_at: 1_700_000_000_000,
}

test('an event without times of its own has exactly its v1 bytes; one with them adds occurred_at and commit_time', () => {
  const spec = streamSpec('events')
  // The v1 columns alone (the list itself is pinned in event-columns.test.ts; the digest below pins
  // the bytes).
  const v1 = { ...spec, tails: [] }
  const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex')
  const plain = { ...row, occurred_at: row.received_at, commit_time: null }
  assert.equal(rowDigest(spec, plain), sha(canonicalBytes(v1, row)))
  // Pinned: the digest the code before event times gave this row (commit 062bfde).
  assert.equal(rowDigest(spec, plain), 'a070e1e5f9d5d6da54e5ec10733d601dd136a465fe7304e7b4d31d6677f6d3f7')
  const backfilled = { ...row, occurred_at: row.received_at - 86_400_000, commit_time: null }
  assert.notEqual(rowDigest(spec, backfilled), rowDigest(spec, plain))
  assert.equal(
    rowDigest(spec, backfilled),
    sha(canonicalBytes({ ...v1, columns: [...spec.columns, 'occurred_at', 'commit_time'] }, backfilled)),
  )
  const committed = { ...plain, commit_time: row.received_at - 3_600_000 }
  assert.notEqual(rowDigest(spec, committed), rowDigest(spec, plain))
})

test('verify passes over events with and without own times, and names one whose occurred_at was rewritten', async (t) => {
  const url = await freshDatabaseUrl(t)
  const database = openDatabase(parseDatabaseUrl(url))
  t.after(() => database.close())
  await migrateToLatest(database)
  const { account } = await addTenant(database, 'Acme')
  const now = Date.now()
  const ids: number[] = []
  for (const [occurred, commit] of [
    [now, null],
    [now - 5 * 86_400_000, null],
    [now, now - 3_600_000],
  ] as const) {
    const inserted = await database.db
      .insertInto('events')
      .values({
        account_id: account.id,
        service: 'api',
        environment: 'prod',
        version: '1.0',
        status: 'Deployed',
        source: 'deploy',
        received_at: now,
        occurred_at: occurred,
        commit_time: commit,
      })
      .returning('id')
      .executeTakeFirstOrThrow()
    ids.push(Number(inserted.id))
  }
  await chainCaughtUp(database, { graceMs: 0, settleMs: 0 })
  const clean = await verifyChains(database)
  assert.deepEqual(
    clean.problems.map((p) => p.message),
    [],
  )
  // Someone moves the backfilled event's time to hide it from retention or metrics.
  await sql`update events set occurred_at = ${now} where id = ${ids[1]}`.execute(database.db)
  const tampered = await verifyChains(database)
  assert.equal(tampered.ok, false)
  assert.match(tampered.problems[0]?.message ?? '', new RegExp(`event ${ids[1]}\\b`))
})

test('guardrail findings are a second tail: a flagged event writes both tails, an unflagged one neither', () => {
  const spec = streamSpec('events')
  const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex')
  const plain = {
    ...row,
    occurred_at: row.received_at,
    commit_time: null,
    guardrails: null,
    override_reason: null,
  }
  // Pinned above: the v1 digest is unchanged by the new (null) columns.
  assert.equal(rowDigest(spec, plain), 'a070e1e5f9d5d6da54e5ec10733d601dd136a465fe7304e7b4d31d6677f6d3f7')
  const ownTimes = { ...plain, occurred_at: row.received_at - 60_000 }
  const tailOne = [...spec.columns, 'occurred_at', 'commit_time']
  assert.equal(
    rowDigest(spec, ownTimes),
    sha(canonicalBytes({ ...spec, tails: [], columns: tailOne }, ownTimes)),
  )
  // A flagged event without own times still writes tail one (each column has one place).
  const flagged = { ...plain, guardrails: 'freeze' }
  const both = [...tailOne, 'guardrails', 'override_reason']
  assert.equal(rowDigest(spec, flagged), sha(canonicalBytes({ ...spec, tails: [], columns: both }, flagged)))
  assert.notEqual(rowDigest(spec, flagged), rowDigest(spec, plain))
  const overridden = { ...plain, override_reason: 'hotfix' }
  assert.equal(
    rowDigest(spec, overridden),
    sha(canonicalBytes({ ...spec, tails: [], columns: both }, overridden)),
  )
  assert.notEqual(rowDigest(spec, overridden), rowDigest(spec, flagged))
})

test('verify names an event whose guardrail findings were erased', async (t) => {
  const url = await freshDatabaseUrl(t)
  const database = openDatabase(parseDatabaseUrl(url))
  t.after(() => database.close())
  await migrateToLatest(database)
  const { account } = await addTenant(database, 'Acme')
  const now = Date.now()
  const inserted = await database.db
    .insertInto('events')
    .values({
      account_id: account.id,
      service: 'api',
      environment: 'prod',
      version: '1.0',
      status: 'Deployed',
      source: 'deploy',
      received_at: now,
      occurred_at: now,
      commit_time: null,
      guardrails: 'lock,freeze',
      override_reason: 'hotfix for INC-7',
    })
    .returning('id')
    .executeTakeFirstOrThrow()
  await chainCaughtUp(database, { graceMs: 0, settleMs: 0 })
  assert.deepEqual(
    (await verifyChains(database)).problems.map((p) => p.message),
    [],
  )
  // Someone hides that the deploy broke a freeze.
  await sql`update events set guardrails = null, override_reason = null where id = ${inserted.id}`.execute(
    database.db,
  )
  const tampered = await verifyChains(database)
  assert.equal(tampered.ok, false)
  assert.match(tampered.problems[0]?.message ?? '', new RegExp(`event ${inserted.id}\\b`))
})
