// `shiplog dump` and `shiplog load`: exact round trips on the suite's database and across to the
// other kind and back, and every refusal (truncated, corrupted, newer schema, occupied target)
// leaving the target unchanged; the master secret never in a dump. Both databases.
import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { gunzipSync } from 'node:zlib'
import { parseDatabaseUrl } from '../../src/config.js'
import { openDatabase } from '../../src/db/connect.js'
import { SEEDED_BY_MIGRATIONS } from '../../src/domain/operations/load.js'
import { freshDatabaseUrl } from '../helper.js'
import {
  assertWorks,
  fillInstallation,
  noOtherDialect,
  otherDialectUrl,
  rowCounts,
  trailerOf,
} from '../support/installation.js'
import { processEnv, runCli } from '../support/processes.js'
import { assertSameRows } from '../support/same-rows.js'

/** A dump never carries the master secret (see the last test), so its row is left out of comparisons. */
const NO_SECRET = { settings: (row: Record<string, string | null>) => row.name === 'session_secret' }

function tempDir(t: { after(fn: () => void): void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'shiplog-dump-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

test('dump → load round-trips exactly, here and across to the other database and back; keys and passwords keep working', async (t) => {
  const dir = tempDir(t)
  const source = await freshDatabaseUrl(t)
  const filled = await fillInstallation(t, source)
  const dump = (url: string, out: string, extra: string[] = []) =>
    runCli(t, ['dump', '--out', out, ...extra], { env: processEnv(url) })
  const load = (url: string, file: string) => runCli(t, ['load', file], { env: processEnv(url) })

  const first = join(dir, 'first.ndjson.gz')
  const dumped = await dump(source, first)
  assert.equal(dumped.code, 0, dumped.stderr)
  assert.match(dumped.stderr, /^dumped \d+ rows from \d+ tables/)
  const text = gunzipSync(readFileSync(first)).toString('utf8')
  const header = JSON.parse(text.slice(0, text.indexOf('\n'))) as Record<string, unknown>
  assert.equal(header.format, 'shiplog-dump')
  assert.equal(header.version, 1)
  assert.match(String(header.schema), /^\d{4}_\d{2}_\d{2}_\d{4}_/)
  writeFileSync(join(dir, 'first.ndjson'), text)
  const original = trailerOf(join(dir, 'first.ndjson'))
  for (const table of ['accounts', 'users', 'api_keys', 'events', 'deployments', 'webhooks', 'sessions']) {
    assert.ok((original[table] as { rows: number }).rows > 0, `the dump holds ${table} rows`)
  }

  // An existing --out is refused unless --force.
  const again = await dump(source, first)
  assert.equal(again.code, 1)
  assert.match(again.stderr, /already exists \(pass --force/)
  assert.equal((await dump(source, first, ['--force'])).code, 0)

  // Same kind of database.
  const same = await freshDatabaseUrl(t)
  const loaded = await load(same, first)
  assert.equal(loaded.code, 0, loaded.stderr)
  assert.match(loaded.stderr, /checksums match/)
  const sameDump = join(dir, 'same.ndjson')
  assert.equal((await dump(same, sameDump)).code, 0)
  assert.deepEqual(trailerOf(sameDump), original)

  await assertSameRows(source, same, { leaveOut: NO_SECRET })

  // Across to the other kind and back: without PostgreSQL, a counted skip rather than a SQLite file
  // that would cross nothing.
  await t.test('across to the other kind of database and back', { skip: noOtherDialect }, async () => {
    const other = await otherDialectUrl(t, dir)
    assert.equal((await load(other, first)).code, 0)
    await assertSameRows(source, other, { leaveOut: NO_SECRET })
    const otherDump = join(dir, 'other.ndjson')
    assert.equal((await dump(other, otherDump)).code, 0)
    assert.deepEqual(trailerOf(otherDump), original)
    const back = await freshDatabaseUrl(t)
    assert.equal((await load(back, otherDump)).code, 0)
    await assertSameRows(source, back, { leaveOut: NO_SECRET })
    const backDump = join(dir, 'back.ndjson')
    assert.equal((await dump(back, backDump)).code, 0)
    assert.deepEqual(trailerOf(backDump), original)

    await assertWorks(t, back, filled)
    await assertWorks(t, other, filled)
  })
})

test('a truncated, corrupted, newer or foreign dump, or an occupied target: one line, non-zero exit, nothing loaded', async (t) => {
  const dir = tempDir(t)
  const source = await freshDatabaseUrl(t)
  await fillInstallation(t, source)
  const good = join(dir, 'good.ndjson')
  assert.equal((await runCli(t, ['dump', '--out', good], { env: processEnv(source) })).code, 0)
  const lines = readFileSync(good, 'utf8').trimEnd().split('\n')
  const eventsAt = lines.findIndex((l) => l.startsWith('{"table":"events"'))
  assert.ok(eventsAt > 0)
  const variant = (name: string, edit: (copy: string[]) => string[]): string => {
    const path = join(dir, name)
    writeFileSync(path, `${edit([...lines]).join('\n')}\n`)
    return path
  }
  const cases: [string, RegExp][] = [
    [
      variant('truncated.ndjson', (c) => c.slice(0, eventsAt + 2)),
      /ends after line \d+ without its trailer: it is truncated/,
    ],
    [
      variant('cut-mid-line.ndjson', (c) => [
        ...c.slice(0, eventsAt + 1),
        (c[eventsAt + 1] ?? '').slice(0, 10),
      ]),
      new RegExp(`^shiplog: line ${eventsAt + 2}: not valid JSON`),
    ],
    [
      variant('altered.ndjson', (c) => {
        c[eventsAt + 1] = (c[eventsAt + 1] ?? '').replace('prod', 'prad')
        return c
      }),
      /line \d+: table events: the checksum does not match its rows/,
    ],
    [
      variant('wrong-shape.ndjson', (c) => {
        c[eventsAt + 1] = '[1,2]'
        return c
      }),
      new RegExp(`^shiplog: line ${eventsAt + 2}: a row of events must be an array of \\d+ values`),
    ],
    [
      variant('newer.ndjson', (c) => {
        c[0] = (c[0] ?? '').replace(/"schema":"[^"]+"/, '"schema":"2099_01_01_0099_future"')
        return c
      }),
      /^shiplog: line 1: the dump is from a newer schema \(2099_01_01_0099_future\)/,
    ],
    [
      variant('format.ndjson', (c) => {
        c[0] = (c[0] ?? '').replace('"version":1', '"version":7')
        return c
      }),
      /^shiplog: line 1: dump format version 7 is not supported/,
    ],
    [variant('not-a-dump.ndjson', () => ['{"hello":"world"}']), /^shiplog: line 1: not a Shiplog dump/],
  ]
  for (const [file, expected] of cases) {
    const target = await freshDatabaseUrl(t)
    const res = await runCli(t, ['load', file], { env: processEnv(target) })
    assert.equal(res.code, 1, `${file}: ${res.stderr}`)
    assert.match(res.stderr, expected, file)
    assert.equal(res.stderr.trim().split('\n').length, 1, `one line for ${file}: ${res.stderr}`)
    const counts = await rowCounts(target)
    const nonEmpty = Object.entries(counts).filter(
      ([name, n]) => n > 0 && !SEEDED_BY_MIGRATIONS.includes(name),
    )
    assert.deepEqual(nonEmpty, [], `${file} loaded nothing`)
  }

  // A gzip file cut short.
  const gz = join(dir, 'good.ndjson.gz')
  assert.equal((await runCli(t, ['dump', '--out', gz], { env: processEnv(source) })).code, 0)
  const bytes = readFileSync(gz)
  const cutGz = join(dir, 'cut.ndjson.gz')
  writeFileSync(cutGz, bytes.subarray(0, Math.floor(bytes.length / 2)))
  const target = await freshDatabaseUrl(t)
  const cut = await runCli(t, ['load', cutGz], { env: processEnv(target) })
  assert.equal(cut.code, 1)
  assert.match(cut.stderr, /^shiplog: line \d+: .*truncated/)

  // A database that holds data is refused and keeps what it had.
  const before = await rowCounts(source)
  const occupied = await runCli(t, ['load', good], { env: processEnv(source) })
  assert.equal(occupied.code, 1)
  assert.match(occupied.stderr, /^shiplog: the database already holds data \(table accounts has rows\)/)
  assert.deepEqual(await rowCounts(source), before)

  // Usage errors.
  const missing = await runCli(t, ['load', join(dir, 'nope.ndjson')], { env: processEnv(target) })
  assert.equal(missing.code, 1)
  assert.match(missing.stderr, /nope\.ndjson: no such file/)
  const noOut = await runCli(t, ['dump'], { env: processEnv(source) })
  assert.equal(noOut.code, 2)
  assert.match(noOut.stderr, /--out FILE is required/)
})

test('a dump never holds the master secret; its load works, and says when the secret it runs with opens no webhook secret', async (t) => {
  const dir = tempDir(t)
  const source = await freshDatabaseUrl(t)
  await fillInstallation(t, source)
  // fillInstallation keeps a generated secret in settings, as a PostgreSQL installation without
  // SHIPLOG_SECRET does (and a SQLite one moved from it).
  const database = openDatabase(parseDatabaseUrl(source))
  const secret = await database.db
    .selectFrom('settings')
    .select('value')
    .where('name', '=', 'session_secret')
    .executeTakeFirst()
    .finally(() => database.close())
  assert.ok(secret && secret.value.length >= 32, 'the source keeps its secret in the database')

  const out = join(dir, 'no-secret.ndjson')
  const dumped = await runCli(t, ['dump', '--out', out], { env: processEnv(source) })
  assert.equal(dumped.code, 0, dumped.stderr)
  const text = readFileSync(out, 'utf8')
  assert.ok(!text.includes(secret.value), 'the secret value is nowhere in the dump')
  assert.ok(!text.includes('"session_secret"'), 'nor its row')
  assert.ok('settings' in trailerOf(out), 'the settings table is in it all the same')

  // Loaded with the secret the webhooks were sealed with: nothing to say.
  const same = await freshDatabaseUrl(t)
  const loaded = await runCli(t, ['load', out], { env: processEnv(same) })
  assert.equal(loaded.code, 0, loaded.stderr)
  assert.doesNotMatch(loaded.stderr, /^note:/m, loaded.stderr)
  const again = join(dir, 'again.ndjson')
  assert.equal((await runCli(t, ['dump', '--out', again], { env: processEnv(same) })).code, 0)
  assert.deepEqual(trailerOf(again), trailerOf(out), 'the load holds what the dump held')
  await assertSameRows(source, same, { leaveOut: NO_SECRET })

  // Loaded where another secret is set: it loads, and says what to do about the webhooks.
  const other = await freshDatabaseUrl(t)
  const elsewhere = await runCli(t, ['load', out], {
    env: processEnv(other, { SHIPLOG_SECRET: 'another-secret-0123456789abcdef0123456789' }),
  })
  assert.equal(elsewhere.code, 0, elsewhere.stderr)
  assert.match(elsewhere.stderr, /checksums match\n/)
  assert.match(
    elsewhere.stderr,
    /^note: the dump holds no secret, and the database holds data sealed with another secret than the one in SHIPLOG_SECRET: set SHIPLOG_SECRET to the secret of the installation this data came from/m,
  )
})
