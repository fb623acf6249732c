// An operator opens the live SQLite file beside a running server (the sqlite3 shell reading and
// writing, a `shiplog` command): the server keeps its locks, nothing is deleted under it, and a SIGKILL
// afterwards loses no acknowledged event.
import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { test } from 'node:test'
import { parseDatabaseUrl } from '../../src/config.js'
import { databaseForServers, testDialect } from '../helper.js'
import { processEnv, runCli, startServer } from '../support/processes.js'
import { deletedFilesOpen, posixLocksOn, sqliteShell } from '../support/sqlite-files.js'

async function send(url: string, key: string, version: string): Promise<number> {
  const response = await fetch(
    `${url}/put?app=a&env=p&version=${encodeURIComponent(version)}&status=Deployed`,
    {
      headers: { 'x-api-key': key },
    },
  )
  const body = (await response.json()) as { id?: number }
  assert.equal(response.status, 201, `event ${version} acknowledged: ${JSON.stringify(body)}`)
  assert.ok(typeof body.id === 'number')
  return body.id
}

// The file and its locks are SQLite's alone; PostgreSQL has nothing of the kind to test.
if (testDialect === 'sqlite') {
  test('reads and writes by other processes beside the server delete nothing, and a SIGKILL after them loses nothing', {
    timeout: 90_000,
  }, async (t) => {
    const { databaseUrl, key } = await databaseForServers(t)
    const target = parseDatabaseUrl(databaseUrl)
    assert.equal(target.dialect, 'sqlite')
    const path = target.path
    const server = await startServer(t, { databaseUrl })
    const acknowledged: number[] = []
    for (let i = 0; i < 10; i++) acknowledged.push(await send(server.url, key, `before-${i}`))

    // What protects the WAL: the server holds a lock on the database file for as long as it runs.
    assert.notDeepEqual(
      posixLocksOn(server.pid, path),
      [],
      'the server holds a POSIX lock on the database file',
    )

    // An operator looks, and writes: each shell closes its connection properly, and would delete
    // the -wal and -shm as the last connection if it could take the file's exclusive lock.
    assert.equal(Number(sqliteShell(path, 'select count(*) from events')), 10)
    sqliteShell(
      path,
      'create table operator_scratch (x); insert into operator_scratch values (1); drop table operator_scratch;',
    )
    // A shiplog command beside the server: its key must work against the server at once.
    const created = await runCli(t, ['keys', 'create', '--account', 'Acme', '--name', 'beside'], {
      env: processEnv(databaseUrl),
    })
    assert.equal(created.code, 0, created.stderr)
    const besideKey = created.stdout.trim()

    for (let i = 0; i < 10; i++) acknowledged.push(await send(server.url, key, `after-${i}`))
    acknowledged.push(await send(server.url, besideKey, 'with-the-new-key'))

    assert.ok(
      existsSync(`${path}-wal`) && existsSync(`${path}-shm`),
      'the -wal and -shm files are still there',
    )
    assert.deepEqual(deletedFilesOpen(server.pid), [], 'the server writes no file that was deleted under it')
    assert.notDeepEqual(posixLocksOn(server.pid, path), [], 'the server still holds its lock')

    server.signal('SIGKILL')
    assert.equal((await server.waitForExit(10_000)).signal, 'SIGKILL')
    const stored = sqliteShell(path, 'select id from events order by id').split('\n').map(Number)
    assert.deepEqual(stored, acknowledged, 'every acknowledged event survived the SIGKILL')
    assert.equal(sqliteShell(path, 'pragma integrity_check'), 'ok')
  })
}
