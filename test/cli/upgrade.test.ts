// Upgrades: a database as the first release left it (the first migration alone), filled in that
// schema's shape, migrates to the latest and reads back through the app; a database migrated by a
// newer release is refused with one clear line.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { type Insertable, sql } from 'kysely'
import { parseDatabaseUrl } from '../../src/config.js'
import { openDatabase } from '../../src/db/connect.js'
import { migrateTo, migrateToLatest, schemaStatus } from '../../src/db/migrate.js'
import type { EventSource, EventStatus, EventsTable } from '../../src/db/schema.js'
import { digestApiKey, generateApiKey } from '../../src/domain/keys.js'
import { hashPassword } from '../../src/domain/passwords.js'
import { buildTestApp, freshDatabaseUrl } from '../helper.js'
import { expectedDeployments, storedDeployments } from '../support/deployments.js'
import { processEnv, runCli } from '../support/processes.js'
import { deploy, login, PASSWORD, parseCsv, shownVersions } from '../support/ui.js'

/** An event row of the first schema: it has no occurred_at (migration 0013 adds it, from received_at). */
type FirstSchemaEvent = Insertable<EventsTable>

const FIRST = '2026_11_21_0001_initial'

test('a database at the first schema, filled in its shape, upgrades to the latest and reads back through the app', {
  timeout: 60_000,
}, async (t) => {
  const databaseUrl = await freshDatabaseUrl(t)
  const key = generateApiKey()
  const now = Date.now()
  const old = openDatabase(parseDatabaseUrl(databaseUrl))
  const versions: string[] = []
  try {
    const outcome = await migrateTo(old, FIRST)
    assert.deepEqual(outcome.applied, [FIRST])
    const status = await schemaStatus(old)
    assert.ok(status.pending.length >= 7, 'every later migration is pending')
    // Raw inserts with the first schema's columns only, as the first release wrote them.
    const account = await old.db
      .insertInto('accounts')
      .values({ name: 'Legacy', created_at: now - 90 * 86_400_000 })
      .returning('id')
      .executeTakeFirstOrThrow()
    await old.db
      .insertInto('users')
      .values({
        account_id: account.id,
        email: 'ops@legacy.example',
        password_hash: await hashPassword(PASSWORD),
        role: 'admin',
        created_at: now - 90 * 86_400_000,
      })
      .execute()
    const apiKey = await old.db
      .insertInto('api_keys')
      .values({
        account_id: account.id,
        name: 'old-ci',
        prefix: key.slice(0, 8),
        digest: digestApiKey(key),
        created_at: now - 90 * 86_400_000,
        created_by: 'cli',
      })
      .returning('id')
      .executeTakeFirstOrThrow()
    const statuses: EventStatus[] = ['Deploying', 'Deployed', 'Failed']
    const sources: EventSource[] = ['put-get', 'put-post', 'deploy']
    let minute = 0
    for (const source of sources) {
      for (const status of statuses) {
        const version = `1.${minute}-${source}-${status.toLowerCase()}`
        versions.push(version)
        await old.db
          .insertInto('events')
          .values({
            account_id: account.id,
            service: 'legacy-api',
            environment: minute % 2 === 0 ? 'prod' : 'staging',
            version,
            status,
            url: 'https://ci.example/run/1',
            commit_sha: 'abc1234',
            description: `from ${source} — ünïcödé`,
            deployer: 'ann',
            source,
            api_key_id: apiKey.id,
            api_key_name: 'old-ci',
            received_at: now - 86_400_000 + minute++ * 60_000,
          } as FirstSchemaEvent)
          .execute()
      }
    }
    // A deployment that opens and succeeds, for the derivation to pair.
    for (const status of ['Deploying', 'Deployed'] as const) {
      await old.db
        .insertInto('events')
        .values({
          account_id: account.id,
          service: 'legacy-web',
          environment: 'prod',
          version: '2.0',
          status,
          source: 'deploy',
          api_key_id: apiKey.id,
          api_key_name: 'old-ci',
          received_at: now - 3_600_000 + minute++ * 60_000,
        } as FirstSchemaEvent)
        .execute()
    }
    versions.push('2.0')
    const [first] = await old.db.selectFrom('events').select('id').orderBy('id').limit(1).execute()
    await old.db
      .insertInto('idempotency_keys')
      .values({ account_id: account.id, idem_key: 'old-key', event_id: first?.id ?? null, created_at: now })
      .execute()
    await old.db.insertInto('settings').values({ name: 'legacy-setting', value: 'kept' }).execute()
  } finally {
    await old.close()
  }

  // The server migrates to the latest at start; everything reads back through the app.
  const ctx = await buildTestApp(t, { databaseUrl })
  const status = await schemaStatus(ctx.database)
  assert.deepEqual([status.pending, status.unknown], [[], []])

  const browser = await login(ctx.app, 'ops@legacy.example')
  const logs = await browser.get('/logs/')
  assert.equal(logs.statusCode, 200)
  const shown = shownVersions(logs.payload)
  for (const version of versions) assert.ok(shown.includes(version), `/logs/ shows ${version}`)

  const recorded = await deploy(ctx.app, key, {
    service: 'legacy-api',
    environment: 'prod',
    version: '3.0',
    status: 'Deployed',
  })
  assert.equal(recorded.status, 201, 'the key made before the upgrade records events')

  await ctx.app.deployments.current()
  const stored = await storedDeployments(ctx.database)
  assert.deepEqual(stored, await expectedDeployments(ctx.database))
  const web = [...stored.values()].flat().find((d) => d.service === 'legacy-web')
  assert.deepEqual([web?.version, web?.result, web?.eventIds.length], ['2.0', 'succeeded', 2])

  const csv = await browser.get('/logs/export.csv')
  assert.equal(csv.statusCode, 200)
  const rows = parseCsv(csv.payload)
  const header = rows[0] ?? []
  const versionColumn = header.indexOf('version')
  assert.ok(versionColumn >= 0, `the export has a version column (${header.join(',')})`)
  const exported = rows.slice(1).map((r) => r[versionColumn])
  for (const version of [...versions, '3.0']) assert.ok(exported.includes(version), `export has ${version}`)

  const setting = await ctx.database.db
    .selectFrom('settings')
    .select('value')
    .where('name', '=', 'legacy-setting')
    .executeTakeFirst()
  assert.equal(setting?.value, 'kept')
  const account = await ctx.database.db
    .selectFrom('accounts')
    .select(['stall_minutes', 'retention_days'])
    .executeTakeFirstOrThrow()
  assert.deepEqual(
    [Number(account.stall_minutes), account.retention_days],
    [60, null],
    'new columns get their defaults',
  )
  // Events from before event time (migration 0013) happened when they arrived.
  const timed = await ctx.database.db
    .selectFrom('events')
    .select(['received_at', 'occurred_at', 'commit_time'])
    .execute()
  assert.ok(timed.length > 0)
  for (const e of timed) {
    assert.equal(Number(e.occurred_at), Number(e.received_at))
    assert.equal(e.commit_time, null)
  }
})

test('a database a newer release migrated is refused by migrate and doctor with one clear line', {
  timeout: 60_000,
}, async (t) => {
  const databaseUrl = await freshDatabaseUrl(t)
  const database = openDatabase(parseDatabaseUrl(databaseUrl))
  try {
    await migrateToLatest(database)
    await sql`insert into kysely_migration (name, timestamp) values ('2099_01_01_0099_future', '2099-01-01T00:00:00.000Z')`.execute(
      database.db,
    )
  } finally {
    await database.close()
  }
  const env = processEnv(databaseUrl)
  const migrate = await runCli(t, ['migrate'], { env })
  assert.equal(migrate.code, 1)
  assert.equal(
    migrate.stderr,
    'shiplog: the database schema is newer than this release (it has run 2099_01_01_0099_future, which this version does not know): run the newer release, or restore the backup taken before upgrading\n',
  )
  const doctor = await runCli(t, ['doctor'], { env })
  assert.equal(doctor.code, 1)
  assert.match(
    doctor.stdout,
    /^FAIL schema {8}newer than this release \(2099_01_01_0099_future unknown here\)/m,
  )
})
