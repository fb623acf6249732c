// `shiplog copy` from SQLite to the suite's database: killed with SIGKILL mid-copy, resumed, verified
// row by row; old keys and passwords work on the target; a plain copy to the other kind of database;
// another installation and wrong URLs are refused.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { sql } from 'kysely'
import { parseDatabaseUrl } from '../../src/config.js'
import { openDatabase } from '../../src/db/connect.js'
import { migrateToLatest } from '../../src/db/migrate.js'
import { PROGRESS_TABLE } from '../../src/domain/operations/copy.js'
import { foreignKeys, secondaryIndexes } from '../../src/domain/operations/indexes.js'
import { allTableNames, applicationTables } from '../../src/domain/operations/tables.js'
import { freshDatabaseUrl } from '../helper.js'
import {
  assertWorks,
  fillInstallation,
  noOtherDialect,
  otherDialectUrl,
  rowCounts,
} from '../support/installation.js'
import { processEnv, runCli, SHIPLOG_BIN, sleep, withTimeout } from '../support/processes.js'
import { assertSameRows } from '../support/same-rows.js'

const EXTRA_EVENTS = 30_000

function tempDir(t: { after(fn: () => void): void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'shiplog-copy-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

function sqliteSource(t: { after(fn: () => void): void }): string {
  return `sqlite:${join(tempDir(t), 'source.db')}`
}

/** Adds many small events straight into the SQLite source, in one statement, so a copy takes long enough to kill. */
async function addEvents(url: string, count: number): Promise<void> {
  const database = openDatabase(parseDatabaseUrl(url))
  if (database.dialect !== 'sqlite') throw new Error('the source is SQLite')
  await database.write((sql) =>
    sql.run(
      `with recursive n(i) as (select 0 union all select i + 1 from n where i < ${Math.trunc(count) - 1})
       insert into events (account_id, service, environment, version, status, source, received_at, occurred_at)
       select 1, 'svc-' || (i % 7), 'prod', '1.' || i, 'Deployed', 'deploy', 1700000000000 + i, 1700000000000 + i from n`,
    ),
  )
  await database.close()
}

/**
 * The indexes and foreign keys a copy drops for the bulk load and builds again at the end, by name
 * and table (foreign keys with their definition).
 */
async function schemaObjects(url: string): Promise<{ indexes: string[]; foreignKeys: string[] }> {
  const database = openDatabase(parseDatabaseUrl(url))
  try {
    const tables = await applicationTables(database)
    return {
      indexes: (await secondaryIndexes(database, tables)).map((i) => `${i.table}.${i.name}`).sort(),
      foreignKeys: (await foreignKeys(database, tables))
        .map((k) => `${k.table}.${k.name} ${k.definition}`)
        .sort(),
    }
  } finally {
    await database.close()
  }
}

/** How many events the unfinished copy has committed in the target (0 before it starts). */
async function committedEvents(url: string): Promise<number> {
  const database = openDatabase(parseDatabaseUrl(url))
  try {
    if (!(await allTableNames(database)).includes(PROGRESS_TABLE)) return 0
    const { rows } = await sql<{ value: string }>`
      select value from ${sql.table(PROGRESS_TABLE)} where name = 'table:events'`.execute(database.db)
    const state = rows[0] ? (JSON.parse(rows[0].value) as { copied: number; done: boolean }) : null
    return state && !state.done ? state.copied : 0
  } catch {
    return 0
  } finally {
    await database.close()
  }
}

test('copy killed with SIGKILL mid-table resumes, verifies, and the old key and password work on the target', async (t) => {
  const source = sqliteSource(t)
  const filled = await fillInstallation(t, source)
  await addEvents(source, EXTRA_EVENTS)
  const target = await freshDatabaseUrl(t)
  const args = ['copy', '--from', source, '--to', target, '--batch-rows', '200']

  const child = spawn(process.execPath, [SHIPLOG_BIN, ...args], {
    env: processEnv(undefined),
    stdio: ['ignore', 'ignore', 'pipe'],
  })
  let stderr = ''
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString()
  })
  const exited = new Promise<NodeJS.Signals | number | null>((resolve) =>
    child.once('exit', (code, signal) => resolve(signal ?? code)),
  )
  t.after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  })
  let copied = 0
  await withTimeout(
    (async () => {
      for (;;) {
        copied = await committedEvents(target)
        if (copied >= 2_000) return
        await sleep(25)
      }
    })(),
    60_000,
    `the copy never got going: ${stderr}`,
  )
  child.kill('SIGKILL')
  assert.equal(await exited, 'SIGKILL', `killed mid-copy (${stderr})`)
  assert.ok(copied < EXTRA_EVENTS, `killed halfway, after ${copied} events`)

  const resumed = await runCli(t, args, { env: processEnv(undefined), timeoutMs: 120_000 })
  assert.equal(resumed.code, 0, resumed.stderr)
  assert.match(resumed.stderr, /resuming after \d+/)
  assert.match(resumed.stderr, /\(resumed\).*row counts and checksums match/)
  // Progress says the time left in words, and only once it rests on a rate (issue 28: the first
  // line said "ETA 80065 s", from one small table's batch).
  const progress = `${stderr}${resumed.stderr}`
  assert.doesNotMatch(progress, /ETA/)
  for (const line of progress.split('\n').filter((l) => l.startsWith('copy: ') && l.includes('rows/s'))) {
    assert.match(line, /, about (\d+ h \d+ min|\d+ min \d+ s|\d+ s) left, table /, line)
  }
  const counts = await rowCounts(target)
  assert.equal(counts.events, EXTRA_EVENTS + 7)
  assert.deepEqual(counts, await rowCounts(source))
  await assertSameRows(source, target)
  const database = openDatabase(parseDatabaseUrl(target))
  try {
    assert.ok(!(await allTableNames(database)).includes(PROGRESS_TABLE), 'the progress table is gone')
  } finally {
    await database.close()
  }
  await assertWorks(t, target, filled)

  // Every index and foreign key dropped for the load is back, as a fresh migration makes them.
  const fresh = await freshDatabaseUrl(t)
  const migrated = openDatabase(parseDatabaseUrl(fresh))
  try {
    await migrateToLatest(migrated)
  } finally {
    await migrated.close()
  }
  const expected = await schemaObjects(fresh)
  assert.ok(expected.indexes.length > 5, 'the schema has secondary indexes')
  if (parseDatabaseUrl(target).dialect === 'postgres') assert.ok(expected.foreignKeys.length > 5)
  assert.deepEqual(await schemaObjects(target), expected)

  // Copying again into the finished target is refused: it already holds the installation.
  const twice = await runCli(t, ['copy', '--from', source, '--to', target], { env: processEnv(undefined) })
  assert.equal(twice.code, 1)
  assert.match(twice.stderr, /^shiplog: the target already holds this installation/)

  // The same source in one go to the other kind of database (PostgreSQL in the SQLite run, SQLite in
  // the PostgreSQL run): without PostgreSQL, a counted skip rather than a copy that crosses nothing.
  await t.test('in one go to the other kind of database', { skip: noOtherDialect }, async () => {
    const other = await otherDialectUrl(t, tempDir(t))
    const copied = await runCli(t, ['copy', '--from', source, '--to', other], {
      env: processEnv(undefined),
      timeoutMs: 120_000,
    })
    assert.equal(copied.code, 0, copied.stderr)
    assert.match(copied.stderr, /row counts and checksums match/)
    await assertSameRows(source, other)
  })
})

test('copy into another installation, or with wrong URLs: one line, non-zero exit, nothing changed', async (t) => {
  const source = sqliteSource(t)
  await fillInstallation(t, source)
  const other = await freshDatabaseUrl(t)
  await fillInstallation(t, other)
  const before = await rowCounts(other)
  const cli = (args: string[]) => runCli(t, args, { env: processEnv(undefined) })

  const refused = await cli(['copy', '--from', source, '--to', other])
  assert.equal(refused.code, 1)
  assert.match(
    refused.stderr,
    /^shiplog: the target already holds another installation \(table accounts has rows\)/,
  )
  assert.equal(refused.stderr.trim().split('\n').length, 1, refused.stderr)
  assert.deepEqual(await rowCounts(other), before)

  const cases: [string[], number, RegExp][] = [
    [
      ['copy', '--from', 'mysql://db/x', '--to', other],
      2,
      /^shiplog: --from must start with sqlite: or postgres:\/\//,
    ],
    [
      ['copy', '--from', source, '--to', 'http://x'],
      2,
      /^shiplog: --to must start with sqlite: or postgres:\/\//,
    ],
    [
      ['copy', '--from', 'sqlite:/nonexistent/dir/x.db', '--to', other],
      1,
      /^shiplog: --from sqlite:\/nonexistent\/dir\/x\.db: no such database file/,
    ],
    [
      ['copy', '--from', source, '--to', 'postgres://nobody@127.0.0.1:1/none'],
      1,
      /^shiplog: --to postgres:\/\/nobody@127\.0\.0\.1:1\/none cannot be opened: /,
    ],
    [['copy', '--from', source, '--to', source], 2, /^shiplog: --from and --to name the same database/],
    [['copy', '--to', other], 2, /^shiplog: --from is required/],
    [['copy', '--from', source, '--to', other, '--batch-rows', '0'], 2, /^shiplog: --batch-rows must be/],
  ]
  for (const [args, code, expected] of cases) {
    const res = await cli(args)
    assert.equal(res.code, code, `${args.join(' ')}: ${res.stderr}`)
    assert.match(res.stderr, expected)
    assert.equal(res.stderr.trim().split('\n').length, 1, res.stderr)
  }
  assert.deepEqual(await rowCounts(other), before)
})
