// Names of accounts and keys: terminal control characters and text-direction overrides are refused
// when they are made (CLI and Settings), and a name stored before the rule is printed escaped.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { parseDatabaseUrl } from '../../src/config.js'
import { openDatabase } from '../../src/db/connect.js'
import { ensureAccount } from '../../src/domain/accounts.js'
import { createApiKey } from '../../src/domain/keys.js'
import { nameProblem, printableName } from '../../src/text-rules.js'
import { freshDatabaseUrl } from '../helper.js'
import { processEnv, runCli } from '../support/processes.js'

const CSI = '\u009b' // a one-character terminal escape (Control Sequence Introducer)
const RLO = '\u202e' // RIGHT-TO-LEFT OVERRIDE: "ci\u202etxt.exe" reads as "ciexe.txt"

test('the name rule refuses C0 and C1 controls, separators and bidi controls, and takes other unicode', () => {
  for (const bad of [
    `a${CSI}31m`,
    `ci${RLO}gpj.exe`,
    'a\u2066b',
    'a\u2069',
    'a\u2028b',
    'a\u0085b',
    'tab\there',
    'nul\u0000',
  ]) {
    assert.match(nameProblem(bad) ?? '', /control characters|direction/, JSON.stringify(bad))
  }
  for (const good of [
    'github-actions',
    'Déploiement 🚀',
    'ジョブ',
    '<script>',
    'a "quoted" name',
    "O'Brien",
  ]) {
    assert.equal(nameProblem(good), null, good)
  }
  assert.equal(nameProblem(''), 'must not be empty')
  assert.equal(nameProblem('x'.repeat(101)), 'must be at most 100 characters')
  assert.equal(nameProblem('é'.repeat(100)), null, 'length counts characters, not bytes')
  assert.equal(printableName(`ci${RLO}x${CSI}y`), 'ci\\u202ex\\u009by')
})

test('keys create and users create refuse such names; keys list escapes a name stored before the rule', {
  timeout: 120_000,
}, async (t) => {
  const databaseUrl = await freshDatabaseUrl(t)
  const env = processEnv(databaseUrl)
  const cli = (args: string[], stdin?: string) => runCli(t, args, { env, stdin })
  const created = await cli(
    ['users', 'create', '--account', `Acme${CSI}2J`, '--email', 'ada@example.com', '--password-stdin'],
    'correct horse battery staple\n',
  )
  assert.equal(created.code, 2, created.stderr)
  assert.match(created.stderr, /--account must not contain control characters/)

  const ok = await cli(
    ['users', 'create', '--account', 'Acme', '--email', 'ada@example.com', '--password-stdin'],
    'correct horse battery staple\n',
  )
  assert.equal(ok.code, 0, ok.stderr)
  const refused = await cli(['keys', 'create', '--account', 'Acme', '--name', `deploy${RLO}gpj.exe`])
  assert.equal(refused.code, 2, refused.stderr)
  assert.equal(refused.stdout, '', 'no key printed')
  assert.match(refused.stderr, /--name must not contain control characters or text-direction overrides/)

  // A key named before the rule existed: written directly, as an old database may hold it.
  const database = openDatabase(parseDatabaseUrl(databaseUrl))
  t.after(() => database.close())
  const account = await ensureAccount(database.db, 'Acme')
  await createApiKey(database.db, { accountId: account.id, name: `old${CSI}31mred${RLO}`, createdBy: 'cli' })
  const keys = await database.db.selectFrom('api_keys').select('name').execute()
  assert.equal(keys.length, 1, 'the refused key was not stored')

  const listed = await cli(['keys', 'list', '--account', 'Acme'])
  assert.equal(listed.code, 0, listed.stderr)
  assert.ok(
    !listed.stdout.includes(CSI) && !listed.stdout.includes(RLO),
    'no raw control character reaches the terminal',
  )
  assert.match(listed.stdout, /old\\u009b31mred\\u202e/)
})
