// Idempotency-Key over HTTP (SPEC §1.2): a true repeat is a 200 replay; the key with other values is
// a 422 that stores nothing, whether the two requests come one after the other or together.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import fc from 'fast-check'
import { buildTestApp, type TestApp } from '../helper.js'

const EVENT = {
  service: 'api',
  environment: 'prod',
  version: '1.0.0',
  status: 'Deployed',
  url: 'https://ci.example/runs/7',
  commit: 'abc123',
  description: 'first try',
  deployer: 'ada',
}

function send(ctx: TestApp, payload: Record<string, string>, idem = 'run-7-step-2', url = '/deploy') {
  return ctx.app.inject({
    method: 'POST',
    url,
    headers: { 'x-api-key': ctx.tenant.key, 'idempotency-key': idem },
    payload,
  })
}

test('Idempotency-Key with different values: 422 idempotency-key-reused, nothing stored; a true repeat stays 200', async (t) => {
  const ctx = await buildTestApp(t)
  const first = await send(ctx, EVENT)
  assert.equal(first.statusCode, 201, first.body)

  // Each event field counts, the optional ones too, and a field sent in the second request only.
  const changes: Record<string, string>[] = [
    { version: '1.0.1' },
    { service: 'web' },
    { environment: 'staging' },
    { status: 'Failed' },
    { url: 'https://ci.example/runs/8' },
    { commit: 'abc124' },
    { description: 'second try' },
    { deployer: 'grace' },
  ]
  for (const change of changes) {
    const res = await send(ctx, { ...EVENT, ...change })
    assert.equal(res.statusCode, 422, `${JSON.stringify(change)}: ${res.body}`)
    assert.match(res.headers['content-type'] as string, /^application\/problem\+json/)
    const problem = res.json()
    assert.equal(problem.type, 'urn:shiplog:problem:idempotency-key-reused')
    assert.equal(problem.status, 422)
    assert.match(problem.detail, /different values/)
    assert.equal(res.headers['idempotent-replayed'], undefined)
    // The earlier event is not handed out as if it were this request's.
    assert.equal(problem.id, undefined)
  }
  const { description: _dropped, ...withoutDescription } = EVENT
  const missing = await send(ctx, withoutDescription)
  assert.equal(missing.statusCode, 422, 'leaving out a field the first request had is a different event')
  assert.equal(await ctx.eventCount(), 1)

  // Same values as validated (trimmed, status in any case): a replay, answered with the original.
  const replay = await send(ctx, { ...EVENT, version: ' 1.0.0 ', status: 'deployed' })
  assert.equal(replay.statusCode, 200, replay.body)
  assert.equal(replay.headers['idempotent-replayed'], 'true')
  assert.deepEqual(replay.json(), first.json())
  assert.equal(await ctx.eventCount(), 1)

  // After refusals, the stored event is still the first one, unchanged.
  const rows = await ctx.database.db.selectFrom('events').selectAll().execute()
  assert.equal(rows.length, 1)
  assert.equal(rows[0]?.version, '1.0.0')
  assert.equal(rows[0]?.description, 'first try')
})

test('Idempotency-Key: the request form is not part of the event, so a retry through POST /put replays', async (t) => {
  const ctx = await buildTestApp(t)
  const first = await send(ctx, { service: 'api', environment: 'prod', version: '2.0', status: 'Deploying' })
  assert.equal(first.statusCode, 201)
  const legacy = await send(
    ctx,
    { app: 'api', env: 'prod', version: '2.0', status: 'Deploying' },
    undefined,
    '/put',
  )
  assert.equal(legacy.statusCode, 200, legacy.body)
  assert.equal(legacy.headers['idempotent-replayed'], 'true')
  assert.equal(legacy.json().source, 'deploy', 'the replay is the original event, form included')
  const query = await ctx.app.inject({
    method: 'GET',
    url: '/put?app=api&env=prod&version=2.1&status=Deploying',
    headers: { 'x-api-key': ctx.tenant.key, 'idempotency-key': 'run-7-step-2' },
  })
  assert.equal(query.statusCode, 422, query.body)
  assert.equal(query.json().type, 'urn:shiplog:problem:idempotency-key-reused')
  assert.equal(await ctx.eventCount(), 1)
})

test('Idempotency-Key sent concurrently with same and different values: one event, replays, 422s', async (t) => {
  const ctx = await buildTestApp(t)
  // Fired together, these reach the writer in one turn and are committed in one transaction.
  const bodies = [
    EVENT,
    EVENT,
    { ...EVENT, version: '1.0.1' },
    EVENT,
    { ...EVENT, status: 'Failed' },
    { ...EVENT, deployer: 'grace' },
  ]
  const answers = await Promise.all(bodies.map((body) => send(ctx, body, 'together')))
  const report = answers.map((a) => `${a.statusCode} ${a.body}`).join('\n')
  // Whichever reached the store first was stored; requests with its values are replays of it,
  // every other one is refused.
  const created = answers.filter((a) => a.statusCode === 201)
  assert.equal(created.length, 1, report)
  const stored = created[0]?.json()
  const sameAsStored = (body: Record<string, string>) =>
    body.version === stored.version && body.status === stored.status && body.deployer === stored.deployer
  answers.forEach((a, i) => {
    const body = bodies[i] as Record<string, string>
    if (a === created[0]) return
    if (sameAsStored(body)) {
      assert.equal(a.statusCode, 200, report)
      assert.equal(a.headers['idempotent-replayed'], 'true')
      assert.deepEqual(a.json(), stored)
    } else {
      assert.equal(a.statusCode, 422, report)
      assert.equal(a.json().type, 'urn:shiplog:problem:idempotency-key-reused')
    }
  })
  assert.equal(await ctx.eventCount(), 1)
})

test('Idempotency-Key: another account may use the same key with other values', async (t) => {
  const ctx = await buildTestApp(t)
  assert.equal((await send(ctx, EVENT, 'shared')).statusCode, 201)
  const other = await ctx.addTenant('Other')
  const res = await ctx.app.inject({
    method: 'POST',
    url: '/deploy',
    headers: { 'x-api-key': other.key, 'idempotency-key': 'shared' },
    payload: { ...EVENT, version: '7.7.7' },
  })
  assert.equal(res.statusCode, 201, res.body)
  assert.equal(await ctx.eventCount(), 2)
})

/**
 * One event as a caller might send it: each value drawn from a few spellings, some of which mean
 * the same after validation (white space around it, the status in another case, an optional field
 * sent empty or left out), so that true repeats and real differences both come up often.
 */
const sentValue = (values: readonly string[]) =>
  fc
    .tuple(fc.constantFrom(...values), fc.constantFrom('', ' ', '\t'), fc.constantFrom('', ' '))
    .map(([value, before, after]) => `${before}${value}${after}`)
const optionalValue = (values: readonly string[]) =>
  fc.option(fc.oneof(sentValue(values), fc.constant('')), { nil: undefined })
const sentEvent = fc.record(
  {
    service: sentValue(['api', 'API', 'web']),
    environment: sentValue(['prod', 'staging']),
    version: sentValue(['1.0.0', '1.0.1', '1.0.0+b']),
    status: fc.constantFrom('Deployed', 'deployed', 'DEPLOYED', 'Failed', 'failed'),
    url: optionalValue(['https://ci.example/1', 'https://ci.example/2']),
    commit: optionalValue(['abc', 'abd']),
    description: optionalValue(['note', 'Note']),
    deployer: optionalValue(['ada']),
  },
  { requiredKeys: ['service', 'environment', 'version', 'status'] },
)
type SentEvent = Record<string, string | undefined>

/** The same event spelled again: other white space, the status in another case, absent as empty. */
const respelled = (e: SentEvent) =>
  fc
    .tuple(
      fc.array(fc.tuple(fc.constantFrom('', ' ', '  '), fc.constantFrom('', ' ', '\t')), {
        minLength: 8,
        maxLength: 8,
      }),
      fc.constantFrom('lower', 'upper', 'same'),
      fc.boolean(),
    )
    .map(([spaces, statusCase, emptyForAbsent]) => {
      const out: SentEvent = {}
      Object.keys({ ...e, url: 1, commit: 1, description: 1, deployer: 1 }).forEach((name, i) => {
        const value = e[name]?.trim()
        const [before, after] = spaces[i] ?? ['', '']
        if (value === undefined || value === '') out[name] = emptyForAbsent ? before : undefined
        else if (name === 'status')
          out[name] =
            statusCase === 'lower'
              ? value.toLowerCase()
              : statusCase === 'upper'
                ? value.toUpperCase()
                : value
        else out[name] = `${before}${value}${after}`
      })
      return out
    })
const pairOfRequests = sentEvent.chain((first) =>
  fc.tuple(fc.constant(first), fc.oneof(sentEvent, respelled(first))),
)

/**
 * The model, from SPEC §1.1 and §1.2 alone: values are trimmed, an empty optional value is absent,
 * the status is compared in its canonical spelling, everything else exactly.
 */
function meaning(e: SentEvent): string {
  const value = (name: string) => {
    const v = e[name]?.trim()
    return v === undefined || v === '' ? null : v
  }
  return JSON.stringify([
    value('service'),
    value('environment'),
    value('version'),
    value('status')?.toLowerCase(),
    value('url'),
    value('commit'),
    value('description'),
    value('deployer'),
  ])
}

test('property: a second request with the same Idempotency-Key is a 200 replay exactly when its values mean the same, else a 422 that stores nothing', async (t) => {
  const ctx = await buildTestApp(t)
  let run = 0
  const seen = { replays: 0, refusals: 0 }
  await fc.assert(
    fc.asyncProperty(pairOfRequests, async ([first, second]) => {
      const key = `prop-${++run}`
      const clean = (e: SentEvent) =>
        Object.fromEntries(Object.entries(e).filter(([, v]) => v !== undefined)) as Record<string, string>
      const before = await ctx.eventCount()
      const a = await send(ctx, clean(first), key)
      assert.equal(a.statusCode, 201, a.body)
      const b = await send(ctx, clean(second), key)
      if (meaning(first) === meaning(second)) {
        assert.equal(b.statusCode, 200, `${JSON.stringify(first)} then ${JSON.stringify(second)}: ${b.body}`)
        assert.equal(b.headers['idempotent-replayed'], 'true')
        assert.deepEqual(b.json(), a.json())
        seen.replays++
      } else {
        assert.equal(b.statusCode, 422, `${JSON.stringify(first)} then ${JSON.stringify(second)}: ${b.body}`)
        assert.equal(b.json().type, 'urn:shiplog:problem:idempotency-key-reused')
        seen.refusals++
      }
      assert.equal(await ctx.eventCount(), before + 1)
    }),
    { numRuns: 150, seed: 20261123, endOnFailure: true },
  )
  // Both outcomes were tried many times, so neither half of the property holds vacuously.
  assert.ok(seen.replays >= 30 && seen.refusals >= 30, JSON.stringify(seen))
  t.diagnostic(`${seen.replays} replays, ${seen.refusals} refusals`)
})
