// Database outages against the real server under load: PostgreSQL stopped and started again (a private
// throw-away cluster), SQLite on a full disk and on a disk the kernel turned read-only.
//
// Every case answers 503 problem+json in bounded time while /healthz stays up; PostgreSQL and the
// full disk recover without restarting Shiplog; nothing acknowledged is lost; an outage is logged once.
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import {
  chownSync,
  closeSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  unlinkSync,
  writeFileSync,
  writeSync,
} from 'node:fs'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { basename, join } from 'node:path'
import { Writable } from 'node:stream'
import { test } from 'node:test'
import { promisify } from 'node:util'
import { sql } from 'kysely'
import { buildApp } from '../../src/app.js'
import { parseDatabaseUrl } from '../../src/config.js'
import { type Database, openDatabase } from '../../src/db/connect.js'
import { migrateToLatest } from '../../src/db/migrate.js'
import type { EventRow } from '../../src/db/schema.js'
import { OutageLog } from '../../src/domain/database-errors.js'
import { addTenant, type Cleanup, freshDatabaseUrl, testConfig, testDialect } from '../helper.js'
import { freePort, type ServerProcess, sleep, startServer, withTimeout } from '../support/processes.js'

const CI = process.env.CI === 'true' || process.env.CI === '1'
/** The server may answer thousands of requests here; the per-key limit must not get in the way. */
const SERVER_ENV = { SHIPLOG_RATE_LIMIT: '10000000' }
/**
 * Longest a request may take while the database is away. The server's PostgreSQL pool gives up on a
 * new connection after 5 s (connectionTimeoutMillis in src/db/connect.ts) and SQLite waits at most
 * its 5 s busy_timeout; one more second covers the rest of the request.
 */
const ANSWER_BOUND_MS = 6_000
/** After PostgreSQL is back, the first request must be recorded within this time. */
const RECOVERY_BOUND_MS = 10_000
/** How long PostgreSQL stays down: longer than the key cache (5 s), so keys are looked up too. */
const PG_OUTAGE_MS = 6_000

const execFileAsync = promisify(execFile)

/** Runs a command to completion; its output is in the error when it fails. */
async function run(command: string, args: string[], timeoutMs = 60_000): Promise<string> {
  try {
    const { stdout } = await execFileAsync(command, args, { timeout: timeoutMs, encoding: 'utf8' })
    return stdout
  } catch (err) {
    const { stdout, stderr } = err as { stdout?: string; stderr?: string }
    throw new Error(
      `${command} ${args.join(' ')} failed: ${(err as Error).message}\n${stdout ?? ''}${stderr ?? ''}`,
    )
  }
}

// ---------------------------------------------------------------------------------------------------
// Clients

type Form = 'deploy' | 'put-post' | 'put-get'
const FORMS: Form[] = ['deploy', 'put-post', 'put-get']

interface Attempt {
  startedAt: number
  endedAt: number
  /** 0 when no answer came (see failure). */
  status: number
  contentType: string
  retryAfter: string | null
  body: string
  failure: string | null
}

interface LogicalEvent {
  readonly form: Form
  readonly idempotencyKey: string
  readonly version: string
  readonly attempts: Attempt[]
  outcome: 'pending' | 'created' | 'replayed'
  body: Record<string, unknown> | null
}

function newEvent(label: string, form: Form): LogicalEvent {
  const marker = `${label}-${randomBytes(4).toString('hex')}`
  return {
    form,
    idempotencyKey: `outage-${marker}`,
    version: `v-${marker}`,
    attempts: [],
    outcome: 'pending',
    body: null,
  }
}

/** Sends one attempt of the event, in its form, with its Idempotency-Key; never throws. */
async function send(base: string, key: string, event: LogicalEvent): Promise<Attempt> {
  const fields = { service: 'outage', environment: 'prod', version: event.version, status: 'Deployed' }
  const legacy = {
    app: fields.service,
    env: fields.environment,
    version: fields.version,
    status: fields.status,
  }
  const headers: Record<string, string> = { 'x-api-key': key, 'idempotency-key': event.idempotencyKey }
  let url = `${base}/deploy`
  let method = 'POST'
  let body: string | undefined
  if (event.form === 'put-get') {
    url = `${base}/put?${new URLSearchParams(legacy).toString()}`
    method = 'GET'
  } else {
    headers['content-type'] = 'application/json'
    if (event.form === 'put-post') url = `${base}/put`
    body = JSON.stringify(event.form === 'deploy' ? fields : legacy)
  }
  const startedAt = Date.now()
  try {
    // Twice the bound: a request that hangs past it is reported with its real duration.
    const response = await fetch(url, {
      method,
      headers,
      body,
      signal: AbortSignal.timeout(2 * ANSWER_BOUND_MS),
    })
    const text = await response.text()
    const replayed = response.headers.get('idempotent-replayed') === 'true'
    const attempt: Attempt = {
      startedAt,
      endedAt: Date.now(),
      status: response.status,
      contentType: response.headers.get('content-type') ?? '',
      retryAfter: response.headers.get('retry-after'),
      body: text,
      failure: null,
    }
    if (response.status === 201 || (response.status === 200 && replayed)) {
      event.outcome = response.status === 201 ? 'created' : 'replayed'
      event.body = JSON.parse(text) as Record<string, unknown>
    }
    event.attempts.push(attempt)
    return attempt
  } catch (err) {
    const cause = (err as Error).cause
    const attempt: Attempt = {
      startedAt,
      endedAt: Date.now(),
      status: 0,
      contentType: '',
      retryAfter: null,
      body: '',
      failure:
        (err as Error).name === 'TimeoutError'
          ? 'no answer (timeout)'
          : cause instanceof Error
            ? ((cause as NodeJS.ErrnoException).code ?? cause.message)
            : (err as Error).message,
    }
    event.attempts.push(attempt)
    return attempt
  }
}

/**
 * Clients that each record events back to back and retry a refused one (503 or no answer) with the
 * same Idempotency-Key until it is acknowledged, as shiplog-deploy does, but without waiting the
 * Retry-After the server asks for, so that the moment of recovery can be measured.
 */
class RetryingClients {
  readonly events: LogicalEvent[] = []
  #stopping = false
  #loops: Promise<void> | null = null

  constructor(
    private readonly base: string,
    private readonly key: string,
    private readonly clients = 4,
  ) {}

  start(): void {
    this.#loops = Promise.all(Array.from({ length: this.clients }, (_, n) => this.#client(n))).then(() => {})
  }

  stop(): Promise<void> {
    this.#stopping = true
    return this.#loops ?? Promise.resolve()
  }

  get attempts(): Attempt[] {
    return this.events.flatMap((e) => e.attempts)
  }

  acknowledged(): LogicalEvent[] {
    return this.events.filter((e) => e.outcome !== 'pending')
  }

  async #client(n: number): Promise<void> {
    for (let i = 0; !this.#stopping; i++) {
      const event = newEvent(`c${n}-${i}`, FORMS[(n + i) % FORMS.length] ?? 'deploy')
      this.events.push(event)
      // The last event is retried until acknowledged even after stop(): a client does not give up.
      const deadline = Date.now() + 60_000
      while (event.outcome === 'pending' && Date.now() < deadline) {
        const attempt = await send(this.base, this.key, event)
        if (attempt.failure === null && attempt.status !== 503 && event.outcome === 'pending') return
        if (event.outcome === 'pending') await sleep(100 + Math.floor(Math.random() * 100))
      }
    }
  }
}

async function until(condition: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`${what} (not within ${timeoutMs} ms)`)
    await sleep(20)
  }
}

async function get(url: string): Promise<{ status: number; contentType: string; body: string; ms: number }> {
  const started = Date.now()
  const response = await fetch(url, { signal: AbortSignal.timeout(2 * ANSWER_BOUND_MS) })
  const body = await response.text()
  return {
    status: response.status,
    contentType: response.headers.get('content-type') ?? '',
    body,
    ms: Date.now() - started,
  }
}

/** A 503 as SPEC §1.2 wants it: problem+json that tells the client to retry and reveals nothing inside. */
function assertUnavailable(
  attempt: Pick<Attempt, 'status' | 'contentType' | 'body' | 'retryAfter'>,
  what: string,
) {
  assert.equal(attempt.status, 503, `${what}: ${attempt.body}`)
  assert.match(attempt.contentType, /^application\/problem\+json/, what)
  const problem = JSON.parse(attempt.body) as Record<string, unknown>
  assert.equal(problem.status, 503, what)
  assert.equal(typeof problem.type, 'string', what)
  assert.equal(typeof problem.title, 'string', what)
  assert.equal(typeof problem.detail, 'string', what)
  assert.doesNotMatch(
    attempt.body,
    /ECONN|SQLITE|stack|at .*\.js|disk I\/O|postgres/i,
    `${what} reveals nothing inside`,
  )
  assert.ok(attempt.retryAfter, `${what} says when to retry`)
}

/**
 * Every acknowledged event is stored once, under the id it was acknowledged with; every event stored
 * was sent (and once); a refused one appears only if a later attempt with its key was acknowledged.
 */
function assertStoredOnce(
  events: LogicalEvent[],
  rows: EventRow[],
  keys: Array<{ idem_key: string; event_id: number | null }>,
) {
  const byVersion = new Map<string, EventRow[]>()
  for (const row of rows) byVersion.set(row.version, [...(byVersion.get(row.version) ?? []), row])
  const duplicates = [...byVersion].filter(([, same]) => same.length > 1).map(([version]) => version)
  assert.deepEqual(duplicates, [], 'no event is stored twice')
  const sent = new Map(events.map((e) => [e.version, e]))
  assert.deepEqual(
    rows.filter((row) => !sent.has(row.version)).map((row) => row.version),
    [],
    'nothing is stored that was not sent',
  )
  const missing: string[] = []
  for (const event of events) {
    const row = byVersion.get(event.version)?.[0]
    if (event.outcome === 'pending') {
      // Never acknowledged: it must not have been stored either (no half-stored events).
      assert.equal(row, undefined, `${event.version} was refused and is not stored`)
      continue
    }
    if (!row) {
      missing.push(event.version)
      continue
    }
    assert.equal(row.id, event.body?.id, `${event.version} is stored under the id it was acknowledged with`)
    assert.equal(row.source, event.form)
  }
  assert.deepEqual(missing, [], 'every acknowledged event is stored')
  const eventOfKey = new Map(keys.map((k) => [k.idem_key, k.event_id]))
  for (const event of events) {
    const expected = event.outcome === 'pending' ? undefined : event.body?.id
    assert.equal(
      eventOfKey.get(event.idempotencyKey),
      expected,
      `the key of ${event.version} names its event or nothing`,
    )
  }
}

async function readBack(database: Database) {
  const rows = await database.db.selectFrom('events').selectAll().orderBy('id').execute()
  const keys = await database.db.selectFrom('idempotency_keys').select(['idem_key', 'event_id']).execute()
  return { rows, keys }
}

// ---------------------------------------------------------------------------------------------------
// PostgreSQL: a private cluster that can be stopped without disturbing the shared one

/** The bin directory of the newest PostgreSQL installed the Debian way, or of SHIPLOG_PG_BINDIR. */
function postgresBinDir(): string | null {
  const fromEnv = process.env.SHIPLOG_PG_BINDIR
  if (fromEnv) return existsSync(join(fromEnv, 'initdb')) ? fromEnv : null
  const root = '/usr/lib/postgresql'
  if (!existsSync(root)) return null
  const versions = readdirSync(root)
    .filter((v) => existsSync(join(root, v, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a))
  return versions[0] === undefined ? null : join(root, versions[0], 'bin')
}

class PrivateCluster {
  private constructor(
    private readonly bin: string,
    private readonly dir: string,
    readonly port: number,
    /** As root, PostgreSQL refuses to run: its programs run as the `postgres` OS user instead. */
    private readonly asUser: string | null,
  ) {}

  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`
  }

  /** A new cluster on a free port, removed after the test; a reason string when none can be made. */
  static async create(t: Cleanup): Promise<PrivateCluster | string> {
    const bin = postgresBinDir()
    if (bin === null) return 'no PostgreSQL server programs (initdb, pg_ctl) found; set SHIPLOG_PG_BINDIR'
    const root = process.getuid?.() === 0
    const dir = mkdtempSync(join(tmpdir(), 'shiplog-pg-'))
    let made: PrivateCluster | null = null
    // One hook, in this order: hooks run in the order they were added, and the directory must not
    // be removed under a running cluster.
    t.after(async () => {
      await made?.stop().catch(() => {})
      rmSync(dir, { recursive: true, force: true })
    })
    if (root) {
      const uid = Number((await run('id', ['-u', 'postgres'])).trim())
      const gid = Number((await run('id', ['-g', 'postgres'])).trim())
      chownSync(dir, uid, gid)
    }
    const cluster = new PrivateCluster(bin, dir, await freePort(), root ? 'postgres' : null)
    made = cluster
    // No fsync while creating it (nothing to keep yet); the server itself runs with fsync on, so an
    // acknowledged commit survives the immediate stop below.
    await cluster.#pg('initdb', [
      '-D',
      cluster.#data,
      '-U',
      'postgres',
      '--auth=trust',
      '-E',
      'UTF8',
      '--no-sync',
    ])
    await cluster.start()
    return cluster
  }

  get #data(): string {
    return join(this.dir, 'data')
  }

  #pg(program: string, args: string[]): Promise<string> {
    const path = join(this.bin, program)
    return this.asUser === null ? run(path, args) : run('runuser', ['-u', this.asUser, '--', path, ...args])
  }

  async start(): Promise<void> {
    const options = `-p ${this.port} -k ${this.dir} -c listen_addresses=127.0.0.1 -c fsync=on`
    await this.#pg('pg_ctl', [
      '-D',
      this.#data,
      '-l',
      join(this.dir, 'server.log'),
      '-w',
      '-t',
      '60',
      '-o',
      options,
      'start',
    ])
  }

  /** Like a crash or `kill -9` of the postmaster: connections are cut, nothing is shut down in order. */
  async stop(): Promise<void> {
    await this.#pg('pg_ctl', ['-D', this.#data, '-m', 'immediate', '-w', 'stop'])
  }

  log(): string {
    try {
      return readFileSync(join(this.dir, 'server.log'), 'utf8').slice(-4000)
    } catch {
      return ''
    }
  }
}

// Only in the PostgreSQL run of the suite; the SQLite run has its own outage tests below. The
// cluster is private, so the shared server on 5432 is never stopped.
if (testDialect === 'postgres') {
  test('PostgreSQL stopped under load: 503 in bounded time, /readyz fails, /healthz stays up; recovers without a restart and loses nothing', {
    timeout: 180_000,
  }, async (t) => {
    const cluster = await PrivateCluster.create(t)
    if (typeof cluster === 'string') {
      // A CI run must prove this, so there a missing PostgreSQL installation is a failure.
      if (CI) assert.fail(`CI=true: the outage test cannot run: ${cluster}`)
      t.skip(cluster)
      return
    }
    const setup = openDatabase(parseDatabaseUrl(cluster.url))
    let key: string
    try {
      await migrateToLatest(setup)
      key = (await addTenant(setup, 'Acme', 'ci')).key
    } finally {
      await setup.close()
    }
    const server = await startServer(t, { databaseUrl: cluster.url, env: SERVER_ENV })
    const clients = new RetryingClients(server.url, key)
    clients.start()
    try {
      await until(() => clients.acknowledged().length >= 40, 30_000, 'acknowledgements before the outage')

      const logAtStop = server.output().length
      const stopIssuedAt = Date.now()
      await cluster.stop()
      const stoppedAt = Date.now()
      const probes: Array<{ path: string; status: number; ms: number }> = []
      while (Date.now() - stoppedAt < PG_OUTAGE_MS) {
        const ready = await get(`${server.url}/readyz`)
        assertUnavailable({ ...ready, retryAfter: 'n/a' }, 'GET /readyz while PostgreSQL is down')
        assert.ok(ready.ms <= ANSWER_BOUND_MS, `/readyz answered in ${ready.ms} ms`)
        const health = await get(`${server.url}/healthz`)
        assert.equal(health.status, 200, 'GET /healthz stays up while PostgreSQL is down')
        probes.push(
          { path: '/readyz', status: ready.status, ms: ready.ms },
          { path: '/healthz', status: health.status, ms: health.ms },
        )
        await sleep(500)
      }

      const startIssuedAt = Date.now()
      await cluster.start()
      const backAt = Date.now()
      await until(
        () => clients.attempts.some((a) => a.status === 201 && a.startedAt >= backAt),
        RECOVERY_BOUND_MS,
        'a request is recorded again after PostgreSQL is back',
      )
      const firstAck = Math.min(
        ...clients.attempts.filter((a) => a.status === 201 && a.startedAt >= backAt).map((a) => a.endedAt),
      )
      await until(() => clients.acknowledged().length >= 80, 30_000, 'more acknowledgements after the outage')
      const ready = await get(`${server.url}/readyz`)
      assert.equal(ready.status, 200, `/readyz is ready again: ${ready.body}`)
      assert.ok(server.isRunning(), 'the same Shiplog process served throughout (no restart)')
      // Once for the outage, however many requests and probes it refused (lost pool connections
      // and the revocation listener add warnings of their own, not tied to requests).
      const outageLog = server.output().slice(logAtStop)
      const lines = outageLines(outageLog)
      assert.equal(
        lines.length,
        1,
        `one log line for the outage, got ${lines.length}:\n${lines.slice(0, 5).join('\n')}`,
      )
      const otherLines = outageLog.split('\n').filter((line) => line.trim() !== '').length - lines.length

      await withTimeout(clients.stop(), 70_000, 'the clients did not finish')
      const attempts = clients.attempts
      const unanswered = attempts.filter((a) => a.failure !== null)
      assert.deepEqual(
        unanswered.map((a) => a.failure),
        [],
        'every request got an answer (the server never hung up or hung)',
      )
      // Requests sent entirely while PostgreSQL was down: all refused, each in bounded time.
      const during = attempts.filter((a) => a.startedAt >= stoppedAt && a.endedAt <= startIssuedAt)
      assert.ok(during.length > 0, 'requests were sent during the outage')
      for (const a of during) assertUnavailable(a, 'a request while PostgreSQL is down')
      const slowest = Math.max(...attempts.map((a) => a.endedAt - a.startedAt))
      assert.ok(
        slowest <= ANSWER_BOUND_MS,
        `every request was answered within ${ANSWER_BOUND_MS} ms (slowest ${slowest} ms)`,
      )
      const refused = attempts.filter((a) => a.status === 503)
      const slowest503 = Math.max(...refused.map((a) => a.endedAt - a.startedAt))
      const unexpected = attempts.filter((a) => ![200, 201, 503].includes(a.status))
      assert.deepEqual(
        unexpected.map((a) => `${a.status} ${a.body}`),
        [],
        'only 201, 200 replays and 503s',
      )

      const check = openDatabase(parseDatabaseUrl(cluster.url))
      try {
        const { rows, keys } = await readBack(check)
        assertStoredOnce(clients.events, rows, keys)
        const retried = clients.events.filter((e) => e.attempts.length > 1)
        t.diagnostic(
          `PostgreSQL down ${startIssuedAt - stopIssuedAt} ms (stop took ${stoppedAt - stopIssuedAt} ms, start ${backAt - startIssuedAt} ms); ` +
            `${refused.length} × 503, slowest ${slowest503} ms (bound ${ANSWER_BOUND_MS} ms), /readyz probes ${probes.filter((p) => p.path === '/readyz').length} × 503 ` +
            `in ≤ ${Math.max(...probes.map((p) => p.ms))} ms, /healthz 200 throughout`,
        )
        t.diagnostic(
          `recovery: first 201 ${firstAck - backAt} ms after PostgreSQL accepted connections again, same process; ` +
            `${clients.acknowledged().length} acknowledged (${clients.events.filter((e) => e.outcome === 'replayed').length} as replays), ` +
            `${retried.length} events retried, ${rows.length} stored, duplicates 0; log: 1 line for the outage (${otherLines} warnings about lost connections), ${(lines[0] ?? '').slice(0, 300)}`,
        )
      } finally {
        await check.close()
      }
    } catch (err) {
      await clients.stop().catch(() => {})
      throw new Error(
        `${(err as Error).message}\nserver output:\n${server.output().slice(-4000)}\nPostgreSQL log:\n${cluster.log()}`,
        {
          cause: err,
        },
      )
    }
  })
}

// ---------------------------------------------------------------------------------------------------
// SQLite: a full disk and a read-only disk under a running server

/** A place for the database whose disk the test can break, and how to break and mend it. */
interface Disk {
  readonly label: string
  /** Makes writes fail: the disk fills up, or the kernel turns the file system read-only. */
  break(): void | Promise<void>
  /** Makes writes work again without a restart; absent where only a restart could mend it. */
  readonly mend?: () => void | Promise<void>
}

/** A disk of the test's own, mounted at `dir`. */
interface MountedDisk extends Disk {
  readonly dir: string
}

/** Lazily, so that a process still holding files there cannot keep the mount (or the test) busy. */
async function unmount(dir: string): Promise<void> {
  await run('umount', ['-l', dir]).catch(() => {})
}

/** A small tmpfs of our own, so the test fills it without touching any shared disk. */
async function tmpfsDisk(t: Cleanup): Promise<MountedDisk | string> {
  const dir = mkdtempSync(join(tmpdir(), 'shiplog-full-'))
  let mounted = false
  t.after(async () => {
    if (mounted) await unmount(dir)
    rmSync(dir, { recursive: true, force: true })
  })
  try {
    await run('mount', ['-t', 'tmpfs', '-o', 'size=8m,mode=0700', 'tmpfs', dir])
    mounted = true
  } catch (err) {
    return `cannot mount a tmpfs (${(err as Error).message.split('\n')[0]})`
  }
  const filler = join(dir, 'filler')
  return {
    label: 'full disk (tmpfs filled to the last block)',
    dir,
    break() {
      const fd = openSync(filler, 'w')
      try {
        // Big pieces first, then ever smaller ones, so that not one free block remains.
        for (let size = 1024 * 1024; size >= 1; size >>= 1) {
          const piece = Buffer.alloc(size, 0x55)
          for (;;) {
            try {
              writeSync(fd, piece)
            } catch (err) {
              if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err
              break
            }
          }
        }
      } finally {
        closeSync(fd)
      }
    },
    mend() {
      unlinkSync(filler)
    },
  }
}

/**
 * An ext4 file system in a file, mounted with errors=remount-ro. Writing to its trigger_fs_error
 * reports a file-system error, and the kernel remounts it read-only under the running server, as it
 * does on a real disk fault. A mount point busy with open files cannot be remounted read-only by hand
 * (EBUSY), so this is the way to take a running server's disk away for writing.
 */
async function ext4Disk(t: Cleanup): Promise<MountedDisk | string> {
  const root = mkdtempSync(join(tmpdir(), 'shiplog-ro-'))
  const image = join(root, 'disk.img')
  const dir = join(root, 'mnt')
  let mounted = false
  t.after(async () => {
    if (mounted) await unmount(dir)
    rmSync(root, { recursive: true, force: true })
  })
  mkdirSync(dir)
  writeFileSync(image, '')
  try {
    await run('truncate', ['-s', '32M', image])
    await run('mkfs.ext4', ['-q', '-F', image])
    await run('mount', ['-o', 'loop,errors=remount-ro', image, dir])
    mounted = true
  } catch (err) {
    return `cannot mount an ext4 image (${(err as Error).message.split('\n')[0]})`
  }
  const source = (await run('findmnt', ['-n', '-o', 'SOURCE', '--mountpoint', dir])).trim()
  const trigger = `/sys/fs/ext4/${basename(source)}/trigger_fs_error`
  if (!existsSync(trigger)) return `the kernel offers no ${trigger}`
  return {
    label: 'read-only disk (ext4 remounted read-only by the kernel after an error)',
    dir,
    break() {
      writeFileSync(trigger, 'shiplog outage test: simulated disk fault\n')
    },
  }
}

/** What the scenario talks to: a server process, or (where no disk can be mounted) the app in-process. */
interface Target {
  readonly url: string
  readonly key: string
  /** The server's log so far. */
  logs(): string
  running(): boolean
  /** A copy of the database files, read after the scenario. */
  snapshot(): Promise<{ rows: EventRow[]; keys: Array<{ idem_key: string; event_id: number | null }> }>
}

/** Reads a copy of the SQLite file and its WAL: the original may be on a read-only disk. */
async function snapshotOf(
  dbPath: string,
  t: Cleanup,
): Promise<{ rows: EventRow[]; keys: Array<{ idem_key: string; event_id: number | null }> }> {
  const dir = mkdtempSync(join(tmpdir(), 'shiplog-copy-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const copy = join(dir, 'copy.db')
  copyFileSync(dbPath, copy)
  if (existsSync(`${dbPath}-wal`)) copyFileSync(`${dbPath}-wal`, `${copy}-wal`)
  const database = openDatabase(parseDatabaseUrl(`sqlite:${copy}`))
  try {
    return await readBack(database)
  } finally {
    await database.close()
  }
}

async function prepareSqlite(dbPath: string): Promise<string> {
  const database = openDatabase(parseDatabaseUrl(`sqlite:${dbPath}`))
  try {
    await migrateToLatest(database)
    return (await addTenant(database, 'Acme', 'ci')).key
  } finally {
    await database.close()
  }
}

async function serverOnDisk(t: Cleanup, disk: MountedDisk): Promise<Target & { server: ServerProcess }> {
  const dbPath = join(disk.dir, 'shiplog.db')
  const key = await prepareSqlite(dbPath)
  const server = await startServer(t, { databaseUrl: `sqlite:${dbPath}`, env: SERVER_ENV })
  return {
    server,
    url: server.url,
    key,
    logs: () => server.output(),
    running: () => server.isRunning(),
    snapshot: () => snapshotOf(dbPath, t),
  }
}

/**
 * Where no file system can be mounted (not root), the same scenario runs against the app in this
 * process with SQLite's own limits: PRAGMA max_page_count for a full database, query_only for a
 * read-only one. Not the real disk, but the same SQLite errors through the same code.
 */
async function inProcess(t: Cleanup, kind: 'full' | 'read-only'): Promise<{ target: Target; disk: Disk }> {
  const config = testConfig(await freshDatabaseUrl(t))
  const database = openDatabase(config.database)
  const close: Array<() => Promise<void>> = [() => database.close()]
  t.after(async () => {
    for (const fn of close.reverse()) await fn()
  })
  await migrateToLatest(database)
  const { key } = await addTenant(database, 'Acme', 'ci')
  let log = ''
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      log += chunk.toString('utf8')
      done()
    },
  })
  const app = await buildApp({ config, database, logger: { level: 'warn', stream } })
  close.push(() => app.close())
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as AddressInfo
  assert.ok(database.dialect === 'sqlite')
  // The pragmas go to the write connection, borrowed from its owner's queue.
  const onWriter = async (pragma: string) => {
    const hold = await database.hold()
    try {
      hold.sql.execute(pragma, [])
    } finally {
      hold.release()
    }
  }
  const target: Target = {
    url: `http://127.0.0.1:${port}`,
    key,
    logs: () => log,
    running: () => true,
    snapshot: () => readBack(database),
  }
  const disk: Disk =
    kind === 'full'
      ? {
          label: 'full database (in-process fallback: PRAGMA max_page_count)',
          async break() {
            const { rows } = await sql<{ page_count: number }>`PRAGMA page_count`.execute(database.db)
            await onWriter(`PRAGMA max_page_count = ${rows[0]?.page_count ?? 1}`)
          },
          mend: () => onWriter('PRAGMA max_page_count = 1073741823'),
        }
      : {
          label: 'read-only database (in-process fallback: PRAGMA query_only)',
          break: () => onWriter('PRAGMA query_only = ON'),
        }
  return { target, disk }
}

/** Log lines about failed requests or probes: those with a request id, and any error or worse. */
function outageLines(log: string): string[] {
  return log
    .split('\n')
    .filter((line) => line.trim() !== '')
    .filter((line) => {
      try {
        const entry = JSON.parse(line) as { level?: number; reqId?: unknown }
        return entry.reqId !== undefined || (entry.level ?? 0) >= 50
      } catch {
        // Not a pino line (a stack trace printed raw, say): it counts.
        return true
      }
    })
}

async function sqliteOutage(
  t: Cleanup & { diagnostic(message: string): void },
  target: Target,
  disk: Disk,
): Promise<void> {
  const { url, key } = target
  const warmUp = FORMS.map((form) => newEvent('before', form))
  for (const event of warmUp) {
    const attempt = await send(url, key, event)
    assert.equal(attempt.status, 201, `before the outage: ${attempt.body}`)
  }
  const logBefore = target.logs().length

  await disk.break()
  const events: LogicalEvent[] = [...warmUp]
  // SQLite may still finish a write that fits in space it already holds; the first write that needs
  // more is refused, and so is every one after it.
  let firstRefusal = -1
  for (let i = 0; i < 300 && firstRefusal < 0; i++) {
    const event = newEvent(`probe-${i}`, FORMS[i % FORMS.length] ?? 'deploy')
    events.push(event)
    const attempt = await send(url, key, event)
    if (attempt.status === 503) firstRefusal = i
    else assert.equal(attempt.status, 201, `a write that fits is recorded: ${attempt.body}`)
  }
  assert.ok(firstRefusal >= 0, `writes are refused on the ${disk.label}`)
  const burst = Array.from({ length: 12 }, (_, i) =>
    newEvent(`burst-${i}`, FORMS[i % FORMS.length] ?? 'deploy'),
  )
  events.push(...burst)
  const answers = await Promise.all(burst.map((event) => send(url, key, event)))
  for (const attempt of answers) {
    assertUnavailable(attempt, `a request on the ${disk.label}`)
    assert.ok(
      attempt.endedAt - attempt.startedAt <= ANSWER_BOUND_MS,
      `answered in ${attempt.endedAt - attempt.startedAt} ms`,
    )
  }
  const slowest = Math.max(...answers.map((a) => a.endedAt - a.startedAt))
  const health = await get(`${url}/healthz`)
  assert.equal(health.status, 200, '/healthz stays up')
  const ready = await get(`${url}/readyz`)
  // A real disk refuses the readiness probe's commit as it refuses events. (The in-process fallback's
  // max_page_count leaves room for the probe's one small row, so there it is only reported.)
  if (!disk.label.includes('fallback')) assert.equal(ready.status, 503, `/readyz on the ${disk.label}`)
  assert.ok(target.running(), 'the server keeps running')

  // One clear line for the outage: not one per refused request or probe, and no stack trace.
  const lines = outageLines(target.logs().slice(logBefore))
  assert.equal(
    lines.length,
    1,
    `exactly one log line about the outage, got ${lines.length}:\n${lines.slice(0, 5).join('\n')}`,
  )
  const [line = ''] = lines
  assert.match(line, /full|read-only|readonly|I\/O|disk/i, `the line says what is wrong: ${line}`)
  assert.doesNotMatch(line, /\\n\s+at /, 'the line carries no stack trace')

  let mended = 'not mendable without a restart'
  if (disk.mend) {
    await disk.mend()
    const refused = events.filter((e) => e.outcome === 'pending')
    for (const event of refused) {
      const attempt = await send(url, key, event)
      // 201, not a 200 replay: the refused attempt left nothing behind, not even its key.
      assert.equal(attempt.status, 201, `after the disk is mended, the retry is recorded: ${attempt.body}`)
    }
    mended = `mended: ${refused.length} refused events retried with their keys, all 201 in the same process`
  }

  const { rows, keys } = await target.snapshot()
  assertStoredOnce(events, rows, keys)
  t.diagnostic(
    `${disk.label}: ${firstRefusal} writes still fitted, then ${answers.length} × 503 (slowest ${slowest} ms); ` +
      `/healthz ${health.status}, /readyz ${ready.status}; log: ${line.slice(0, 300)}; ${mended}; ${rows.length} stored, none twice`,
  )
}

if (testDialect === 'sqlite') {
  for (const kind of ['full', 'read-only'] as const) {
    test(`SQLite on a ${kind} disk under a running server: 503 problem+json, one clear log line, nothing half-stored`, {
      timeout: 60_000,
    }, async (t) => {
      const disk = kind === 'full' ? await tmpfsDisk(t) : await ext4Disk(t)
      if (typeof disk === 'string') {
        // The fallback proves less (no server process, no /readyz check), so a CI run, which must
        // prove the real thing, fails here, like the PostgreSQL outage test without PostgreSQL.
        if (CI) assert.fail(`CI=true: the SQLite outage test needs a real disk: ${disk}`)
        t.diagnostic(`${disk}: running the in-process fallback`)
        const fallback = await inProcess(t, kind)
        await sqliteOutage(t, fallback.target, fallback.disk)
        // Counted as a skip, so the run's summary shows that the real disk was not tried.
        t.skip(`${disk}: only the in-process fallback ran (no server process, no /readyz check)`)
        return
      }
      const target = await serverOnDisk(t, disk)
      try {
        await sqliteOutage(t, target, disk)
      } catch (err) {
        throw new Error(`${(err as Error).message}\nserver output:\n${target.logs().slice(-3000)}`, {
          cause: err,
        })
      } finally {
        // Before the mount goes away, so the lazy unmount releases the disk at once.
        target.server.signal('SIGKILL')
        await target.server.waitForExit(5_000).catch(() => {})
      }
    })
  }
}

test('an outage is logged once with its cause, then only a reminder a minute; a quiet spell or a success ends it', () => {
  let now = 0
  const outages = new OutageLog(60_000, () => now)
  const lines: string[] = []
  const log = {
    error: (_fields: Record<string, unknown>, message: string) => void lines.push(`error ${message}`),
    info: (_fields: Record<string, unknown>, message: string) => void lines.push(`info ${message}`),
  }
  const full = Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' })
  for (; now < 59_000; now += 100) outages.failed(log, full)
  assert.equal(lines.length, 1, 'one line for hundreds of refused requests')
  assert.match(
    lines[0] ?? '',
    /^error database unavailable: the disk or the database file is full: .*SQLITE_FULL/,
  )
  now = 61_000
  outages.failed(log, full)
  assert.match(lines[1] ?? '', /^error database still unavailable: .* 591 failures so far$/)
  outages.recovered(log)
  assert.equal(lines[2], 'info database available again')
  outages.recovered(log)
  assert.equal(lines.length, 3, 'recovery is logged once')
  // A new outage after a success, or after a minute without failures, is logged in full again.
  outages.failed(log, full)
  now += 60_000
  outages.failed(
    log,
    Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }),
  )
  assert.deepEqual(
    lines.slice(3).map((line) => line.split(':')[0]),
    ['error database unavailable', 'error database unavailable'],
  )
  assert.match(lines[4] ?? '', /cannot reach the database server: connect ECONNREFUSED/)
})
