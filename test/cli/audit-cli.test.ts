// The operator's commands leave audit entries too (SPEC §10): users create and set-password, keys
// create and revoke, webhooks create and delete, each by "cli (<user>)" with no address, in the
// account they touch, naming no secret; a refused command writes nothing.
import assert from 'node:assert/strict'
import { userInfo } from 'node:os'
import { test } from 'node:test'
import { parseDatabaseUrl } from '../../src/config.js'
import { openDatabase } from '../../src/db/connect.js'
import { freshDatabaseUrl } from '../helper.js'
import { processEnv, runCli } from '../support/processes.js'

test('CLI changes are recorded as the operator, with no address and no secret', async (t) => {
  const databaseUrl = await freshDatabaseUrl(t)
  // No USER nor LOGNAME, as in a container or under a supervisor: the operating system names the
  // operator all the same (issue 28: "cli (unknown)" was all the log could say).
  const env = processEnv(databaseUrl, { SHIPLOG_WEBHOOK_ALLOW_PRIVATE: '1' })
  for (const name of ['USER', 'LOGNAME', 'SUDO_USER']) delete env[name]
  const cli = async (args: string[], stdin?: string, code = 0) => {
    const run = await runCli(t, args, { env, ...(stdin === undefined ? {} : { stdin }) })
    assert.equal(run.code, code, `${args.join(' ')}: ${run.stderr}`)
    return run
  }
  const password = 'correct horse battery staple'
  const second = 'another long password 9'
  await cli(
    ['users', 'create', '--account', 'Acme', '--email', 'ada@example.com', '--password-stdin'],
    `${password}\n`,
  )
  await cli(
    [
      'users',
      'set-password',
      '--account',
      'Acme',
      '--email',
      'ada@example.com',
      '--password-stdin',
      '--one-time',
    ],
    `${second}\n`,
  )
  const key = (
    await cli(['keys', 'create', '--account', 'Acme', '--name', 'deploy', '--scope', 'ingest,read'])
  ).stdout.trim()
  await cli(['keys', 'revoke', '--account', 'Acme', key])
  const secret = (
    await cli([
      'webhooks',
      'create',
      '--account',
      'Acme',
      '--url',
      'https://hooks.example.com/T1/B2/pathsecret',
      '--format',
      'slack',
      '--status',
      'Failed',
    ])
  ).stdout.trim()
  const database = openDatabase(parseDatabaseUrl(databaseUrl))
  t.after(() => database.close())
  const hook = await database.db.selectFrom('webhooks').select('id').executeTakeFirstOrThrow()
  await cli(['webhooks', 'delete', '--account', 'Acme', String(hook.id)])
  // Refused: nothing is changed, so nothing is recorded.
  await cli(['keys', 'revoke', '--account', 'Acme', '999999'], undefined, 1)
  await cli(['webhooks', 'delete', '--account', 'Acme', '999999'], undefined, 1)

  const account = await database.db
    .selectFrom('accounts')
    .select('id')
    .where('name', '=', 'Acme')
    .executeTakeFirstOrThrow()
  const prefix = (await database.db.selectFrom('api_keys').select('prefix').executeTakeFirstOrThrow()).prefix
  const rows = await database.db.selectFrom('audit_entries').selectAll().orderBy('id').execute()
  const lists = { environments: [], services: [] }
  assert.deepEqual(
    rows.map((r) => [
      Number(r.account_id),
      r.actor_kind,
      r.actor,
      r.address,
      r.action,
      r.target,
      JSON.parse(r.details),
    ]),
    [
      ['user.added', 'ada@example.com', { role: 'admin', via: 'shiplog users create' }],
      ['password.changed', 'ada@example.com', { how: 'shiplog users set-password --one-time' }],
      ['key.created', `deploy (${prefix}…)`, { scopes: ['ingest', 'read'] }],
      ['key.revoked', `deploy (${prefix}…)`, { scopes: ['ingest', 'read'] }],
      [
        'webhook.created',
        'https://hooks.example.com',
        { format: 'slack', statuses: ['Failed'], outcomes: [], ...lists },
      ],
      [
        'webhook.deleted',
        'https://hooks.example.com',
        { id: Number(hook.id), format: 'slack', statuses: ['Failed'], outcomes: [], ...lists },
      ],
    ].map(([action, target, details]) => [
      Number(account.id),
      'cli',
      `cli (${userInfo().username})`,
      null,
      action,
      target,
      details,
    ]),
  )
  const text = JSON.stringify(rows)
  for (const s of [password, second, key, secret, 'pathsecret'])
    assert.ok(!text.includes(s), `no entry holds ${s.slice(0, 6)}…`)
})
