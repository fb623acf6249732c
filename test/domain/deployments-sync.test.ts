// The deployments' background task (src/domain/deployments/sync.ts), run as the task runner runs it
// (it stands aside: standingAside), waits while a burst of ingest lasts and derives the burst after
// it; a read derives what it shows even during one; under a burst that never eases it derives once
// it has waited its bound, and waits again only once nothing is left; live updates' own runs are left
// to it while a burst lasts (the policy's verdict, `busy`). Both databases.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { parseDatabaseUrl } from '../../src/config.js'
import { type Database, openDatabase } from '../../src/db/connect.js'
import { migrateToLatest } from '../../src/db/migrate.js'
import { deploymentsBehind } from '../../src/domain/deployments/store.js'
import { DeploymentSync } from '../../src/domain/deployments/sync.js'
import { type BurstOptions, BurstPolicy } from '../../src/domain/ingest-burst.js'
import { LOOK_AGAIN_MS } from '../../src/domain/pacing.js'
import { standingAside, type Task } from '../../src/domain/tasks.js'
import { addTenant, type Cleanup, freshDatabaseUrl } from '../helper.js'
import { expectedDeployments, storedDeployments } from '../support/deployments.js'

async function setUp(t: Cleanup): Promise<{ database: Database; accountId: number }> {
  const database = openDatabase(parseDatabaseUrl(await freshDatabaseUrl(t)))
  t.after(() => database.close())
  await migrateToLatest(database)
  const { account } = await addTenant(database, 'Acme')
  return { database, accountId: account.id }
}

/** A Deploying and a Deployed event of `version` of api in prod. */
async function deployOnce(database: Database, accountId: number, version: string): Promise<void> {
  for (const status of ['Deploying', 'Deployed'] as const) {
    await database.db
      .insertInto('events')
      .values({
        account_id: accountId,
        service: 'api',
        environment: 'prod',
        version,
        status,
        url: null,
        commit_sha: null,
        description: null,
        deployer: 'ada',
        source: 'deploy',
        api_key_id: null,
        api_key_name: null,
        received_at: Date.now(),
        occurred_at: Date.now(),
      })
      .execute()
  }
}

async function derivedCount(database: Database): Promise<number> {
  const row = await database.db
    .selectFrom('deployments')
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .executeTakeFirstOrThrow()
  return Number(row.n)
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** The task under a burst policy of its own, as the runner runs it; only the ingest rate counts. */
function underPolicy(sync: DeploymentSync, options: BurstOptions): { burst: BurstPolicy; task: Task } {
  const burst = new BurstPolicy({ busyLoop: 2, ...options })
  return { burst, task: standingAside(sync.task(), burst.gate()) }
}

test('the task waits while a burst of ingest lasts and derives it after; a read derives what it shows meanwhile', async (t) => {
  const { database, accountId } = await setUp(t)
  const sync = new DeploymentSync(database)
  const { burst, task } = underPolicy(sync, { maxYieldMs: 60_000 })
  const derivedRuns: number[] = []
  sync.onDerived((result) => derivedRuns.push(result.events))

  await deployOnce(database, accountId, '1.0.0')
  await pause(100)
  // A million events since the last look: a burst however slowly this machine runs the test.
  burst.stored(1_000_000)
  assert.equal(burst.busy, false, 'no burst seen yet')
  assert.equal(await task.run(), LOOK_AGAIN_MS, 'a burst: look again soon')
  assert.equal(burst.busy, true, 'live updates leave the burst to the task')
  assert.equal(await derivedCount(database), 0, 'nothing derived during the burst')
  assert.equal(await deploymentsBehind(database.db), true)
  assert.deepEqual(derivedRuns, [])

  // A page or API answer does not wait for the burst: it derives what it shows.
  await sync.current()
  assert.equal(await deploymentsBehind(database.db), false)
  assert.deepEqual(await storedDeployments(database), await expectedDeployments(database))
  assert.deepEqual(derivedRuns, [2])

  await deployOnce(database, accountId, '1.0.1')
  await pause(100)
  burst.stored(1_000_000)
  assert.equal(await task.run(), LOOK_AGAIN_MS, 'the burst goes on')
  assert.equal(await derivedCount(database), 1)
  await pause(200)
  burst.stored(10) // 10 events in 200 ms: 50 a second
  assert.equal(await task.run(), undefined, 'the burst eased: derived, nothing left')
  assert.equal(burst.busy, false)
  assert.equal(await deploymentsBehind(database.db), false)
  assert.deepEqual(await storedDeployments(database), await expectedDeployments(database))
  assert.deepEqual(derivedRuns, [2, 2])
})

test('under a burst that never eases the task derives once it has waited its bound, then waits again', async (t) => {
  const { database, accountId } = await setUp(t)
  const { burst: policy, task } = underPolicy(new DeploymentSync(database), { maxYieldMs: 300 })
  /** Events keep arriving for `ms`, far faster than the bound however slowly the test runs. */
  const burst = async (ms: number) => {
    await pause(ms)
    policy.stored(ms * 10_000)
  }

  await deployOnce(database, accountId, '2.0.0')
  await burst(100)
  assert.equal(await task.run(), LOOK_AGAIN_MS, 'within its bound it waits')
  assert.equal(await derivedCount(database), 0)
  await burst(350)
  assert.equal(await task.run(), undefined, 'past its bound it derives, burst or not, until nothing is left')
  assert.equal(policy.busy, true, 'the burst goes on: live updates still leave it to the task')
  assert.equal(await deploymentsBehind(database.db), false)
  assert.deepEqual(await storedDeployments(database), await expectedDeployments(database))

  await deployOnce(database, accountId, '2.0.1')
  await burst(100)
  assert.equal(await task.run(), LOOK_AGAIN_MS, 'caught up: under the same burst it waits again')
  assert.equal(await derivedCount(database), 1)
  await burst(350)
  await task.run()
  assert.equal(await derivedCount(database), 2, 'and again derives once past its bound')
  assert.equal(await deploymentsBehind(database.db), false)
})

test('a catch-up past the bound ends once a run is not full, though something always waits (a gap)', async (t) => {
  const { database, accountId } = await setUp(t)
  const { burst: policy, task } = underPolicy(new DeploymentSync(database), { maxYieldMs: 300 })
  const burst = async (ms: number) => {
    await pause(ms)
    policy.stored(ms * 10_000)
  }
  await deployOnce(database, accountId, '4.0.0')
  // Ids PostgreSQL handed out to transactions not committed yet: derivation waits for them, so
  // something stays behind, as under steady ingest on PostgreSQL.
  const far = Number.MAX_SAFE_INTEGER - 10
  await database.db
    .insertInto('deployment_gaps')
    .values({ from_id: far, to_id: far, seen_at: Date.now() })
    .execute()
  await burst(100)
  assert.equal(await task.run(), LOOK_AGAIN_MS, 'within its bound it waits')
  await burst(350)
  await task.run()
  assert.equal(await derivedCount(database), 1, 'past its bound it derived')
  assert.equal(await deploymentsBehind(database.db), true, 'the gap still waits')
  await deployOnce(database, accountId, '4.0.1')
  await burst(100)
  assert.equal(
    await task.run(),
    LOOK_AGAIN_MS,
    'its run was not full: the catch-up ended, and it waits again',
  )
  assert.equal(await derivedCount(database), 1)
})

test("the task itself derives at once and says whether it left a full batch; standing aside is the runner's", async (t) => {
  const { database, accountId } = await setUp(t)
  const task = new DeploymentSync(database).task()
  assert.equal(task.standsAside, true)
  await deployOnce(database, accountId, '3.0.0')
  assert.deepEqual(await task.run(), { nextMs: undefined, more: false })
  assert.equal(await derivedCount(database), 1)
  assert.equal(await deploymentsBehind(database.db), false)
})
