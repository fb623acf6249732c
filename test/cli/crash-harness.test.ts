// Crash harness: the real server is SIGKILLed at random moments under load and restarted on the same
// database and port; every acknowledged event is stored exactly once, and clients that retry with the
// same Idempotency-Key never create duplicates.
//
// SHIPLOG_CRASH_KILLS sets the number of kills (default 5, as in CI; 20 or more for the long run) and
// SHIPLOG_CRASH_SEED replays the kill moments and the mix of requests of an earlier run.
import assert from 'node:assert/strict'
import { randomBytes, randomInt } from 'node:crypto'
import { test } from 'node:test'
import { parseDatabaseUrl } from '../../src/config.js'
import { openDatabase } from '../../src/db/connect.js'
import type { EventRow } from '../../src/db/schema.js'
import { databaseForServers, testDialect } from '../helper.js'
import { type ServerProcess, sleep, startServer, withTimeout } from '../support/processes.js'

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
/** A kill comes this long after the server (re)started and answered /healthz: a random moment. */
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
/** The server may answer many thousands of requests; the per-key limit must not get in the way. */
const SERVER_ENV = { SHIPLOG_RATE_LIMIT: '10000000' }

type Form = 'deploy' | 'put-post' | 'put-get'

interface Sent {
  service: string
  environment: string
  version: string
  status: 'Deploying' | 'Deployed' | 'Failed'
  description: string
}

/** One thing a client wants recorded; its version is a marker unique to it across the whole run. */
interface LogicalEvent {
  readonly client: number
  readonly form: Form
  readonly idempotencyKey: string | null
  readonly sent: Sent
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

/** Every stored event and idempotency record, read straight from the database (no server involved). */
async function readBack(databaseUrl: string) {
  const database = openDatabase(parseDatabaseUrl(databaseUrl))
  try {
    const events = await database.db.selectFrom('events').selectAll().orderBy('id').execute()
    const keys = await database.db.selectFrom('idempotency_keys').selectAll().execute()
    return { events, keys }
  } finally {
    await database.close()
  }
}

function requestFor(base: string, key: string, event: LogicalEvent): [string, RequestInit] {
  const { sent } = event
  const headers: Record<string, string> = { 'x-api-key': key }
  if (event.idempotencyKey !== null) headers['idempotency-key'] = event.idempotencyKey
  const legacy = {
    app: sent.service,
    env: sent.environment,
    version: sent.version,
    status: sent.status,
    description: sent.description,
  }
  const init: RequestInit = { headers, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) }
  switch (event.form) {
    case 'put-get':
      return [`${base}/put?${new URLSearchParams(legacy).toString()}`, { ...init, method: 'GET' }]
    case 'put-post':
      headers['content-type'] = 'application/json'
      return [`${base}/put`, { ...init, method: 'POST', body: JSON.stringify(legacy) }]
    case 'deploy':
      headers['content-type'] = 'application/json'
      return [`${base}/deploy`, { ...init, method: 'POST', body: JSON.stringify(sent) }]
  }
}

/**
 * CLIENTS concurrent clients send events back to back, each with the form and key decided by the
 * seed. An attempt that fails without an answer (the server is down or was killed mid-request) or
 * with a 503 is retried, with the same Idempotency-Key, until the event is acknowledged; the server
 * listens on the same address again after its restart, so the clients never learn of it.
 */
class Load {
  readonly events: LogicalEvent[] = []
  /** Answers no client should get: anything but 201, a 200 replay, or 503. */
  readonly unexpected: string[] = []
  inFlight = 0
  answers503 = 0
  #stopping = false
  readonly #run = randomBytes(3).toString('hex')
  #loops: Promise<void> | null = null

  constructor(
    private readonly base: string,
    private readonly key: string,
  ) {}

  start(): void {
    this.#loops = Promise.all(Array.from({ length: CLIENTS }, (_, n) => this.#client(n))).then(() => {})
  }

  /** Clients start no new event, but finish (retry until acknowledged) the one they have. */
  stop(): Promise<void> {
    this.#stopping = true
    return this.#loops ?? Promise.resolve()
  }

  get acknowledged(): number {
    return this.events.filter((e) => e.outcome === 'created' || e.outcome === 'replayed').length
  }

  async #client(n: number): Promise<void> {
    // One generator per client: which form and whether a key is used depend on the seed alone, not
    // on how the clients' requests interleave.
    const random = seededRandom(SEED ^ Math.imul(n + 1, 0x9e3779b1))
    const forms: Form[] = ['deploy', 'deploy', 'put-post', 'put-get']
    for (let i = 0; !this.#stopping; i++) {
      const marker = `${this.#run}-${n}-${i}`
      const event: LogicalEvent = {
        client: n,
        form: forms[Math.floor(random() * forms.length)] ?? 'deploy',
        idempotencyKey: random() < PLAIN_SHARE ? null : `crash-${marker}`,
        sent: {
          service: `svc-${n}`,
          environment: i % 2 === 0 ? 'prod' : 'staging',
          version: `v-${marker}`,
          status: (['Deploying', 'Deployed', 'Failed'] as const)[i % 3] ?? 'Deployed',
          description: `crash harness ${n}/${i} — ünïcödé`,
        },
        attempts: 0,
        failures: [],
        outcome: 'pending',
        body: null,
      }
      this.events.push(event)
      await this.#deliver(event)
    }
  }

  async #deliver(event: LogicalEvent): Promise<void> {
    const deadline = Date.now() + EVENT_DEADLINE_MS
    for (;;) {
      event.attempts++
      const [url, init] = requestFor(this.base, this.key, event)
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
        const cause = (err as Error).cause
        failure =
          cause instanceof Error
            ? ((cause as NodeJS.ErrnoException).code ?? cause.message)
            : (err as Error).name === 'TimeoutError'
              ? 'timeout'
              : (err as Error).message
      } finally {
        this.inFlight--
      }
      if (failure === 'timeout') {
        this.unexpected.push(`${event.sent.version}: no answer within ${REQUEST_TIMEOUT_MS} ms`)
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
        this.unexpected.push(`${event.sent.version} (${event.form}): ${status} ${text.slice(0, 300)}`)
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
        this.unexpected.push(`${event.sent.version}: not acknowledged in ${EVENT_DEADLINE_MS} ms`)
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
    id: row.id,
    service: row.service,
    environment: row.environment,
    version: row.version,
    status: row.status,
    description: row.description,
    source: row.source,
    api_key_name: row.api_key_name,
    received_at: new Date(row.received_at).toISOString(),
  }
}

test(`SIGKILL at random moments under load (${KILLS} kills, seed ${SEED}): every acknowledged event is stored exactly once`, {
  timeout: 60_000 + KILLS * 15_000,
}, async (t) => {
  const started = Date.now()
  const replay = `SHIPLOG_CRASH_SEED=${SEED} SHIPLOG_CRASH_KILLS=${KILLS} SHIPLOG_TEST_DB=${testDialect}`
  t.diagnostic(`replay with: ${replay}`)
  const random = seededRandom(SEED)
  const { databaseUrl, key } = await databaseForServers(t)
  let server: ServerProcess = await startServer(t, { databaseUrl, env: SERVER_ENV })
  const port = server.port
  const load = new Load(server.url, key)
  load.start()

  const inFlightAtKill: number[] = []
  const downtimes: number[] = []
  const outputs: string[] = []
  try {
    for (let kill = 1; kill <= KILLS; kill++) {
      await sleep(KILL_DELAY_MIN_MS + Math.floor(random() * (KILL_DELAY_MAX_MS - KILL_DELAY_MIN_MS)))
      // A server that died by itself would look like one more kill; it must still be there.
      assert.ok(server.isRunning(), `the server was running before kill ${kill}; output:\n${server.output()}`)
      inFlightAtKill.push(load.inFlight)
      const killedAt = Date.now()
      server.signal('SIGKILL')
      const exit = await server.waitForExit(10_000)
      assert.equal(exit.signal, 'SIGKILL', `kill ${kill} ended the server`)
      outputs.push(server.output())
      // Same database, same port: the clients' retries find the new process where the old one was.
      server = await startServer(t, { databaseUrl, env: SERVER_ENV, port })
      downtimes.push(Date.now() - killedAt)
    }
    // Some more load on the last process, so events retried after the last kill are acknowledged.
    await sleep(KILL_DELAY_MIN_MS)
  } finally {
    await withTimeout(load.stop(), EVENT_DEADLINE_MS + REQUEST_TIMEOUT_MS, 'the clients did not finish')
  }
  assert.ok(server.isRunning(), `the last server still runs; output:\n${server.output()}`)
  server.signal('SIGTERM')
  const lastExit = await server.waitForExit(20_000)
  assert.deepEqual(lastExit, { code: 0, signal: null }, `the last server stops cleanly:\n${server.output()}`)

  const { events: rows, keys } = await readBack(databaseUrl)
  const byVersion = new Map<string, EventRow[]>()
  for (const row of rows) byVersion.set(row.version, [...(byVersion.get(row.version) ?? []), row])

  const created = load.events.filter((e) => e.outcome === 'created')
  const replayed = load.events.filter((e) => e.outcome === 'replayed')
  const abandoned = load.events.filter((e) => e.outcome === 'abandoned')
  const retried = load.events.filter((e) => e.idempotencyKey !== null && e.failures.length > 0)
  const retries = load.events.reduce((sum, e) => sum + Math.max(0, e.attempts - 1), 0)
  const abandonedStored = abandoned.filter((e) => byVersion.has(e.sent.version)).length
  const duplicates = [...byVersion].filter(([, same]) => same.length > 1)
  const seconds = ((Date.now() - started) / 1000).toFixed(1)
  const maxDown = Math.max(...downtimes)
  const meanDown = Math.round(downtimes.reduce((a, b) => a + b, 0) / downtimes.length)
  t.diagnostic(
    `${testDialect}: ${KILLS} kills survived in ${seconds} s; ${load.events.length} events, ` +
      `${created.length + replayed.length} acknowledged (${created.length} × 201, ` +
      `${replayed.length} × 200 replay), ${retries} retries, ${retried.length} keyed events retried ` +
      `after a failed attempt, ${load.answers503} × 503; ${abandoned.length} keyless events cut off ` +
      `(${abandonedStored} of them stored anyway); duplicates ${duplicates.length}`,
  )
  t.diagnostic(
    `in flight at each kill: ${inFlightAtKill.join(', ')}; down for ${meanDown} ms on average, ` +
      `${maxDown} ms at most (kill → restarted server answers /healthz)`,
  )

  const context = `(${replay}); last output:\n${outputs.at(-1) ?? ''}`
  assert.deepEqual(load.unexpected, [], `every attempt got 201, a 200 replay, 503 or no answer ${context}`)
  assert.deepEqual(
    duplicates.map(([version, same]) => `${version}: ids ${same.map((r) => r.id).join(', ')}`),
    [],
    `no event is stored twice ${context}`,
  )
  const known = new Set(load.events.map((e) => e.sent.version))
  assert.deepEqual(
    rows.filter((row) => !known.has(row.version)).map((row) => row.version),
    [],
    'nothing is stored that no client sent',
  )

  const missing: string[] = []
  for (const event of [...created, ...replayed]) {
    const body = event.body ?? {}
    const row = byVersion.get(event.sent.version)?.[0]
    if (!row) {
      missing.push(`${event.sent.version} (id ${String(body.id)}, ${event.outcome})`)
      continue
    }
    // The answer names the stored row (for a replay: the one an earlier attempt stored) and both
    // hold what the client sent.
    const expected = {
      ...event.sent,
      source: SOURCE_OF_FORM[event.form],
      api_key_name: 'ci',
    }
    assert.deepEqual(
      describeRow(row),
      { ...expected, id: body.id, received_at: body.received_at },
      `${event.sent.version} is stored as acknowledged`,
    )
  }
  assert.deepEqual(missing, [], `every acknowledged event is stored ${context}`)
  const ackIds = [...created, ...replayed].map((e) => e.body?.id)
  assert.equal(new Set(ackIds).size, ackIds.length, 'every acknowledgement names an event of its own')

  // A keyed event is retried until acknowledged, so each is stored exactly once, under its key.
  const keyed = load.events.filter((e) => e.idempotencyKey !== null)
  assert.ok(
    keyed.every((e) => e.outcome === 'created' || e.outcome === 'replayed'),
    'every event with an Idempotency-Key was acknowledged in the end',
  )
  const eventOfKey = new Map(keys.map((k) => [k.idem_key, k.event_id]))
  for (const event of keyed) {
    assert.equal(
      eventOfKey.get(event.idempotencyKey ?? ''),
      event.body?.id,
      `the Idempotency-Key of ${event.sent.version} names its event`,
    )
  }
  assert.equal(keys.length, keyed.length, 'one idempotency record per keyed event, none left over')

  // The run proved something only if kills did cut requests that were then retried.
  assert.ok(
    inFlightAtKill.some((n) => n > 0),
    `requests were in flight at the kills: ${inFlightAtKill.join(', ')}`,
  )
  assert.ok(retried.length > 0, 'some keyed events were retried after a kill')
})
