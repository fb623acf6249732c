// `shiplog doctor`: one line per check, a verdict, exit 0 only when all pass; a pending migration,
// an unreachable database and a bad Redis each give a FAIL line and exit 1, quickly, and no secret
// is ever printed.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { parseDatabaseUrl } from '../../src/config.js'
import { openDatabase } from '../../src/db/connect.js'
import { migrateTo, migrateToLatest } from '../../src/db/migrate.js'
import { freshDatabaseUrl, TEST_SECRET, testDialect } from '../helper.js'
import { processEnv, runCli } from '../support/processes.js'

const LINE = /^(ok {3}|warn |FAIL )\S+ +\S.*$/

async function migrated(url: string, to?: string): Promise<void> {
  const database = openDatabase(parseDatabaseUrl(url))
  try {
    if (to) await migrateTo(database, to)
    else await migrateToLatest(database)
  } finally {
    await database.close()
  }
}

function checkLines(stdout: string): string[] {
  const [checks = '', verdict = ''] = stdout.split('\n\n')
  const lines = checks.split('\n')
  for (const line of lines) assert.match(line, LINE)
  assert.ok(verdict.length > 0, 'a verdict follows the checks')
  return lines
}

test('a healthy installation passes every check and exits 0', { timeout: 30_000 }, async (t) => {
  const databaseUrl = await freshDatabaseUrl(t)
  await migrated(databaseUrl)
  const result = await runCli(t, ['doctor'], { env: processEnv(databaseUrl) })
  assert.equal(result.code, 0, result.stdout + result.stderr)
  const lines = checkLines(result.stdout)
  const names = lines.map((l) => l.slice(5).split(/\s+/)[0])
  const expected =
    testDialect === 'sqlite'
      ? ['configuration', 'database', 'schema', 'secret', 'disk', 'wal', 'clock']
      : ['configuration', 'database', 'schema', 'secret', 'postgresql', 'pg_trgm', 'clock']
  assert.deepEqual(names, expected)
  assert.ok(lines.every((l) => !l.startsWith('FAIL')))
  assert.match(lines[1] ?? '', /^ok {3}database {6}(sqlite:|postgres).* reachable \(\d+ ms\)$/)
  assert.match(lines[2] ?? '', /^ok {3}schema {8}current \(\d+ migrations applied\)$/)
  assert.match(result.stdout, /\nall checks passed/)
  assert.doesNotMatch(result.stdout + result.stderr, new RegExp(TEST_SECRET))
})

test('a pending migration fails the schema check and says what to run', { timeout: 30_000 }, async (t) => {
  const databaseUrl = await freshDatabaseUrl(t)
  await migrated(databaseUrl, '2026_11_23_0005_deployments')
  const result = await runCli(t, ['doctor'], { env: processEnv(databaseUrl) })
  assert.equal(result.code, 1)
  checkLines(result.stdout)
  assert.match(
    result.stdout,
    /^FAIL schema {8}\d+ migrations pending: 2026_11_24_0006_lean_deployments, .* → run shiplog migrate$/m,
  )
  assert.match(result.stdout, /\n1 check failed/)
  assert.equal(result.stderr, 'shiplog: doctor found 1 failing check\n')
})

test('an unreachable database fails within seconds, password never shown', { timeout: 30_000 }, async (t) => {
  for (const url of [
    // Nothing listens there: refused at once.
    'postgres://shiplog:pw-very-secret@127.0.0.1:1/shiplog',
    // A non-routable address: the connection hangs until the check's own time limit.
    'postgres://shiplog:pw-very-secret@10.255.255.1:5432/shiplog',
  ]) {
    const started = Date.now()
    const result = await runCli(t, ['doctor'], { env: processEnv(url) })
    const took = Date.now() - started
    assert.equal(result.code, 1, result.stdout)
    assert.match(
      result.stdout,
      /^FAIL database {6}postgres:\/\/shiplog:\*\*\*@[\d.]+:\d+\/shiplog unreachable: .+$/m,
    )
    assert.doesNotMatch(result.stdout + result.stderr, /pw-very-secret/)
    assert.ok(took < 8000, `doctor answered in ${took} ms`)
  }
  // On SQLite, a missing database file is not created by doctor.
  const missing = await runCli(t, ['doctor'], { env: processEnv('sqlite:/nonexistent-dir/shiplog.db') })
  assert.equal(missing.code, 1)
  assert.match(
    missing.stdout,
    /^FAIL database {6}no database file at \/nonexistent-dir\/shiplog\.db → run shiplog migrate/m,
  )
})

test('a bad REDIS_URL fails: unreachable, or not a Redis URL at all', { timeout: 30_000 }, async (t) => {
  const databaseUrl = await freshDatabaseUrl(t)
  await migrated(databaseUrl)
  const unreachable = await runCli(t, ['doctor'], {
    env: processEnv(databaseUrl, { REDIS_URL: 'redis://:redis-secret@127.0.0.1:1/0' }),
  })
  assert.equal(unreachable.code, 1)
  assert.match(
    unreachable.stdout,
    /^FAIL redis {9}redis:\/\/:\*\*\*@127\.0\.0\.1:1\/0 unreachable: .*ECONNREFUSED/m,
  )
  assert.doesNotMatch(unreachable.stdout + unreachable.stderr, /redis-secret/)
  assert.match(unreachable.stdout, /^ok {3}schema/m, 'the other checks still ran')

  const malformed = await runCli(t, ['doctor'], {
    env: processEnv(databaseUrl, { REDIS_URL: 'http://cache:6379' }),
  })
  assert.equal(malformed.code, 1)
  assert.match(malformed.stdout, /^FAIL configuration REDIS_URL must start with redis:\/\/ or rediss:\/\//m)
})
