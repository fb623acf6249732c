// A rename or merge re-derives only the groups it touches. What it leaves must be exactly what
// deriving every event again from the start gives under the same aliases: the deployments, their
// heads and the first deployment of each version (lead time). Both databases.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { sql } from 'kysely'
import type { Database } from '../../src/db/connect.js'
import { openDatabase } from '../../src/db/connect.js'
import { migrateToLatest } from '../../src/db/migrate.js'
import { ensureAccount } from '../../src/domain/accounts.js'
import { rebuildDeployments } from '../../src/domain/deployments/store.js'
import { checkRename, renameName } from '../../src/domain/names/rename.js'
import { freshDatabaseUrl, testConfig } from '../helper.js'
import { insertEvents } from '../support/ui.js'

type Snapshot = { deployments: string[]; heads: string[]; firsts: string[] }

/** The derived tables, every column. */
async function snapshot(database: Database): Promise<Snapshot> {
  // A deployment's id is its opening event's: the same in both, so every column is compared.
  const deployments = await sql<Record<string, unknown>>`select * from deployments order by id`.execute(
    database.db,
  )
  const heads = await sql<Record<string, unknown>>`select h.service, h.environment, d.version, d.started_at,
      l.version as latest_version, l.started_at as latest_started_at
      from deployment_heads h left join deployments d on d.id = h.running_id
      join deployments l on l.id = h.latest_id
      order by h.service, h.environment`.execute(database.db)
  const firsts = await sql<Record<string, unknown>>`select v.service, v.version, v.started_at, d.environment
      from version_firsts v join deployments d on d.id = v.deployment_id
      order by v.service, v.version`.execute(database.db)
  const text = (rows: Record<string, unknown>[]) =>
    rows.map((r) => JSON.stringify(Object.values(r).map((v) => (v === null ? null : String(v)))))
  return { deployments: text(deployments.rows), heads: text(heads.rows), firsts: text(firsts.rows) }
}

test('a rename and a merge leave what a rebuild from scratch gives, lead-time firsts included', async (t) => {
  const config = testConfig(await freshDatabaseUrl(t))
  const database = openDatabase(config.database)
  t.after(() => database.close())
  await migrateToLatest(database)
  const account = await ensureAccount(database.db, 'Acme')
  const start = Date.UTC(2026, 5, 1)
  // Three services sharing versions across environments, interleaved, with failures and repeats.
  const seeds = []
  for (let i = 0; i < 600; i++) {
    const service = ['api', 'api-old', 'web'][i % 3] as string
    const environment = ['prod', 'stage', 'Prod'][Math.floor(i / 3) % 3] as string
    const version = `1.${Math.floor(i / 9)}`
    const status =
      i % 7 === 0 ? ('Failed' as const) : i % 2 === 0 ? ('Deploying' as const) : ('Deployed' as const)
    seeds.push({ service, environment, version, status, received_at: start + i * 60_000 })
  }
  await insertEvents(database, account.id, seeds)
  await rebuildDeployments(database)

  const steps: ['service' | 'environment', string, string][] = [
    ['service', 'api-old', 'api'], // a merge: both have history
    ['environment', 'Prod', 'prod'], // a merge of environments
    ['service', 'web', 'frontend'], // a rename: the new name has none
  ]
  for (const [kind, from, to] of steps) {
    const checked = await checkRename(database.db, account.id, kind, from, to)
    assert.ok('kind' in checked, JSON.stringify(checked))
    await renameName(database.db, account.id, checked)
    const merged = await snapshot(database)
    await rebuildDeployments(database)
    const rebuilt = await snapshot(database)
    assert.deepEqual(merged.deployments, rebuilt.deployments, `${kind} ${from} → ${to}: deployments`)
    assert.deepEqual(merged.heads, rebuilt.heads, `${kind} ${from} → ${to}: heads`)
    assert.deepEqual(
      merged.firsts,
      rebuilt.firsts,
      `${kind} ${from} → ${to}: first deployment of each version`,
    )
    assert.ok(merged.firsts.length > 0)
  }
})
