// Shiplog ingest benchmark (`npm run bench`, which builds first).
//
// Measures, in one run, on this machine:
//   - a baseline: a bare Fastify 5 server (bench/bare-server.mjs) that parses the same request and
//     answers 201 with a small JSON body;
//   - durable ingest through POST /deploy and GET /put with a real API key, on SQLite (a file in a
//     temporary directory) and on PostgreSQL (a fresh database, dropped at the end).
// Every server is its own child process on 127.0.0.1 on a free port. Load comes from autocannon
// (50 connections, no pipelining): a warm-up, then the measured run. After each ingest run the stored
// events are counted: there must be at least as many as 2xx answers (acknowledged means stored).
//
// Environment:
//   BENCH_QUICK=1            1 s warm-up, 2 s measured (CI smoke run)
//   BENCH_WARMUP, BENCH_DURATION   seconds (defaults 3 and 10)
//   BENCH_CONNECTIONS        default 50
//   BENCH_PG_URL             PostgreSQL server to create the bench database on
//                            (default postgres://postgres@127.0.0.1:5432/test)
//   BENCH_SKIP_PG=1          leave PostgreSQL out
//   BENCH_LOG_LEVEL          Shiplog's LOG_LEVEL during the run (default warn: per-request logging off)
//   BENCH_KEEP_TMP=1         keep the temporary directory (server logs, SQLite file) for a post-mortem
//
// Prints one table and writes it as JSON to bench/results/latest.json. There are no performance
// thresholds; the exit code is 1 when a check failed (a server did not start, a non-2xx answer or a
// socket error under load, fewer stored events than acknowledgements), 2 when the run overran its
// time limit.
import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import SqliteDatabase from 'better-sqlite3'
import pg from 'pg'
import { killAllChildren, runNode, startServer } from './lib/children.mjs'
import { runLoad } from './lib/load.mjs'
import { num, renderTable, summariseLog } from './lib/report.mjs'

const root = fileURLToPath(new URL('..', import.meta.url))
const shiplogBin = join(root, 'bin', 'shiplog.js')
const bareServer = join(root, 'bench', 'bare-server.mjs')
const resultsDir = join(root, 'bench', 'results')

const quick = process.env.BENCH_QUICK === '1' || process.env.BENCH_QUICK === 'true'
const warmupSeconds = positive('BENCH_WARMUP', quick ? 1 : 3)
const measureSeconds = positive('BENCH_DURATION', quick ? 2 : 10)
const connections = positive('BENCH_CONNECTIONS', 50)
const pgServerUrl = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const skipPg = process.env.BENCH_SKIP_PG === '1' || process.env.BENCH_SKIP_PG === 'true'
const serverLogLevel = process.env.BENCH_LOG_LEVEL ?? 'warn'

/** @param {string} name @param {number} fallback */
function positive(name, fallback) {
  const raw = process.env[name]
  if (raw === undefined || raw === '') return fallback
  const value = Number(raw)
  if (!Number.isInteger(value) || value < 1) {
    console.error(`bench: ${name} must be a whole number >= 1, got "${raw}"`)
    process.exit(2)
  }
  return value
}

// ---------------------------------------------------------------------------------------------
// Cleanup and the overall time limit

/** @type {Array<() => Promise<void>>} run in reverse order, once */
const cleanups = []
let cleaningUp = null

function cleanUp() {
  cleaningUp ??= (async () => {
    for (const fn of cleanups.reverse()) {
      try {
        await withTimeout(fn(), 20_000, 'cleanup step')
      } catch (err) {
        console.error(`bench: cleanup: ${err instanceof Error ? err.message : String(err)}`)
      }
    }
    killAllChildren()
  })()
  return cleaningUp
}

/**
 * @template T
 * @param {Promise<T>} promise
 * @param {number} ms
 * @param {string} what
 * @returns {Promise<T>}
 */
function withTimeout(promise, ms, what) {
  let timer
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms)
    }),
  ])
}

async function abort(code, message) {
  console.error(`\nbench: ${message}`)
  const force = setTimeout(() => process.exit(code), 30_000)
  force.unref()
  await cleanUp()
  process.exit(code)
}

for (const signal of /** @type {const} */ (['SIGINT', 'SIGTERM'])) {
  process.on(signal, () => abort(130, `${signal} received; stopping servers and cleaning up`))
}

// Six scenarios, each a warm-up plus a measured run, plus start-up and set-up time for each server.
const limitSeconds = 6 * (warmupSeconds + measureSeconds + 30) + 120
setTimeout(
  () => abort(2, `the run took longer than its limit of ${limitSeconds} s; aborted`),
  limitSeconds * 1000,
).unref()

// ---------------------------------------------------------------------------------------------
// Request shapes: every request is valid, with its own version.

const dummyKey = `shl_${'0'.repeat(40)}`

/** @param {string} key @returns {import('./lib/load.mjs').RequestShape} */
function deployShape(key) {
  let n = 0
  return {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key },
    next: () => ({
      path: '/deploy',
      body: JSON.stringify({
        service: 'bench-api',
        environment: 'Production',
        version: `1.0.${++n}`,
        status: 'Deployed',
      }),
    }),
  }
}

/** @param {string} key @returns {import('./lib/load.mjs').RequestShape} */
function putShape(key) {
  let n = 0
  return {
    method: 'GET',
    headers: { 'X-API-Key': key },
    next: () => ({ path: `/put?app=bench-web&env=Production&version=2.0.${++n}&status=Deployed` }),
  }
}

// ---------------------------------------------------------------------------------------------
// Scenarios

/**
 * @typedef {object} Row
 * @property {string} scenario
 * @property {string} target 'bare' | 'sqlite' | 'postgres'
 * @property {string} request e.g. 'POST /deploy'
 * @property {import('./lib/load.mjs').LoadStats | null} warmup
 * @property {import('./lib/load.mjs').LoadStats | null} measured
 * @property {number | null} ratio 2xx/s relative to the baseline for the same request form
 * @property {number | null} acked 2xx answers, warm-up and measured run together
 * @property {number | null} stored events of that form in the database after the run
 * @property {string[]} problems
 */

/** @type {Row[]} */
const rows = []
/** @type {Record<string, ReturnType<typeof summariseLog> & { logFile: string }>} */
const serverLogs = {}
const runDir = mkdtempSync(join(tmpdir(), 'shiplog-bench-'))
if (process.env.BENCH_KEEP_TMP === '1') console.error(`bench: keeping ${runDir} (server logs, SQLite file)`)
else cleanups.push(async () => rmSync(runDir, { recursive: true, force: true }))

/**
 * Warm-up then measured run of one request shape.
 * @param {string} url @param {import('./lib/load.mjs').RequestShape} shape @param {string} title
 */
async function warmAndMeasure(url, shape, title) {
  process.stderr.write(`  ${title}: warm-up ${warmupSeconds} s`)
  const warmup = await runLoad({ url, shape, seconds: warmupSeconds, connections, title: `${title} warm-up` })
  process.stderr.write(`, measuring ${measureSeconds} s`)
  const measured = await runLoad({ url, shape, seconds: measureSeconds, connections, title })
  process.stderr.write(` -> ${num(measured.okPerSecond)} 2xx/s\n`)
  return { warmup, measured }
}

/** @param {import('./lib/load.mjs').LoadStats} stats @param {string} phase */
function loadProblems(stats, phase) {
  const problems = []
  if (stats.ok === 0) problems.push(`${phase}: no 2xx answer at all`)
  if (stats.non2xx > 0) {
    const codes = Object.entries(stats.statusCodes)
      .filter(([code]) => !code.startsWith('2'))
      .map(([code, count]) => `${count}x ${code}`)
      .join(', ')
    problems.push(`${phase}: ${stats.non2xx} non-2xx answers (${codes})`)
  }
  if (stats.errors > 0) problems.push(`${phase}: ${stats.errors} socket errors (${stats.timeouts} timeouts)`)
  return problems
}

async function benchBaseline() {
  const logFile = join(runDir, 'bare-server.log')
  const server = await startServer({
    name: 'bare Fastify server',
    args: [bareServer],
    env: process.env,
    cwd: root,
    logFile,
    readyPath: '/healthz',
  })
  cleanups.push(server.stop)
  try {
    for (const [request, shape] of /** @type {const} */ ([
      ['POST /deploy', deployShape(dummyKey)],
      ['GET /put', putShape(dummyKey)],
    ])) {
      const { warmup, measured } = await warmAndMeasure(server.url, shape, `baseline ${request}`)
      rows.push({
        scenario: `baseline ${request}`,
        target: 'bare',
        request,
        warmup,
        measured,
        ratio: 1,
        acked: null,
        stored: null,
        problems: [...loadProblems(warmup, 'warm-up'), ...loadProblems(measured, 'measured')],
      })
    }
  } finally {
    await server.stop()
    serverLogs.bare = { ...summariseLog(logFile), logFile }
  }
}

/**
 * @typedef {object} Store
 * @property {'sqlite' | 'postgres'} dialect
 * @property {string} databaseUrl
 * @property {(source: string) => Promise<number>} countEvents
 */

/** @param {Store} store */
async function benchShiplog(store) {
  const env = {
    ...process.env,
    DATABASE_URL: store.databaseUrl,
    SHIPLOG_SECRET: randomBytes(32).toString('hex'),
    SHIPLOG_RATE_LIMIT: '10000000',
    LOG_LEVEL: serverLogLevel,
  }
  // The bench measures one process with its in-memory rate limiter.
  delete env.REDIS_URL
  delete env.PORT
  await runNode(
    [shiplogBin, 'users', 'create', '--account', 'Bench', '--email', 'b@x.io', '--password-stdin'],
    {
      env,
      cwd: root,
      input: 'pw12345678\n',
    },
  )
  const key = (
    await runNode([shiplogBin, 'keys', 'create', '--account', 'Bench', '--name', 'bench'], { env, cwd: root })
  ).trim()
  if (!/^shl_[0-9A-Za-z]{32,}$/.test(key))
    throw new Error(`keys create printed something that is not a key: "${key}"`)

  const logFile = join(runDir, `shiplog-${store.dialect}.log`)
  const server = await startServer({
    name: `shiplog serve (${store.dialect})`,
    args: [shiplogBin, 'serve'],
    env,
    cwd: root,
    logFile,
    readyPath: '/readyz',
  })
  cleanups.push(server.stop)
  try {
    for (const [request, shape, source] of /** @type {const} */ ([
      ['POST /deploy', deployShape(key), 'deploy'],
      ['GET /put', putShape(key), 'put-get'],
    ])) {
      const scenario = `${store.dialect} ${request}`
      const { warmup, measured } = await warmAndMeasure(server.url, shape, scenario)
      const acked = warmup.ok + measured.ok
      const stored = await withTimeout(store.countEvents(source), 30_000, 'counting events')
      const problems = [...loadProblems(warmup, 'warm-up'), ...loadProblems(measured, 'measured')]
      if (stored < acked) problems.push(`only ${stored} events stored for ${acked} acknowledged requests`)
      const baseline = rows.find((r) => r.target === 'bare' && r.request === request)
      rows.push({
        scenario,
        target: store.dialect,
        request,
        warmup,
        measured,
        ratio: baseline?.measured?.okPerSecond ? measured.okPerSecond / baseline.measured.okPerSecond : null,
        acked,
        stored,
        problems,
      })
    }
  } finally {
    await server.stop()
    serverLogs[store.dialect] = { ...summariseLog(logFile), logFile }
  }
}

/** @returns {Store} */
function sqliteStore() {
  const file = join(runDir, 'sqlite', 'shiplog.db')
  return {
    dialect: 'sqlite',
    databaseUrl: `sqlite:${file}`,
    countEvents: async (source) => {
      const db = new SqliteDatabase(file, { readonly: true, fileMustExist: true })
      try {
        const row = /** @type {{ n: number }} */ (
          db.prepare('SELECT count(*) AS n FROM events WHERE source = ?').get(source)
        )
        return row.n
      } finally {
        db.close()
      }
    },
  }
}

/** Creates a fresh database on the PostgreSQL server (dropped at cleanup). @returns {Promise<Store>} */
async function postgresStore() {
  const name = `shiplog_bench_${randomBytes(6).toString('hex')}`
  const admin = async (/** @type {string} */ sql) => {
    const client = new pg.Client({ connectionString: pgServerUrl, connectionTimeoutMillis: 5000 })
    await client.connect()
    try {
      await client.query(sql)
    } finally {
      await client.end()
    }
  }
  await admin(`CREATE DATABASE "${name}"`)
  cleanups.push(() => admin(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`))
  const url = new URL(pgServerUrl)
  url.pathname = `/${name}`
  const databaseUrl = url.toString()
  return {
    dialect: 'postgres',
    databaseUrl,
    countEvents: async (source) => {
      const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 5000 })
      await client.connect()
      try {
        const res = await client.query('SELECT count(*)::int AS n FROM events WHERE source = $1', [source])
        return Number(res.rows[0]?.n ?? 0)
      } finally {
        await client.end()
      }
    },
  }
}

/** Records a scenario group that could not run at all. @param {string} target @param {unknown} err */
function failedGroup(target, err) {
  const message = err instanceof Error ? err.message : String(err)
  console.error(`  ${target} failed: ${message}`)
  for (const request of ['POST /deploy', 'GET /put']) {
    if (rows.some((r) => r.target === target && r.request === request)) continue
    rows.push({
      scenario: `${target === 'bare' ? 'baseline' : target} ${request}`,
      target,
      request,
      warmup: null,
      measured: null,
      ratio: null,
      acked: null,
      stored: null,
      problems: [`did not run: ${message.split('\n')[0]}`],
    })
  }
}

// ---------------------------------------------------------------------------------------------
// Main

function gitDescribe() {
  try {
    const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], {
      cwd: root,
      encoding: 'utf8',
    }).trim()
    const dirty = execFileSync('git', ['status', '--porcelain', '--', 'src'], {
      cwd: root,
      encoding: 'utf8',
    }).trim()
    return dirty ? `${commit} (src/ modified)` : commit
  } catch {
    return 'unknown'
  }
}

const started = Date.now()
const machine = `${cpus().length} x ${cpus()[0]?.model?.trim() ?? 'cpu'}`
console.error(
  `shiplog bench${quick ? ' (quick)' : ''}: ${connections} connections, warm-up ${warmupSeconds} s, ` +
    `measured ${measureSeconds} s; node ${process.version}; ${machine}`,
)

try {
  try {
    await benchBaseline()
  } catch (err) {
    failedGroup('bare', err)
  }
  try {
    await benchShiplog(sqliteStore())
  } catch (err) {
    failedGroup('sqlite', err)
  }
  if (skipPg) console.error('  postgres: skipped (BENCH_SKIP_PG=1)')
  else {
    try {
      await benchShiplog(await postgresStore())
    } catch (err) {
      failedGroup('postgres', err)
    }
  }
} finally {
  await cleanUp()
}

// ---------------------------------------------------------------------------------------------
// Report

const header = [
  'scenario',
  '2xx/s',
  'p50 ms',
  'p99 ms',
  '2xx',
  'non-2xx',
  'errors',
  'vs bare',
  'stored/acked',
]
const tableRows = rows.map((r) => {
  const m = r.measured
  return [
    r.scenario,
    num(m?.okPerSecond),
    num(m?.p50),
    num(m?.p99),
    num(m?.ok),
    num(m?.non2xx),
    num(m?.errors),
    r.ratio === null ? '-' : `${num(r.ratio, 2)}x`,
    r.stored === null ? '-' : `${r.stored}/${r.acked} ${r.stored >= (r.acked ?? 0) ? 'ok' : 'LOST'}`,
  ]
})
const table = renderTable(header, tableRows)
const problems = rows.flatMap((r) => r.problems.map((p) => `${r.scenario}: ${p}`))

console.log('')
console.log(
  `Shiplog ingest benchmark${quick ? ' (BENCH_QUICK: smoke run, numbers not meaningful)' : ''} - ` +
    `${connections} connections, no pipelining, ${warmupSeconds} s warm-up + ${measureSeconds} s measured; ` +
    `server LOG_LEVEL=${serverLogLevel}`,
)
console.log(`node ${process.version}, ${machine} (autocannon shares the machine with the servers)`)
console.log('')
console.log(table)
console.log('')
console.log(
  '2xx/s and latencies are from the measured run (latency of 2xx answers only); "stored/acked" compares the ' +
    'events of that form in the database with the 2xx answers of warm-up plus measured run.',
)
for (const [name, log] of Object.entries(serverLogs)) {
  if (log.warnings + log.errors === 0) continue
  console.log(`server log (${name}): ${log.errors} errors, ${log.warnings} warnings`)
  for (const sample of log.samples) console.log(`  ${sample}`)
}
if (problems.length > 0) {
  console.log('checks FAILED:')
  for (const p of problems) console.log(`  - ${p}`)
} else {
  console.log('checks: ok (every request answered 2xx, no socket errors, every acknowledged event stored)')
}

mkdirSync(resultsDir, { recursive: true })
const jsonFile = join(resultsDir, 'latest.json')
writeFileSync(
  jsonFile,
  `${JSON.stringify(
    {
      generatedAt: new Date().toISOString(),
      elapsedSeconds: Math.round((Date.now() - started) / 1000),
      commit: gitDescribe(),
      quick,
      node: process.version,
      platform: `${process.platform} ${process.arch}`,
      machine,
      connections,
      pipelining: 1,
      warmupSeconds,
      measureSeconds,
      serverLogLevel,
      columns: header,
      table: tableRows,
      rows,
      serverLogs: Object.fromEntries(
        Object.entries(serverLogs).map(([name, { warnings, errors, samples }]) => [
          name,
          { warnings, errors, samples },
        ]),
      ),
      problems,
    },
    null,
    2,
  )}\n`,
)
console.log(`results written to ${jsonFile}`)
process.exit(problems.length > 0 ? 1 : 0)
