// Property-based tests of the three ingest forms (issue 6, "Bad input"). fast-check generates more
// than 10,000 malformed requests per database: wrong types, missing, extra and repeated fields, huge
// and empty values, control characters, invalid UTF-8, broken JSON, odd content types, repeated
// query parameters, header tricks. Each answer is checked against a model of SPEC §1
// (test/support/fuzz-arbitraries.ts): never a 5xx, problem+json with the status of the error
// table, nothing stored. Valid generated events must be stored exactly as sent.
//
// The seed is fixed so CI runs repeat; SHIPLOG_FUZZ_SEED picks another one and SHIPLOG_FUZZ_RUNS
// multiplies the number of runs (e.g. SHIPLOG_FUZZ_RUNS=10 for a long local run).
import assert from 'node:assert/strict'
import { type AddressInfo, connect } from 'node:net'
import { type TestContext, test } from 'node:test'
import fc from 'fast-check'
import type { InjectOptions } from 'fastify'
import { sql } from 'kysely'
import { revokeApiKey } from '../../src/domain/keys.js'
import { buildTestApp, type TestApp } from '../helper.js'
import {
  type Expected,
  expectedAnswer,
  type FuzzRequest,
  fuzzArbitraries,
  headerValue,
  IDEMPOTENCY_KEY_MAX,
  type Keys,
  type RawCase,
  rawArbitraries,
  renderRaw,
  storedEvent,
} from '../support/fuzz-arbitraries.js'

const MINIMUM_MALFORMED = 10_000
const SEED = readSeed()
const MULTIPLIER = readMultiplier()

function readSeed(): number {
  const raw = process.env.SHIPLOG_FUZZ_SEED?.trim()
  if (!raw) return 20_261_121
  const seed = Number(raw)
  if (!Number.isSafeInteger(seed)) throw new Error(`SHIPLOG_FUZZ_SEED must be an integer, got "${raw}"`)
  return seed
}

function readMultiplier(): number {
  const raw = process.env.SHIPLOG_FUZZ_RUNS?.trim()
  if (!raw) return 1
  const multiplier = Number(raw)
  // Fewer runs than the default would fall short of the 10,000 the issue asks for.
  if (!Number.isFinite(multiplier) || multiplier < 1) {
    throw new Error(`SHIPLOG_FUZZ_RUNS must be a number of at least 1, got "${raw}"`)
  }
  return multiplier
}

const runs = (base: number) => Math.ceil(base * MULTIPLIER)

/** Each property gets its own seed, derived from the one seed, so adding one shifts no other. */
function seedFor(name: string): number {
  let hash = SEED | 0
  for (const ch of name) hash = (Math.imul(hash, 31) + (ch.codePointAt(0) ?? 0)) | 0
  return hash
}

interface World {
  ctx: TestApp
  port: number
  keys: Keys
}

async function world(t: TestContext): Promise<World> {
  // Thousands of requests with one key: the rate limit is not what is under test here.
  const ctx = await buildTestApp(t, { env: { SHIPLOG_RATE_LIMIT: '10000000' } })
  const revoked = await ctx.addTenant('Acme', 'revoked')
  await revokeApiKey(ctx.database.db, revoked.account.id, String(revoked.keyId))
  await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const port = (ctx.app.server.address() as AddressInfo).port
  return { ctx, port, keys: { live: ctx.tenant.key, revoked: revoked.key } }
}

interface Counts {
  events: number
  idempotency: number
}

async function counts(ctx: TestApp): Promise<Counts> {
  const { rows } = await sql<{ events: number | string; idempotency: number | string }>`
    select (select count(*) from events) as events, (select count(*) from idempotency_keys) as idempotency
  `.execute(ctx.database.db)
  return { events: Number(rows[0]?.events), idempotency: Number(rows[0]?.idempotency) }
}

function describe(req: FuzzRequest): string {
  const target = req.query === '' ? req.path : `${req.path}?${req.query.slice(0, 300)}`
  const body = req.body === null ? '(none)' : JSON.stringify(req.body.toString('latin1').slice(0, 400))
  return `${req.kind}\n  ${req.method} ${target}\n  headers ${JSON.stringify(req.headers).slice(0, 400)}\n  body ${body}`
}

function injectOptions(req: FuzzRequest): InjectOptions {
  const options: InjectOptions = {
    method: req.method,
    url: req.query === '' ? req.path : `${req.path}?${req.query}`,
    headers: req.headers,
  }
  if (req.body !== null) options.payload = req.body
  return options
}

/** An answer from inject or from a socket. */
interface Answer {
  status: number
  headers: Record<string, string | string[] | number | undefined>
  body: string
}

function isFieldError(value: unknown): value is { field: string; message: string } {
  if (typeof value !== 'object' || value === null) return false
  const { field, message } = value as Record<string, unknown>
  return typeof field === 'string' && typeof message === 'string'
}

/** SPEC §1.2: an RFC 9457 problem with the status the model allows; a 422 lists every bad field. */
function assertProblem(answer: Answer, expected: Expected, what: string): void {
  const context = `${what}\n  expected ${expected.statuses.join(' or ')} (${expected.reason}), got ${answer.status}: ${answer.body.slice(0, 400)}`
  assert.ok(answer.status < 500, `a 5xx: ${context}`)
  assert.ok(expected.statuses.includes(answer.status), context)
  assert.match(String(answer.headers['content-type']), /^application\/problem\+json/, context)
  const body = JSON.parse(answer.body) as Record<string, unknown>
  assert.equal(body.status, answer.status, context)
  for (const key of ['type', 'title', 'detail'])
    assert.equal(typeof body[key], 'string', `${key}: ${context}`)
  if (answer.status === 422) {
    const errors: unknown = body.errors
    assert.ok(Array.isArray(errors) && errors.every(isFieldError), context)
    const listed = [...new Set(errors.map((e) => e.field))].sort()
    assert.deepEqual(listed, [...new Set(expected.badFields)].sort(), context)
  }
  if (answer.status === 405) {
    const allow = String(answer.headers.allow).split(/\s*,\s*/)
    for (const method of expected.allow ?? []) assert.ok(allow.includes(method), `Allow: ${context}`)
  }
}

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

/** SPEC §1.2: a 201 with the stored event, stored exactly as the model read it, and nothing else. */
async function assertStored(ctx: TestApp, answer: Answer, req: FuzzRequest, before: Counts): Promise<void> {
  const expected = expectedAnswer(req)
  const context = `${describe(req)}\n  → ${answer.status}: ${answer.body.slice(0, 400)}`
  assert.ok(expected.statuses.includes(answer.status), context)
  if (answer.status !== 201) {
    // A 415 for an odd label on POST /deploy, which SPEC §1.1 allows; then nothing is stored.
    assertProblem(answer, expected, describe(req))
    assert.deepEqual(await counts(ctx), before, context)
    return
  }
  const event = expected.event
  assert.ok(event, context)
  assert.match(String(answer.headers['content-type']), /^application\/json/, context)
  const body = JSON.parse(answer.body) as Record<string, unknown>
  assert.ok(typeof body.id === 'number' && Number.isInteger(body.id) && body.id > 0, context)
  assert.match(String(body.received_at), ISO_MS, context)
  for (const [key, value] of Object.entries(event)) assert.deepEqual(body[key], value, `${key}: ${context}`)
  assert.equal(body.api_key_name, 'ci', context)

  const row = await ctx.database.db
    .selectFrom('events')
    .selectAll()
    .where('id', '=', body.id)
    .executeTakeFirstOrThrow()
  const stored = {
    service: row.service,
    environment: row.environment,
    version: row.version,
    status: row.status,
    url: row.url,
    commit: row.commit_sha,
    description: row.description,
    deployer: row.deployer,
    source: row.source,
  }
  assert.deepEqual(stored, event, context)
  assert.equal(row.account_id, ctx.tenant.account.id, context)
  assert.equal(row.api_key_id, ctx.tenant.keyId, context)
  assert.equal(new Date(row.received_at).toISOString(), body.received_at, context)

  const idempotencyKey = headerValue(req, 'idempotency-key')?.trim()
  const after = await counts(ctx)
  assert.deepEqual(
    after,
    { events: before.events + 1, idempotency: before.idempotency + (idempotencyKey === undefined ? 0 : 1) },
    context,
  )
  if (idempotencyKey !== undefined) {
    const record = await ctx.database.db
      .selectFrom('idempotency_keys')
      .select('event_id')
      .where('idem_key', '=', idempotencyKey)
      .executeTakeFirstOrThrow()
    assert.equal(Number(record.event_id), body.id, context)
  }
}

/** Sends bytes as they are and reads the answer until the server closes the connection. */
function sendRaw(port: number, bytes: Buffer): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1')
    const chunks: Buffer[] = []
    let settled = false
    const finish = (err?: Error) => {
      if (settled) return
      settled = true
      const raw = Buffer.concat(chunks)
      // A reset after the answer arrived (the server closing on unread bytes) still has the answer.
      if (raw.length === 0) reject(err ?? new Error('connection closed without an answer'))
      else resolve(parseAnswer(raw))
    }
    socket.setTimeout(15_000, () => socket.destroy(new Error('no answer within 15 s')))
    socket.on('data', (chunk) => chunks.push(chunk))
    socket.on('error', (err) => finish(err))
    socket.on('close', () => finish())
    // Written without ending our side: Node drops a request whose client half-closes before the
    // answer is ready (curl does not do that), and every request says Connection: close anyway.
    socket.write(bytes)
  })
}

function parseAnswer(raw: Buffer): Answer {
  const split = raw.indexOf('\r\n\r\n')
  const head = raw.subarray(0, split === -1 ? raw.length : split).toString('latin1')
  const [statusLine = '', ...lines] = head.split('\r\n')
  const headers: Record<string, string> = {}
  for (const line of lines) {
    const colon = line.indexOf(':')
    const name = line.slice(0, colon).trim().toLowerCase()
    const value = line.slice(colon + 1).trim()
    headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`
  }
  let body = split === -1 ? Buffer.alloc(0) : raw.subarray(split + 4)
  if (headers['transfer-encoding'] === 'chunked') body = dechunk(body)
  return { status: Number(statusLine.split(' ')[1]), headers, body: body.toString('utf8') }
}

function dechunk(data: Buffer): Buffer {
  const parts: Buffer[] = []
  for (let at = 0; at < data.length; ) {
    const lineEnd = data.indexOf('\r\n', at)
    if (lineEnd === -1) break
    const size = Number.parseInt(data.subarray(at, lineEnd).toString('latin1'), 16)
    if (!size) break
    parts.push(data.subarray(lineEnd + 2, lineEnd + 2 + size))
    at = lineEnd + 2 + size + 2
  }
  return Buffer.concat(parts)
}

test('malformed requests: never a 5xx, problem+json with the SPEC status, nothing stored', async (t) => {
  const { ctx, port, keys } = await world(t)
  const arbs = fuzzArbitraries(keys)
  const raw = rawArbitraries(keys)
  // What the tables held after the last check: each request is checked against its own moment, so
  // one stored event fails that request only, and shrinking looks for the right one.
  let last = await counts(ctx)
  const assertNothingStored = async (what: string) => {
    const before = last
    last = await counts(ctx)
    assert.deepEqual(last, before, `something was stored: ${what}`)
  }
  t.diagnostic(`seed ${SEED}, runs ×${MULTIPLIER} (change with SHIPLOG_FUZZ_SEED and SHIPLOG_FUZZ_RUNS)`)
  let sent = 0

  // How many of each kind: most where the most can go wrong, about 10,000 in all with the socket.
  const injected: Array<{ name: string; arbitrary: fc.Arbitrary<FuzzRequest>; base: number }> = [
    {
      name: 'fields: wrong types, missing, renamed, repeated, empty, too long, control characters, lone surrogates',
      arbitrary: arbs.fieldDefects,
      base: 3000,
    },
    {
      name: 'bodies: broken JSON, not an object, invalid UTF-8, UTF-16, odd content types',
      arbitrary: arbs.bodyDefects,
      base: 2400,
    },
    {
      name: 'query strings: repeated parameters, broken and non-UTF-8 escapes, escaped control bytes',
      arbitrary: arbs.queryDefects,
      base: 1800,
    },
    {
      name: 'credentials: none, blank, unknown, revoked, near misses, wrong scheme or header',
      arbitrary: arbs.credentialDefects,
      base: 1500,
    },
    { name: 'Idempotency-Key blank or over 200 characters', arbitrary: arbs.idempotencyDefects, base: 500 },
    { name: 'bodies over 16 KiB', arbitrary: arbs.sizeDefects, base: 300 },
    { name: 'wrong methods, with any body', arbitrary: arbs.methodDefects, base: 300 },
  ]
  for (const { name, arbitrary, base } of injected) {
    const numRuns = runs(base)
    await t.test(`${name} (${numRuns} requests, inject)`, async () => {
      await fc.assert(
        fc.asyncProperty(arbitrary, async (req) => {
          const expected = expectedAnswer(req)
          const what = describe(req)
          assert.notEqual(expected.statuses[0], 201, `the generator made a valid request: ${what}`)
          const res = await ctx.app.inject(injectOptions(req))
          sent++
          assertProblem({ status: res.statusCode, headers: res.headers, body: res.body }, expected, what)
          await assertNothingStored(what)
        }),
        { seed: seedFor(name), numRuns },
      )
    })
  }

  // Over a real socket, for what inject cannot say: repeated headers, raw bytes, broken framing.
  const overSocket: Array<{ name: string; arbitrary: fc.Arbitrary<RawCase>; base: number }> = [
    {
      name: 'the same kinds, byte for byte, by length or in chunks',
      arbitrary: raw.malformedOverSocket,
      base: 250,
    },
    { name: 'the key header twice', arbitrary: raw.duplicatedKeyHeaders, base: 100 },
    { name: 'key headers with bytes that are not UTF-8', arbitrary: raw.highByteKeys, base: 50 },
    {
      name: 'broken HTTP framing: obs-fold, NUL/CR/LF in values, two lengths, bad chunks, bad request lines',
      arbitrary: raw.brokenFraming,
      base: 100,
    },
  ]
  for (const { name, arbitrary, base } of overSocket) {
    const numRuns = runs(base)
    await t.test(`${name} (${numRuns} requests, socket)`, async () => {
      await fc.assert(
        fc.asyncProperty(arbitrary, async (rawCase) => {
          const answer = await sendRaw(port, rawCase.bytes)
          sent++
          const what = rawCase.request ? describe(rawCase.request) : rawCase.kind
          if (rawCase.framing) {
            // Node's HTTP parser refuses these; the test below checks the problem+json format.
            const context = `${what}: got ${answer.status} ${answer.body.slice(0, 200)}`
            assert.ok(rawCase.expected.statuses.includes(answer.status), context)
          } else {
            assertProblem(answer, rawCase.expected, what)
          }
          await assertNothingStored(what)
        }),
        { seed: seedFor(name), numRuns },
      )
    })
  }

  t.diagnostic(`${sent} malformed requests sent, all refused as the SPEC says, none stored`)
  assert.ok(sent >= MINIMUM_MALFORMED, `only ${sent} malformed requests were sent`)

  // Three gaps the fuzzing found, fixed since; each keeps a property of its own.
  await t.test('HTTP framing errors are answered as problem+json too', async () => {
    await fc.assert(
      fc.asyncProperty(raw.brokenFraming, async (rawCase) => {
        const answer = await sendRaw(port, rawCase.bytes)
        assert.match(String(answer.headers['content-type']), /^application\/problem\+json/, rawCase.kind)
      }),
      { seed: seedFor('framing as problem+json'), numRuns: 20, endOnFailure: true },
    )
  })
  await t.test(
    'POST /put reads a JSON body whatever the Content-Type, even a malformed one (SPEC §1.1)',
    async () => {
      await fc.assert(
        fc.asyncProperty(arbs.putWithMalformedContentType, async (generated) => {
          // A key generated twice would make the second request a replay (200); each must be new.
          const req: FuzzRequest = {
            ...generated,
            headers: Object.fromEntries(
              Object.entries(generated.headers).filter(([name]) => name.toLowerCase() !== 'idempotency-key'),
            ),
          }
          const before = await counts(ctx)
          const res = await ctx.app.inject(injectOptions(req))
          await assertStored(
            ctx,
            { status: res.statusCode, headers: res.headers, body: res.body },
            req,
            before,
          )
        }),
        { seed: seedFor('malformed content type'), numRuns: 20, endOnFailure: true },
      )
    },
  )
  await t.test('GET /put with a broken chunk in its body: refused, and nothing stored', async () => {
    await fc.assert(
      fc.asyncProperty(raw.getWithBrokenBody, async (rawCase) => {
        const before = await counts(ctx)
        const answer = await sendRaw(port, rawCase.bytes)
        assert.ok(rawCase.expected.statuses.includes(answer.status), `${rawCase.kind}: got ${answer.status}`)
        // The event may be written just after Node's 400; give the commit a moment to show.
        await new Promise((resolve) => setTimeout(resolve, 50))
        assert.deepEqual(await counts(ctx), before, `stored although refused: ${rawCase.kind}`)
      }),
      { seed: seedFor('GET with a broken body'), numRuns: 10, endOnFailure: true },
    )
  })
})

test('valid generated events are stored exactly as sent, by all three forms', async (t) => {
  const { ctx, port, keys } = await world(t)
  const arbs = fuzzArbitraries(keys)
  const raw = rawArbitraries(keys)
  // Generated keys repeat across runs (and shrinking replays a run); a repeat would be a replay. The
  // run number makes each unique, replacing the end of a key at the 200-character limit.
  let requestNumber = 0
  const unique = (req: FuzzRequest): FuzzRequest => {
    const suffix = `~${++requestNumber}`
    const headers = Object.fromEntries(
      Object.entries(req.headers).map(([name, value]) => {
        if (name.toLowerCase() !== 'idempotency-key') return [name, value]
        const room = IDEMPOTENCY_KEY_MAX - suffix.length
        return [name, `${value.length > room ? value.slice(0, room) : value}${suffix}`]
      }),
    )
    return { ...req, headers }
  }

  const injectRuns = runs(600)
  await t.test(`through inject (${injectRuns} events)`, async () => {
    await fc.assert(
      fc.asyncProperty(arbs.validRequest, async ({ req: generated, event }) => {
        const req = unique(generated)
        // The model reads the bytes on its own; it must find what the generator meant to send.
        assert.deepEqual(expectedAnswer(req).event, storedEvent(event, req.form), describe(req))
        const before = await counts(ctx)
        const res = await ctx.app.inject(injectOptions(req))
        await assertStored(ctx, { status: res.statusCode, headers: res.headers, body: res.body }, req, before)
      }),
      { seed: seedFor('valid, inject'), numRuns: injectRuns },
    )
  })

  const socketRuns = runs(80)
  await t.test(`over a socket, by length or in chunks (${socketRuns} events)`, async () => {
    await fc.assert(
      fc.asyncProperty(raw.validOverSocket, async ({ valid, how }) => {
        const req = unique(valid.req)
        const before = await counts(ctx)
        const answer = await sendRaw(port, renderRaw(req, how))
        await assertStored(ctx, answer, req, before)
      }),
      { seed: seedFor('valid, socket'), numRuns: socketRuns },
    )
  })
})
