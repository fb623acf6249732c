// `shiplog backup`: a copy of a SQLite database taken while a real server ingests holds every event
// acknowledged before it began; bad targets get one line, a non-zero exit and leave nothing behind.
// It works on SQLite files in both runs of the suite; on PostgreSQL it explains pg_dump instead.
import assert from 'node:assert/strict'
import { execFileSync, spawnSync } from 'node:child_process'
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type TestContext, test } from 'node:test'
import SqliteDatabase from 'better-sqlite3'
import { parseDatabaseUrl } from '../../src/config.js'
import { openDatabase } from '../../src/db/connect.js'
import { migrateToLatest } from '../../src/db/migrate.js'
import { addTenant } from '../helper.js'
import { processEnv, REPO_ROOT, runCli, SHIPLOG_BIN, startServer, withTimeout } from '../support/processes.js'

const SERVER_ENV = { SHIPLOG_RATE_LIMIT: '10000000' }
const LOOPS = 4

/** File systems mounted by a test, unmounted before its directory is removed. */
const mounts: string[] = []

function tempDir(t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'shiplog-backup-'))
  t.after(() => {
    for (const mounted of mounts.splice(0)) execFileSync('umount', [mounted], { stdio: 'ignore' })
    rmSync(dir, { recursive: true, force: true })
  })
  return dir
}

/** A migrated SQLite file with the account "Acme" and an ingest key. */
async function sqliteInstallation(dir: string): Promise<{ databaseUrl: string; key: string; path: string }> {
  const path = join(dir, 'data', 'shiplog.db')
  const databaseUrl = `sqlite:${path}`
  const database = openDatabase(parseDatabaseUrl(databaseUrl))
  try {
    await migrateToLatest(database)
    const { key } = await addTenant(database, 'Acme', 'ci')
    return { databaseUrl, key, path }
  } finally {
    await database.close()
  }
}

function readIds(path: string): { ids: Set<number>; check: string; incomplete: number } {
  const db = new SqliteDatabase(path, { readonly: true, fileMustExist: true })
  try {
    const check = (db.prepare('PRAGMA integrity_check').get() as { integrity_check: string }).integrity_check
    const rows = db.prepare('SELECT id, service, version, status FROM events').all() as Array<{
      id: number
      service: string | null
      version: string | null
      status: string | null
    }>
    const incomplete = rows.filter((r) => !r.service || !r.version || !r.status).length
    return { ids: new Set(rows.map((r) => r.id)), check, incomplete }
  } finally {
    db.close()
  }
}

test('a backup taken under real ingest load holds every event acknowledged before it began, and restores', {
  timeout: 120_000,
}, async (t) => {
  const dir = tempDir(t)
  const { databaseUrl, key } = await sqliteInstallation(dir)
  const server = await startServer(t, { databaseUrl, env: SERVER_ENV })
  const acked: number[] = []
  const failures: string[] = []
  let stop = false
  const loop = async (n: number) => {
    for (let i = 0; !stop; i++) {
      const response = await fetch(`${server.url}/deploy`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': key },
        body: JSON.stringify({
          service: `svc-${n}`,
          environment: 'prod',
          version: `${n}.${i}`,
          status: ['Deploying', 'Deployed', 'Failed'][i % 3],
          description: 'x'.repeat(200),
        }),
        signal: AbortSignal.timeout(10_000),
      })
      const body = (await response.json()) as { id?: number }
      if (response.status !== 201 || typeof body.id !== 'number') {
        failures.push(`${response.status} ${JSON.stringify(body)}`)
        return
      }
      acked.push(body.id)
    }
  }
  const load = Promise.all(Array.from({ length: LOOPS }, (_, n) => loop(n)))
  for (let waited = 0; acked.length < 300; waited += 10) {
    assert.ok(waited < 30_000 && failures.length === 0, `the load runs (${failures.join('; ')})`)
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
  const ackedBefore = [...acked]
  const out = join(dir, 'backups', 'shiplog-backup.db')
  mkdirSync(join(dir, 'backups'))
  const backup = await runCli(t, ['backup', '--out', out], { env: processEnv(databaseUrl) })
  const ackedDuring = acked.length - ackedBefore.length
  stop = true
  await withTimeout(load, 15_000, 'the load did not stop')
  assert.deepEqual(failures, [], 'every request was acknowledged')
  assert.equal(backup.code, 0, backup.stderr)
  assert.match(
    backup.stderr,
    /^backup written to .*shiplog-backup\.db \([\d.]+ MiB, \d+ events, [\d.]+ s\)\nkeep SHIPLOG_SECRET with .*shiplog-backup\.db, stored apart from it/,
  )
  assert.ok(ackedDuring > 0, 'ingest went on while the backup ran')
  t.diagnostic(`${ackedBefore.length} acknowledged before the backup, ${ackedDuring} while it ran`)
  assert.deepEqual(readdirSync(join(dir, 'backups')), ['shiplog-backup.db'], 'no temporary file is left')

  const copy = readIds(out)
  assert.equal(copy.check, 'ok')
  assert.equal(copy.incomplete, 0, 'no event is half-written')
  assert.ok(copy.ids.size >= ackedBefore.length)
  const missing = ackedBefore.filter((id) => !copy.ids.has(id))
  assert.deepEqual(missing, [], 'every event acknowledged before the backup is in it')

  // Restoring is putting the file in place: a server on it takes the old key and carries on.
  const restoredDir = join(dir, 'restored')
  mkdirSync(restoredDir)
  copyFileSync(out, join(restoredDir, 'shiplog.db'))
  const restored = await startServer(t, { databaseUrl: `sqlite:${join(restoredDir, 'shiplog.db')}` })
  const response = await fetch(`${restored.url}/deploy`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key },
    body: JSON.stringify({
      service: 'svc',
      environment: 'prod',
      version: 'after-restore',
      status: 'Deployed',
    }),
  })
  assert.equal(response.status, 201)
  const { id } = (await response.json()) as { id: number }
  assert.ok(id > Math.max(...copy.ids), 'new events get new ids')
})

test('backup refuses an existing target, an unwritable directory and a full disk: one line, exit 1, nothing left', {
  timeout: 60_000,
}, async (t) => {
  const dir = tempDir(t)
  const { databaseUrl, path } = await sqliteInstallation(dir)
  // Make the database bigger than the small disk below.
  const db = new SqliteDatabase(path)
  const insert = db.prepare(
    "INSERT INTO events (account_id, service, environment, version, status, source, received_at, description, occurred_at) VALUES (1, 'svc', 'prod', ?, 'Deployed', 'deploy', ?, ?, ?)",
  )
  db.transaction(() => {
    for (let i = 0; i < 4000; i++) insert.run(`v${i}`, Date.now(), 'x'.repeat(500), Date.now())
  })()
  db.close()
  const env = processEnv(databaseUrl)

  const existing = join(dir, 'existing.db')
  writeFileSync(existing, 'precious')
  const refused = await runCli(t, ['backup', '--out', existing], { env })
  assert.equal(refused.code, 1)
  assert.match(
    refused.stderr,
    /^shiplog: .*existing\.db already exists \(choose another name, or --force to replace it\)\n$/,
  )
  assert.equal(readFileSync(existing, 'utf8'), 'precious', 'the existing file is untouched')
  const forced = await runCli(t, ['backup', '--out', existing, '--force'], { env })
  assert.equal(forced.code, 0, forced.stderr)
  assert.equal(readIds(existing).check, 'ok')

  const missingDir = await runCli(t, ['backup', '--out', join(dir, 'nope', 'b.db')], { env })
  assert.equal(missingDir.code, 1)
  assert.match(missingDir.stderr, /^shiplog: directory .*nope does not exist\n$/)

  const usage = await runCli(t, ['backup'], { env })
  assert.equal(usage.code, 2)
  assert.match(usage.stderr, /^shiplog: --out FILE is required/)

  // A read-only file system (as root, permissions do not stop a write) or a read-only directory.
  const readOnly = join(dir, 'ro')
  mkdirSync(readOnly)
  const mounted = mount(readOnly, 'size=1m,ro')
  if (!mounted) execFileSync('chmod', ['0555', readOnly])
  const unwritable = await runCli(t, ['backup', '--out', join(readOnly, 'b.db')], { env })
  assert.equal(unwritable.code, 1)
  assert.match(
    unwritable.stderr,
    /^shiplog: cannot write to directory .*ro \((read-only file system|permission denied)\)\n$/,
  )
  assert.deepEqual(readdirSync(readOnly), [])

  // A full disk: a 1 MiB file system where one is allowed, else a file size limit on the process.
  const small = join(dir, 'small')
  mkdirSync(small)
  if (mount(small, 'size=1m')) {
    const full = await runCli(t, ['backup', '--out', join(small, 'b.db')], { env })
    assert.equal(full.code, 1)
    assert.match(
      full.stderr,
      /^shiplog: backup failed: the disk is full \(no space left\); nothing was written\n$/,
    )
  } else {
    // Writes past the limit fail (EFBIG) once SIGXFSZ is ignored: the same path as a full disk.
    const script = `trap "" XFSZ; ulimit -f 512; exec "${process.execPath}" "${SHIPLOG_BIN}" backup --out "${join(small, 'b.db')}"`
    const full = spawnSync('sh', ['-c', script], { env, cwd: REPO_ROOT, encoding: 'utf8', timeout: 30_000 })
    assert.equal(full.status, 1)
    assert.match(full.stderr, /^shiplog: backup failed: .*\n$/)
  }
  assert.deepEqual(readdirSync(small), [], 'the partial file is removed')
})

test("the backup is its owner's only from the moment it exists: never group- or other-readable, nor the final file", {
  timeout: 120_000,
}, async (t) => {
  const dir = tempDir(t)
  const { databaseUrl, path } = await sqliteInstallation(dir)
  // Big enough that VACUUM INTO writes for a while, so the temporary file is seen many times.
  const db = new SqliteDatabase(path)
  db.exec('CREATE TABLE filler (id INTEGER PRIMARY KEY, b BLOB)')
  const insert = db.prepare('INSERT INTO filler (b) VALUES (randomblob(1048576))')
  db.transaction(() => {
    for (let i = 0; i < 160; i++) insert.run()
  })()
  db.close()
  // The usual umask, which leaves new files readable by everyone unless they are created otherwise.
  const umask = process.umask(0o022)
  t.after(() => process.umask(umask))
  const backups = join(dir, 'backups')
  mkdirSync(backups)
  const out = join(backups, 'nightly.db')
  const seen: { name: string; mode: number }[] = []
  let running = true
  const watching = (async () => {
    while (running) {
      for (const name of readdirSync(backups)) {
        try {
          seen.push({ name, mode: statSync(join(backups, name)).mode & 0o777 })
        } catch {
          // Renamed or removed between the listing and the stat.
        }
      }
      await new Promise((resolve) => setTimeout(resolve, 1))
    }
  })()
  const backup = await runCli(t, ['backup', '--out', out], {
    env: processEnv(databaseUrl),
    timeoutMs: 100_000,
  })
  running = false
  await watching
  assert.equal(backup.code, 0, backup.stderr)
  const temporary = seen.filter((s) => s.name.includes('.partial-'))
  t.diagnostic(
    `${temporary.length} looks at the temporary file(s), modes ${[...new Set(temporary.map((s) => s.mode.toString(8)))].join(', ')}`,
  )
  assert.ok(
    temporary.length >= 10,
    `the temporary file was watched while written (${temporary.length} looks)`,
  )
  const open = seen.filter((s) => (s.mode & 0o077) !== 0)
  assert.deepEqual(open.slice(0, 5), [], 'no file in the directory was ever group- or other-accessible')
  assert.equal(statSync(out).mode & 0o777, 0o600)
  assert.deepEqual(readdirSync(backups), ['nightly.db'])
})

test('on PostgreSQL backup explains pg_dump with the connection (password hidden) and points to dump', async (t) => {
  const env = processEnv(
    'postgres://shiplog:hunter2-secret@db.internal:6543/shiplog_prod?options=-c%20search_path%3Dlogs',
  )
  const result = await runCli(t, ['backup', '--out', 'nightly.dump'], { env })
  assert.equal(result.code, 1)
  assert.doesNotMatch(result.stderr, /hunter2/)
  assert.match(result.stderr, /postgres:\/\/shiplog:\*\*\*@db\.internal:6543\/shiplog_prod/)
  assert.match(
    result.stderr,
    /\n {2}pg_dump --format=custom --file=nightly\.dump --host=db\.internal --port=6543 --username=shiplog --schema=logs shiplog_prod\n/,
  )
  assert.match(result.stderr, /pg_restore/)
  assert.match(result.stderr, /shiplog dump --out FILE\.ndjson\.gz/)
  assert.equal(result.stdout, '')
})

/** Mounts a tmpfs on `dir` for the test; false where this process may not mount. */
function mount(dir: string, options: string): boolean {
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', options, 'tmpfs', dir], { stdio: 'ignore', cwd: REPO_ROOT })
  } catch {
    return false
  }
  mounts.push(dir)
  return true
}
