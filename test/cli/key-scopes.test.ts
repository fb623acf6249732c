// `shiplog keys create --scope` (SPEC §7): a read key reads and cannot record; a bad scope is
// refused with one line and exit 2, and no key is created.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { parseDatabaseUrl } from '../../src/config.js'
import { openDatabase } from '../../src/db/connect.js'
import { digestApiKey } from '../../src/domain/keys.js'
import { freshDatabaseUrl } from '../helper.js'
import { processEnv, runCli } from '../support/processes.js'

const KEY_LINE = /^shl_[0-9A-Za-z]{32,}\n$/

test('keys create --scope read|ingest,read stores the scopes; a bad scope creates nothing', async (t) => {
  const databaseUrl = await freshDatabaseUrl(t)
  const env = processEnv(databaseUrl)
  const cli = (args: string[], stdin?: string) =>
    runCli(t, args, { env, ...(stdin === undefined ? {} : { stdin }) })
  const made = await cli(
    ['users', 'create', '--account', 'Acme', '--email', 'ada@example.com', '--password-stdin'],
    'correct horse battery staple\n',
  )
  assert.equal(made.code, 0, made.stderr)

  const read = await cli(['keys', 'create', '--account', 'Acme', '--name', 'dashboard', '--scope', 'read'])
  assert.equal(read.code, 0, read.stderr)
  assert.match(read.stdout, KEY_LINE, 'the key alone on stdout')
  const both = await cli(['keys', 'create', '--account', 'Acme', '--name', 'both', '--scope', 'Read, ingest'])
  assert.equal(both.code, 0, both.stderr)
  const plain = await cli(['keys', 'create', '--account', 'Acme', '--name', 'ci'])
  assert.equal(plain.code, 0, plain.stderr)

  for (const bad of ['admin', '', 'read,read', 'ingest,read,write', 'read;ingest', ',']) {
    const refused = await cli(['keys', 'create', '--account', 'Acme', '--name', `bad-${bad}`, '--scope', bad])
    assert.equal(refused.code, 2, `--scope ${JSON.stringify(bad)}: ${refused.stderr}`)
    assert.equal(refused.stdout, '')
    assert.match(refused.stderr, /^shiplog: --scope must be ingest, read or ingest,read[^\n]*\n$/)
  }

  const list = await cli(['keys', 'list', '--account', 'Acme'])
  assert.equal(list.code, 0, list.stderr)
  assert.match(list.stdout, /SCOPES/)
  assert.match(list.stdout, /dashboard\s+shl_\S+\s+read\s/)
  assert.match(list.stdout, /both\s+shl_\S+\s+ingest,read\s/)
  assert.match(list.stdout, /ci\s+shl_\S+\s+ingest\s/)

  const database = openDatabase(parseDatabaseUrl(databaseUrl))
  t.after(() => database.close())
  const rows = await database.db
    .selectFrom('api_keys')
    .select(['name', 'scopes', 'digest'])
    .orderBy('id')
    .execute()
  assert.deepEqual(
    rows.map((r) => [r.name, r.scopes]),
    [
      ['dashboard', 'read'],
      ['both', 'ingest,read'],
      ['ci', 'ingest'],
    ],
    'only the three good keys exist',
  )
  assert.equal(rows[0]?.digest, digestApiKey(read.stdout.trim()))
})
