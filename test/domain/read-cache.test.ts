// The board's and the metrics' remembered reads (read-cache.ts) answer exactly what the plain
// queries answer, whatever happens between two reads: events of several accounts with hostile
// names, arriving out of time order, derived by another handle (another instance), instants and
// windows on the very millisecond of a deployment, other clocks and stall times. Both databases.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import fc from 'fast-check'
import { parseDatabaseUrl } from '../../src/config.js'
import { type Database, openDatabase } from '../../src/db/connect.js'
import { migrateToLatest } from '../../src/db/migrate.js'
import type { EventStatus } from '../../src/db/schema.js'
import { ensureAccount } from '../../src/domain/accounts.js'
import { boardCells, boardCellsUncached } from '../../src/domain/board/cells.js'
import { metricsForWindow, metricsForWindowUncached } from '../../src/domain/deployments/queries.js'
import { derivedGeneration, GenerationCache } from '../../src/domain/deployments/read-cache.js'
import { catchUpDeployments, rebuildDeployments } from '../../src/domain/deployments/store.js'
import { freshDatabaseUrl } from '../helper.js'

const MIN = 60_000
/** Names a URL, a LIKE pattern, HTML or a careless key joiner would trip over. */
const NAMES = ['api', 'a/b', '100%', 'with space', 'ünïcødé ✓', '<b>&"\'', '..', 'a|1', 'a\u001fb']
const ENVIRONMENTS = ['dev', 'staging', 'prod', 'p/r%d', '<env>']
const VERSIONS = ['1.0', '1.1', '2.0', '1.0 <rc>', 'v%2F']
const STATUSES: EventStatus[] = ['Deploying', 'Deployed', 'Failed']

interface Step {
  /** Events to record: index into the accounts, names, and minutes from the epoch (any order). */
  events: {
    account: number
    service: string
    environment: string
    version: string
    status: EventStatus
    minute: number
  }[]
  /** Derive through the other handle (another instance), or leave the events waiting. */
  derive: boolean
  rebuild: boolean
}

const stepArb: fc.Arbitrary<Step> = fc.record({
  events: fc.array(
    fc.record({
      account: fc.integer({ min: 0, max: 1 }),
      service: fc.constantFrom(...NAMES),
      environment: fc.constantFrom(...ENVIRONMENTS),
      version: fc.constantFrom(...VERSIONS),
      status: fc.constantFrom(...STATUSES),
      minute: fc.integer({ min: 0, max: 600 }),
    }),
    { maxLength: 12 },
  ),
  derive: fc.integer({ min: 0, max: 3 }).map((n) => n > 0),
  rebuild: fc.integer({ min: 0, max: 4 }).map((n) => n === 0),
})

async function twoHandles(t: Parameters<typeof freshDatabaseUrl>[0]): Promise<[Database, Database]> {
  const url = await freshDatabaseUrl(t)
  const reader = openDatabase(parseDatabaseUrl(url))
  await migrateToLatest(reader)
  const writer = openDatabase(parseDatabaseUrl(url))
  t.after(async () => {
    await reader.close()
    await writer.close()
  })
  return [reader, writer]
}

test('remembered board and metrics equal the plain queries through any history (another instance derives)', async (t) => {
  const [reader, writer] = await twoHandles(t)
  const accounts = [(await ensureAccount(writer.db, 'Acme')).id, (await ensureAccount(writer.db, 'Other')).id]
  const epoch = Date.UTC(2026, 0, 1)
  /** Every instant an event was given: where deployments start and finish. */
  const instants = new Set<number>()

  const compare = async (label: string) => {
    const now = epoch + 700 * MIN
    const times = [...instants].sort((a, b) => a - b)
    // Fixed instants and windows are read again after every step (a stale memory would show);
    // the others sit on the very millisecond an event was given, and either side of it. Fewer
    // keys than the memories hold, so nothing is pushed out between two reads of one key.
    const middle = epoch + 300 * MIN
    const edges = [times[0], times[Math.floor(times.length / 2)], times.at(-1)].filter(
      (x): x is number => x !== undefined,
    )
    const ats: (number | null)[] = [null, middle - 1, middle, ...edges.slice(0, 1), (edges[1] ?? middle) + 1]
    for (const accountId of accounts) {
      for (const at of ats) {
        for (const clock of [
          { now, stallMs: 60 * MIN },
          { now: now + 600 * MIN, stallMs: MIN },
        ]) {
          // Twice: the second read comes from memory when nothing changed.
          for (let k = 0; k < 2; k++) {
            assert.deepEqual(
              await boardCells(reader.db, accountId, at, clock),
              await boardCellsUncached(reader.db, accountId, at, clock),
              `${label}: board of account ${accountId} at ${at}`,
            )
          }
        }
      }
      const windows = [
        { from: epoch, to: epoch + 601 * MIN },
        { from: middle, to: epoch + 601 * MIN },
        { from: edges[0] ?? epoch, to: edges.at(-1) ?? middle },
      ]
      for (const environment of ['prod', 'p/r%d']) {
        for (const service of [null, 'a/b']) {
          for (const w of windows) {
            const window = { environment, service, ...w }
            for (let k = 0; k < 2; k++) {
              assert.deepEqual(
                await metricsForWindow(reader.db, accountId, window),
                await metricsForWindowUncached(reader.db, accountId, window),
                `${label}: metrics of account ${accountId} ${JSON.stringify(window)}`,
              )
            }
          }
        }
      }
    }
  }

  let run = 0
  await fc.assert(
    fc.asyncProperty(fc.array(stepArb, { minLength: 2, maxLength: 4 }), async (steps) => {
      run++
      for (const [i, step] of steps.entries()) {
        if (step.events.length > 0) {
          await writer.db
            .insertInto('events')
            .values(
              step.events.map((e) => {
                const receivedAt = epoch + e.minute * MIN
                instants.add(receivedAt)
                return {
                  account_id: accounts[e.account] as number,
                  service: e.service,
                  environment: e.environment,
                  version: e.version,
                  status: e.status,
                  source: 'deploy' as const,
                  api_key_name: 'ci',
                  deployer: e.minute % 3 === 0 ? null : `dev ${e.minute % 5} <x>`,
                  received_at: receivedAt,
                  occurred_at: receivedAt,
                }
              }),
            )
            .execute()
        }
        if (step.rebuild) await rebuildDeployments(writer)
        else if (step.derive) {
          for (;;) if (!(await catchUpDeployments(writer, { now: epoch + 700 * MIN })).more) break
        }
        await compare(`run ${run} step ${i}`)
      }
    }),
    { numRuns: 20 },
  )
})

test('the generation moves with every derivation, so a read after it is never the remembered one', async (t) => {
  const [reader, writer] = await twoHandles(t)
  const accountId = (await ensureAccount(writer.db, 'Acme')).id
  const clock = { now: Date.UTC(2026, 0, 2), stallMs: 60 * MIN }
  const insert = (version: string, status: EventStatus, receivedAt: number) =>
    writer.db
      .insertInto('events')
      .values({
        account_id: accountId,
        service: 'api',
        environment: 'prod',
        version,
        status,
        source: 'deploy',
        api_key_name: 'ci',
        received_at: receivedAt,
        occurred_at: receivedAt,
      })
      .execute()
  await insert('1.0', 'Deployed', Date.UTC(2026, 0, 1))
  await catchUpDeployments(writer)
  const g1 = await derivedGeneration(reader.db)
  const first = await boardCells(reader.db, accountId, null, clock)
  assert.equal(first[0]?.running?.version, '1.0')
  await insert('1.1', 'Deployed', Date.UTC(2026, 0, 1, 1))
  // Not derived yet: the generation stands and the board is still the one derived.
  assert.equal(await derivedGeneration(reader.db), g1)
  assert.equal((await boardCells(reader.db, accountId, null, clock))[0]?.running?.version, '1.0')
  await catchUpDeployments(writer)
  assert.ok((await derivedGeneration(reader.db)) > g1)
  assert.equal((await boardCells(reader.db, accountId, null, clock))[0]?.running?.version, '1.1')
  // A past instant is remembered on its own key and is not the present.
  assert.equal(
    (await boardCells(reader.db, accountId, Date.UTC(2026, 0, 1, 0, 30), clock))[0]?.running?.version,
    '1.0',
  )
})

test('GenerationCache: bounded, least recently used first out, no older generation, failures forgotten', async () => {
  const cache = new GenerationCache<string>(2)
  let loads = 0
  const load = (v: string) => async () => {
    loads++
    return v
  }
  assert.equal(await cache.get('a', 1, load('a1')), 'a1')
  assert.equal(await cache.get('a', 1, load('never')), 'a1')
  assert.equal(loads, 1)
  assert.equal(await cache.get('a', 2, load('a2')), 'a2')
  assert.equal(await cache.get('b', 2, load('b2')), 'b2')
  await cache.get('a', 2, load('never'))
  assert.equal(await cache.get('c', 2, load('c2')), 'c2')
  assert.equal(cache.size, 2)
  // b was the least recently used: it went.
  assert.equal(await cache.get('b', 2, load('b2 again')), 'b2 again')
  await assert.rejects(
    cache.get('d', 2, async () => {
      throw new Error('database gone')
    }),
    /database gone/,
  )
  assert.equal(await cache.get('d', 2, load('d2')), 'd2')
  // Two readers at once share one load.
  let concurrent = 0
  const slow = async () => {
    concurrent++
    await new Promise((resolve) => setTimeout(resolve, 10))
    return 'e'
  }
  const [x, y] = await Promise.all([cache.get('e', 3, slow), cache.get('e', 3, slow)])
  assert.equal(x, 'e')
  assert.equal(y, 'e')
  assert.equal(concurrent, 1)
})
