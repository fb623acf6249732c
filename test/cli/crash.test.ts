// Every event answered 201 is in the database after the real server is SIGKILLed or SIGTERMed under load.
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { connect } from 'node:net'
import { test } from 'node:test'
import { parseDatabaseUrl } from '../../src/config.js'
import { openDatabase } from '../../src/db/connect.js'
import type { EventRow } from '../../src/db/schema.js'
import { type Cleanup, databaseForServers } from '../helper.js'
import { type ExitStatus, type ServerProcess, sleep, startServer, withTimeout } from '../support/processes.js'

const LOOPS = 8
/** Acknowledgements to collect before the server is stopped. */
const ACKS_BEFORE_STOP = 200
/** The load gives up (and the test fails) if the acknowledgements take longer than this. */
const LOAD_DEADLINE_MS = 30_000
const STATUSES = ['Deploying', 'Deployed', 'Failed'] as const
/** The server may answer thousands of requests here; the per-key limit must not get in the way. */
const SERVER_ENV = { SHIPLOG_RATE_LIMIT: '10000000' }
/** A graceful stop must be over well within a container's usual 30 s grace period. */
const STOP_BOUND_MS = 15_000

interface Sent {
  service: string
  environment: string
  version: string
  status: string
  description: string
}

interface Ack {
  sent: Sent
  body: Record<string, unknown>
}

/** All stored events, read straight from the database (no server involved). */
async function storedEvents(databaseUrl: string): Promise<EventRow[]> {
  const database = openDatabase(parseDatabaseUrl(databaseUrl))
  try {
    return await database.db.selectFrom('events').selectAll().orderBy('id').execute()
  } finally {
    await database.close()
  }
}

/**
 * LOOPS concurrent clients each POST /deploy back to back, every event with a unique version, and
 * keep every 201 with its body. `interrupt` runs once, from inside the loop that received the
 * ACKS_BEFORE_STOP-th acknowledgement, while the other loops still have requests in flight. After
 * that no loop starts a new request (as a load balancer stops sending to an instance it drains), but
 * each waits for the one it has in flight; before it, any failure is recorded as unexpected.
 */
class Load {
  readonly acks: Ack[] = []
  readonly unexpected: string[] = []
  inFlight = 0
  inFlightAtInterrupt = -1
  interruptedAt = 0
  /** 201s whose response arrived after the interruption (requests the server finished). */
  acksAfterInterrupt = 0
  /** Requests that ended in a network error or a non-201 after the interruption. */
  failuresAfterInterrupt = 0
  readonly #run = randomBytes(4).toString('hex')

  constructor(
    private readonly server: ServerProcess,
    private readonly key: string,
    private readonly interrupt: () => void,
  ) {}

  get interrupted(): boolean {
    return this.interruptedAt > 0
  }

  run(): Promise<void> {
    const deadline = Date.now() + LOAD_DEADLINE_MS
    return Promise.all(Array.from({ length: LOOPS }, (_, n) => this.#loop(n, deadline))).then(() => {})
  }

  async #loop(n: number, deadline: number): Promise<void> {
    for (let i = 0; !this.interrupted; i++) {
      if (Date.now() > deadline) {
        this.unexpected.push(`loop ${n}: fewer than ${ACKS_BEFORE_STOP} acks in time`)
        return
      }
      const sent: Sent = {
        service: `svc-${n}`,
        environment: i % 2 === 0 ? 'prod' : 'staging',
        version: `${n}.${i}-${this.#run}`,
        status: STATUSES[i % STATUSES.length] ?? 'Deployed',
        description: `load ${n}/${i} — ünïcödé "quoted"`,
      }
      this.inFlight++
      let status: number
      let body: Record<string, unknown>
      try {
        const response = await fetch(`${this.server.url}/deploy`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-api-key': this.key },
          body: JSON.stringify(sent),
          signal: AbortSignal.timeout(10_000),
        })
        status = response.status
        const text = await response.text()
        body = status === 201 ? (JSON.parse(text) as Record<string, unknown>) : { text }
      } catch (err) {
        if (this.interrupted) this.failuresAfterInterrupt++
        else
          this.unexpected.push(`loop ${n}: ${(err as Error).message} ${String((err as Error).cause ?? '')}`)
        return
      } finally {
        this.inFlight--
      }
      if (status !== 201) {
        if (this.interrupted) this.failuresAfterInterrupt++
        else this.unexpected.push(`loop ${n}: ${status} ${JSON.stringify(body)}`)
        return
      }
      if (this.interrupted) this.acksAfterInterrupt++
      this.acks.push({ sent, body })
      if (!this.interrupted && this.acks.length >= ACKS_BEFORE_STOP) {
        this.interruptedAt = Date.now()
        this.inFlightAtInterrupt = this.inFlight
        this.interrupt()
      }
    }
  }
}

/** Each acknowledged event is stored once, under the id it was acknowledged with, with what was sent. */
function assertAllStored(acks: Ack[], rows: EventRow[]): void {
  const byId = new Map(rows.map((row) => [row.id, row]))
  const versions = rows.map((row) => row.version)
  assert.equal(new Set(versions).size, versions.length, 'no request was stored twice')
  const missing: string[] = []
  for (const { sent, body } of acks) {
    const id = body.id
    assert.ok(
      typeof id === 'number' && Number.isInteger(id) && id > 0,
      `201 body has an id: ${JSON.stringify(body)}`,
    )
    assert.equal(body.version, sent.version, 'the 201 describes the event that was sent')
    const row = byId.get(id)
    if (!row) {
      missing.push(`${id} (${sent.version})`)
      continue
    }
    assert.deepEqual(
      {
        service: row.service,
        environment: row.environment,
        version: row.version,
        status: row.status,
        description: row.description,
        source: row.source,
        api_key_name: row.api_key_name,
        received_at: new Date(row.received_at).toISOString(),
      },
      { ...sent, source: 'deploy', api_key_name: 'ci', received_at: body.received_at },
      `event ${id} is stored as acknowledged`,
    )
  }
  assert.deepEqual(missing, [], `${missing.length} of ${acks.length} acknowledged events are missing`)
  const ids = new Set(acks.map((ack) => ack.body.id))
  assert.equal(ids.size, acks.length, 'every acknowledgement names its own event')
}

test('after SIGKILL under load, every acknowledged event is stored with its id and values', {
  timeout: 120_000,
}, async (t) => {
  const { databaseUrl, key } = await databaseForServers(t)
  const server = await startServer(t, { databaseUrl, env: SERVER_ENV })
  const load = new Load(server, key, () => server.signal('SIGKILL'))
  await withTimeout(load.run(), LOAD_DEADLINE_MS + 15_000, 'the load did not end')

  assert.deepEqual(
    load.unexpected,
    [],
    `before the kill every request got 201; server output:\n${server.output()}`,
  )
  assert.ok(load.interrupted, `the server was killed after ${ACKS_BEFORE_STOP} acknowledgements`)
  assert.ok(load.inFlightAtInterrupt > 0, 'requests were in flight when the server was killed')
  const exit = await server.waitForExit(10_000)
  assert.equal(exit.signal, 'SIGKILL')
  t.diagnostic(
    `${load.acks.length} acknowledged, ${load.inFlightAtInterrupt} in flight at the kill, ${load.failuresAfterInterrupt} cut off`,
  )

  const rows = await storedEvents(databaseUrl)
  assertAllStored(load.acks, rows)

  // The database is usable again, and ids keep increasing past everything acknowledged.
  const restarted = await startServer(t, { databaseUrl, env: SERVER_ENV })
  const response = await fetch(`${restarted.url}/deploy`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key },
    body: JSON.stringify({
      service: 'svc',
      environment: 'prod',
      version: 'after-restart',
      status: 'Deployed',
    }),
    signal: AbortSignal.timeout(10_000),
  })
  const body = (await response.json()) as { id: number }
  assert.equal(response.status, 201, JSON.stringify(body))
  const highest = Math.max(...rows.map((row) => row.id))
  assert.ok(body.id > highest, `new id ${body.id} follows the highest stored id ${highest}`)
})

/** Resolves when a TCP connection to the port is refused: the server has stopped listening. */
async function listenerClosed(port: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const refused = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1')
      socket.once('connect', () => {
        socket.destroy()
        resolve(false)
      })
      socket.once('error', () => resolve(true))
    })
    if (refused) return
    if (Date.now() > deadline)
      throw new Error(`port ${port} still accepted connections after ${timeoutMs} ms`)
    await sleep(20)
  }
}

/**
 * A keep-alive POST /deploy whose body is sent in two parts: the request is under way on the server
 * from the first part until `finish` sends the rest. The connection stays open after the answer, as
 * a client's or load balancer's pooled connection does, until the server closes it.
 */
async function slowDeploy(t: Cleanup, port: number, key: string, sent: Sent) {
  const body = Buffer.from(JSON.stringify(sent), 'utf8')
  const socket = connect(port, '127.0.0.1')
  t.after(() => {
    socket.destroy()
  })
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve)
    socket.once('error', reject)
  })
  let received = Buffer.alloc(0)
  socket.on('data', (chunk: Buffer) => {
    received = Buffer.concat([received, chunk])
  })
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()))
  socket.on('error', () => {})
  const head = [
    'POST /deploy HTTP/1.1',
    `Host: 127.0.0.1:${port}`,
    'Content-Type: application/json',
    `X-API-Key: ${key}`,
    `Content-Length: ${body.length}`,
  ]
  socket.write(`${head.join('\r\n')}\r\n\r\n`)
  socket.write(body.subarray(0, 10))
  return {
    closed,
    /** Sends the rest of the body and reads the answer, leaving the connection open. */
    async finish(timeoutMs: number): Promise<{ status: number; body: Record<string, unknown> }> {
      socket.write(body.subarray(10))
      const deadline = Date.now() + timeoutMs
      for (;;) {
        const split = received.indexOf('\r\n\r\n')
        if (split >= 0) {
          const headText = received.subarray(0, split).toString('latin1')
          const length = Number(/\r\ncontent-length:\s*(\d+)/i.exec(headText)?.[1] ?? Number.NaN)
          const rest = received.subarray(split + 4)
          if (rest.length >= length) {
            const status = Number(headText.split(' ')[1])
            const text = rest.subarray(0, length).toString('utf8')
            return { status, body: JSON.parse(text) as Record<string, unknown> }
          }
        }
        if (socket.destroyed || Date.now() > deadline) {
          throw new Error(
            `no complete answer to the slow request: ${JSON.stringify(received.toString('utf8'))}`,
          )
        }
        await sleep(10)
      }
    },
  }
}

test('SIGTERM under load: the server finishes, exits 0 in time, and every acknowledged event is stored', {
  timeout: 120_000,
}, async (t) => {
  const { databaseUrl, key } = await databaseForServers(t)
  const server = await startServer(t, { databaseUrl, env: SERVER_ENV })
  // A request that is surely under way when the signal arrives, whatever the timing of the load.
  const slowSent: Sent = {
    service: 'slow',
    environment: 'prod',
    version: `slow-${randomBytes(4).toString('hex')}`,
    status: 'Deployed',
    description: 'sent in two parts around SIGTERM',
  }
  const slow = await slowDeploy(t, server.port, key, slowSent)
  const load = new Load(server, key, () => server.signal('SIGTERM'))
  await withTimeout(load.run(), LOAD_DEADLINE_MS + 15_000, 'the load did not end')

  assert.deepEqual(
    load.unexpected,
    [],
    `before SIGTERM every request got 201; server output:\n${server.output()}`,
  )
  assert.ok(load.interrupted, `SIGTERM was sent after ${ACKS_BEFORE_STOP} acknowledgements`)
  assert.ok(load.inFlightAtInterrupt > 0, 'requests were in flight when SIGTERM was sent')

  // Once the server has stopped accepting connections, the request it already has is still finished.
  await listenerClosed(server.port, 10_000)
  const answer = await slow.finish(10_000)
  assert.equal(
    answer.status,
    201,
    `a request under way at SIGTERM is completed: ${JSON.stringify(answer.body)}`,
  )
  const acks: Ack[] = [...load.acks, { sent: slowSent, body: answer.body }]

  // The slow request's connection is now idle but open: the server must close it and exit by itself.
  let exit: ExitStatus | string
  try {
    exit = await server.waitForExit(STOP_BOUND_MS)
  } catch (err) {
    exit = (err as Error).message
  }
  const stopMs = Date.now() - load.interruptedAt
  t.diagnostic(
    `${load.acks.length} acknowledged under load (${load.acksAfterInterrupt} after SIGTERM), ` +
      `${load.inFlightAtInterrupt} in flight at SIGTERM, ${load.failuresAfterInterrupt} cut off, ` +
      `exit ${JSON.stringify(exit)} after ${stopMs} ms`,
  )

  // Whatever the exit, nothing acknowledged may be missing.
  assertAllStored(acks, await storedEvents(databaseUrl))
  assert.deepEqual(
    exit,
    { code: 0, signal: null },
    `SIGTERM must stop the server with exit code 0 within ${STOP_BOUND_MS} ms, closing idle ` +
      `keep-alive connections; output:\n${server.output()}`,
  )
  await withTimeout(slow.closed, 5_000, 'the idle connection was not closed')
})

test('SIGTERM with connections that sent nothing yet (spare ones, as fetch and browsers keep): the server exits 0 at once', {
  timeout: 60_000,
}, async (t) => {
  const { databaseUrl } = await databaseForServers(t)
  const server = await startServer(t, { databaseUrl })
  const spare = Array.from({ length: 3 }, () => connect({ port: server.port, host: '127.0.0.1' }))
  // The server may end them with a reset, as it may any connection it closes: what counts is its exit.
  for (const socket of spare) socket.on('error', () => {})
  t.after(() => {
    for (const socket of spare) socket.destroy()
  })
  await Promise.all(spare.map((socket) => new Promise((resolve) => socket.once('connect', resolve))))
  const started = Date.now()
  server.signal('SIGTERM')
  const exit = await server.waitForExit(20_000)
  const ms = Date.now() - started
  assert.deepEqual(exit, { code: 0, signal: null }, `a clean stop, not the 25 s bound:\n${server.output()}`)
  assert.ok(ms < 5_000, `stopped in ${ms} ms`)
})
