// The stored deployments are exactly what the rules derive from all the events, however the events
// arrive: in batches, interleaved with derivation runs of any size, late (an id below ones already
// derived), or derived again from nothing. Both databases.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import fc from 'fast-check'
import { sql } from 'kysely'
import { parseDatabaseUrl } from '../../src/config.js'
import type { Database } from '../../src/db/connect.js'
import { openDatabase } from '../../src/db/connect.js'
import { migrateToLatest } from '../../src/db/migrate.js'
import type { EventStatus } from '../../src/db/schema.js'
import { ensureAccount } from '../../src/domain/accounts.js'
import { boardCells } from '../../src/domain/board/cells.js'
import {
  computeMetrics,
  firstStartKey,
  firstStartsOf,
  type Metrics,
} from '../../src/domain/deployments/metrics.js'
import { listDeployments, metricsForWindow } from '../../src/domain/deployments/queries.js'
import {
  type Deployment,
  type DeploymentOutcome,
  emptyGroupState,
  groupKey,
  latestAt,
  outcomeAt,
  runningAt,
} from '../../src/domain/deployments/rules.js'
import { catchUpDeployments, rebuildDeployments } from '../../src/domain/deployments/store.js'
import { buildTestApp, freshDatabaseUrl } from '../helper.js'
import { expectedDeployments, storedDeployments } from '../support/deployments.js'

interface Sent {
  account: number
  service: string
  environment: string
  version: string
  status: EventStatus
}

const sentEvent = fc.record({
  account: fc.integer({ min: 0, max: 1 }),
  service: fc.constantFrom('api', 'web', 'API', 'wéb 1/2'),
  environment: fc.constantFrom('prod', 'staging'),
  version: fc.constantFrom('1.0', '1.1', '2.0'),
  status: fc.constantFrom<EventStatus>('Deploying', 'Deploying', 'Deployed', 'Failed'),
})

async function insertEvents(
  database: Database,
  accounts: number[],
  events: readonly Sent[],
  at: number,
  ids?: number[],
): Promise<void> {
  for (const [i, e] of events.entries()) {
    const row = {
      account_id: accounts[e.account] as number,
      service: e.service,
      environment: e.environment,
      version: e.version,
      status: e.status,
      source: 'deploy' as const,
      deployer: `d${i % 3}`,
      api_key_name: 'ci',
      received_at: at + i * 1000,
      occurred_at: at + i * 1000,
    }
    const id = ids?.[i]
    if (id === undefined) {
      await database.db.insertInto('events').values(row).execute()
    } else if (database.dialect === 'sqlite') {
      await database.db
        .insertInto('events')
        .values({ ...row, id })
        .execute()
    } else {
      // An id chosen by the test, as a transaction that was handed it earlier would commit it.
      await sql`insert into events (id, account_id, service, environment, version, status, source, deployer, api_key_name, received_at, occurred_at)
        overriding system value values (${id}, ${row.account_id}, ${row.service}, ${row.environment}, ${row.version},
        ${row.status}, ${row.source}, ${row.deployer}, ${row.api_key_name}, ${row.received_at}, ${row.occurred_at})`.execute(
        database.db,
      )
    }
  }
}

const expected = expectedDeployments
const stored = storedDeployments

/**
 * Each service and environment has a head naming its running deployment. (Its latest_id is only
 * what it was when the head was last written; the board cells checked elsewhere cover the latest.)
 */
async function checkHeads(database: Database, all: Map<number, Deployment[]>): Promise<void> {
  const heads = await database.db.selectFrom('deployment_heads').selectAll().execute()
  const want = new Map<string, { running: number | null; latest: number }>()
  for (const [accountId, deployments] of all) {
    const states = new Map<string, ReturnType<typeof emptyGroupState>>()
    for (const d of deployments) {
      const key = `${accountId}:${groupKey(d.service, d.environment)}`
      const latest = want.get(key)?.latest ?? 0
      want.set(key, { running: want.get(key)?.running ?? null, latest: Math.max(latest, d.id) })
      if (!states.has(key)) states.set(key, emptyGroupState())
    }
    for (const d of deployments) {
      if (d.result !== 'succeeded') continue
      const key = `${accountId}:${groupKey(d.service, d.environment)}`
      const entry = want.get(key)
      const current =
        entry?.running === null || entry?.running === undefined
          ? null
          : deployments.find((x) => x.id === entry.running)
      if (entry && (!current || (current.finishEventId ?? 0) < (d.finishEventId ?? 0))) entry.running = d.id
    }
  }
  const got = new Map(
    heads.map((h) => [
      `${h.account_id}:${groupKey(h.service, h.environment)}`,
      { running: h.running_id === null ? null : Number(h.running_id) },
    ]),
  )
  const wantRunning = new Map([...want].map(([key, w]) => [key, { running: w.running }]))
  assert.deepEqual(got, wantRunning, 'deployment heads')
}

/** Lead time's starting points: the first deployment of each (service, version). */
async function checkFirsts(database: Database, all: Map<number, Deployment[]>): Promise<void> {
  const rows = await database.db.selectFrom('version_firsts').selectAll().execute()
  const got = new Map(
    rows.map((r) => [
      `${r.account_id}:${firstStartKey(r.service, r.version)}`,
      { startedAt: r.started_at, id: r.deployment_id },
    ]),
  )
  const want = new Map<string, { startedAt: number; id: number }>()
  for (const [accountId, deployments] of all) {
    for (const [key, first] of firstStartsOf(deployments)) want.set(`${accountId}:${key}`, first)
  }
  assert.deepEqual(got, want, 'first deployment of each version')
}

async function drain(database: Database, limit: number): Promise<void> {
  for (let i = 0; i < 10_000; i++) {
    const result = await catchUpDeployments(database, { limit })
    if (!result.more && result.events === 0) return
  }
  assert.fail('derivation did not finish')
}

test('derived in batches of any size, the stored deployments equal the plain derivation', async (t) => {
  const ctx = await buildTestApp(t)
  const other = await ctx.addTenant('Other')
  const accounts = [ctx.tenant.account.id, other.account.id]
  let at = Date.UTC(2026, 0, 1)
  await fc.assert(
    fc.asyncProperty(
      fc.array(
        fc.tuple(fc.array(sentEvent, { minLength: 0, maxLength: 12 }), fc.integer({ min: 1, max: 7 })),
        {
          minLength: 1,
          maxLength: 6,
        },
      ),
      async (rounds) => {
        await ctx.database.db.deleteFrom('events').execute()
        await rebuildDeployments(ctx.database)
        for (const [events, limit] of rounds) {
          await insertEvents(ctx.database, accounts, events, at)
          at += events.length * 1000 + 1000
          // Sometimes only part of what waits is derived before more arrives.
          await catchUpDeployments(ctx.database, { limit })
        }
        await drain(ctx.database, 50)
        const want = await expected(ctx.database)
        assert.deepEqual(await stored(ctx.database), want)
        await checkHeads(ctx.database, want)
        await checkFirsts(ctx.database, want)
      },
    ),
    {
      numRuns: Number(process.env.SHIPLOG_FUZZ_RUNS ?? 25),
      seed: Number(process.env.SHIPLOG_FUZZ_SEED ?? 61),
    },
  )
  // Derived again from nothing, the same.
  const before = await stored(ctx.database)
  await rebuildDeployments(ctx.database)
  assert.deepEqual(await stored(ctx.database), before)
})

test('an event that commits after later ids were derived is taken in id order', async (t) => {
  const ctx = await buildTestApp(t)
  const accounts = [ctx.tenant.account.id]
  const base = 1000
  const at = Date.UTC(2026, 0, 2)
  // Ids 1000 and 1002 commit first; 1001 (a Deploying of the same version) only after they were derived.
  await insertEvents(
    ctx.database,
    accounts,
    [
      { account: 0, service: 'api', environment: 'prod', version: '1.0', status: 'Deploying' },
      { account: 0, service: 'api', environment: 'prod', version: '1.0', status: 'Deployed' },
    ],
    at,
    [base, base + 2],
  )
  await drain(ctx.database, 100)
  const gaps = await ctx.database.db.selectFrom('deployment_gaps').selectAll().execute()
  assert.deepEqual(
    gaps.map((g) => [g.from_id, g.to_id]),
    [
      [1, base - 1],
      [base + 1, base + 1],
    ],
    'the missing ids are remembered (below the first event too: this test chose its ids)',
  )
  await insertEvents(
    ctx.database,
    accounts,
    [{ account: 0, service: 'api', environment: 'prod', version: '1.0', status: 'Deploying' }],
    at + 500,
    [base + 1],
  )
  await drain(ctx.database, 100)
  const want = await expected(ctx.database)
  assert.deepEqual(await stored(ctx.database), want)
  assert.deepEqual(
    want.get(accounts[0] as number)?.[0]?.eventIds,
    [base, base + 1, base + 2],
    'the late retry is folded in',
  )
  const left = await ctx.database.db.selectFrom('deployment_gaps').selectAll().execute()
  assert.deepEqual(
    left.map((g) => [g.from_id, g.to_id]),
    [[1, base - 1]],
    'the filled gap is forgotten',
  )
})

test('the board now and at any past instant agrees with the rules over all deployments', async (t) => {
  const ctx = await buildTestApp(t)
  const accounts = [ctx.tenant.account.id, (await ctx.addTenant('Other')).account.id]
  const start = Date.UTC(2026, 1, 1)
  const stallMs = 5_000
  await fc.assert(
    fc.asyncProperty(
      fc.array(sentEvent, { minLength: 1, maxLength: 30 }),
      fc.array(fc.integer({ min: -2, max: 32 }), { minLength: 1, maxLength: 4 }),
      async (events, instants) => {
        await ctx.database.db.deleteFrom('events').execute()
        await rebuildDeployments(ctx.database)
        await insertEvents(ctx.database, accounts, events, start)
        await drain(ctx.database, 1000)
        const all = (await expected(ctx.database)).get(accounts[0] as number) ?? []
        const now = start + 40_000
        for (const at of [null, ...instants.map((i) => start + i * 1000)]) {
          const cells = await boardCells(ctx.database.db, accounts[0] as number, at, { now, stallMs })
          const want = new Map<string, unknown>()
          const groups = new Set(all.map((d) => groupKey(d.service, d.environment)))
          for (const key of groups) {
            const mine = all.filter((d) => groupKey(d.service, d.environment) === key)
            const instant = at ?? now
            const running = runningAt(mine, instant)
            const latest = latestAt(mine, instant, stallMs)
            if (!running && !latest) continue
            want.set(key, {
              running: running?.id ?? null,
              latest: latest ? [latest.deployment.id, latest.outcome] : null,
            })
          }
          const got = new Map(
            cells.map((c) => [
              groupKey(c.service, c.environment),
              {
                running: c.running?.id ?? null,
                latest: c.latest ? [c.latest.deployment.id, c.latest.outcome] : null,
              },
            ]),
          )
          assert.deepEqual(got, want, `board at ${at === null ? 'now' : new Date(at).toISOString()}`)
        }
      },
    ),
    {
      numRuns: Number(process.env.SHIPLOG_FUZZ_RUNS ?? 25),
      seed: Number(process.env.SHIPLOG_FUZZ_SEED ?? 62),
    },
  )
})

test('metrics read from the stored deployments equal the metrics of all deployments', async (t) => {
  const ctx = await buildTestApp(t)
  const accounts = [ctx.tenant.account.id, (await ctx.addTenant('Other')).account.id]
  const start = Date.UTC(2026, 2, 1)
  await fc.assert(
    fc.asyncProperty(
      fc.array(sentEvent, { minLength: 1, maxLength: 40 }),
      fc.integer({ min: -5, max: 40 }),
      fc.integer({ min: 1, max: 45 }),
      fc.constantFrom('prod', 'staging'),
      fc.constantFrom(null, 'api', 'web'),
      async (events, fromSecond, seconds, environment, service) => {
        await ctx.database.db.deleteFrom('events').execute()
        await rebuildDeployments(ctx.database)
        await insertEvents(ctx.database, accounts, events, start)
        await drain(ctx.database, 1000)
        const all = (await expected(ctx.database)).get(accounts[0] as number) ?? []
        const window = {
          environment,
          service,
          from: start + fromSecond * 1000,
          to: start + (fromSecond + seconds) * 1000,
        }
        const want = computeMetrics(window, all, firstStartsOf(all))
        const got = await metricsForWindow(ctx.database.db, accounts[0] as number, window)
        const ids = (list: readonly Deployment[]) => list.map((d) => d.id)
        const shape = (m: Metrics) => ({
          succeeded: ids(m.succeeded),
          failed: ids(m.failed),
          rolledBack: ids(m.rolledBack),
          frequency: m.deploymentFrequencyPerDay,
          cfr: m.changeFailureRate,
          restore: m.timeToRestore.values,
          unrestored: ids(m.timeToRestore.unrestored),
          duration: m.duration.values,
          lead: m.leadTime.values,
        })
        assert.deepEqual(shape(got), shape(want))
      },
    ),
    {
      numRuns: Number(process.env.SHIPLOG_FUZZ_RUNS ?? 25),
      seed: Number(process.env.SHIPLOG_FUZZ_SEED ?? 63),
    },
  )
})

test('listing deployments page by page with any filter gives exactly the matching ones, newest first', async (t) => {
  const ctx = await buildTestApp(t)
  const accounts = [ctx.tenant.account.id, (await ctx.addTenant('Other')).account.id]
  const start = Date.UTC(2026, 3, 1)
  await fc.assert(
    fc.asyncProperty(
      fc.array(sentEvent, { minLength: 1, maxLength: 40 }),
      fc.record({
        service: fc.option(fc.constantFrom('api', 'web', 'API'), { nil: undefined }),
        environment: fc.option(fc.constantFrom('prod', 'staging'), { nil: undefined }),
        outcome: fc.option(
          fc.constantFrom<DeploymentOutcome>('succeeded', 'failed', 'in_progress', 'stalled'),
          {
            nil: undefined,
          },
        ),
        from: fc.option(fc.integer({ min: -2, max: 42 }), { nil: undefined }),
        to: fc.option(fc.integer({ min: -2, max: 42 }), { nil: undefined }),
      }),
      fc.integer({ min: 1, max: 7 }),
      async (events, f, limit) => {
        await ctx.database.db.deleteFrom('events').execute()
        await rebuildDeployments(ctx.database)
        await insertEvents(ctx.database, accounts, events, start)
        await drain(ctx.database, 1000)
        const all = (await expected(ctx.database)).get(accounts[0] as number) ?? []
        const clock = { now: start + 30_000, stallMs: 10_000 }
        const filter = {
          ...(f.service === undefined ? {} : { service: f.service }),
          ...(f.environment === undefined ? {} : { environment: f.environment }),
          ...(f.outcome === undefined ? {} : { outcome: f.outcome }),
          ...(f.from === undefined ? {} : { from: start + f.from * 1000 }),
          ...(f.to === undefined ? {} : { to: start + f.to * 1000 }),
        }
        const want = all
          .filter(
            (d) =>
              (filter.service === undefined || d.service === filter.service) &&
              (filter.environment === undefined || d.environment === filter.environment) &&
              (filter.outcome === undefined || outcomeAt(d, clock.now, clock.stallMs) === filter.outcome) &&
              (filter.from === undefined || d.startedAt >= filter.from) &&
              (filter.to === undefined || d.startedAt < filter.to),
          )
          .map((d) => d.id)
          .sort((a, b) => b - a)
        const got: number[] = []
        let beforeId: number | undefined
        for (let guard = 0; guard < 100; guard++) {
          const page = await listDeployments(
            ctx.database.db,
            accounts[0] as number,
            filter,
            { beforeId, limit },
            clock,
          )
          got.push(...page.map((d) => d.id))
          if (page.length < limit) break
          beforeId = page.at(-1)?.id
        }
        assert.deepEqual(got, want)
      },
    ),
    {
      numRuns: Number(process.env.SHIPLOG_FUZZ_RUNS ?? 25),
      seed: Number(process.env.SHIPLOG_FUZZ_SEED ?? 64),
    },
  )
})

test('two instances deriving in turn, each remembering its own groups, store exactly the plain derivation', async (t) => {
  // Each process keeps the groups it derived in memory; a run by another instance (or a rebuild)
  // in between must make it read them again, or it would apply events to a stale state.
  const url = await freshDatabaseUrl(t)
  const first = openDatabase(parseDatabaseUrl(url))
  const second = openDatabase(parseDatabaseUrl(url))
  t.after(async () => {
    await first.close()
    await second.close()
  })
  await migrateToLatest(first)
  const account = await ensureAccount(first.db, 'Acme')
  let at = Date.UTC(2026, 0, 1)
  await fc.assert(
    fc.asyncProperty(
      fc.array(
        fc.record({
          events: fc.array(sentEvent, { minLength: 1, maxLength: 8 }),
          instance: fc.constantFrom(0, 1),
          limit: fc.integer({ min: 1, max: 6 }),
          rebuild: fc.boolean().map((b) => b && Math.random() < 0.2),
        }),
        { minLength: 1, maxLength: 6 },
      ),
      async (steps) => {
        for (const step of steps) {
          const database = step.instance === 0 ? first : second
          await insertEvents(database, [account.id, account.id], step.events, at)
          at += step.events.length * 1000
          if (step.rebuild) await rebuildDeployments(database)
          else await drain(database, step.limit)
        }
        await drain(first, 1000)
        assert.deepEqual(await stored(first), await expected(first))
      },
    ),
    { numRuns: 25 },
  )
})

const hostileEvent = fc.record({
  account: fc.integer({ min: 0, max: 2 }),
  service: fc.constantFrom('api', 'API', 'wéb 1/2', "o'brien; drop", 'a,b', '💥', 'x\u00a0y'),
  environment: fc.constantFrom('prod', 'staging', 'Prod'),
  version: fc.constantFrom('1.0', '1.1', '2.0', '1,0'),
  status: fc.constantFrom<EventStatus>('Deploying', 'Deploying', 'Deployed', 'Failed'),
})

test('a late event derives its service and environment again only up to where the run stops: later events are left to the next runs', async (t) => {
  // Found by the crash harness on PostgreSQL: the group of a late event was derived again from all its
  // events, also those past the batch's end, and the next runs applied those a second time (an event
  // id twice in a deployment, phantom instant deployments, the rolled-back mark on the wrong one).
  const ctx = await buildTestApp(t)
  const accounts = [ctx.tenant.account.id]
  const at = Date.UTC(2026, 0, 3)
  const event = (version: string, status: 'Deploying' | 'Deployed') => ({
    account: 0,
    service: 'api',
    environment: 'prod',
    version,
    status,
  })
  await insertEvents(
    ctx.database,
    accounts,
    [event('1.1', 'Deploying'), event('1.1', 'Deployed')],
    at,
    [1, 3],
  )
  await catchUpDeployments(ctx.database, { limit: 1000 })
  // Id 2 commits late; then three more of the same group, derived in runs of one event each.
  await insertEvents(
    ctx.database,
    accounts,
    [
      event('1.0', 'Deployed'),
      event('1.2', 'Deploying'),
      event('1.2', 'Deploying'),
      event('1.2', 'Deployed'),
    ],
    at + 1000,
    [2, 4, 5, 6],
  )
  for (let run = 0; run < 6; run++) await catchUpDeployments(ctx.database, { limit: 1 })
  const want = await expected(ctx.database)
  assert.deepEqual(await stored(ctx.database), want)
  assert.deepEqual(
    want.get(accounts[0] as number)?.map((d) => d.eventIds),
    [[1, 3], [2], [4, 5, 6]],
  )
})

test('events committing in any order, in small batches, derived in runs of any size (large ones too), store exactly the plain derivation', async (t) => {
  // Each event gets its id up front, as PostgreSQL hands ids out before commit; they then commit in
  // a random order, a few at a time, with derivation runs in between: an event below ids already
  // derived arrives late and its service and environment is derived again, beside groups derived on
  // from where they stood. Three accounts, names that differ only in case, commas and quotes.
  const ctx = await buildTestApp(t)
  const second = await ctx.addTenant('Second')
  const third = await ctx.addTenant('Third')
  const accounts = [ctx.tenant.account.id, second.account.id, third.account.id]
  let base = 1
  const at = Date.UTC(2026, 0, 1)
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.tuple(hostileEvent, fc.nat(1000)), { minLength: 1, maxLength: 40 }).chain((events) =>
        fc.tuple(
          fc.constant(events),
          fc.array(fc.tuple(fc.integer({ min: 1, max: 6 }), fc.constantFrom(1, 2, 3, 7, 1000, 5000)), {
            minLength: 1,
            maxLength: 12,
          }),
        ),
      ),
      async ([events, rounds]) => {
        await ctx.database.db.deleteFrom('events').execute()
        await rebuildDeployments(ctx.database)
        base += 100
        // Commit order: by the random key, ties by id.
        const order = events
          .map(([event, key], i) => ({ event, key, id: base + i }))
          .sort((a, b) => a.key - b.key || a.id - b.id)
        let next = 0
        for (const [size, limit] of rounds) {
          const chunk = order.slice(next, next + size)
          next += size
          for (const c of chunk)
            await insertEvents(ctx.database, accounts, [c.event], at + (c.id - base) * 1000, [c.id])
          await catchUpDeployments(ctx.database, { limit })
        }
        for (const c of order.slice(next))
          await insertEvents(ctx.database, accounts, [c.event], at + (c.id - base) * 1000, [c.id])
        await drain(ctx.database, 3)
        const want = await expected(ctx.database)
        assert.deepEqual(await stored(ctx.database), want)
        await checkHeads(ctx.database, want)
        await checkFirsts(ctx.database, want)
      },
    ),
    {
      numRuns: Number(process.env.SHIPLOG_FUZZ_RUNS ?? 25),
      seed: Number(process.env.SHIPLOG_FUZZ_SEED ?? 67),
    },
  )
})
