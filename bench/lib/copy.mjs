// The `copy` bench part: seeds N events into SQLite, runs `shiplog copy` to a fresh PostgreSQL
// database, and reports rows/s and the copy process's peak RSS. Standalone too:
//   BENCH_COPY_ROWS=1000000 node bench/lib/copy.mjs
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import { runNode } from './children.mjs'
import { sampleRss } from './proc.mjs'
import { historyPlan, seedSqlite, sqliteSeedTarget } from './seed.mjs'

const root = fileURLToPath(new URL('../../', import.meta.url))
const shiplogBin = join(root, 'bin', 'shiplog.js')

/** @param {string} serverUrl @param {string} text */
async function admin(serverUrl, text) {
  const client = new pg.Client({ connectionString: serverUrl, connectionTimeoutMillis: 5000 })
  await client.connect()
  try {
    await client.query(text)
  } finally {
    await client.end()
  }
}

/**
 * @param {{ rows: number, pgServerUrl: string }} options
 * @returns {Promise<{ rows: number, copiedRows: number, seconds: number, rowsPerSecond: number, rowsPhaseSeconds: number | null, rowsPhasePerSecond: number | null, peakRssMb: number, seedSeconds: number }>}
 */
export async function benchCopy({ rows, pgServerUrl }) {
  const dir = mkdtempSync(join(tmpdir(), 'shiplog-bench-copy-'))
  const file = join(dir, 'source.db')
  const name = `shiplog_bench_copy_${randomBytes(5).toString('hex')}`
  const target = new URL(pgServerUrl)
  target.pathname = `/${name}`
  const env = {
    ...process.env,
    DATABASE_URL: `sqlite:${file}`,
    SHIPLOG_SECRET: randomBytes(32).toString('hex'),
    LOG_LEVEL: 'warn',
  }
  await admin(pgServerUrl, `CREATE DATABASE "${name}"`)
  try {
    const seedStarted = Date.now()
    await runNode(
      [shiplogBin, 'users', 'create', '--account', 'Bench', '--email', 'b@x.io', '--password-stdin'],
      {
        env,
        cwd: root,
        input: 'pw12345678\n',
      },
    )
    await runNode([shiplogBin, 'keys', 'create', '--account', 'Bench', '--name', 'bench'], { env, cwd: root })
    seedSqlite(file, historyPlan(rows, Date.now()), sqliteSeedTarget(file))
    const seedSeconds = (Date.now() - seedStarted) / 1000

    const started = Date.now()
    const child = spawn(
      process.execPath,
      [shiplogBin, 'copy', '--from', `sqlite:${file}`, '--to', target.toString()],
      {
        env,
        cwd: root,
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    )
    const rss = sampleRss(/** @type {number} */ (child.pid), 100)
    let stderr = ''
    /** When the rows were all in (the command then builds indexes and verifies). */
    let rowsDoneAt = 0
    child.stderr.on('data', (chunk) => {
      stderr += chunk
      if (!rowsDoneAt && stderr.includes('copy: building indexes')) rowsDoneAt = Date.now()
    })
    const code = await new Promise((resolve) => child.once('close', resolve))
    const seconds = (Date.now() - started) / 1000
    const { peak } = rss.stop()
    if (code !== 0) throw new Error(`shiplog copy failed (exit ${code}): ${stderr.trim().split('\n').at(-1)}`)
    const done = /copied (\d+) rows/.exec(stderr)
    const copiedRows = done ? Number(done[1]) : 0
    return {
      rows,
      copiedRows,
      seconds,
      rowsPerSecond: Math.round(copiedRows / seconds),
      rowsPhaseSeconds: rowsDoneAt ? (rowsDoneAt - started) / 1000 : null,
      rowsPhasePerSecond: rowsDoneAt ? Math.round(copiedRows / ((rowsDoneAt - started) / 1000)) : null,
      peakRssMb: Math.round(peak / 1024 / 1024),
      seedSeconds,
    }
  } finally {
    await admin(pgServerUrl, `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)
    rmSync(dir, { recursive: true, force: true })
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const result = await benchCopy({
    rows: Number(process.env.BENCH_COPY_ROWS ?? 1_000_000),
    pgServerUrl: process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
  })
  console.log(JSON.stringify(result))
}
