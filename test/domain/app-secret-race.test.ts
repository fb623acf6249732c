// Two processes starting together on a new SQLite installation both read the configuration before
// either made the secret. The file is created exclusively (domain/app-secret.ts, flag wx), so the
// one that comes second runs with the first one's secret instead of replacing it.
import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { loadConfig } from '../../src/config.js'
import { openDatabase } from '../../src/db/connect.js'
import { migrateToLatest } from '../../src/db/migrate.js'
import { resolveAppSecret } from '../../src/domain/app-secret.js'

test('a secret another process made after this one read the configuration is used, never replaced', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'shiplog-secret-race-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const env = { DATABASE_URL: `sqlite:${join(dir, 'data', 'shiplog.db')}`, LOG_LEVEL: 'silent' }
  const config = loadConfig(env)
  const file = config.secretFile
  assert.ok(file !== null && config.secret === null, 'no secret yet, and reading the configuration made none')
  const database = openDatabase(config.database)
  t.after(() => database.close())
  await migrateToLatest(database)

  // The other process wins: its secret is on disk by the time this one makes its own.
  const theirs = 'f'.repeat(64)
  writeFileSync(file, `${theirs}\n`, { mode: 0o600 })
  assert.equal(await resolveAppSecret(config, database.db), theirs)
  assert.equal(readFileSync(file, 'utf8'), `${theirs}\n`, 'the file is as the other process wrote it')
  assert.equal(loadConfig(env).secret, theirs, 'the next start reads the same secret')
})
