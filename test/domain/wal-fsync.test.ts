// An event on SQLite is answered only after the WAL file holding its commit has been fsynced
// (SPEC §1.2: an acknowledged event is never lost), watched through the database's WAL-opening hook.
// The write connection commits with synchronous=NORMAL, so without this fsync a commit sits in the page cache.
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { open } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type TestContext, test } from 'node:test'
import { parseDatabaseUrl } from '../../src/config.js'
import { openDatabase } from '../../src/db/connect.js'
import { migrateToLatest } from '../../src/db/migrate.js'
import type { WalFile } from '../../src/db/sqlite/wal.js'
import { eventStoreFor } from '../../src/domain/events/store.js'
import { EventWriter, type PendingEvent } from '../../src/domain/events/writer.js'
import { addTenant } from '../helper.js'

/** A gate a test opens by hand: each fsync waits at one until the test lets it through. */
interface HeldSync {
  release(): void
  fail(err: Error): void
}

/**
 * Opens the real WAL file and wraps its handle: once watching, every sync() is recorded and held
 * until the test releases it, then performs the real fsync. Before (migrating and setting up, which
 * commit too) syncs go straight through.
 */
function watchedWal() {
  const opened: string[] = []
  const held: HeldSync[] = []
  let completed = 0
  let watching = false
  const openWal = async (path: string): Promise<WalFile> => {
    opened.push(path)
    const handle = await open(path, 'r')
    return {
      async sync() {
        if (!watching) return handle.sync()
        await new Promise<void>((resolve, reject) => held.push({ release: resolve, fail: reject }))
        await handle.sync()
        completed++
      },
      close: () => handle.close(),
    }
  }
  return {
    openWal,
    opened,
    held,
    completed: () => completed,
    watch: () => {
      watching = true
    },
  }
}

/**
 * Lets the event loop run (the writer's setImmediate, the commit, the thread-pool fsync) until
 * `ready` holds, for at most two seconds.
 */
async function until(ready: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 2000
  while (!ready()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

/** Whether a promise has settled, looked at without waiting for it. */
function tracked<T>(promise: Promise<T>) {
  const state = { settled: false as boolean, value: undefined as T | undefined, error: undefined as unknown }
  promise.then(
    (value) => {
      state.settled = true
      state.value = value
    },
    (error: unknown) => {
      state.settled = true
      state.error = error
    },
  )
  return state
}

async function setUp(t: TestContext) {
  const dir = mkdtempSync(join(tmpdir(), 'shiplog-fsync-'))
  const dbPath = join(dir, 'shiplog.db')
  const wal = watchedWal()
  const database = openDatabase(parseDatabaseUrl(`sqlite:${dbPath}`), { openWal: wal.openWal })
  // Closed in reverse order of opening, in one hook.
  const closers: Array<() => Promise<void> | void> = [
    () => rmSync(dir, { recursive: true, force: true }),
    () => database.close(),
  ]
  t.after(async () => {
    for (const close of closers.reverse()) await close()
  })
  await migrateToLatest(database)
  const tenant = await addTenant(database, 'Acme')
  wal.watch()
  const writer = new EventWriter(eventStoreFor(database))
  closers.push(async () => {
    for (const gate of wal.held) gate.release()
    await writer.close()
  })
  const pending = (version: string): PendingEvent => ({
    accountId: tenant.account.id,
    apiKeyId: tenant.keyId,
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
  })
  const stored = async () =>
    (await database.db.selectFrom('events').select('version').orderBy('id').execute()).map((r) => r.version)
  return { dbPath, wal, writer, pending, stored }
}

test('SQLite file: each event is answered only after the fsync of the -wal file that follows its commit', async (t) => {
  const { dbPath, wal, writer, pending, stored } = await setUp(t)

  const first = tracked(writer.record(pending('1.0.0')))
  await until(() => wal.held.length === 1, 'the first fsync')
  assert.deepEqual(wal.opened, [`${dbPath}-wal`], 'the file synced is the WAL the commit went to')
  // Committed (visible to another connection), yet not answered while its fsync is under way.
  assert.deepEqual(await stored(), ['1.0.0'])
  await new Promise((resolve) => setTimeout(resolve, 50))
  assert.equal(first.settled, false, 'the event was answered before its WAL was fsynced')

  // The next event waits for that batch (group commit), then gets a commit and an fsync of its own.
  const second = tracked(writer.record(pending('1.0.1')))
  await new Promise((resolve) => setTimeout(resolve, 20))
  assert.deepEqual(await stored(), ['1.0.0'], 'the next batch waits until the first is answered')
  wal.held[0]?.release()
  await until(() => first.settled, 'the first answer')
  assert.equal(first.error, undefined)
  assert.equal(wal.completed(), 1)
  await until(() => wal.held.length === 2, 'a second fsync for the second event')
  assert.deepEqual(await stored(), ['1.0.0', '1.0.1'])
  await new Promise((resolve) => setTimeout(resolve, 50))
  assert.equal(second.settled, false, 'the second event was answered before its own fsync')
  wal.held[1]?.release()
  await until(() => second.settled, 'the second answer')
  assert.equal(second.error, undefined)
  assert.equal(wal.completed(), 2)
  assert.deepEqual(wal.opened, [`${dbPath}-wal`], 'the WAL is opened once and kept open')
})

test('SQLite file: when the fsync fails, the event is not acknowledged', async (t) => {
  const { wal, writer, pending } = await setUp(t)
  const event = tracked(writer.record(pending('2.0.0')))
  await until(() => wal.held.length === 1, 'the fsync')
  wal.held[0]?.fail(Object.assign(new Error('EIO: i/o error, fsync'), { code: 'EIO' }))
  await until(() => event.settled, 'the answer')
  assert.ok(event.error instanceof Error, 'a failed fsync fails the request')
  assert.match((event.error as Error).message, /EIO/)
})
