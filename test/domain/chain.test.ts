// The tamper-evidence chain (src/domain/chain/): links are computed in id order and verify names the
// first changed, deleted or inserted row of events and audit entries; rows pruned by retention are
// not missing; a row whose id commits late (PostgreSQL) is waited for, not reported; a head kept
// from before catches a rewrite that recomputed every link after it. Both databases.
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { test } from 'node:test'
import { sql } from 'kysely'
import { parseDatabaseUrl } from '../../src/config.js'
import { type Database, openDatabase } from '../../src/db/connect.js'
import { migrateToLatest } from '../../src/db/migrate.js'
import { recordAudit, SYSTEM_ACTOR } from '../../src/domain/audit/log.js'
import {
  canonicalBytes,
  genesisLink,
  linkedValues,
  linkFrom,
  rowDigest,
  streamSpec,
} from '../../src/domain/chain/canonical.js'
import {
  type ChainOptions,
  chainCaughtUp,
  chainLag,
  chainOnce,
  chainTask,
} from '../../src/domain/chain/chainer.js'
import { currentHead, parseHead, verifyChains } from '../../src/domain/chain/verify.js'
import { type BurstOptions, BurstPolicy } from '../../src/domain/ingest-burst.js'
import { standingAside } from '../../src/domain/tasks.js'
import { addTenant, buildTestApp, type Cleanup, freshDatabaseUrl, testDialect } from '../helper.js'
import { deploy, userSession } from '../support/ui.js'

const DAY_MS = 86_400_000

interface Setup {
  database: Database
  url: string
  accountId: number
}

async function setUp(t: Cleanup): Promise<Setup> {
  const url = await freshDatabaseUrl(t)
  const database = openDatabase(parseDatabaseUrl(url))
  t.after(() => database.close())
  await migrateToLatest(database)
  const { account } = await addTenant(database, 'Acme')
  return { database, url, accountId: account.id }
}

async function addEvent(
  database: Database,
  accountId: number,
  version: string,
  receivedAt = Date.now(),
): Promise<number> {
  const row = await database.db
    .insertInto('events')
    .values({
      account_id: accountId,
      service: 'api',
      environment: 'prod',
      version,
      status: 'Deployed',
      url: null,
      commit_sha: version === 'empty' ? '' : null,
      description: 'ünïcode ✓',
      deployer: 'ada',
      source: 'deploy',
      api_key_id: null,
      api_key_name: null,
      received_at: receivedAt,
      occurred_at: receivedAt,
    })
    .returning('id')
    .executeTakeFirstOrThrow()
  return Number(row.id)
}

async function addAudit(database: Database, accountId: number, target: string): Promise<number> {
  await recordAudit(database.db, {
    accountId,
    actor: SYSTEM_ACTOR,
    address: null,
    action: 'settings.changed',
    target,
    details: { field: 'stall_minutes' },
  })
  const row = await database.db
    .selectFrom('audit_entries')
    .select((eb) => eb.fn.max('id').as('id'))
    .executeTakeFirstOrThrow()
  return Number(row.id)
}

/** Raw SQL inserting an event with a chosen id, as someone with database access could. */
async function insertEventWithId(database: Database, id: number, accountId: number): Promise<void> {
  const overriding = database.dialect === 'postgres' ? sql`overriding system value` : sql``
  const now = Date.now()
  await sql`insert into events (id, account_id, service, environment, version, status, source, received_at, occurred_at)
    ${overriding} values (${id}, ${accountId}, 'api', 'prod', 'forged', 'Deployed', 'deploy', ${now}, ${now})`.execute(
    database.db,
  )
}

function messages(result: Awaited<ReturnType<typeof verifyChains>>): string[] {
  return result.problems.map((p) => p.message)
}

test('canonical bytes: length-prefixed, typed fields; null differs from the empty string; digests are stable', () => {
  const spec = streamSpec('audit')
  const base = {
    id: 7,
    account_id: null,
    at: 1_700_000_000_000,
    actor_kind: 'cli',
    actor_id: null,
    actor: 'cli (ada)',
    address: null,
    action: 'key.created',
    target: 'ci',
    details: '{}',
  }
  const bytes = canonicalBytes(spec, base)
  // id = "I", length 1, "7"
  assert.deepEqual([...bytes.subarray(0, 6)], [0x49, 0, 0, 0, 1, 0x37])
  // account_id = "N", length 0
  assert.deepEqual([...bytes.subarray(6, 11)], [0x4e, 0, 0, 0, 0])
  assert.notEqual(rowDigest(spec, base), rowDigest(spec, { ...base, address: '' }))
  assert.notEqual(rowDigest(spec, base), rowDigest(spec, { ...base, target: 'c', details: 'i{}' }))
  assert.notEqual(rowDigest(spec, base), rowDigest(spec, { ...base, id: '7' }), 'a number is not text')
  // Pinned: the serialisation is a contract (docs/SECURITY.md); a change here is a new chain version.
  assert.equal(rowDigest(spec, base), 'fdf1db6aac6ef8dcb972c7b42e7d596c2e746af285f255b0922c1ffb0e9bc4de')
  const values = linkedValues(spec, base)
  assert.deepEqual(values, { accountId: null, at: 1_700_000_000_000 })
  assert.match(linkFrom('00'.repeat(32), rowDigest(spec, base), null, values.at), /^[0-9a-f]{64}$/)
})

test('the fast digest and link hash exactly the bytes the definition lays out, whatever the values', () => {
  const spec = streamSpec('events')
  const sha = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex')
  // The plain definitions: SHA-256 of canonicalBytes, and of previous || digest || field || field.
  const plainLink = (previous: string, digest: string, accountId: number | null, at: number | null) =>
    sha(
      Buffer.concat([
        Buffer.from(previous, 'hex'),
        Buffer.from(digest, 'hex'),
        canonicalBytes({ ...spec, columns: ['a', 'b'] }, { a: accountId, b: at }),
      ]),
    )
  const texts = [
    '',
    ' ',
    'svc/a%20b',
    '<img src=x onerror=alert(1)>',
    'ünïcødé 🚀 日本語',
    'lone \ud800 surrogate',
    'line\nbreak\ttab',
    '\u2028\u2029',
    'x'.repeat(40_000),
    '€'.repeat(9_000),
  ]
  const numbers = [0, -1, 1, 42, Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER, 1.5, -0.25, 1e21]
  const values: unknown[] = [...texts, ...numbers, null, 7n, true, false, Buffer.from([0, 1, 255])]
  let previous = genesisLink('events')
  let seed = 12345
  const pick = () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31
    return values[seed % values.length]
  }
  for (let i = 0; i < 500; i++) {
    const row = Object.fromEntries(spec.columns.map((column) => [column, pick()]))
    const digest = rowDigest(spec, row)
    assert.equal(digest, sha(canonicalBytes(spec, row)), `row ${i}`)
    const accountId = i % 3 === 0 ? null : i
    const at = i % 5 === 0 ? null : 1_700_000_000_000 + i
    const link = linkFrom(previous, digest, accountId, at)
    assert.equal(link, plainLink(previous, digest, accountId, at), `link ${i}`)
    previous = link
  }
})

test('verify passes on an untouched database, then names a changed, a deleted and an inserted event', async (t) => {
  const { database, accountId } = await setUp(t)
  const ids: number[] = []
  for (let i = 1; i <= 6; i++) ids.push(await addEvent(database, accountId, i === 2 ? 'empty' : `1.0.${i}`))
  await addAudit(database, accountId, 'Acme')
  // A hole: the row with this id is gone before it was chained (a rolled-back id on PostgreSQL).
  const hole = ids[4] as number
  await database.db.deleteFrom('events').where('id', '=', hole).execute()
  assert.deepEqual(await chainLag(database), { events: 5, audit: 1 })
  // graceMs 0: the hole is final at once (here nothing may still commit in it).
  const first = await chainOnce(database, { graceMs: 0 })
  if (testDialect === 'postgres') {
    // PostgreSQL waits once at a gap: it is recorded, then passed on the next run.
    assert.equal(first.find((r) => r.stream === 'events')?.waitingAt, hole)
  }
  await chainCaughtUp(database, { graceMs: 0, settleMs: 0 })
  assert.deepEqual(await chainLag(database), { events: 0, audit: 0 })

  const clean = await verifyChains(database)
  assert.deepEqual(messages(clean), [])
  assert.equal(clean.ok, true)
  const events = clean.streams.find((s) => s.stream === 'events')
  assert.equal(events?.checked, 5)
  assert.equal(events?.through, ids[5])
  assert.equal(clean.streams.find((s) => s.stream === 'audit')?.checked, 1)

  // A new event not chained yet is waiting, not a problem.
  const late = await addEvent(database, accountId, '2.0.0')
  const waiting = await verifyChains(database)
  assert.equal(waiting.ok, true)
  assert.equal(waiting.streams.find((s) => s.stream === 'events')?.pending, 1)
  await chainCaughtUp(database)

  // Changed: one column of one row.
  await sql`update events set deployer = 'mallory' where id = ${ids[2]}`.execute(database.db)
  assert.deepEqual(messages(await verifyChains(database)), [`event ${ids[2]} changed`])
  await sql`update events set deployer = 'ada' where id = ${ids[2]}`.execute(database.db)
  assert.equal((await verifyChains(database)).ok, true, 'put back, it verifies again')

  // Null made the empty string: a change too.
  await sql`update events set commit_sha = null where id = ${ids[1]}`.execute(database.db)
  assert.deepEqual(messages(await verifyChains(database)), [`event ${ids[1]} changed`])
  await sql`update events set commit_sha = '' where id = ${ids[1]}`.execute(database.db)

  // Deleted (recent, no retention): missing.
  await sql`delete from events where id = ${ids[3]}`.execute(database.db)
  assert.deepEqual(messages(await verifyChains(database)), [`event ${ids[3]} missing`])

  // Inserted below the head, into the hole that was passed.
  await insertEventWithId(database, hole, accountId)
  const result = await verifyChains(database)
  assert.equal(result.ok, false)
  assert.deepEqual(messages(result), [
    `event ${ids[3]} missing`,
    `event ${hole} not chained (inserted after the fact?)`,
  ])
  assert.ok(late > hole)
})

test('an audit entry changed or deleted behind the append-only trigger is named', async (t) => {
  const { database, accountId } = await setUp(t)
  const a = await addAudit(database, accountId, 'first')
  const b = await addAudit(database, accountId, 'second')
  await addEvent(database, accountId, '1.0.0')
  await chainCaughtUp(database)
  assert.equal((await verifyChains(database)).ok, true)
  if (database.dialect === 'sqlite') {
    await sql`drop trigger audit_entries_no_update`.execute(database.db)
    await sql`drop trigger audit_entries_no_delete`.execute(database.db)
  } else {
    await sql`alter table audit_entries disable trigger audit_entries_append_only`.execute(database.db)
  }
  await sql`update audit_entries set actor = 'someone else' where id = ${a}`.execute(database.db)
  assert.deepEqual(messages(await verifyChains(database)), [`audit entry ${a} changed`])
  await sql`delete from audit_entries where id = ${b}`.execute(database.db)
  assert.deepEqual(messages(await verifyChains(database)), [
    `audit entry ${a} changed`,
    `audit entry ${b} missing`,
  ])
})

test('a kept head catches a rewrite that recomputed every link after it; the head is not leaked past the chain', async (t) => {
  const { database, accountId } = await setUp(t)
  const ids: number[] = []
  for (let i = 0; i < 4; i++) ids.push(await addEvent(database, accountId, `1.0.${i}`))
  await chainCaughtUp(database)
  const kept = await currentHead(database.db, 'events')
  assert.ok(kept)
  const head = parseHead(kept)
  assert.ok(typeof head !== 'string')
  assert.equal(head.id, ids[3])
  for (let i = 0; i < 3; i++) ids.push(await addEvent(database, accountId, `2.0.${i}`))
  await chainCaughtUp(database)
  assert.equal((await verifyChains(database, { heads: [head] })).ok, true, 'the kept head still holds')

  // A database administrator rewrites event ids[1] and recomputes every link and the head.
  await sql`update events set version = '9.9.9' where id = ${ids[1]}`.execute(database.db)
  const spec = streamSpec('events')
  const { rows } = await sql<Record<string, unknown>>`select * from events order by id`.execute(database.db)
  let link = genesisLink('events')
  for (const row of rows) {
    const digest = rowDigest(spec, row)
    const v = linkedValues(spec, row)
    link = linkFrom(link, digest, v.accountId, v.at)
    await database.db
      .updateTable('chain_links')
      .set({ digest, link })
      .where('stream', '=', 'events')
      .where('row_id', '=', Number(row.id))
      .execute()
  }
  await database.db.updateTable('chain_heads').set({ link }).where('stream', '=', 'events').execute()
  assert.equal((await verifyChains(database)).ok, true, 'without a head from outside, a full rewrite passes')
  const caught = await verifyChains(database, { heads: [head] })
  assert.deepEqual(messages(caught), [
    `head events:${ids[3]} does not match: the chain up to event ${ids[3]} was rewritten since`,
  ])
  const unknown = await verifyChains(database, {
    heads: [{ stream: 'events', id: 999_999, link: head.link }],
  })
  assert.match(messages(unknown)[0] ?? '', /head events:999999 not found/)
  assert.equal(typeof parseHead('events:12:xyz'), 'string')
  assert.equal(typeof parseHead(`deployments:1:${'a'.repeat(64)}`), 'string')
})

test('events pruned by retention are not missing; a link re-dated to pass a deletion off as pruning is caught', async (t) => {
  const { database, accountId } = await setUp(t)
  // accounts.retention_days comes with retention (another migration); add it if this branch lacks it.
  const { rows: columns } =
    database.dialect === 'sqlite'
      ? await sql<{ name: string }>`select name from pragma_table_info('accounts')`.execute(database.db)
      : await sql<{ name: string }>`select column_name as name from information_schema.columns
          where table_schema = current_schema() and table_name = 'accounts'`.execute(database.db)
  if (!columns.some((c) => c.name === 'retention_days'))
    await sql`alter table accounts add column retention_days integer`.execute(database.db)
  await sql`update accounts set retention_days = 30 where id = ${accountId}`.execute(database.db)
  const now = Date.now()
  const old1 = await addEvent(database, accountId, 'old-1', now - 60 * DAY_MS)
  const old2 = await addEvent(database, accountId, 'old-2', now - 45 * DAY_MS)
  const recent = await addEvent(database, accountId, 'recent', now - 10 * DAY_MS)
  const newest = await addEvent(database, accountId, 'newest', now)
  await chainCaughtUp(database)
  // Retention deletes what is older than 30 days.
  await sql`delete from events where received_at < ${now - 30 * DAY_MS}`.execute(database.db)
  const pruned = await verifyChains(database, { now })
  assert.deepEqual(messages(pruned), [])
  assert.equal(pruned.streams.find((s) => s.stream === 'events')?.pruned, 2)

  // A recent event deleted is missing, retention or not.
  await sql`delete from events where id = ${recent}`.execute(database.db)
  assert.deepEqual(messages(await verifyChains(database, { now })), [`event ${recent} missing`])
  // Re-dating its link to look old breaks the link.
  await sql`update chain_links set at = ${now - 90 * DAY_MS} where stream = 'events' and row_id = ${recent}`.execute(
    database.db,
  )
  assert.deepEqual(messages(await verifyChains(database, { now })), [
    `link of event ${recent} (row gone) does not follow from the one before (links rewritten?)`,
  ])
  assert.ok(old1 < old2 && newest > recent)
})

/** A second connection that inserts an event in a transaction it commits when told. */
async function heldInsert(url: string, accountId: number): Promise<{ id: number; commit(): Promise<void> }> {
  const other = openDatabase(parseDatabaseUrl(url))
  let release: () => void = () => {}
  const released = new Promise<void>((resolve) => {
    release = resolve
  })
  let reportId: (id: number) => void = () => {}
  const gotId = new Promise<number>((resolve) => {
    reportId = resolve
  })
  const done = other.db.transaction().execute(async (trx) => {
    const row = await trx
      .insertInto('events')
      .values({
        account_id: accountId,
        service: 'api',
        environment: 'prod',
        version: 'slow',
        status: 'Deployed',
        url: null,
        commit_sha: null,
        description: null,
        deployer: null,
        source: 'deploy',
        api_key_id: null,
        api_key_name: null,
        received_at: Date.now(),
        occurred_at: Date.now(),
      })
      .returning('id')
      .executeTakeFirstOrThrow()
    reportId(Number(row.id))
    await released
  })
  const id = await gotId
  return {
    id,
    commit: async () => {
      release()
      await done
      await other.close()
    },
  }
}

test('an id that commits after a higher one is waited for and chained, not reported (the grace window)', async (t) => {
  const { database, url, accountId } = await setUp(t)
  const before = await addEvent(database, accountId, '1.0.0')
  await chainCaughtUp(database)
  const held = await heldInsert(url, accountId)
  // On PostgreSQL a later transaction commits a higher id first; on SQLite the held transaction
  // holds the write lock, so nothing commits past it (ids follow commit order there).
  const higher = testDialect === 'postgres' ? await addEvent(database, accountId, '1.0.2') : null
  if (testDialect === 'postgres') {
    const results = await chainOnce(database)
    const events = results.find((r) => r.stream === 'events')
    assert.equal(events?.through, before, 'not past the id that may still commit')
    assert.equal(events?.waitingAt, held.id)
    // Still waiting within the grace window: the transaction that took the id still runs.
    const later = await chainOnce(database, { now: () => Date.now() + 1000 })
    assert.equal(later.find((r) => r.stream === 'events')?.through, before)
  }
  await held.commit()
  await chainCaughtUp(database, { now: () => Date.now() + 1000 })
  const result = await verifyChains(database)
  assert.deepEqual(messages(result), [])
  assert.equal(result.streams.find((s) => s.stream === 'events')?.through, higher ?? held.id)
  assert.equal(result.streams.find((s) => s.stream === 'events')?.checked, testDialect === 'postgres' ? 3 : 2)
})

test('a gap left by a rolled-back insert is passed once its transaction has ended, and two instances chain each row once', async (t) => {
  const { database, url, accountId } = await setUp(t)
  await addEvent(database, accountId, '1.0.0')
  await database.db
    .transaction()
    .execute(async (trx) => {
      await trx
        .insertInto('events')
        .values({
          account_id: accountId,
          service: 'api',
          environment: 'prod',
          version: 'rolled-back',
          status: 'Deployed',
          url: null,
          commit_sha: null,
          description: null,
          deployer: null,
          source: 'deploy',
          api_key_id: null,
          api_key_name: null,
          received_at: Date.now(),
          occurred_at: Date.now(),
        })
        .execute()
      throw new Error('roll back')
    })
    .catch(() => {})
  const after = await addEvent(database, accountId, '1.0.2')
  // First sight of the gap (PostgreSQL) records it; the next run passes it without waiting for the
  // grace time, because no transaction that was writing to events then still runs.
  await chainOnce(database)
  await chainCaughtUp(database)
  assert.equal((await verifyChains(database)).streams.find((s) => s.stream === 'events')?.through, after)

  // Two instances at once: each row is linked once and the chain verifies.
  const second = openDatabase(parseDatabaseUrl(url))
  t.after(() => second.close())
  for (let i = 0; i < 300; i++) await addEvent(database, accountId, `3.0.${i}`)
  await Promise.all([
    chainCaughtUp(database, { batch: 50 }),
    chainCaughtUp(second, { batch: 50 }),
    chainCaughtUp(database, { batch: 50 }),
  ])
  await chainCaughtUp(database)
  const result = await verifyChains(database)
  assert.deepEqual(messages(result), [])
  assert.equal(result.streams.find((s) => s.stream === 'events')?.checked, 302)
})

test('CSV/JSON exports and /api/v1/events carry Shiplog-Chain-Head; verify --head confirms it later', async (t) => {
  const ctx = await buildTestApp(t)
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'ada@example.com')
  const none = await browser.get('/logs/export.csv')
  assert.equal(none.statusCode, 200)
  assert.equal(none.headers['shiplog-chain-head'], undefined, 'nothing chained yet: no head')
  for (let i = 0; i < 3; i++) {
    const res = await deploy(ctx.app, ctx.tenant.key, {
      service: 'api',
      environment: 'prod',
      version: `1.${i}`,
      status: 'Deployed',
    })
    assert.equal(res.status, 201)
  }
  await chainCaughtUp(ctx.database)
  const csv = await browser.get('/logs/export.csv')
  const json = await browser.get('/logs/export.json')
  const api = await browser.get('/api/v1/events?limit=1')
  const head = String(csv.headers['shiplog-chain-head'])
  assert.match(head, /^events:\d+:[0-9a-f]{64}$/)
  assert.equal(json.headers['shiplog-chain-head'], head)
  assert.equal(api.headers['shiplog-chain-head'], head, 'the API page covers its newest event')
  assert.match(csv.payload, /^id,/, 'the body is the export as before')
  assert.equal((json.json() as unknown[]).length, 3)

  // Later: more events, one older event changed; the kept head no longer matches.
  await deploy(ctx.app, ctx.tenant.key, {
    service: 'api',
    environment: 'prod',
    version: '2.0',
    status: 'Deployed',
  })
  await chainCaughtUp(ctx.database)
  const kept = parseHead(head)
  assert.ok(typeof kept !== 'string')
  assert.equal((await verifyChains(ctx.database, { heads: [kept] })).ok, true)
  const older = await browser.get('/api/v1/events?limit=1&service=api')
  assert.notEqual(older.headers['shiplog-chain-head'], head, 'a newer page has a newer head')
})

test('the task logs the heads (a copy outside the database) once they move, and says when rows wait', async (t) => {
  const { database, accountId } = await setUp(t)
  const lines: string[] = []
  const log = {
    debug: () => {},
    warn: () => {},
    info: (_: unknown, message: string) => void lines.push(message),
  }
  // As the runner runs it; busyLoop above 1: never waits for the loop (this test's own work keeps it busy).
  const task = standingAside(chainTask(database, { batch: 2 }, log), new BurstPolicy({ busyLoop: 2 }).gate())
  assert.equal(await task.run(), undefined, 'nothing to chain: the normal interval')
  assert.deepEqual(lines, [], 'no head yet, nothing logged')
  for (let i = 0; i < 5; i++) await addEvent(database, accountId, `1.0.${i}`)
  const next = await task.run()
  assert.ok(typeof next === 'number' && next < 1000, 'more rows wait: the next run comes sooner')
  for (let i = 0; i < 5 && (await chainLag(database)).events > 0; i++) await chainOnce(database)
  const head = await currentHead(database.db, 'events')
  assert.ok(head)
  const fresh = chainTask(database, {}, log)
  await fresh.run()
  assert.equal(lines.length, 1)
  assert.match(lines[0] ?? '', new RegExp(`^chain heads ${head} \\(keep a copy`))
})

test('the task waits while the event loop is saturated (a burst of ingest), but never longer than its bound', async (t) => {
  const { database, accountId } = await setUp(t)
  const quiet = { debug: () => {}, warn: () => {}, info: () => {} }
  for (let i = 0; i < 3; i++) await addEvent(database, accountId, `2.0.${i}`)
  /** Keeps this thread busy, as a burst of requests would, for `ms`. */
  const spin = (ms: number) => {
    const end = performance.now() + ms
    while (performance.now() < end) {}
  }
  /** The task as the runner runs it (it stands aside), under a burst policy of its own. */
  const gated = (options: ChainOptions, burst: BurstOptions) =>
    standingAside(chainTask(database, options, quiet), new BurstPolicy(burst).gate())
  const patient = gated({}, { maxYieldMs: 60_000 })
  spin(300)
  assert.equal(await patient.run(), 250, 'a saturated loop: look again soon')
  assert.equal((await chainLag(database)).events, 3, 'nothing chained during the burst')
  await new Promise((resolve) => setTimeout(resolve, 300))
  await patient.run()
  assert.equal((await chainLag(database)).events, 0, 'chained once the loop eased')

  for (let i = 3; i < 6; i++) await addEvent(database, accountId, `2.0.${i}`)
  const bounded = gated({}, { maxYieldMs: 0 })
  spin(300)
  await bounded.run()
  assert.equal((await chainLag(database)).events, 0, 'past its bound it chains even under load')

  // Under load that never eases, once past its bound it keeps catching up (batch after batch, busy
  // loop or not) until nothing waits, and only then waits again.
  for (let i = 6; i < 13; i++) await addEvent(database, accountId, `2.0.${i}`)
  const sustained = gated({ batch: 2 }, { maxYieldMs: 200 })
  spin(300)
  assert.equal(await sustained.run(), 250, 'within its bound it waits')
  spin(300)
  for (let runs = 0; runs < 4; runs++) {
    const behind = (await chainLag(database)).events
    spin(300)
    await sustained.run()
    assert.equal((await chainLag(database)).events, Math.max(0, behind - 2), `catch-up run ${runs + 1}`)
  }
  spin(300)
  assert.equal(await sustained.run(), 250, 'caught up: under a busy loop it waits again')
})

test('the task waits while events arrive faster than its bound (a burst on PostgreSQL seldom saturates the loop)', async (t) => {
  const { database, accountId } = await setUp(t)
  const quiet = { debug: () => {}, warn: () => {}, info: () => {} }
  for (let i = 0; i < 3; i++) await addEvent(database, accountId, `3.0.${i}`)
  const burst = new BurstPolicy({ busyIngest: 500, maxYieldMs: 60_000 })
  const task = standingAside(chainTask(database, {}, quiet), burst.gate())
  const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
  await pause(100)
  burst.stored(1000) // 1,000 events in about 100 ms: 10,000 a second
  assert.equal(await task.run(), 250, 'a burst: look again soon')
  assert.equal((await chainLag(database)).events, 3, 'nothing chained during the burst')
  await pause(200)
  burst.stored(10) // 10 events in 200 ms: 50 a second
  await task.run()
  assert.equal((await chainLag(database)).events, 0, 'chained once the burst eased')
})
