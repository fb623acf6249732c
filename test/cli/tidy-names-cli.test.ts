// `shiplog env rename`, `shiplog services rename|delete` (issue 28 point 5) as an operator runs them:
// a merge on the board's data, a deletion refused without the exact confirmation, then done, audited
// as the command line, and `shiplog verify` passing and naming it. Both databases.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { parseDatabaseUrl } from '../../src/config.js'
import { openDatabase } from '../../src/db/connect.js'
import { migrateToLatest } from '../../src/db/migrate.js'
import { ensureAccount } from '../../src/domain/accounts.js'
import { chainCaughtUp } from '../../src/domain/chain/chainer.js'
import { freshDatabaseUrl } from '../helper.js'
import { processEnv, runCli } from '../support/processes.js'
import { insertEvents } from '../support/ui.js'

test('env rename merges, services delete needs --confirm, is audited, and verify names it', {
  timeout: 120_000,
}, async (t) => {
  const databaseUrl = await freshDatabaseUrl(t)
  const env = processEnv(databaseUrl)
  const cli = (args: string[]) => runCli(t, args, { env })
  const database = openDatabase(parseDatabaseUrl(databaseUrl))
  t.after(() => database.close())
  await migrateToLatest(database)
  const account = await ensureAccount(database.db, 'Acme')
  await insertEvents(database, account.id, [
    { service: 'api', environment: 'Dev', version: '1' },
    { service: 'api', environment: 'dev', version: '2' },
    { service: 'scratch', environment: 'dev', version: '0' },
  ])
  const heads = async () =>
    (
      await database.db
        .selectFrom('deployment_heads')
        .select(['service', 'environment'])
        .orderBy('service')
        .orderBy('environment')
        .execute()
    ).map((h) => `${h.service}/${h.environment}`)

  const unknown = await cli(['env', 'rename', '--account', 'Acme', 'qa', 'dev'])
  assert.equal(unknown.code, 2, unknown.stderr)
  assert.match(unknown.stderr, /FROM: This account has no environment named "qa"/)
  const merged = await cli(['env', 'rename', '--account', 'Acme', 'Dev', 'dev'])
  assert.equal(merged.code, 0, merged.stderr)
  assert.match(merged.stderr, /environment Dev merged into dev/)
  assert.deepEqual(await heads(), ['api/dev', 'scratch/dev'])

  // What was said about the service goes with its history; what names another service, or none, stays.
  const by = { created_by: 'test', created_at: Date.now() }
  await database.db
    .insertInto('bad_versions')
    .values([
      { account_id: account.id, service: 'scratch', version: '0', reason: 'gone with it', ...by },
      { account_id: account.id, service: 'api', version: '1', reason: 'stays', ...by },
    ])
    .execute()
  await database.db
    .insertInto('environment_locks')
    .values([
      {
        account_id: account.id,
        environment: 'dev',
        service: 'scratch',
        reason: 'gone with it',
        ends_at: null,
        ...by,
      },
      { account_id: account.id, environment: 'dev', service: null, reason: 'stays', ends_at: null, ...by },
    ])
    .execute()
  await chainCaughtUp(database, { graceMs: 0, settleMs: 0 })
  const wrong = await cli(['services', 'delete', '--account', 'Acme', 'scratch', '--confirm', 'scratc'])
  assert.equal(wrong.code, 2, wrong.stderr)
  assert.equal((await database.db.selectFrom('events').selectAll().execute()).length, 3)
  const deleted = await cli(['services', 'delete', '--account', 'Acme', 'scratch', '--confirm', 'scratch'])
  assert.equal(deleted.code, 0, deleted.stderr)
  assert.deepEqual(await heads(), ['api/dev'])
  for (const table of ['bad_versions', 'environment_locks'] as const) {
    const reasons = (await database.db.selectFrom(table).select('reason').execute()).map((r) => r.reason)
    assert.deepEqual(reasons, ['stays'], table)
  }
  const audit = await database.db
    .selectFrom('audit_entries')
    .select(['action', 'actor', 'target'])
    .orderBy('id')
    .execute()
  assert.deepEqual(
    audit.map((a) => `${a.action} ${a.target}`),
    ['environment.renamed environment Dev', 'service.history_deleted service scratch'],
  )
  assert.match(audit[1]?.actor ?? '', /^cli /)
  const verified = await cli(['verify'])
  assert.equal(verified.code, 0, verified.stdout + verified.stderr)
  assert.match(
    verified.stdout,
    /events: 1 deleted by an admin: history of service "scratch" deleted \(see the audit log\)/,
  )
  assert.match(verified.stdout, /verify: intact/)
})
