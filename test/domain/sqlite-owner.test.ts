// The one owner of SQLite connections (src/db/sqlite/owner.ts) under the interleavings that broke the
// many hands before it: reads beside transactions, writes beside a transaction that rolls back, another
// process holding the write lock, a write awaited from inside a transaction, pragmas that stay put.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { test } from 'node:test'
import { parseDatabaseUrl } from '../../src/config.js'
import { type Database, openDatabase, type SqliteHandle } from '../../src/db/connect.js'
import { migrateToLatest } from '../../src/db/migrate.js'
import { catchUpDeployments } from '../../src/domain/deployments/store.js'
import { eventStoreFor, type PendingEvent, type RecordOutcome } from '../../src/domain/events/store.js'
import { buildTestApp, type Cleanup, freshDatabaseUrl, type Tenant, testDialect } from '../helper.js'
import { expectedDeployments, storedDeployments } from '../support/deployments.js'
import { sleep } from '../support/processes.js'

async function settingsCount(database: Database): Promise<number> {
  const row = await database.db
    .selectFrom('settings')
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .executeTakeFirstOrThrow()
  return Number(row.n)
}

function pending(tenant: Tenant, version: string, status: PendingEvent['input']['status']): PendingEvent {
  return {
    accountId: tenant.account.id,
    apiKeyId: tenant.keyId,
    apiKeyName: 'ci',
    source: 'deploy',
    input: {
      service: `svc-${version.length % 7}`,
      environment: 'prod',
      version,
      status,
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

test('600 derivation runs (what every read of deployments does first), interleaved with 600 two-statement transactions: every one succeeds', {
  timeout: 120_000,
}, async (t) => {
  const ctx = await buildTestApp(t)
  const store = eventStoreFor(ctx.database)
  const failures: string[] = []
  // Four callers of each kind, 150 calls each, one after the other: the calls of the two kinds meet
  // at every turn, and on PostgreSQL the pool (10 connections) is never the bottleneck.
  const workers = (work: (i: number) => Promise<void>) =>
    Array.from({ length: 4 }, async (_, worker) => {
      for (let n = 0; n < 150; n++) await work(worker * 150 + n)
    })
  const runs = workers(async (i) => {
    try {
      // An event before each run gives it something to derive.
      await store.writeBatch([pending(ctx.tenant, `1.${i}`, i % 2 === 0 ? 'Deploying' : 'Deployed')])
      await catchUpDeployments(ctx.database)
    } catch (err) {
      failures.push(`derivation ${i}: ${(err as Error).message}`)
    }
  })
  const transactions = workers((i) =>
    ctx.database.db
      .transaction()
      .execute(async (trx) => {
        await trx
          .insertInto('settings')
          .values({ name: `t${i}`, value: 'a' })
          .execute()
        // Between its statements the transaction waits, as one that hashes or calls out does.
        await new Promise((resolve) => setImmediate(resolve))
        await trx.updateTable('settings').set({ value: 'b' }).where('name', '=', `t${i}`).execute()
      })
      .then(
        () => {},
        (err: Error) => {
          failures.push(`transaction ${i}: ${err.message}`)
        },
      ),
  )
  await Promise.all([...runs, ...transactions])
  assert.deepEqual(failures, [])
  const rows = await ctx.database.db.selectFrom('settings').selectAll().where('name', 'like', 't%').execute()
  assert.equal(rows.filter((r) => r.value === 'b').length, 600)
  await catchUpDeployments(ctx.database)
  assert.deepEqual(await storedDeployments(ctx.database), await expectedDeployments(ctx.database))
})

test('an event batch written while a transaction is open commits on its own: the transaction rolling back leaves it stored', async (t) => {
  const ctx = await buildTestApp(t)
  const store = eventStoreFor(ctx.database)
  const before = await settingsCount(ctx.database)
  let writing: Promise<RecordOutcome[]> | null = null
  await assert.rejects(
    ctx.database.db.transaction().execute(async (trx) => {
      await trx.insertInto('settings').values({ name: 'rolled-back', value: 'x' }).execute()
      writing = store.writeBatch([pending(ctx.tenant, 'beside-a-transaction', 'Deployed')])
      await sleep(50)
      throw new Error('the transaction gives up')
    }),
    /the transaction gives up/,
  )
  const [outcome] = await ((writing as Promise<RecordOutcome[]> | null) ??
    Promise.reject(new Error('not written')))
  assert.equal(outcome?.kind, 'stored', 'the event was acknowledged')
  assert.equal(await settingsCount(ctx.database), before, 'the transaction left nothing')
  const stored = await ctx.database.db
    .selectFrom('events')
    .select('id')
    .where('version', '=', 'beside-a-transaction')
    .execute()
  assert.deepEqual(
    stored.map((r) => Number(r.id)),
    [outcome?.event.id],
    'the acknowledged event is stored, under the id it was acknowledged with',
  )
})

/** A SQLite database file migrated by an owner of its own, closed after the test. */
async function sqliteFile(t: Cleanup, options: { lockWaitMs?: number } = {}) {
  const url = await freshDatabaseUrl(t)
  const target = parseDatabaseUrl(url)
  assert.equal(target.dialect, 'sqlite')
  const database = openDatabase(target, options) as SqliteHandle
  t.after(() => database.close())
  await migrateToLatest(database)
  return { database, path: target.path }
}

/**
 * Another process that takes the write lock of `path` and holds it for `ms`; resolves once it holds
 * it, with the moment it lets go (wrapped: a promise resolving to a promise would wait for both).
 */
async function holdWriteLockElsewhere(
  t: Cleanup,
  path: string,
  ms: number,
): Promise<{ released: Promise<void> }> {
  const child = spawn(
    process.execPath,
    [
      '-e',
      `const D = require('better-sqlite3'); const d = new D(process.argv[1]); d.exec('begin immediate');
       process.stdout.write('held\\n'); setTimeout(() => { d.exec('commit'); d.close() }, Number(process.argv[2]))`,
      path,
      String(ms),
    ],
    // Not the test runner's environment: a node process with NODE_TEST_CONTEXT writes its protocol on stdout.
    { stdio: ['ignore', 'pipe', 'inherit'], env: { PATH: process.env.PATH ?? '' } },
  )
  t.after(() => {
    child.kill('SIGKILL')
  })
  await new Promise<void>((resolve, reject) => {
    let said = ''
    child.stdout.on('data', (chunk: Buffer) => {
      said += chunk.toString()
      if (said.includes('held')) resolve()
    })
    child.once('exit', (code) =>
      reject(new Error(`the lock holder exited (${code}) before it held the lock`)),
    )
  })
  return { released: new Promise<void>((resolve) => child.once('exit', () => resolve())) }
}

/** The longest the event loop went without running a 5 ms timer, while `work` ran. */
async function longestStall<T>(work: Promise<T>): Promise<{ value: T; stallMs: number }> {
  let last = performance.now()
  let stallMs = 0
  const timer = setInterval(() => {
    const now = performance.now()
    stallMs = Math.max(stallMs, now - last)
    last = now
  }, 5)
  try {
    return { value: await work, stallMs }
  } finally {
    clearInterval(timer)
  }
}

// The owner's own mechanics: connections, locks and pragmas exist on SQLite alone.
if (testDialect === 'sqlite') {
  test('another process holding the write lock: the write waits on a timer, not on the event loop, then commits', {
    timeout: 30_000,
  }, async (t) => {
    const { database, path } = await sqliteFile(t)
    const { released } = await holdWriteLockElsewhere(t, path, 1500)
    const started = performance.now()
    const { stallMs } = await longestStall(
      database.write((sql) => sql.run("insert into settings (name, value) values ('waited', 'yes')")),
    )
    const waited = performance.now() - started
    await released
    assert.ok(waited > 1000, `the write waited for the lock (${Math.round(waited)} ms)`)
    assert.ok(
      stallMs < 250,
      `the event loop kept turning meanwhile (longest stall ${Math.round(stallMs)} ms)`,
    )
    const row = await database.read((sql) =>
      sql.get<{ value: string }>("select value from settings where name = 'waited'"),
    )
    assert.equal(row?.value, 'yes')
  })

  test('a write lock held past the wait: the write fails as busy (an outage, 503), nothing is written, the event loop never stops', {
    timeout: 30_000,
  }, async (t) => {
    const { database, path } = await sqliteFile(t, { lockWaitMs: 300 })
    const { released } = await holdWriteLockElsewhere(t, path, 2000)
    const { value: outcome, stallMs } = await longestStall(
      database
        .write((sql) => sql.run("insert into settings (name, value) values ('never', 'x')"))
        .then(
          () => null,
          (err: Error & { code?: string }) => err,
        ),
    )
    assert.equal(outcome?.code, 'SQLITE_BUSY', String(outcome))
    assert.ok(stallMs < 250, `longest stall ${Math.round(stallMs)} ms`)
    await released
    assert.equal(
      await database.read((sql) => sql.get("select 1 from settings where name = 'never'")),
      undefined,
    )
    // The lock is free again: the next write goes through.
    await database.write((sql) => sql.run("insert into settings (name, value) values ('after', 'x')"))
  })

  test('a write awaited from inside a transaction through another handle fails as busy instead of hanging', {
    timeout: 30_000,
  }, async (t) => {
    const { database } = await sqliteFile(t, { lockWaitMs: 300 })
    await assert.rejects(
      database.db.transaction().execute(async (trx) => {
        await trx.insertInto('settings').values({ name: 'outer', value: 'x' }).execute()
        // A bug: `database.db`, not `trx`. It waits behind the transaction that awaits it.
        await database.db.insertInto('settings').values({ name: 'inner', value: 'x' }).execute()
      }),
      (err: Error & { code?: string }) => err.code === 'SQLITE_BUSY',
    )
    assert.equal(await settingsCount(database), 0, 'the transaction rolled back')
    await database.db.insertInto('settings').values({ name: 'later', value: 'x' }).execute()
    assert.equal(await settingsCount(database), 1, 'the writer is free again')
  })

  test('pragmas are set once: the writer commits with synchronous=NORMAL and never waits on a busy handler; the reader cannot write', async (t) => {
    const { database } = await sqliteFile(t)
    const hold = await database.hold()
    try {
      assert.equal(hold.sql.get<{ synchronous: number }>('pragma synchronous')?.synchronous, 1)
      assert.equal(hold.sql.get<{ journal_mode: string }>('pragma journal_mode')?.journal_mode, 'wal')
      assert.equal(hold.sql.get<{ timeout: number }>('pragma busy_timeout')?.timeout, 0)
      assert.equal(hold.sql.get<{ foreign_keys: number }>('pragma foreign_keys')?.foreign_keys, 1)
    } finally {
      hold.release()
    }
    await database.read((sql) => {
      assert.equal(sql.get<{ query_only: number }>('pragma query_only')?.query_only, 1)
      assert.equal(sql.get<{ timeout: number }>('pragma busy_timeout')?.timeout, 0)
    })
    // Kysely sends what writes to the writer, whatever the statement looks like.
    await database.db.insertInto('settings').values({ name: 'routed', value: 'x' }).execute()
    assert.equal(await settingsCount(database), 1)
  })

  test('a private in-memory database: one connection does it all, and writes still wait for a transaction to end', async (t) => {
    const database = openDatabase(parseDatabaseUrl('sqlite::memory:'))
    t.after(() => database.close())
    await migrateToLatest(database)
    assert.equal(database.dialect, 'sqlite')
    let written = false
    await database.db.transaction().execute(async (trx) => {
      await trx.insertInto('settings').values({ name: 'outer', value: 'x' }).execute()
      void database
        .write((sql) => sql.run("insert into settings (name, value) values ('queued', 'x')"))
        .then(() => {
          written = true
        })
      await sleep(20)
      assert.equal(written, false, 'the queued write waits for the transaction')
    })
    for (let waited = 0; !written; waited += 5) {
      assert.ok(waited < 2000)
      await sleep(5)
    }
    assert.equal(await settingsCount(database), 2)
  })
}
