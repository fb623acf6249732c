// Recording never refuses the truth (SPEC §11): an event into a locked or frozen environment, of a
// bad version or ahead of its promotion, is stored with the guardrails it broke, answered and read
// back with them; an override reason is stored, answered and audited once, with the event.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { cliSource } from '../../src/domain/audit/log.js'
import {
  addFreezeWindow,
  lockEnvironment,
  markVersionBad,
  setPromotionRule,
  unlockEnvironment,
} from '../../src/domain/guardrails/commands.js'
import { createApiKey } from '../../src/domain/keys.js'
import { buildTestApp, type TestApp } from '../helper.js'
import { deploy } from '../support/ui.js'

const MIN = 60_000

/** An app whose account knows App1 in Dev, Staging and Prod (guardrail commands refuse unknown names). */
async function seeded(t: Parameters<typeof buildTestApp>[0]): Promise<TestApp> {
  const ctx = await buildTestApp(t)
  for (const environment of ['Dev', 'Staging', 'Prod']) {
    const res = await deploy(ctx.app, ctx.tenant.key, {
      service: 'App1',
      environment,
      version: '0.9.0',
      status: 'Deployed',
    })
    assert.equal(res.status, 201)
    assert.deepEqual(res.body.guardrails, [])
    assert.equal(res.body.override_reason, null)
  }
  await ctx.app.deployments.current()
  return ctx
}

/** Guardrails set by the domain commands are seen by recording at once once the cache forgets them. */
async function ok<T>(ctx: TestApp, done: Promise<{ ok: boolean } & T>): Promise<void> {
  const result = await done
  assert.ok(result.ok, JSON.stringify(result))
  ctx.app.guardrails.invalidate()
}

const account = (ctx: TestApp) => ctx.tenant.account.id

async function readKey(ctx: TestApp): Promise<string> {
  const { key } = await createApiKey(ctx.database.db, {
    accountId: account(ctx),
    name: 'reader',
    createdBy: 'test',
    scopes: ['read'],
  })
  return key
}

async function storedGuardrails(ctx: TestApp, id: unknown): Promise<string | null> {
  const row = await ctx.database.db
    .selectFrom('events')
    .select('guardrails')
    .where('id', '=', Number(id))
    .executeTakeFirstOrThrow()
  return row.guardrails
}

async function overrideEntries(ctx: TestApp) {
  return ctx.database.db
    .selectFrom('audit_entries')
    .selectAll()
    .where('action', '=', 'guardrail.overridden')
    .orderBy('id')
    .execute()
}

test('an event into a locked environment is stored with ["lock"] and read back with it', async (t) => {
  const ctx = await seeded(t)
  await ok(
    ctx,
    lockEnvironment(
      ctx.database.db,
      account(ctx),
      { environment: 'Prod', service: null, reason: 'migration', endsAt: null },
      cliSource(),
    ),
  )
  const res = await deploy(ctx.app, ctx.tenant.key, {
    service: 'App1',
    environment: 'Prod',
    version: '1.0.0',
    status: 'Deployed',
  })
  assert.equal(res.status, 201)
  assert.deepEqual(res.body.guardrails, ['lock'])
  assert.equal(await storedGuardrails(ctx, res.body.id), 'lock')
  // Other environments are not locked.
  const dev = await deploy(ctx.app, ctx.tenant.key, {
    service: 'App1',
    environment: 'Dev',
    version: '1.0.0',
    status: 'Deployed',
  })
  assert.deepEqual(dev.body.guardrails, [])
  const read = await ctx.app.inject({
    url: '/api/v1/events?environment=Prod&version=1.0.0',
    headers: { 'x-api-key': await readKey(ctx) },
  })
  assert.equal(read.statusCode, 200, read.payload)
  const [event] = read.json().events as Record<string, unknown>[]
  assert.equal(event?.id, res.body.id)
  assert.deepEqual(event?.guardrails, ['lock'])
  // The legacy forms answer the same shape.
  const legacy = await ctx.app.inject({
    url: '/put?app=App1&env=Prod&version=1.0.1&status=Deployed',
    headers: { 'x-api-key': ctx.tenant.key },
  })
  assert.equal(legacy.statusCode, 201)
  assert.deepEqual(legacy.json().guardrails, ['lock'])
})

test('a one-off freeze, a bad version and an unmet promotion rule each flag the event', async (t) => {
  const ctx = await seeded(t)
  const db = ctx.database.db
  const now = Date.now()
  await ok(
    ctx,
    addFreezeWindow(
      db,
      account(ctx),
      {
        environment: 'Staging',
        reason: 'release week',
        schedule: { kind: 'once', startsAt: now - 10 * MIN, endsAt: now + 60 * MIN },
      },
      cliSource(),
    ),
  )
  await ok(
    ctx,
    markVersionBad(db, account(ctx), { service: 'App1', version: '6.6.6', reason: 'leaks' }, cliSource()),
  )
  await ok(
    ctx,
    setPromotionRule(
      db,
      account(ctx),
      { environment: 'Prod', afterEnvironment: 'Staging', minMinutes: 0, requireGood: false },
      cliSource(),
    ),
  )
  const send = (environment: string, version: string) =>
    deploy(ctx.app, ctx.tenant.key, { service: 'App1', environment, version, status: 'Deploying' })
  assert.deepEqual((await send('Staging', '2.0.0')).body.guardrails, ['freeze'])
  assert.deepEqual((await send('Dev', '6.6.6')).body.guardrails, ['bad_version'])
  // 3.0.0 never succeeded in Staging; 0.9.0 did (the seed).
  assert.deepEqual((await send('Prod', '3.0.0')).body.guardrails, ['promotion'])
  assert.deepEqual((await send('Prod', '0.9.0')).body.guardrails, [])
  // A success in Staging (during its freeze: stored all the same, flagged) lets Prod take it.
  const staged = await deploy(ctx.app, ctx.tenant.key, {
    service: 'App1',
    environment: 'Staging',
    version: '3.0.0',
    status: 'Deployed',
  })
  assert.deepEqual(staged.body.guardrails, ['freeze'])
  assert.deepEqual((await send('Prod', '3.0.0')).body.guardrails, [])
})

test('all four at once, in order; an account without guardrails gets []', async (t) => {
  const ctx = await seeded(t)
  const db = ctx.database.db
  const now = Date.now()
  const who = cliSource()
  await ok(
    ctx,
    lockEnvironment(
      db,
      account(ctx),
      { environment: 'Prod', service: 'App1', reason: 'r', endsAt: null },
      who,
    ),
  )
  await ok(
    ctx,
    addFreezeWindow(
      db,
      account(ctx),
      {
        environment: 'Prod',
        reason: 'f',
        schedule: { kind: 'once', startsAt: now - MIN, endsAt: now + 60 * MIN },
      },
      who,
    ),
  )
  await ok(ctx, markVersionBad(db, account(ctx), { service: 'App1', version: '4.0.0', reason: 'b' }, who))
  await ok(
    ctx,
    setPromotionRule(
      db,
      account(ctx),
      { environment: 'Prod', afterEnvironment: 'Staging', minMinutes: 5, requireGood: false },
      who,
    ),
  )
  const res = await deploy(ctx.app, ctx.tenant.key, {
    service: 'App1',
    environment: 'Prod',
    version: '4.0.0',
    status: 'Deployed',
  })
  assert.equal(res.status, 201)
  assert.deepEqual(res.body.guardrails, ['lock', 'freeze', 'bad_version', 'promotion'])
  assert.equal(await storedGuardrails(ctx, res.body.id), 'lock,freeze,bad_version,promotion')

  const other = await ctx.addTenant('Other')
  const plain = await deploy(ctx.app, other.key, {
    service: 'App1',
    environment: 'Prod',
    version: '4.0.0',
    status: 'Deployed',
  })
  assert.equal(plain.status, 201)
  assert.deepEqual(plain.body.guardrails, [])
  assert.equal(await storedGuardrails(ctx, plain.body.id), null)
})

test('an idempotent replay answers the event as stored, even after the lock is lifted', async (t) => {
  const ctx = await seeded(t)
  const db = ctx.database.db
  await ok(
    ctx,
    lockEnvironment(
      db,
      account(ctx),
      { environment: 'Prod', service: null, reason: 'x', endsAt: null },
      cliSource(),
    ),
  )
  const send = () =>
    ctx.app.inject({
      method: 'POST',
      url: '/deploy',
      headers: {
        'x-api-key': ctx.tenant.key,
        'idempotency-key': 'run-7',
        'content-type': 'application/json',
      },
      payload: { service: 'App1', environment: 'Prod', version: '5.0.0', status: 'Deployed' },
    })
  const first = await send()
  assert.equal(first.statusCode, 201)
  assert.deepEqual(first.json().guardrails, ['lock'])
  await ok(ctx, unlockEnvironment(db, account(ctx), { environment: 'Prod', service: null }, cliSource()))
  const again = await send()
  assert.equal(again.statusCode, 200)
  assert.equal(again.headers['idempotent-replayed'], 'true')
  assert.deepEqual(again.json(), first.json())
})

test('override_reason is stored, answered and audited once, in the event’s transaction', async (t) => {
  const ctx = await seeded(t)
  const db = ctx.database.db
  await ok(
    ctx,
    lockEnvironment(
      db,
      account(ctx),
      { environment: 'Prod', service: null, reason: 'x', endsAt: null },
      cliSource(),
    ),
  )
  const body = {
    service: 'App1',
    environment: 'Prod',
    version: '7.0.0',
    status: 'Deployed',
    override_reason: '  hotfix for INC-42  ',
  }
  const send = (payload: Record<string, string>, idem?: string) =>
    ctx.app.inject({
      method: 'POST',
      url: '/deploy',
      headers: {
        'x-api-key': ctx.tenant.key,
        'content-type': 'application/json',
        ...(idem ? { 'idempotency-key': idem } : {}),
      },
      payload,
    })
  // Among plain events arriving together (one batch): only the override is audited.
  const plainBody = { ...body, version: '7.0.1' }
  delete (plainBody as Record<string, string>).override_reason
  const answers = await Promise.all([
    send(plainBody),
    send(body, 'ovr-1'),
    send(plainBody),
    send({ ...body, version: '7.0.2' }),
  ])
  for (const a of answers) assert.equal(a.statusCode, 201, a.payload)
  const overridden = answers[1]?.json()
  assert.equal(overridden.override_reason, 'hotfix for INC-42')
  assert.deepEqual(overridden.guardrails, ['lock'])
  assert.equal(answers[0]?.json().override_reason, null)
  const stored = await db
    .selectFrom('events')
    .select(['override_reason'])
    .where('id', '=', Number(overridden.id))
    .executeTakeFirstOrThrow()
  assert.equal(stored.override_reason, 'hotfix for INC-42')

  const replay = await send(body, 'ovr-1')
  assert.equal(replay.statusCode, 200)
  assert.deepEqual(replay.json(), overridden)

  const entries = await overrideEntries(ctx)
  assert.equal(entries.length, 2, 'one per overriding event, none for the plain ones or the replay')
  const entry = entries.find((e) => JSON.parse(e.details).event_id === Number(overridden.id))
  assert.ok(entry)
  assert.equal(entry.account_id, account(ctx))
  assert.equal(entry.actor_kind, 'key')
  assert.equal(Number(entry.actor_id), ctx.tenant.keyId)
  assert.equal(entry.actor, 'ci')
  assert.equal(entry.address, '127.0.0.1')
  assert.equal(entry.target, 'App1 7.0.0 in Prod')
  assert.equal(Number(entry.at), Date.parse(overridden.received_at))
  assert.deepEqual(JSON.parse(entry.details), {
    reason: 'hotfix for INC-42',
    guardrails: ['lock'],
    event_id: Number(overridden.id),
  })

  // An override where no guardrail applies is still stored and audited (it says what was sent).
  const dev = await send({ ...body, environment: 'Dev', version: '7.1.0' })
  assert.deepEqual(dev.json().guardrails, [])
  const devEntry = (await overrideEntries(ctx)).find((e) => JSON.parse(e.details).event_id === dev.json().id)
  assert.deepEqual(JSON.parse(devEntry?.details ?? '{}').guardrails, [])

  // A bad override_reason is a 422 naming it; nothing stored, nothing audited.
  const before = await ctx.eventCount()
  const bad = await send({ ...body, override_reason: 'x'.repeat(501) })
  assert.equal(bad.statusCode, 422)
  assert.ok(bad.json().errors.some((e: { field: string }) => e.field === 'override_reason'))
  assert.equal(await ctx.eventCount(), before)
  assert.equal((await overrideEntries(ctx)).length, 3)
})
