// Crash harness: servers SIGKILLed at random moments while everything else is busy lose and double nothing.
//
// Clients record events (Deploying → Deployed/Failed, retries, rollbacks) with and without an
// Idempotency-Key; meanwhile the servers derive deployments and the tamper-evidence chain, send
// webhooks to a slow receiver, feed live streams, prune by retention, and serve CSV exports; an
// operator runs the sqlite3 shell, `shiplog keys create` (and uses the key), `backup`, `verify`,
// `dump` and `doctor` at random moments. On PostgreSQL two instances share the database and either
// or both are killed. After each restart a snapshot of the database is checked; at the end, with
// the servers stopped, everything is.
//
// SHIPLOG_CRASH_KILLS sets the number of kill rounds (default 5, as in CI; 30 for the long run),
// SHIPLOG_CRASH_SEED replays the kill moments, the mix of requests and the operators' choices, and
// SHIPLOG_CRASH_LOG_LEVEL sets the servers' LOG_LEVEL (warn).
import assert from 'node:assert/strict'
import { randomBytes, randomInt } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { isDeepStrictEqual } from 'node:util'
import { gunzipSync } from 'node:zlib'
import { parseDatabaseUrl } from '../../src/config.js'
import { type Database, openDatabase } from '../../src/db/connect.js'
import type { EventRow } from '../../src/db/schema.js'
import { type Cleanup, databaseForServers, testDialect } from '../helper.js'
import {
  deploymentDifferences,
  derivedEvents,
  readSnapshot,
  type Snapshot,
} from '../support/crash-invariants.js'
import { Exporter, failureOf, LiveStreams } from '../support/crash-observers.js'
import { plainDeployments } from '../support/deployments.js'
import {
  type ProcessResult,
  processEnv,
  runCli,
  type ServerProcess,
  sleep,
  startServer,
  withTimeout,
} from '../support/processes.js'
import { sqliteShellAsync } from '../support/sqlite-files.js'
import { type EventSeed, insertEvents, PASSWORD } from '../support/ui.js'
import { startReceiver, verifySignature } from '../support/webhook-receiver.js'

function envInteger(name: string, fallback: number, min: number): number {
  const raw = process.env[name]
  if (raw === undefined || raw.trim() === '') return fallback
  const value = Number(raw)
  if (!Number.isInteger(value) || value < min) throw new Error(`${name} must be a whole number ≥ ${min}`)
  return value
}

const KILLS = envInteger('SHIPLOG_CRASH_KILLS', 5, 1)
const SEED = envInteger('SHIPLOG_CRASH_SEED', randomInt(2 ** 31), 0)
/** Concurrent clients: enough that every kill cuts several requests (and a group commit) short. */
const CLIENTS = 6
/** A kill comes this long after the server (re)started and the checks ran: a random moment. */
const KILL_DELAY_MIN_MS = 150
const KILL_DELAY_MAX_MS = 1500
/** Share of events sent without an Idempotency-Key; a client cannot safely retry those. */
const PLAIN_SHARE = 0.2
/** A client waits this long (plus jitter) before it retries; shiplog-deploy backs off similarly. */
const RETRY_DELAY_MS = 40
/** One request may take this long; a killed server resets its connections, so none should. */
const REQUEST_TIMEOUT_MS = 15_000
/** A client gives up on an event it could not get acknowledged for this long (the test then fails). */
const EVENT_DEADLINE_MS = 30_000
/**
 * The server prunes by retention only in a run of its retention task, the first a minute after it
 * starts (src/domain/operations/retention.ts; nothing configures it): so some lives last that long,
 * and end in a kill while the prune is under way. One per ten kills, at least one.
 */
const LONG_LIVES = Math.max(1, Math.floor(KILLS / 10))
/** How long a long life waits for the prune to begin before it is killed all the same. */
const RETENTION_WAIT_MS = 80_000
/** Old events are Deploying/Deployed pairs in these service names, so pruning has work. */
const OLD_SERVICES = ['old-billing', 'old-search', 'old-auth']
/** Pairs of old events per long life: a prune of them takes a few transactions (1000 events each). */
const OLD_PAIRS_PER_LONG_LIFE = 2500
/** The old events' ages, evenly spread; the retention of the last long life passes them all. */
const OLDEST_DAYS = 400
const NEWEST_DAYS = 45
const LAST_RETENTION_DAYS = 40
/**
 * The retention the operator sets just before long life `i`: each a shorter one, so each long life
 * has its own share of old events to prune (a prune that outlived its kill, or ran on the other
 * PostgreSQL instance, would otherwise leave the next one nothing).
 */
function retentionDays(i: number): number {
  return Math.round(OLDEST_DAYS - ((i + 1) * (OLDEST_DAYS - LAST_RETENTION_DAYS)) / LONG_LIVES)
}
/** Live streams held open, spread over the servers. */
const STREAMS = 3
/** `shiplog verify` as a check (beside the operator's) after every this many kills, and at the end. */
const VERIFY_EVERY = 3
/** The slow webhook receiver answers after this long. */
const RECEIVER_DELAY_MS: readonly [number, number] = [200, 800]
const SERVER_ENV = {
  // The servers answer many thousands of requests; the per-key limit must not get in the way.
  SHIPLOG_RATE_LIMIT: '10000000',
  // The receiver is on 127.0.0.1.
  SHIPLOG_WEBHOOK_ALLOW_PRIVATE: '1',
  // SHIPLOG_CRASH_LOG_LEVEL=debug shows each background task's runs in the output kept on failure.
  LOG_LEVEL: process.env.SHIPLOG_CRASH_LOG_LEVEL ?? 'warn',
}
/** Operator commands that read or copy the whole database get longer than runCli's default. */
const OPERATOR_TIMEOUT_MS = 90_000
/** How long the sqlite3 shell waits for a lock (`.timeout`), as long as Shiplog's connections do. */
const SHELL_BUSY_TIMEOUT_MS = 5000
const USER = { email: 'ops@example.com', password: PASSWORD }

type Form = 'deploy' | 'put-post' | 'put-get'
type Status = 'Deploying' | 'Deployed' | 'Failed'

interface Sent {
  service: string
  environment: string
  version: string
  status: Status
  /** Unique to this logical event across the run: how its row is found. */
  description: string
  deployer: string | null
}

/** One thing a client wants recorded. */
interface LogicalEvent {
  readonly client: number
  readonly form: Form
  readonly idempotencyKey: string | null
  readonly sent: Sent
  readonly key: string
  readonly keyName: string
  attempts: number
  /** Why earlier attempts did not get an answer (connection refused or reset, 503, timeout). */
  readonly failures: string[]
  /**
   * created: answered 201. replayed: answered 200 Idempotent-Replayed, so an earlier attempt had been
   * stored and only its answer was lost. abandoned: an attempt without a key failed, and a client
   * cannot know whether it was stored (it must then be stored at most once).
   */
  outcome: 'pending' | 'created' | 'replayed' | 'abandoned'
  body: Record<string, unknown> | null
}

/** mulberry32: a small seeded generator, so a failing run can be replayed with its seed. */
function seededRandom(seed: number): () => number {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let z = state
    z = Math.imul(z ^ (z >>> 15), z | 1)
    z ^= z + Math.imul(z ^ (z >>> 7), z | 61)
    return ((z ^ (z >>> 14)) >>> 0) / 2 ** 32
  }
}

function pick<T>(random: () => number, items: readonly T[]): T {
  const item = items[Math.floor(random() * items.length)]
  if (item === undefined) throw new Error('pick from an empty list')
  return item
}

function requestFor(base: string, event: LogicalEvent): [string, RequestInit] {
  const { sent } = event
  const headers: Record<string, string> = { 'x-api-key': event.key }
  if (event.idempotencyKey !== null) headers['idempotency-key'] = event.idempotencyKey
  const extras: Record<string, string> = sent.deployer === null ? {} : { deployer: sent.deployer }
  const legacy: Record<string, string> = {
    app: sent.service,
    env: sent.environment,
    version: sent.version,
    status: sent.status,
    description: sent.description,
    ...extras,
  }
  const init: RequestInit = { headers, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) }
  switch (event.form) {
    case 'put-get':
      return [`${base}/put?${new URLSearchParams(legacy).toString()}`, { ...init, method: 'GET' }]
    case 'put-post':
      headers['content-type'] = 'application/json'
      return [`${base}/put`, { ...init, method: 'POST', body: JSON.stringify(legacy) }]
    case 'deploy': {
      headers['content-type'] = 'application/json'
      const { deployer: _, ...fields } = sent
      return [`${base}/deploy`, { ...init, method: 'POST', body: JSON.stringify({ ...fields, ...extras }) }]
    }
  }
}

/**
 * CLIENTS concurrent clients, spread over the servers, each recording deployments of its own
 * service back to back: mostly Deploying then Deployed or Failed, sometimes a repeated Deploying (a
 * retry, folded), an instant Deployed, one left open, or a return to an earlier version (a
 * rollback). Form and key are the seed's choice. An attempt that fails without an answer (the server
 * is down or was killed mid-request) or with a 503 is retried, with the same Idempotency-Key, until
 * the event is acknowledged; a restarted server listens where the old one did, so the clients never
 * learn of it.
 */
class Load {
  readonly events: LogicalEvent[] = []
  /** Answers no client should get: anything but 201, a 200 replay, or 503. */
  readonly unexpected: string[] = []
  inFlight = 0
  answers503 = 0
  #stopping = false
  readonly run = randomBytes(3).toString('hex')
  #loops: Promise<void> | null = null
  readonly #extra: Promise<void>[] = []

  constructor(
    private readonly urls: readonly string[],
    private readonly key: string,
  ) {}

  start(): void {
    this.#loops = Promise.all(Array.from({ length: CLIENTS }, (_, n) => this.#client(n))).then(() => {})
  }

  /** Clients start no new event, but finish (retry until acknowledged) the one they have. */
  async stop(): Promise<void> {
    this.#stopping = true
    await this.#loops
    await Promise.all(this.#extra)
  }

  acknowledged(): LogicalEvent[] {
    return this.events.filter((e) => e.outcome === 'created' || e.outcome === 'replayed')
  }

  acknowledgedIds(): number[] {
    return this.acknowledged().map((e) => Number(e.body?.id))
  }

  /**
   * Records one event with another key (one an operator just created), through server `server`,
   * retried until acknowledged like any keyed event; resolves with its outcome.
   */
  sendWith(key: string, keyName: string, server: number, marker: string): Promise<LogicalEvent> {
    const event: LogicalEvent = {
      client: -1,
      form: 'deploy',
      idempotencyKey: `crash-op-${this.run}-${marker}`,
      key,
      keyName,
      sent: {
        service: 'svc-operator',
        environment: 'prod',
        version: `op-${this.run}-${marker}`,
        status: 'Deployed',
        description: `crash operator ${this.run}-${marker}`,
        deployer: 'operator',
      },
      attempts: 0,
      failures: [],
      outcome: 'pending',
      body: null,
    }
    this.events.push(event)
    const done = this.#deliver(event, this.urls[server % this.urls.length] ?? '').then(() => event)
    this.#extra.push(done.then(() => {}))
    return done
  }

  async #client(n: number): Promise<void> {
    // One generator per client: what it sends depends on the seed alone, not on how the clients'
    // requests interleave.
    const random = seededRandom(SEED ^ Math.imul(n + 1, 0x9e3779b1))
    const forms: Form[] = ['deploy', 'deploy', 'put-post', 'put-get']
    const base = this.urls[n % this.urls.length] ?? ''
    const succeeded = new Map<string, string[]>()
    let i = 0
    for (let d = 0; !this.#stopping; d++) {
      const environment = random() < 0.5 ? 'prod' : 'staging'
      const earlier = succeeded.get(environment) ?? []
      // A return to a version that succeeded here before, but not the one running: a rollback.
      const rollback = earlier.length >= 2 && random() < 0.1
      const version = rollback ? pick(random, earlier.slice(0, -1)) : `v-${this.run}-${n}-${d}`
      const shape = random()
      const plan: Status[] =
        shape < 0.08
          ? ['Deployed']
          : shape < 0.13
            ? ['Deploying']
            : shape < 0.23
              ? ['Deploying', 'Deploying', 'Deployed']
              : ['Deploying', random() < 0.75 ? 'Deployed' : 'Failed']
      const deployer = random() < 0.5 ? `deployer-${n}` : null
      for (const status of plan) {
        if (this.#stopping) break
        const marker = `${this.run}-${n}-${i++}`
        const event: LogicalEvent = {
          client: n,
          form: pick(random, forms),
          idempotencyKey: random() < PLAIN_SHARE ? null : `crash-${marker}`,
          key: this.key,
          keyName: 'ci',
          sent: {
            service: `svc-${n}`,
            environment,
            version,
            status,
            description: `crash harness ${marker} — ünïcödé`,
            deployer,
          },
          attempts: 0,
          failures: [],
          outcome: 'pending',
          body: null,
        }
        this.events.push(event)
        await this.#deliver(event, base)
        if (status === 'Deployed' && (event.outcome === 'created' || event.outcome === 'replayed')) {
          succeeded.set(environment, [...earlier.filter((v) => v !== version), version])
        }
      }
    }
  }

  async #deliver(event: LogicalEvent, base: string): Promise<void> {
    const deadline = Date.now() + EVENT_DEADLINE_MS
    for (;;) {
      event.attempts++
      const [url, init] = requestFor(base, event)
      let status = 0
      let replayed = false
      let text = ''
      let failure: string | null = null
      this.inFlight++
      try {
        const response = await fetch(url, init)
        status = response.status
        replayed = response.headers.get('idempotent-replayed') === 'true'
        text = await response.text()
      } catch (err) {
        failure = failureOf(err)
      } finally {
        this.inFlight--
      }
      if (failure === 'timeout') {
        this.unexpected.push(`${event.sent.description}: no answer within ${REQUEST_TIMEOUT_MS} ms`)
      }
      if (failure === null && status === 201) {
        event.outcome = 'created'
        event.body = JSON.parse(text) as Record<string, unknown>
        return
      }
      if (failure === null && status === 200 && replayed && event.idempotencyKey !== null) {
        event.outcome = 'replayed'
        event.body = JSON.parse(text) as Record<string, unknown>
        return
      }
      if (failure === null && status === 503) {
        this.answers503++
        failure = '503'
      }
      if (failure === null) {
        this.unexpected.push(`${event.sent.description} (${event.form}): ${status} ${text.slice(0, 300)}`)
        event.outcome = 'abandoned'
        return
      }
      event.failures.push(failure)
      if (event.idempotencyKey === null) {
        // Without a key a retry could record the event twice, so a careful client gives up here.
        event.outcome = 'abandoned'
        return
      }
      if (Date.now() > deadline) {
        this.unexpected.push(`${event.sent.description}: not acknowledged in ${EVENT_DEADLINE_MS} ms`)
        event.outcome = 'abandoned'
        return
      }
      await sleep(RETRY_DELAY_MS + Math.floor(Math.random() * RETRY_DELAY_MS))
    }
  }
}

const SOURCE_OF_FORM: Record<Form, EventRow['source']> = {
  deploy: 'deploy',
  'put-post': 'put-post',
  'put-get': 'put-get',
}

/** The row as the 201 body and the client describe it. */
function describeRow(row: EventRow) {
  return {
    id: Number(row.id),
    service: row.service,
    environment: row.environment,
    version: row.version,
    status: row.status,
    description: row.description,
    deployer: row.deployer,
    source: row.source,
    api_key_name: row.api_key_name,
    received_at: new Date(Number(row.received_at)).toISOString(),
  }
}

interface OldEvent {
  description: string
  /** The deployment (pair of events) it belongs to: retention prunes both or neither. */
  pair: string
  service: string
}

/**
 * Events as an installation that has run for a year holds them: pairs older than the retention, in
 * services of their own. Written straight into the database before the first server starts: a
 * server stamps received_at with its own clock, and no request can carry an earlier time (SPEC
 * §1.2's occurred_at is not implemented), so this is the only way to have events past the retention.
 * Each version is new, so no rollback depends on a pruned deployment (after a prune a rebuild could
 * then mark it differently: README, Retention).
 */
async function seedOldEvents(databaseUrl: string, pairs: number): Promise<OldEvent[]> {
  const database = openDatabase(parseDatabaseUrl(databaseUrl))
  try {
    const account = await database.db
      .selectFrom('accounts')
      .select('id')
      .where('name', '=', 'Acme')
      .executeTakeFirstOrThrow()
    const day = 86_400_000
    const start = Date.now() - OLDEST_DAYS * day
    const span = (OLDEST_DAYS - NEWEST_DAYS) * day
    const old: OldEvent[] = []
    const seeds: EventSeed[] = []
    for (let p = 0; p < pairs; p++) {
      const service = OLD_SERVICES[p % OLD_SERVICES.length] ?? 'old'
      const at = start + Math.floor((p / pairs) * span)
      for (const [j, status] of (['Deploying', p % 7 === 0 ? 'Failed' : 'Deployed'] as const).entries()) {
        const description = `crash old ${p}-${j}`
        old.push({ description, pair: `old-${p}`, service })
        seeds.push({
          service,
          environment: 'prod',
          version: `old-${p}`,
          status,
          description,
          received_at: at + j * 120_000,
        })
      }
    }
    await insertEvents(database, Number(account.id), seeds)
    return old
  } finally {
    await database.close()
  }
}

async function countOldEvents(database: Database): Promise<number> {
  const row = await database.db
    .selectFrom('events')
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .where('service', 'in', OLD_SERVICES)
    .executeTakeFirstOrThrow()
  return Number(row.n)
}

/**
 * What must hold at any moment, from a snapshot: every event acknowledged before it was taken is
 * stored once, as sent; nothing is stored twice or unasked; old events are stored or pruned whole;
 * the stored deployments are the plain rules over the events derived so far. Returns the problems.
 */
function snapshotProblems(
  snapshot: Snapshot,
  acknowledged: readonly LogicalEvent[],
  all: readonly LogicalEvent[],
  old: readonly OldEvent[],
): string[] {
  const problems: string[] = []
  const byDescription = new Map<string, EventRow[]>()
  for (const row of snapshot.events) {
    const description = row.description ?? ''
    const rows = byDescription.get(description) ?? []
    rows.push(row)
    byDescription.set(description, rows)
  }
  for (const [description, rows] of byDescription) {
    if (rows.length > 1)
      problems.push(`${description} is stored ${rows.length} times: ids ${rows.map((r) => r.id).join(', ')}`)
  }
  const known = new Set([...all.map((e) => e.sent.description), ...old.map((o) => o.description)])
  for (const row of snapshot.events) {
    if (!known.has(row.description ?? ''))
      problems.push(`event ${row.id} (${row.description}) was never sent`)
  }
  for (const event of acknowledged) {
    const row = byDescription.get(event.sent.description)?.[0]
    const body = event.body ?? {}
    if (!row) {
      problems.push(`lost: ${event.sent.description} (id ${String(body.id)}, ${event.outcome})`)
      continue
    }
    // The answer names the stored row (for a replay: the one an earlier attempt stored) and both
    // hold what the client sent.
    const expected = {
      ...event.sent,
      source: SOURCE_OF_FORM[event.form],
      api_key_name: event.keyName,
      id: Number(body.id),
      received_at: body.received_at,
    }
    if (!isDeepStrictEqual(describeRow(row), expected)) {
      problems.push(
        `${event.sent.description} is stored as ${JSON.stringify(describeRow(row))}, acknowledged as ${JSON.stringify(expected)}`,
      )
    }
  }
  const pairs = new Map<string, number>()
  for (const o of old) {
    if (byDescription.has(o.description)) pairs.set(o.pair, (pairs.get(o.pair) ?? 0) + 1)
  }
  for (const [pair, n] of pairs) {
    if (n !== 2) problems.push(`old deployment ${pair} is pruned in part (${n} of its 2 events remain)`)
  }
  problems.push(
    ...deploymentDifferences(
      snapshot.deployments,
      plainDeployments(derivedEvents(snapshot)),
      10,
      snapshot,
    ).map(
      (line) =>
        `deployments differ from the rules over the ${derivedEvents(snapshot).length} derived events: ${line}`,
    ),
  )
  return problems
}

type OperatorKind = 'sqlite3' | 'keys-create' | 'backup' | 'verify' | 'dump' | 'doctor'

interface OperatorRun {
  kind: OperatorKind
  life: number
  /** When it started, in ms since the test began (to set beside the kills and restarts). */
  at: number
  ms: number
  ok: boolean
  detail: string
}

/** Milliseconds since the module loaded: one clock for the operators' runs and the kills. */
const clock = (() => {
  const zero = Date.now()
  return () => Date.now() - zero
})()

/** Ids of the `events` rows of a shiplog dump (NDJSON: a header line per table, then its rows). */
function eventIdsOfDump(path: string): number[] {
  const raw = readFileSync(path)
  const text = (path.endsWith('.gz') ? gunzipSync(raw) : raw).toString('utf8')
  const ids: number[] = []
  let column = -1
  for (const line of text.split('\n')) {
    if (line === '') continue
    if (line.startsWith('{')) {
      const header = JSON.parse(line) as { table?: string; columns?: string[] }
      column = header.table === 'events' ? (header.columns ?? []).indexOf('id') : -1
      continue
    }
    if (column >= 0) ids.push(Number((JSON.parse(line) as unknown[])[column]))
  }
  return ids
}

/**
 * The operator beside the servers: each command runs to its end whatever happens to the servers
 * meanwhile (a kill, a restart) and must succeed; the copies it makes must hold every event
 * acknowledged before it began.
 */
class Operator {
  readonly runs: OperatorRun[] = []
  readonly #pending: Promise<void>[] = []
  #keys = 0

  constructor(
    private readonly t: Cleanup,
    private readonly databaseUrl: string,
    private readonly scratch: string,
    private readonly load: Load,
    private readonly servers: number,
  ) {}

  static kinds(): OperatorKind[] {
    return testDialect === 'sqlite'
      ? ['sqlite3', 'keys-create', 'backup', 'verify', 'dump', 'doctor']
      : ['keys-create', 'verify', 'dump', 'doctor']
  }

  /** Starts `kind` after `delayMs`, without waiting for it. */
  schedule(kind: OperatorKind, life: number, delayMs: number): void {
    this.#pending.push(
      sleep(delayMs)
        .then(() => this.#run(kind, life))
        .catch((err: unknown) => {
          this.runs.push({ kind, life, at: clock(), ms: 0, ok: false, detail: (err as Error).message })
        }),
    )
  }

  async finished(): Promise<void> {
    await Promise.all(this.#pending)
  }

  #cli(args: string[]): Promise<ProcessResult> {
    return runCli(this.t, args, { env: processEnv(this.databaseUrl), timeoutMs: OPERATOR_TIMEOUT_MS })
  }

  async #run(kind: OperatorKind, life: number): Promise<void> {
    const started = Date.now()
    const at = clock()
    const before = this.load.acknowledgedIds()
    let detail = ''
    let ok = true
    const fail = (why: string) => {
      ok = false
      detail = why
    }
    const exited = (result: ProcessResult) => {
      if (result.code !== 0) fail(`exit ${result.code}: ${result.stderr.trim().slice(0, 300)}`)
      return result.code === 0
    }
    const missingFrom = (ids: readonly number[]) => {
      const have = new Set(ids)
      return before.filter((id) => !have.has(id))
    }
    switch (kind) {
      case 'sqlite3': {
        const path = (parseDatabaseUrl(this.databaseUrl) as { path: string }).path
        // With a busy timeout, as the server's own connections have: a shell opening the file just as
        // a restarted server replays its WAL, or as the last other connection checkpoints it on
        // closing, is otherwise refused at once ("database is locked"), by SQLite's design.
        detail = await sqliteShellAsync(
          path,
          "select count(*) from events; select count(*) from deployments where result = 'succeeded'; select through from deployments_progress",
          { busyTimeoutMs: SHELL_BUSY_TIMEOUT_MS },
        ).then((out) => out.replaceAll('\n', ' / '))
        break
      }
      case 'keys-create': {
        const n = ++this.#keys
        const name = `operator-${n}`
        const created = await this.#cli(['keys', 'create', '--account', 'Acme', '--name', name])
        if (!exited(created)) break
        const key = created.stdout.trim()
        if (!/^shl_\w{32,}$/.test(key) || created.stdout !== `${key}\n`) {
          fail(`stdout is not one key: ${JSON.stringify(created.stdout)}`)
          break
        }
        // The new key must work against the running server(s) at once.
        const event = await this.load.sendWith(key, name, n % this.servers, `key-${n}`)
        if (event.outcome !== 'created' && event.outcome !== 'replayed')
          fail(`the new key's event was ${event.outcome}`)
        else detail = `${name} recorded event ${String(event.body?.id)}`
        break
      }
      case 'backup': {
        const out = join(this.scratch, `backup-${randomBytes(4).toString('hex')}.db`)
        const result = await this.#cli(['backup', '--out', out])
        if (!exited(result)) break
        const integrity = await sqliteShellAsync(out, 'pragma integrity_check', {
          timeoutMs: OPERATOR_TIMEOUT_MS,
        })
        const ids = (await sqliteShellAsync(out, 'select id from events', { timeoutMs: OPERATOR_TIMEOUT_MS }))
          .split('\n')
          .map(Number)
        const missing = missingFrom(ids)
        if (integrity !== 'ok') fail(`the backup's integrity_check says ${integrity}`)
        else if (missing.length > 0)
          fail(
            `the backup lacks ${missing.length} acknowledged events, e.g. ${missing.slice(0, 5).join(', ')}`,
          )
        else detail = `${ids.length} events, ${(statSync(out).size / 1024 ** 2).toFixed(1)} MiB`
        rmSync(out, { force: true })
        break
      }
      case 'verify': {
        const result = await this.#cli(['verify'])
        if (exited(result) && !/^verify: intact$/m.test(result.stdout)) fail(`verify said: ${result.stdout}`)
        if (ok) detail = result.stdout.split('\n')[0] ?? ''
        break
      }
      case 'dump': {
        const out = join(
          this.scratch,
          `dump-${randomBytes(4).toString('hex')}.ndjson${this.runs.length % 2 === 0 ? '.gz' : ''}`,
        )
        const result = await this.#cli(['dump', '--out', out])
        if (!exited(result)) break
        const ids = eventIdsOfDump(out)
        const missing = missingFrom(ids)
        if (new Set(ids).size !== ids.length) fail('the dump holds an event twice')
        else if (missing.length > 0)
          fail(`the dump lacks ${missing.length} acknowledged events, e.g. ${missing.slice(0, 5).join(', ')}`)
        else detail = `${ids.length} events`
        rmSync(out, { force: true })
        break
      }
      case 'doctor': {
        const result = await this.#cli(['doctor'])
        if (exited(result)) detail = result.stdout.trim().split('\n').at(-1) ?? ''
        else detail = `${detail}; ${result.stdout.trim().replaceAll('\n', ' | ')}`
        break
      }
    }
    this.runs.push({ kind, life, at, ms: Date.now() - started, ok, detail })
  }
}

interface Slot {
  server: ServerProcess
  readonly port: number
  kills: number
}

test(`SIGKILL at random moments with everything busy (${KILLS} kills, seed ${SEED}): nothing acknowledged is lost or doubled, derived state stays true`, {
  timeout: 120_000 + KILLS * 20_000 + LONG_LIVES * (RETENTION_WAIT_MS + 10_000),
}, async (t) => {
  const started = Date.now()
  const replay = `SHIPLOG_CRASH_SEED=${SEED} SHIPLOG_CRASH_KILLS=${KILLS} SHIPLOG_TEST_DB=${testDialect}`
  t.diagnostic(`replay with: ${replay}`)
  const random = seededRandom(SEED)
  const { databaseUrl, key } = await databaseForServers(t)
  const sqlitePath =
    testDialect === 'sqlite' ? (parseDatabaseUrl(databaseUrl) as { path: string }).path : null
  const scratch = mkdtempSync(join(tmpdir(), 'shiplog-crash-'))
  t.after(() => rmSync(scratch, { recursive: true, force: true }))

  // The installation as operators set it up, through the CLI.
  const cli = async (args: string[], stdin?: string, env: Record<string, string> = {}) => {
    const result = await runCli(t, args, {
      env: processEnv(databaseUrl, env),
      ...(stdin === undefined ? {} : { stdin }),
    })
    assert.equal(result.code, 0, `shiplog ${args.join(' ')}: ${result.stderr}`)
    return result.stdout.trim()
  }
  const old = await seedOldEvents(databaseUrl, OLD_PAIRS_PER_LONG_LIFE * LONG_LIVES)
  await cli(
    ['users', 'create', '--account', 'Acme', '--email', USER.email, '--password-stdin'],
    `${USER.password}\n`,
  )
  const readKey = await cli(['keys', 'create', '--account', 'Acme', '--name', 'reader', '--scope', 'read'])
  // Ten years: retention runs from the first long life on, and finds nothing that old until then.
  await cli(['retention', 'set', '--account', 'Acme', '--days', '3650'])
  const receiverRandom = seededRandom(SEED ^ 0x5bd1e995)
  // Signatures are checked as they arrive: their time stamps are only good for five minutes.
  let hookSecret = ''
  let badSignatures = 0
  const receiver = await startReceiver(t, (req, res) => {
    if (!verifySignature(hookSecret, String(req.headers['shiplog-signature']), req.body)) badSignatures++
    const [min, max] = RECEIVER_DELAY_MS
    setTimeout(() => res.end('ok'), min + Math.floor(receiverRandom() * (max - min)))
  })
  hookSecret = await cli(
    [
      'webhooks',
      'create',
      '--account',
      'Acme',
      '--url',
      `${receiver.url}/hook`,
      '--format',
      'json',
      '--status',
      'Deploying,Deployed,Failed',
      '--outcome',
      'succeeded,failed',
    ],
    undefined,
    { SHIPLOG_WEBHOOK_ALLOW_PRIVATE: '1' },
  )

  // One server on SQLite; on PostgreSQL a second instance on the same database, as SPEC §5 scales out.
  const slots: Slot[] = []
  for (let n = 0; n < (testDialect === 'postgres' ? 2 : 1); n++) {
    const server = await startServer(t, { databaseUrl, env: SERVER_ENV })
    slots.push({ server, port: server.port, kills: 0 })
  }
  const urls = slots.map((s) => s.server.url)
  const load = new Load(urls, key)
  const streams = new LiveStreams(urls, readKey, STREAMS)
  const exporter = new Exporter(urls, USER, readKey, () => load.acknowledgedIds())
  const operator = new Operator(t, databaseUrl, scratch, load, slots.length)
  load.start()
  streams.start()
  exporter.start()

  const kinds = Operator.kinds()
  for (let i = kinds.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1))
    ;[kinds[i], kinds[j]] = [kinds[j] as OperatorKind, kinds[i] as OperatorKind]
  }
  /** Each life gets one kind in turn (so a CI run sees every one) and now and then others. */
  const scheduleOperators = (life: number, windowMs: number) => {
    kinds.forEach((kind, k) => {
      if (k === life % kinds.length || random() < 0.2)
        operator.schedule(kind, life, Math.floor(random() * windowMs))
    })
  }
  const longLives = new Set<number>()
  for (let i = 0; i < LONG_LIVES; i++) longLives.add(1 + Math.floor(((i + random()) * KILLS) / LONG_LIVES))

  const inFlightAtKill: number[] = []
  const downtimes: number[] = []
  const outputs: string[] = []
  const checks = { snapshots: 0, integrity: 0, verify: 0, slowest: 0 }
  /** What the checks after the restarts found: the run goes on, so that one run shows all of it. */
  const findings: string[] = []
  const retention = {
    lives: 0,
    days: [] as number[],
    neverBegan: 0,
    startedAt: [] as number[],
    oldBefore: [] as number[],
    oldAfter: [] as number[],
  }
  let processKills = 0
  /** Kills and restarts on the operators' clock, to read their failures against. */
  const timeline: string[] = []

  /**
   * The checks after each restart, once every server answers again: they run beside the new
   * servers and the load rather than between kill and restart, because a restarted server must
   * recover what the crash left by itself (an operator's shell opening the file first would replay
   * the WAL for it), and because what the servers do on top of a crash (derivation catching up, the
   * chain, pruning) must keep the invariants too. A snapshot sees what the crash kept and what came
   * since, and either would show a loss. Cheap enough for every kill, but verify (every few kills).
   */
  const checkAfterRestart = async (kill: number) => {
    // The test's own event loop serves the clients and the webhook receiver: a check that held it
    // for seconds would look like a server that does not answer.
    const checking = Date.now()
    const acknowledged = load.acknowledged()
    const snapshot = await readSnapshot(databaseUrl)
    checks.snapshots++
    const problems = snapshotProblems(snapshot, acknowledged, load.events, old)
    checks.slowest = Math.max(checks.slowest, Date.now() - checking)
    findings.push(...problems.slice(0, 10).map((p) => `after kill ${kill}: ${p}`))
    if (sqlitePath !== null) {
      const integrity = await sqliteShellAsync(sqlitePath, 'pragma integrity_check', {
        timeoutMs: OPERATOR_TIMEOUT_MS,
        busyTimeoutMs: SHELL_BUSY_TIMEOUT_MS,
      })
      checks.integrity++
      if (integrity !== 'ok') findings.push(`after kill ${kill}: integrity_check says ${integrity}`)
    }
    if (kill % VERIFY_EVERY === 0) {
      const verified = await runCli(t, ['verify'], {
        env: processEnv(databaseUrl),
        timeoutMs: OPERATOR_TIMEOUT_MS,
      })
      checks.verify++
      if (verified.code !== 0)
        findings.push(
          `after kill ${kill}: shiplog verify exited ${verified.code}: ${verified.stdout}${verified.stderr}`,
        )
    }
  }

  /**
   * A long life lasts until the servers' retention task has begun pruning (the old events start
   * to go), then a moment more: the kill lands in the middle of the prune.
   */
  const awaitRetention = async () => {
    const lifeStart = Date.now()
    const days = retentionDays(retention.lives++)
    retention.days.push(days)
    await cli(['retention', 'set', '--account', 'Acme', '--days', String(days)])
    const database = openDatabase(parseDatabaseUrl(databaseUrl))
    try {
      const before = await countOldEvents(database)
      retention.oldBefore.push(before)
      for (;;) {
        await sleep(100)
        if ((await countOldEvents(database)) < before) break
        if (Date.now() - lifeStart > RETENTION_WAIT_MS) {
          retention.neverBegan++
          break
        }
      }
      retention.startedAt.push(Date.now() - lifeStart)
      await sleep(Math.floor(random() * 300))
      retention.oldAfter.push(await countOldEvents(database))
    } finally {
      await database.close()
    }
  }

  try {
    for (let kill = 1; kill <= KILLS; kill++) {
      const long = longLives.has(kill)
      const delay = KILL_DELAY_MIN_MS + Math.floor(random() * (KILL_DELAY_MAX_MS - KILL_DELAY_MIN_MS))
      scheduleOperators(kill - 1, long ? 20_000 : delay + 800)
      if (long) await awaitRetention()
      else await sleep(delay)
      // Either instance, or both (PostgreSQL); the one server on SQLite.
      const choice = random()
      const victims =
        slots.length === 1 ? slots : choice < 0.4 ? slots.slice(0, 1) : choice < 0.7 ? slots.slice(1) : slots
      for (const slot of victims) {
        // A server that died by itself would look like one more kill; it must still be there.
        assert.ok(
          slot.server.isRunning(),
          `the server on port ${slot.port} was running before kill ${kill}; output:\n${slot.server.output()}`,
        )
      }
      inFlightAtKill.push(load.inFlight)
      const killedAt = Date.now()
      timeline.push(`${clock()} ms: kill ${kill} of ${victims.map((v) => v.port).join(' and ')}`)
      for (const slot of victims) slot.server.signal('SIGKILL')
      await Promise.all(
        victims.map(async (slot) => {
          const exit = await slot.server.waitForExit(10_000)
          assert.equal(exit.signal, 'SIGKILL', `kill ${kill} ended the server on port ${slot.port}`)
          outputs.push(slot.server.output())
          slot.kills++
          processKills++
          // Same database, same port: the clients' retries find the new process where the old one was.
          slot.server = await startServer(t, { databaseUrl, env: SERVER_ENV, port: slot.port })
          timeline.push(`${clock()} ms: ${slot.port} answers again`)
        }),
      )
      downtimes.push(Date.now() - killedAt)
      await checkAfterRestart(kill)
    }
    // Some more load on the last processes, so events retried after the last kill are
    // acknowledged, and the last life's operator commands.
    scheduleOperators(KILLS, 1000)
    await sleep(1500)
  } finally {
    await withTimeout(load.stop(), EVENT_DEADLINE_MS + REQUEST_TIMEOUT_MS, 'the clients did not finish')
    await withTimeout(streams.stop(), 10_000, 'the live streams did not stop')
    await withTimeout(exporter.stop(), 90_000, 'the exporter did not stop')
    await withTimeout(
      operator.finished(),
      OPERATOR_TIMEOUT_MS + 10_000,
      'the operator commands did not finish',
    )
  }

  // A read derives whatever waits (read-your-writes), so after it every event is in deployments.
  const deadline = Date.now() + 30_000
  for (;;) {
    for (const slot of slots) {
      const response = await fetch(`${slot.server.url}/api/v1/deployments?limit=1`, {
        headers: { 'x-api-key': readKey },
        signal: AbortSignal.timeout(30_000),
      })
      assert.equal(response.status, 200, await response.text())
    }
    const snapshot = await readSnapshot(databaseUrl)
    if (derivedEvents(snapshot).length === snapshot.events.length) break
    assert.ok(
      Date.now() < deadline,
      `the servers derived every event within 30 s of the last read (${replay})`,
    )
    await sleep(200)
  }
  // Stopped together, as an orchestrator stops a deployment; how they ended is asserted last, so
  // a slow stop does not hide what the rest of the run found.
  const stops = await Promise.all(
    slots.map(async (slot) => {
      const running = slot.server.isRunning()
      const stopping = Date.now()
      slot.server.signal('SIGTERM')
      // Null when it did not exit at all (it is then SIGKILLed when the test ends).
      const exit = await slot.server.waitForExit(60_000).catch(() => null)
      return { running, exit, ms: Date.now() - stopping, output: slot.server.output() }
    }),
  )

  // Everything, with every server stopped.
  const snapshot = await readSnapshot(databaseUrl)
  const verified = await runCli(t, ['verify'], {
    env: processEnv(databaseUrl),
    timeoutMs: OPERATOR_TIMEOUT_MS,
  })
  const integrity =
    sqlitePath === null
      ? 'ok'
      : await sqliteShellAsync(sqlitePath, 'pragma integrity_check', { timeoutMs: OPERATOR_TIMEOUT_MS })
  const { events: rows } = snapshot
  const byDescription = new Map<string, number>()
  for (const row of rows)
    byDescription.set(row.description ?? '', (byDescription.get(row.description ?? '') ?? 0) + 1)
  const created = load.events.filter((e) => e.outcome === 'created')
  const replayed = load.events.filter((e) => e.outcome === 'replayed')
  const acknowledged = [...created, ...replayed]
  const abandoned = load.events.filter((e) => e.outcome === 'abandoned')
  const retried = load.events.filter((e) => e.idempotencyKey !== null && e.failures.length > 0)
  const retries = load.events.reduce((sum, e) => sum + Math.max(0, e.attempts - 1), 0)
  const lost = acknowledged.filter((e) => !byDescription.has(e.sent.description))
  const duplicates = [...byDescription].filter(([, n]) => n > 1)
  const oldKept = old.filter((o) => byDescription.has(o.description)).length
  const seconds = ((Date.now() - started) / 1000).toFixed(1)
  const maxDown = Math.max(...downtimes)
  const meanDown = Math.round(downtimes.reduce((a, b) => a + b, 0) / downtimes.length)
  const operatorSummary = Operator.kinds()
    .map((kind) => {
      const runs = operator.runs.filter((r) => r.kind === kind)
      return `${kind} ${runs.filter((r) => r.ok).length}/${runs.length} ok`
    })
    .join(', ')
  const received = receiver.received
  const deliveries = snapshot.deliveries
  t.diagnostic(
    `${testDialect}: ${KILLS} kill rounds (${processKills} SIGKILLs${slots.length > 1 ? `: ${slots.map((s) => s.kills).join(' + ')} per instance` : ''}) in ${seconds} s; ` +
      `${load.events.length} events sent, ${acknowledged.length} acknowledged (${created.length} × 201, ` +
      `${replayed.length} × 200 replay), lost ${lost.length}, duplicates ${duplicates.length}, ` +
      `${load.answers503} × 503; ${retries} retries, ${retried.length} keyed events retried after a failed attempt; ` +
      `${abandoned.length} keyless events cut off (${abandoned.filter((e) => byDescription.has(e.sent.description)).length} of them stored anyway)`,
  )
  t.diagnostic(
    `in flight at each kill: ${inFlightAtKill.join(', ')}; down for ${meanDown} ms on average, ` +
      `${maxDown} ms at most (kill → restarted servers answer /healthz)`,
  )
  t.diagnostic(
    `operators: ${operator.runs.length} commands (${operatorSummary}); ` +
      `checks: ${checks.snapshots} snapshots, ${checks.integrity} integrity_check, ${checks.verify} verify, ${findings.length} findings; the slowest snapshot took ${checks.slowest} ms`,
  )
  for (const run of operator.runs.filter((r) => !r.ok)) {
    t.diagnostic(
      `operator ${run.kind} in life ${run.life} failed (${run.at}–${run.at + run.ms} ms): ${run.detail}; ` +
        `kills and restarts: ${timeline.filter((line) => Math.abs(Number.parseInt(line, 10) - run.at) < 5000).join('; ')}`,
    )
  }
  t.diagnostic(
    `background: ${snapshot.deployments.get(1)?.length ?? 0} deployments; webhooks ${deliveries.length} deliveries queued, ` +
      `${deliveries.filter((d) => d.state === 'succeeded').length} delivered, ${received.length} requests received; ` +
      `streams ${streams.stats.connections} connections (${streams.stats.cut} cut, ${streams.stats.refusedConnections} refused attempts), ${streams.stats.events} events, ` +
      `${streams.stats.resets} resets, refused ${JSON.stringify(streams.stats.refused)}; exports ${exporter.stats.complete} whole (${exporter.stats.parsed} parsed strictly) ` +
      `of ${exporter.stats.started} (${exporter.stats.cut} cut, ${exporter.stats.rows} rows), ${exporter.stats.pagedReads} paged reads; ` +
      `retention: ${retention.lives} long lives (keep ${retention.days.join(', then ')} days), pruning began after ${retention.startedAt.map((ms) => `${(ms / 1000).toFixed(1)} s`).join(', ')}, ` +
      `old events ${retention.oldBefore.join('/')} → ${retention.oldAfter.join('/')} at the kill, ${oldKept} of ${old.length} kept at the end`,
  )
  t.diagnostic(`verify: ${verified.stdout.trim().replaceAll('\n', ' | ')}`)
  t.diagnostic(
    `SIGTERM at the end: ${stops.map((s) => `exit ${JSON.stringify(s.exit)} after ${s.ms} ms`).join('; ')}`,
  )

  for (const finding of findings.slice(0, 10)) t.diagnostic(finding)
  const rebuilt = deploymentDifferences(
    snapshot.deployments,
    plainDeployments(rows),
    Number.POSITIVE_INFINITY,
    snapshot,
  )
  t.diagnostic(
    `final state: ${derivedEvents(snapshot).length} of ${rows.length} events derived, ` +
      `${rebuilt.length} deployments differ from a rebuild${rebuilt.length > 0 ? `, e.g. ${rebuilt[0]}` : ''}`,
  )

  const context = `(${replay}); last output:\n${outputs.at(-1) ?? ''}`
  assert.deepEqual(findings.slice(0, 20), [], `the checks after each restart (${replay})`)
  assert.deepEqual(load.unexpected, [], `every attempt got 201, a 200 replay, 503 or no answer ${context}`)
  assert.deepEqual(
    snapshotProblems(snapshot, acknowledged, load.events, old).slice(0, 20),
    [],
    `the final state ${context}`,
  )
  assert.deepEqual(
    lost.map((e) => e.sent.description),
    [],
    'no acknowledged event is lost',
  )
  assert.deepEqual(duplicates, [], 'no event is stored twice')
  const ackIds = acknowledged.map((e) => e.body?.id)
  assert.equal(new Set(ackIds).size, ackIds.length, 'every acknowledgement names an event of its own')
  // Every event derived, and the deployments exactly what the rules make of all the events.
  assert.equal(derivedEvents(snapshot).length, rows.length, 'every event is derived')
  assert.deepEqual(rebuilt.slice(0, 10), [], 'the deployments equal a rebuild from the events')
  assert.equal(
    verified.code,
    0,
    `shiplog verify: the chains are intact\n${verified.stdout}${verified.stderr}`,
  )
  assert.equal(integrity, 'ok', 'PRAGMA integrity_check')

  // A keyed event is retried until acknowledged, so each is stored exactly once, under its key.
  const keyed = load.events.filter((e) => e.idempotencyKey !== null)
  assert.ok(
    keyed.every((e) => e.outcome === 'created' || e.outcome === 'replayed'),
    'every event with an Idempotency-Key was acknowledged in the end',
  )
  const eventOfKey = new Map(snapshot.idempotency.map((k) => [k.idem_key, k.event_id]))
  for (const event of keyed) {
    assert.equal(
      eventOfKey.get(event.idempotencyKey ?? ''),
      Number(event.body?.id),
      `the Idempotency-Key of ${event.sent.description} names its event`,
    )
  }
  assert.equal(
    snapshot.idempotency.length,
    keyed.length,
    'one idempotency record per keyed event, none left over',
  )

  // Webhooks: queued once per event and trigger, each delivery the database calls delivered reached
  // the receiver (a kill mid-delivery may send one again: receivers dedupe on Shiplog-Delivery).
  const triggers = new Set(deliveries.map((d) => `${d.webhook_id}/${d.event_id}/${d.kind}`))
  assert.equal(triggers.size, deliveries.length, 'no event is queued twice for the same webhook and trigger')
  const receivedIds = new Set(received.map((r) => String(r.headers['shiplog-delivery'])))
  assert.deepEqual(
    deliveries
      .filter((d) => d.state === 'succeeded' && !receivedIds.has(d.delivery_id))
      .map((d) => d.delivery_id),
    [],
    'every delivery marked delivered was received',
  )
  assert.ok(received.length > 0, 'the slow receiver got deliveries')
  assert.equal(badSignatures, 0, 'every delivery is signed with the webhook secret')

  // Retention: pruning ran in every long life, whole deployments at a time, and kept each service's latest.
  assert.equal(
    retention.neverBegan,
    0,
    `the servers began pruning in each long life within ${RETENTION_WAIT_MS} ms`,
  )
  assert.ok(oldKept < old.length, `retention pruned old events (${old.length - oldKept} of ${old.length})`)
  for (const service of OLD_SERVICES) {
    const last = old.filter((o) => o.service === service).at(-1)
    assert.ok(last && byDescription.has(last.description), `the latest deployment of ${service} is kept`)
  }

  // The readers and the operator: all answered as they should.
  assert.deepEqual(streams.stats.unexpected, [], 'the live streams saw only kills')
  assert.deepEqual(streams.stats.replayedTwice, [], 'a resumed stream sends nothing it had sent whole')
  assert.ok(streams.stats.events > 0, 'the live streams carried events')
  assert.deepEqual(exporter.stats.problems, [], 'the exports are whole and complete')
  assert.ok(exporter.stats.complete > 0, 'some export was read whole')
  assert.deepEqual(
    operator.runs.filter((r) => !r.ok).map((r) => `${r.kind} (life ${r.life}): ${r.detail}`),
    [],
    'every operator command succeeded',
  )
  for (const kind of Operator.kinds()) {
    assert.ok(
      operator.runs.some((r) => r.kind === kind),
      `the operator ran ${kind}`,
    )
  }

  // The run proved something only if kills did cut requests that were then retried.
  assert.ok(
    inFlightAtKill.some((n) => n > 0),
    `requests were in flight at the kills: ${inFlightAtKill.join(', ')}`,
  )
  assert.ok(retried.length > 0, 'some keyed events were retried after a kill')

  for (const stop of stops) {
    assert.ok(stop.running, `the last server still ran at the end; output:\n${stop.output}`)
    assert.deepEqual(
      stop.exit,
      { code: 0, signal: null },
      `the last server stops cleanly:\n${stop.output.slice(-20_000)}`,
    )
  }
})
