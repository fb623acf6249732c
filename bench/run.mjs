// Shiplog benchmark (`npm run bench`, which builds first).
//
// Measures, in one run, on this machine, in up to three parts:
//
// ingest - a baseline: a bare Fastify 5 server (bench/bare-server.mjs) that parses the same request and
//   answers 201 with a small JSON body; then durable ingest through POST /deploy and GET /put with a
//   real API key, on SQLite (a file in a temporary directory) and on PostgreSQL (a fresh database,
//   dropped at the end). Load comes from autocannon (50 connections, no pipelining): a warm-up, then
//   the measured run. Every request carries its own version; after each ingest run the database is
//   read back: every acknowledged event (its version taken from the 2xx answer) stored exactly once,
//   no version twice, and nothing else but requests cut off when a run stopped (acknowledged means
//   stored, and stored means sent once). Then, on the same server, POST /deploy without webhooks,
//   twice with three webhooks (json, slack, grafana) aimed at a local receiver that answers each
//   delivery only after BENCH_WEBHOOK_DELAY_MS, and once more with them deleted: the mean rate and
//   server CPU per answer with them are compared with those without (issue 12: within 5 %). On
//   PostgreSQL, POST /deploy four more times, with the tamper-evidence chain held off, running,
//   running, held off (issue 14: throughput does not drop), and four more with the derivation of
//   deployments held off, running, running, held off (issue 11: the ingest ratio does not drop).
// export - for each size in BENCH_EXPORT_ROWS and each database: a fresh SQLite file / PostgreSQL
//   database seeded directly with that many events of one account (bench/lib/seed.mjs: 20 services,
//   5 environments, 3 statuses, versions, some url/commit/description, received_at increasing), then
//   for CSV and for JSON a fresh `shiplog serve`, a login through the form, and one full, unfiltered
//   GET /logs/export.csv|json read to the end: records and bytes counted as they arrive (the count must
//   equal the seeded events), rows/s, and the server's RSS from /proc/<pid>/status: idle before the
//   download, peak of VmRSS sampled every 50 ms during it, growth = peak - idle, and VmHWM at the end
//   (reset through /proc/<pid>/clear_refs just before the download).
// export-compressed - the same for the CSV alone, downloaded as it is, then with Accept-Encoding: gzip,
//   then br, each from a fresh server on the same dataset (default size 1,000,000): the client inflates
//   as the bytes arrive and counts the records; MB are the bytes on the wire.
// insights - BENCH_INSIGHTS_ROWS events (default 1,000,000) of 500 services promoted through 6
//   environments (bench/lib/insights.mjs) seeded into a fresh database; `derive-child.mjs` derives
//   their deployments in a process of its own and reports its CPU per event (no HTTP: the budget is
//   5 µs); then the board now and at ?at= a year back, a service page and /insights/ over 30 and 90
//   days, timed like the /logs/ pages (target p95 <= 50 ms each).
// pages - on the BENCH_PAGES_ROWS dataset (the export one of that size when there is one): GET /logs/
//   first page, a page 90% back (?before=), and each filter alone (service, environment, status,
//   version substring common and rare, from/to narrow and wide); 2 warm-up requests, then
//   BENCH_PAGE_REQUESTS measured ones one after the other. The time is client-observed, request sent
//   to last byte, over one kept-alive connection on 127.0.0.1 (so it is the server's time plus
//   loopback and HTTP parsing). Each page must show the number of rows the seed predicts.
// Every server is its own child process on 127.0.0.1 on a free port; children are killed, temporary
// files and databases removed, on every exit path (including SIGINT/SIGTERM and the watchdog).
//
// Environment:
//   BENCH_ONLY               comma-separated parts to run: ingest, export, export-compressed, pages,
//                            insights, startup, install, copy (default: all but copy and
//                            export-compressed; the quick run leaves install out)
//   BENCH_COPY_ROWS          events seeded in SQLite for the copy part (default 1000000; quick 20000)
//   BENCH_QUICK=1            CI smoke run: ingest 1 s warm-up + 2 s measured; exports of 20,000 and
//                            40,000 events; pages on 20,000 events with 10 requests each
//   BENCH_WARMUP, BENCH_DURATION   ingest seconds (defaults 3 and 10)
//   BENCH_CONNECTIONS        ingest connections, default 50
//   BENCH_EXPORT_ROWS        comma-separated dataset sizes for exports (default 1000000,3000000)
//   BENCH_PAGES_ROWS         dataset size for the page timings (default 1000000)
//   BENCH_INSIGHTS_ROWS      events of the insights dataset (default 1000000; quick 20000)
//   BENCH_DERIVE_ONLY=1      in the insights part, stop after deriving (no server, no pages): a quick
//                            way to measure derivation alone, e.g. with BENCH_INSIGHTS_ROWS=200000
//   BENCH_DERIVE_STEADY      events derived again after the rebuild as under ingest, in runs of
//                            BENCH_DERIVE_RUN (default 300), their CPU reported apart (default 50000; 0: off)
//   BENCH_WEBHOOK_DELAY_MS   how long the webhook scenario's receiver waits before answering (default 2000)
//   BENCH_PAGE_REQUESTS      measured requests per page case (default 50); a case stops early once
//                            it has used BENCH_PAGE_SECONDS (default 30; quick 10) and has 5 requests
//   BENCH_PG_URL             PostgreSQL server to create the bench databases on
//                            (default postgres://postgres@127.0.0.1:5432/test)
//   BENCH_SKIP_PG=1          leave PostgreSQL out
//   BENCH_SKIP_SQLITE=1      leave SQLite out (all parts)
//   BENCH_LOG_LEVEL          Shiplog's LOG_LEVEL during the run (default warn: per-request logging off)
//   BENCH_INSIGHTS_KEEP      a directory: the insights part seeds and derives its datasets once, keeps them
//                            there (SQLite) and in a PostgreSQL database named after it, and reuses them
//                            on later runs of the same size (seeding and derivation are then skipped)
//   BENCH_INSIGHTS_SETTLE_SECONDS  how long the insights part waits at most, before timing pages, for the
//                            server to finish chaining and indexing the seeded events (default 900; quick 30)
//   BENCH_KEEP_TMP=1         keep the temporary directory (server logs; the read parts' SQLite files
//                            are still removed, they can be gigabytes) for a post-mortem
//
// Prints one report (a table per part) and writes it as JSON to bench/results/latest.json. There are no
// performance thresholds; the exit code is 1 when a check failed (a server did not start, a non-2xx
// answer or a socket error under load, fewer stored events than acknowledgements, an export whose
// record count differs from the database, a page that does not show the expected rows), 2 when the
// run overran its time limit (the watchdog) or the environment is invalid.
import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import SqliteDatabase from 'better-sqlite3'
import pg from 'pg'
import { chainCpu, chainLagAfterRun, holdChain, holdDerivation } from './lib/chain.mjs'
import { killAllChildren, runNode, startServer } from './lib/children.mjs'
import { benchCopy } from './lib/copy.mjs'
import { benchInsights, DERIVE_TARGET_US, PAGE_TARGET_MS } from './lib/insights.mjs'
import { runLoad } from './lib/load.mjs'
import { cpuSeconds } from './lib/proc.mjs'
import { benchReads, countLabel, exportLimitSeconds, seedLimitSeconds } from './lib/reads.mjs'
import { num, renderTable, summariseLog } from './lib/report.mjs'
import { benchInstall, benchStartup } from './lib/startup.mjs'
import { slowReceiver } from './lib/webhooks.mjs'

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
const skipSqlite = process.env.BENCH_SKIP_SQLITE === '1' || process.env.BENCH_SKIP_SQLITE === 'true'
const serverLogLevel = process.env.BENCH_LOG_LEVEL ?? 'warn'
const PARTS = /** @type {const} */ ([
  'ingest',
  'export',
  'export-compressed',
  'pages',
  'insights',
  'startup',
  'install',
  'copy',
])
// The install part compiles better-sqlite3 from source (minutes): left out of the quick run. The copy
// part (seed N events in SQLite, `shiplog copy` to PostgreSQL) and the compressed exports only run
// when BENCH_ONLY names them.
const DEFAULT_PARTS = (quick ? PARTS.filter((p) => p !== 'install') : PARTS).filter(
  (p) => p !== 'copy' && p !== 'export-compressed',
)
const parts = new Set(
  (process.env.BENCH_ONLY ?? DEFAULT_PARTS.join(','))
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean),
)
for (const part of parts) {
  if (!(/** @type {readonly string[]} */ (PARTS).includes(part))) {
    console.error(`bench: BENCH_ONLY takes a comma-separated list of ${PARTS.join(', ')}; got "${part}"`)
    process.exit(2)
  }
}
const exportSizes = parts.has('export')
  ? sizeList('BENCH_EXPORT_ROWS', quick ? [20_000, 40_000] : [1_000_000, 3_000_000])
  : parts.has('export-compressed')
    ? sizeList('BENCH_EXPORT_ROWS', quick ? [20_000] : [1_000_000])
    : []
/**
 * The downloads per export dataset: CSV and JSON as they are (export); the CSV as it is, gzip and
 * Brotli, in the same run on the same data (export-compressed).
 * @type {Array<{ format: 'csv' | 'json', encoding: 'identity' | 'gzip' | 'br' }>}
 */
const exportVariants = []
if (parts.has('export'))
  exportVariants.push({ format: 'csv', encoding: 'identity' }, { format: 'json', encoding: 'identity' })
if (parts.has('export-compressed')) {
  if (!parts.has('export')) exportVariants.push({ format: 'csv', encoding: 'identity' })
  exportVariants.push({ format: 'csv', encoding: 'gzip' }, { format: 'csv', encoding: 'br' })
}
const exportPart = parts.has('export') || parts.has('export-compressed')
const pagesSize = parts.has('pages') ? positive('BENCH_PAGES_ROWS', quick ? 20_000 : 1_000_000) : null
const pageRequests = positive('BENCH_PAGE_REQUESTS', quick ? 10 : 50)
const insightsSize = parts.has('insights')
  ? positive('BENCH_INSIGHTS_ROWS', quick ? 20_000 : 1_000_000)
  : null
const insightsSettleSeconds = positive('BENCH_INSIGHTS_SETTLE_SECONDS', quick ? 30 : 900)
const deriveOnly = process.env.BENCH_DERIVE_ONLY === '1' || process.env.BENCH_DERIVE_ONLY === 'true'
const deriveSteady =
  process.env.BENCH_DERIVE_STEADY === '0'
    ? 0
    : Math.min(positive('BENCH_DERIVE_STEADY', quick ? 5_000 : 50_000), Math.floor((insightsSize ?? 0) / 2))
const deriveRun = positive('BENCH_DERIVE_RUN', 300)
const startupRuns = positive('BENCH_STARTUP_RUNS', quick ? 3 : 11)
const pageCaseSeconds = positive('BENCH_PAGE_SECONDS', quick ? 10 : 30)
const webhookDelayMs = positive('BENCH_WEBHOOK_DELAY_MS', 2000)
/** @type {Array<'sqlite' | 'postgres'>} */
const readDialects = [
  ...(skipSqlite ? [] : /** @type {const} */ (['sqlite'])),
  ...(skipPg ? [] : /** @type {const} */ (['postgres'])),
]

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

/** @param {string} name @param {number[]} fallback */
function sizeList(name, fallback) {
  const raw = process.env[name]
  if (raw === undefined || raw.trim() === '') return fallback
  const values = raw.split(',').map((v) => Number(v.trim().replaceAll('_', '')))
  if (values.some((v) => !Number.isInteger(v) || v < 1)) {
    console.error(`bench: ${name} must be a comma-separated list of whole numbers >= 1, got "${raw}"`)
    process.exit(2)
  }
  return [...new Set(values)].sort((a, b) => a - b)
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

// The watchdog: ingest is eight scenarios, each a warm-up plus a measured run, plus start-up and set-up
// time for each server; each read dataset is bounded by its set-up, the seed's and the downloads'
// own limits (bench/lib/reads.mjs) and the page cases' time budgets.
function limitFor() {
  let seconds = 120
  // Two bare runs, six on SQLite and ten on PostgreSQL (the chain's catch-up after each included).
  if (parts.has('ingest')) seconds += 18 * (warmupSeconds + measureSeconds + 40)
  if (parts.has('startup')) seconds += 60 + 2 * startupRuns * 10
  if (parts.has('install')) seconds += 900
  // Seeding and copying, at a pessimistic 10,000 events a second each.
  if (parts.has('copy'))
    seconds += 60 + (2 * positive('BENCH_COPY_ROWS', quick ? 20_000 : 1_000_000)) / 10_000
  // Set-up, seeding, deriving twice (about 30 µs of wall time an event at worst; keeping up at most
  // 200 µs an event), the server's background catch-up and nine page cases.
  if (insightsSize !== null)
    seconds +=
      readDialects.length *
      (90 +
        seedLimitSeconds(insightsSize) +
        (2 * insightsSize) / 30_000 +
        deriveSteady / 5_000 +
        (deriveOnly ? 0 : insightsSettleSeconds + 9 * (pageCaseSeconds + 35)))
  const sizes = new Set([...exportSizes, ...(pagesSize === null ? [] : [pagesSize])])
  for (const n of sizes) {
    let perDialect = 60 + seedLimitSeconds(n)
    if (exportSizes.includes(n)) perDialect += exportVariants.length * (20 + exportLimitSeconds(n))
    if (pagesSize === n) perDialect += 20 + 9 * (pageCaseSeconds + 35)
    seconds += readDialects.length * perDialect
  }
  return seconds
}
const limitSeconds = limitFor()
setTimeout(
  () => abort(2, `the run took longer than its limit of ${limitSeconds} s; aborted`),
  limitSeconds * 1000,
).unref()

// ---------------------------------------------------------------------------------------------
// Request shapes: every request is valid, with its own version.

const dummyKey = `shl_${'0'.repeat(40)}`

/**
 * A request shape whose requests each carry their own version (`prefix` + a counter), remembering
 * which versions were acknowledged (from the 2xx answers' bodies) and how many were sent.
 * @typedef {import('./lib/load.mjs').RequestShape & { acked: Set<string>, sent: () => number }} CountedShape
 */

/**
 * @param {Omit<import('./lib/load.mjs').RequestShape, 'next' | 'onAck'>} base
 * @param {(version: string) => { path: string, body?: string }} build
 * @param {string} prefix
 * @returns {CountedShape}
 */
function countedShape(base, build, prefix) {
  let n = 0
  /** @type {Set<string>} */
  const acked = new Set()
  return {
    ...base,
    next: () => build(`${prefix}${++n}`),
    // The stored event comes back as JSON; its version says which request this answers. indexOf
    // rather than JSON.parse: the client shares the machine with the server it measures.
    onAck: (body) => {
      const at = body.indexOf('"version":"')
      if (at < 0) return
      const start = at + 11
      acked.add(body.slice(start, body.indexOf('"', start)))
    },
    acked,
    sent: () => n,
  }
}

/** Each scenario's versions start with its own prefix, so one database can hold several. */
const VERSION_PREFIXES = [
  '1.0.',
  '2.0.',
  '3.0.',
  '4.0.',
  '5.0.',
  '6.0.',
  '7.0.',
  '8.0.',
  '9.0.',
  '9.1.',
  '9.2.',
  '9.3.',
  '9.4.',
  '9.5.',
]

/** @param {string} key @param {string} [prefix] versions are the prefix and a counter */
function deployShape(key, prefix = '1.0.') {
  return countedShape(
    { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': key } },
    (version) => ({
      path: '/deploy',
      body: JSON.stringify({ service: 'bench-api', environment: 'Production', version, status: 'Deployed' }),
    }),
    prefix,
  )
}

/** @param {string} key */
function putShape(key) {
  return countedShape(
    { method: 'GET', headers: { 'X-API-Key': key } },
    (version) => ({ path: `/put?app=bench-web&env=Production&version=${version}&status=Deployed` }),
    '2.0.',
  )
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
 * @property {number | null} cpuUs the Shiplog server process's CPU (user+system) per 2xx answer in
 *   the measured run, µs (the database server's not counted)
 * @property {number | null} acked events acknowledged (2xx), warm-up and measured run together
 * @property {number | null} stored of those, how many the database holds (exactly once each)
 * @property {number | null} unanswered events stored whose request was still in flight when a run
 *   stopped (autocannon drops those answers), at most one per connection and run
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
 * Warm-up then measured run of one request shape; with the server's pid, also its CPU per answer.
 * @param {string} url @param {import('./lib/load.mjs').RequestShape} shape @param {string} title
 * @param {number} [pid]
 */
async function warmAndMeasure(url, shape, title, pid) {
  process.stderr.write(`  ${title}: warm-up ${warmupSeconds} s`)
  const warmup = await runLoad({ url, shape, seconds: warmupSeconds, connections, title: `${title} warm-up` })
  process.stderr.write(`, measuring ${measureSeconds} s`)
  const cpuBefore = pid === undefined ? null : cpuSeconds(pid)
  const measured = await runLoad({ url, shape, seconds: measureSeconds, connections, title })
  const cpuAfter = pid === undefined ? null : cpuSeconds(pid)
  const cpuUs =
    cpuBefore !== null && cpuAfter !== null && measured.ok > 0
      ? ((cpuAfter - cpuBefore) * 1e6) / measured.ok
      : null
  process.stderr.write(
    ` -> ${num(measured.okPerSecond)} 2xx/s${cpuUs === null ? '' : `, ${num(cpuUs)} µs server CPU each`}\n`,
  )
  return { warmup, measured, cpuUs }
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
        cpuUs: null,
        acked: null,
        stored: null,
        unanswered: null,
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
 * @property {(source: string) => Promise<Map<string, number>>} storedVersions how many rows of that
 *   form the database holds per version
 * @property {() => Promise<number>} underived events the server has not derived into deployments yet
 */

/** Events not derived yet, and whether gaps wait: the same question on both databases. */
const UNDERIVED_SQL =
  'SELECT (SELECT coalesce(max(id), 0) FROM events) - (SELECT through FROM deployments_progress WHERE id = 1) ' +
  '+ (SELECT count(*) FROM deployment_gaps) AS n'

/**
 * Waits (bounded) until the server has derived every event: each scenario then starts without the
 * previous one's backlog competing with it.
 * @param {Store} store
 */
async function settleDerivation(store) {
  const deadline = Date.now() + 120_000
  for (;;) {
    const behind = await store.underived()
    if (behind <= 0) return
    if (Date.now() > deadline) throw new Error(`the server still had ${behind} events to derive after 120 s`)
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
}

/**
 * Stored must equal acknowledged: every acknowledged event in the database exactly once, no version
 * twice, and nothing else but the requests cut off when a run stopped (sent, perhaps stored, their
 * answers dropped by autocannon: at most one per connection in each of the two runs).
 * Versions with another scenario's prefix belong to that scenario and are left out.
 * @param {Store} store @param {string} source @param {CountedShape} shape @param {number} answered
 * @param {string} prefix
 */
async function checkStored(store, source, shape, answered, prefix) {
  /** @type {string[]} */
  const problems = []
  const counts = await store.storedVersions(source)
  const acked = shape.acked.size
  if (acked !== answered) problems.push(`${answered} 2xx answers name ${acked} distinct events`)
  let lost = 0
  for (const version of shape.acked) if (!counts.has(version)) lost++
  let duplicates = 0
  let unanswered = 0
  let unknown = 0
  for (const [version, count] of counts) {
    if (!version.startsWith(prefix) && VERSION_PREFIXES.some((p) => version.startsWith(p))) continue
    if (count > 1) duplicates += count - 1
    if (shape.acked.has(version)) continue
    const k = version.startsWith(prefix) ? Number(version.slice(prefix.length)) : Number.NaN
    if (Number.isInteger(k) && k >= 1 && k <= shape.sent()) unanswered++
    else unknown++
  }
  if (lost > 0) problems.push(`${lost} of ${acked} acknowledged events are not stored`)
  if (duplicates > 0) problems.push(`${duplicates} events stored more than once`)
  if (unknown > 0) problems.push(`${unknown} stored events were never sent`)
  if (unanswered > 2 * connections)
    problems.push(`${unanswered} events stored without an answer, more than the ${2 * connections} in flight`)
  return { acked, stored: acked - lost, unanswered, problems }
}

/** @type {Array<{ scenario: string, behind: number, catchUpMs: number | null }>} */
const chainLags = []
/** @type {Array<{ dialect: string, rows: number, cpuMs: number, seconds: number, usPerRow: number }>} */
const chainCpus = []

/** @param {Store} store */
async function benchShiplog(store) {
  const env = {
    ...process.env,
    DATABASE_URL: store.databaseUrl,
    SHIPLOG_SECRET: randomBytes(32).toString('hex'),
    SHIPLOG_RATE_LIMIT: '10000000',
    LOG_LEVEL: serverLogLevel,
    // The webhook scenario's receiver listens on 127.0.0.1.
    SHIPLOG_WEBHOOK_ALLOW_PRIVATE: '1',
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
  const receiver = await slowReceiver(webhookDelayMs)
  cleanups.push(receiver.close)
  try {
    // Three webhooks (one per format) whose receiver answers only after webhookDelayMs: a slow
    // target must not slow ingest (issue 12: within 5 %).
    const createWebhooks = async () => {
      for (const [format, triggers] of /** @type {const} */ ([
        ['json', ['--status', 'Deploying', '--status', 'Deployed', '--status', 'Failed']],
        ['slack', ['--outcome', 'succeeded', '--outcome', 'failed']],
        ['grafana', ['--outcome', 'succeeded', '--outcome', 'failed', '--grafana-token', 'bench-token']],
      ])) {
        await runNode(
          [
            shiplogBin,
            ...['webhooks', 'create', '--account', 'Bench', '--url', `${receiver.url}/${format}`],
            ...['--format', format, ...triggers],
          ],
          { env, cwd: root },
        )
      }
    }
    const deleteWebhooks = async () => {
      const listed = await runNode([shiplogBin, 'webhooks', 'list', '--account', 'Bench'], { env, cwd: root })
      const ids = [...listed.matchAll(/^(\d+)\s/gm)].map((m) => m[1])
      if (ids.length !== 3) throw new Error(`expected 3 webhooks to delete, found ${ids.length}:\n${listed}`)
      for (const id of ids) {
        await runNode([shiplogBin, 'webhooks', 'delete', '--account', 'Bench', String(id)], {
          env,
          cwd: root,
        })
      }
    }
    /** @type {Array<[string, CountedShape, string, string, string, (() => Promise<void>) | null, ('chain' | 'derivation')?]>} */
    const scenarios = [
      [`${store.dialect} POST /deploy`, deployShape(key), 'deploy', 'POST /deploy', '1.0.', null],
      [`${store.dialect} GET /put`, putShape(key), 'put-get', 'GET /put', '2.0.', null],
      // The webhooks' comparison is the same form run just before them, on a database of the same
      // size (each run adds 100k+ events, and a later run is slower for that alone).
      [
        `${store.dialect} POST /deploy, just before webhooks`,
        deployShape(key, '4.0.'),
        'deploy',
        'POST /deploy',
        '4.0.',
        null,
      ],
      [
        `${store.dialect} POST /deploy, 3 slow webhooks`,
        deployShape(key, '3.0.'),
        'deploy',
        'POST /deploy',
        '3.0.',
        createWebhooks,
      ],
      // Each run is slower than the one before it for the rows it adds: the order without, with,
      // with, without lets that fall on both sides equally.
      [
        `${store.dialect} POST /deploy, 3 slow webhooks again`,
        deployShape(key, '9.0.'),
        'deploy',
        'POST /deploy',
        '9.0.',
        null,
      ],
      [
        `${store.dialect} POST /deploy, webhooks deleted`,
        deployShape(key, '9.1.'),
        'deploy',
        'POST /deploy',
        '9.1.',
        deleteWebhooks,
      ],
    ]
    // Tamper evidence (issue 14: ingest throughput does not drop): the chain waits while a burst lasts
    // (a busy event loop, or more than 500 events a second); the rows it has not chained when a run
    // ends show that. On PostgreSQL, where a second instance could chain beside the one ingesting,
    // POST /deploy is also measured with the chain running and with it held off (its head rows held
    // FOR UPDATE by the bench, which makes the chain skip its turn), in the order off, on, on, off so
    // that the slow-down of a growing table falls on both equally.
    if (store.dialect === 'postgres') {
      // Deriving deployments (issue 11: the ingest ratio does not drop) the same way: its progress
      // row, the lock every derivation run takes first, held FOR UPDATE by the bench.
      for (const [label, prefix, hold] of /** @type {const} */ ([
        ['chain held off', '5.0.', 'chain'],
        ['chain running', '6.0.', undefined],
        ['chain running again', '7.0.', undefined],
        ['chain held off again', '8.0.', 'chain'],
        ['derivation held off', '9.2.', 'derivation'],
        ['derivation running', '9.3.', undefined],
        ['derivation running again', '9.4.', undefined],
        ['derivation held off again', '9.5.', 'derivation'],
      ])) {
        scenarios.push([
          `${store.dialect} POST /deploy, ${label}`,
          deployShape(key, prefix),
          'deploy',
          'POST /deploy',
          prefix,
          null,
          hold,
        ])
      }
    }
    for (const [scenario, shape, source, request, prefix, before, hold] of scenarios) {
      if (before) await before()
      await settleDerivation(store)
      const held =
        hold === 'chain'
          ? await holdChain(store.databaseUrl)
          : hold === 'derivation'
            ? await holdDerivation(store.databaseUrl)
            : null
      let run
      try {
        run = await warmAndMeasure(server.url, shape, scenario, server.pid)
      } finally {
        await held?.release()
      }
      const { warmup, measured, cpuUs } = run
      // Tamper evidence: rows the chain is behind as the run ends, and the time to catch up.
      chainLags.push({ scenario, ...(await chainLagAfterRun(store.databaseUrl)) })
      const problems = [...loadProblems(warmup, 'warm-up'), ...loadProblems(measured, 'measured')]
      const check = await withTimeout(
        checkStored(store, source, shape, warmup.ok + measured.ok, prefix),
        60_000,
        'checking the stored events',
      )
      problems.push(...check.problems)
      const { acked, stored, unanswered } = check
      const baseline = rows.find((r) => r.target === 'bare' && r.request === request)
      rows.push({
        scenario,
        target: store.dialect,
        request,
        warmup,
        measured,
        ratio: baseline?.measured?.okPerSecond ? measured.okPerSecond / baseline.measured.okPerSecond : null,
        cpuUs,
        acked,
        stored,
        unanswered,
        problems,
      })
    }
    const hooked = rows.find((r) => r.target === store.dialect && r.scenario.endsWith('3 slow webhooks'))
    if (hooked && receiver.received() === 0)
      hooked.problems.push('the webhook receiver got no request: the webhooks were not active')
  } finally {
    await receiver.close()
    await server.stop()
    serverLogs[store.dialect] = { ...summariseLog(logFile), logFile }
  }
  // The chain's CPU per row, without HTTP: every row of this run chained again in a process of its own.
  chainCpus.push({ dialect: store.dialect, ...(await chainCpu(store.databaseUrl)) })
}

/** @returns {Store} */
function sqliteStore() {
  const file = join(runDir, 'sqlite', 'shiplog.db')
  return {
    dialect: 'sqlite',
    databaseUrl: `sqlite:${file}`,
    storedVersions: async (source) => {
      const db = new SqliteDatabase(file, { readonly: true, fileMustExist: true })
      try {
        const rows = /** @type {Array<{ version: string, n: number }>} */ (
          db
            .prepare('SELECT version, count(*) AS n FROM events WHERE source = ? GROUP BY version')
            .all(source)
        )
        return new Map(rows.map((r) => [r.version, r.n]))
      } finally {
        db.close()
      }
    },
    underived: async () => {
      const db = new SqliteDatabase(file, { readonly: true, fileMustExist: true })
      try {
        return Number(/** @type {{ n: number }} */ (db.prepare(UNDERIVED_SQL).get()).n)
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
    storedVersions: async (source) => {
      const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 5000 })
      await client.connect()
      try {
        const res = await client.query(
          'SELECT version, count(*)::int AS n FROM events WHERE source = $1 GROUP BY version',
          [source],
        )
        return new Map(res.rows.map((r) => [String(r.version), Number(r.n)]))
      } finally {
        await client.end()
      }
    },
    underived: async () => {
      const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 5000 })
      await client.connect()
      try {
        return Number((await client.query(UNDERIVED_SQL)).rows[0].n)
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
      unanswered: null,
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
  `shiplog bench${quick ? ' (quick)' : ''}: parts ${[...parts].join(', ')}; node ${process.version}; ${machine}; ` +
    `time limit ${limitSeconds} s`,
)

/** @type {Awaited<ReturnType<typeof benchReads>> | null} */
let reads = null
/** @type {Awaited<ReturnType<typeof benchInsights>> | null} */
let insights = null
/** @type {Awaited<ReturnType<typeof benchStartup>>} */
const startupRows = []
/** @type {Awaited<ReturnType<typeof benchInstall>> | null} */
let installRow = null
/** @type {Record<string, number>} wall-clock seconds of each part */
const partSeconds = {}
try {
  if (parts.has('ingest')) {
    const ingestStarted = Date.now()
    console.error(
      `ingest: ${connections} connections, warm-up ${warmupSeconds} s, measured ${measureSeconds} s`,
    )
    try {
      await benchBaseline()
    } catch (err) {
      failedGroup('bare', err)
    }
    if (skipSqlite) console.error('  sqlite: skipped (BENCH_SKIP_SQLITE=1)')
    else {
      try {
        await benchShiplog(sqliteStore())
      } catch (err) {
        failedGroup('sqlite', err)
      }
    }
    if (skipPg) console.error('  postgres: skipped (BENCH_SKIP_PG=1)')
    else {
      try {
        await benchShiplog(await postgresStore())
      } catch (err) {
        failedGroup('postgres', err)
      }
    }
    partSeconds.ingest = Math.round((Date.now() - ingestStarted) / 1000)
  }
  if (exportPart || parts.has('pages')) {
    const readsStarted = Date.now()
    console.error(
      `reads: exports at ${exportSizes.map(countLabel).join(', ') || '-'} events, pages at ` +
        `${pagesSize === null ? '-' : countLabel(pagesSize)} events; ${readDialects.join(', ') || 'no database'}`,
    )
    reads = await benchReads({
      root,
      shiplogBin,
      runDir,
      cleanups,
      withTimeout,
      dialects: readDialects,
      pgServerUrl,
      serverLogLevel,
      exportSizes,
      exportVariants,
      pagesSize,
      pageRequests,
      pageCaseSeconds,
      settleMs: quick ? 300 : 1000,
    })
    Object.assign(serverLogs, reads.serverLogs)
    partSeconds[[...parts].filter((p) => p.startsWith('export') || p === 'pages').join('+')] = Math.round(
      (Date.now() - readsStarted) / 1000,
    )
  }
  if (insightsSize !== null) {
    const insightsStarted = Date.now()
    console.error(`insights: ${countLabel(insightsSize)} events; ${readDialects.join(', ') || 'no database'}`)
    insights = await benchInsights({
      root,
      shiplogBin,
      runDir,
      cleanups,
      dialects: readDialects,
      pgServerUrl,
      serverLogLevel,
      n: insightsSize,
      keepDir: process.env.BENCH_INSIGHTS_KEEP || null,
      settleSeconds: insightsSettleSeconds,
      deriveOnly,
      steady: deriveSteady,
      runSize: deriveRun,
      requests: pageRequests,
      caseSeconds: pageCaseSeconds,
    })
    partSeconds.insights = Math.round((Date.now() - insightsStarted) / 1000)
  }
  if (parts.has('startup')) {
    const startupStarted = Date.now()
    console.error(`startup: ${startupRuns} starts of the compiled server per database`)
    const targets = []
    if (!skipSqlite)
      targets.push({ dialect: 'sqlite', databaseUrl: `sqlite:${join(runDir, 'startup', 'shiplog.db')}` })
    if (!skipPg) targets.push({ dialect: 'postgres', databaseUrl: (await postgresStore()).databaseUrl })
    startupRows.push(...(await benchStartup({ root, shiplogBin, targets, runs: startupRuns })))
    partSeconds.startup = Math.round((Date.now() - startupStarted) / 1000)
  }
  if (parts.has('install')) {
    const installStarted = Date.now()
    console.error('install: a fresh copy of the tree, npm ci (warm npm cache), npm start, first answer')
    installRow = await benchInstall({ root, runDir })
    partSeconds.install = Math.round((Date.now() - installStarted) / 1000)
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
  'srv µs/2xx',
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
    num(r.cpuUs),
    r.stored === null
      ? '-'
      : `${r.stored}/${r.acked} ${r.stored === r.acked ? 'ok' : 'LOST'}` +
        (r.unanswered ? ` (+${r.unanswered} cut off)` : ''),
  ]
})
const problems = [
  ...rows.flatMap((r) => r.problems.map((p) => `${r.scenario}: ${p}`)),
  ...(reads?.problems ?? []),
  ...(insights?.problems ?? []),
  ...startupRows.flatMap((r) => r.problems.map((p) => `${r.scenario}: ${p}`)),
  ...(installRow?.problems ?? []).map((p) => `${installRow?.scenario}: ${p}`),
]
const startupHeader = ['scenario', 'runs', 'min ms', 'median ms', 'max ms']
const startupTable = [
  ...startupRows.map((r) => [r.scenario, num(r.runs), num(r.min), num(r.median), num(r.max)]),
  ...(installRow
    ? [
        [
          installRow.scenario,
          '1',
          `npm ci ${num(installRow.ciSeconds, 1)} s`,
          `start ${num(installRow.startSeconds, 1)} s`,
          `total ${num(installRow.totalSeconds, 1)} s`,
        ],
      ]
    : []),
]

const mib = (/** @type {number | null | undefined} */ bytes) =>
  bytes === null || bytes === undefined ? '-' : num(bytes / 2 ** 20, 1)

const exportHeader = [
  'scenario',
  'rows/s',
  'MB/s',
  'seconds',
  'rows',
  'MB',
  'idle RSS MB',
  'peak RSS MB',
  'growth MB',
  'peak per quarter MB',
  'VmHWM MB',
  'srv CPU s',
  'rows/CPU-s',
  'load',
  'rows check',
]
const exportTable = (reads?.exportRows ?? []).map((r) => [
  r.scenario,
  num(r.rowsPerSecond),
  r.bytes !== null && r.seconds ? num(r.bytes / 2 ** 20 / r.seconds, 1) : '-',
  num(r.seconds, 1),
  num(r.records),
  mib(r.bytes),
  mib(r.idleRss),
  mib(r.peakRss),
  mib(r.growth),
  r.quarterPeaks ? r.quarterPeaks.map((b) => num(b / 2 ** 20)).join(' ') : '-',
  r.hwmReset ? mib(r.hwm) : `${mib(r.hwm)} (not reset)`,
  num(r.serverCpuSeconds, 1),
  r.records !== null && r.serverCpuSeconds ? num(r.records / r.serverCpuSeconds) : '-',
  num(r.load, 1),
  r.records === r.n ? `${num(r.records)}/${num(r.n)} ok` : `${num(r.records)}/${num(r.n)} WRONG`,
])

const pagesHeader = ['scenario', 'requests', 'p50 ms', 'p95 ms', 'max ms', 'load', 'rows shown']
const pagesTable = (reads?.pageRows ?? []).map((r) => [
  r.scenario,
  num(r.requests),
  num(r.p50, 1),
  num(r.p95, 1),
  num(r.max, 1),
  num(r.load, 1),
  r.rowsOk ? `${r.shown} ok` : `${r.shown ?? '-'}/${r.expected} WRONG`,
])

if (parts.has('ingest')) {
  console.log('')
  console.log(
    `Shiplog ingest benchmark${quick ? ' (BENCH_QUICK: smoke run, numbers not meaningful)' : ''} - ` +
      `${connections} connections, no pipelining, ${warmupSeconds} s warm-up + ${measureSeconds} s measured; ` +
      `server LOG_LEVEL=${serverLogLevel}`,
  )
  console.log(`node ${process.version}, ${machine} (autocannon shares the machine with the servers)`)
  console.log('')
  console.log(renderTable(header, tableRows))
  console.log('')
  console.log(
    '2xx/s and latencies are from the measured run (latency of 2xx answers only); "stored/acked": of the events ' +
      'acknowledged (2xx) in warm-up plus measured run, how many the database holds, each exactly once; "cut off" = ' +
      'events stored whose answer autocannon dropped when a run stopped (at most one per connection and run). ' +
      'A duplicate or an event never sent fails the checks. "srv µs/2xx": the Shiplog process\'s user+system ' +
      'CPU during the measured run per 2xx answer (the database server not counted).',
  )
  /** Mean rate and CPU per answer of the runs with `labels` of one database, when all ran. */
  const meanOf = (dialect, labels) => {
    const found = labels.map((l) => rows.find((r) => r.scenario === `${dialect} POST /deploy, ${l}`))
    if (!found.every((r) => r?.measured)) return null
    const mean = (pick) => found.reduce((sum, r) => sum + pick(r), 0) / found.length
    return {
      rate: mean((r) => r.measured.okPerSecond),
      cpu: found.every((r) => r.cpuUs) ? mean((r) => r.cpuUs) : null,
    }
  }
  /** "ran at X % of its rate <against> and used Y % of the server CPU per answer" of `on` against `off`. */
  const compared = (on, off, against) =>
    `ran at ${num((on.rate / off.rate) * 100, 1)} % of its rate ${against}` +
    (on.cpu && off.cpu ? ` and used ${num((on.cpu / off.cpu) * 100, 1)} % of the server CPU per answer` : '')
  for (const dialect of ['sqlite', 'postgres']) {
    const off = meanOf(dialect, ['just before webhooks', 'webhooks deleted'])
    const on = meanOf(dialect, ['3 slow webhooks', '3 slow webhooks again'])
    if (!off || !on) continue
    console.log(
      `${dialect}: with 3 webhooks whose receiver answers after ${webhookDelayMs} ms, POST /deploy ` +
        `${compared(on, off, 'without them')} (two runs each, in the order without, with, with, without; ` +
        'target: within 5 % of the rate)',
    )
  }
  for (const dialect of ['sqlite', 'postgres']) {
    const off = meanOf(dialect, ['chain held off', 'chain held off again'])
    const on = meanOf(dialect, ['chain running', 'chain running again'])
    if (!off || !on) continue
    console.log(
      `chain: ${dialect}: with the chain running, POST /deploy ${compared(on, off, 'with the chain held off')} ` +
        '(two runs each, in the order off, on, on, off)',
    )
  }
  for (const dialect of ['sqlite', 'postgres']) {
    const off = meanOf(dialect, ['derivation held off', 'derivation held off again'])
    const on = meanOf(dialect, ['derivation running', 'derivation running again'])
    if (!off || !on) continue
    console.log(
      `deployments: ${dialect}: with derivation running, POST /deploy ` +
        `${compared(on, off, 'with it held off')} (two runs each, in the order off, on, on, off)`,
    )
  }
  for (const c of chainLags) {
    console.log(
      `chain: ${c.scenario}: ${num(c.behind)} rows not chained when the measured run ended; ` +
        (c.catchUpMs === null
          ? 'NOT caught up within 60 s'
          : `caught up ${num(c.catchUpMs / 1000, 2)} s later`),
    )
  }
  for (const c of chainCpus) {
    console.log(
      `chain: ${c.dialect}: ${num(c.usPerRow, 2)} µs of CPU per row to chain (${num(c.rows)} rows in ` +
        `${num(c.seconds, 1)} s, one process, no HTTP; the database server not counted)`,
    )
  }
}
if (exportPart) {
  console.log('')
  console.log(
    `Export: full, unfiltered GET /logs/export.csv|json of one account${quick ? ' (BENCH_QUICK: tiny datasets)' : ''}` +
      ` - a fresh server per download, read to the end by a client on 127.0.0.1`,
  )
  console.log('')
  console.log(renderTable(exportHeader, exportTable))
  console.log('')
  console.log(
    'rows/s and MB/s: request sent to last byte. RSS of the server process (MB = MiB) from /proc/<pid>/status: ' +
      `idle = median VmRSS after login, ${quick ? 0.3 : 1} s settled; ` +
      'peak = highest VmRSS sampled every 50 ms during the download; ' +
      'growth = peak - idle; peak per quarter = the peak in each quarter of the download time (rising: memory ' +
      'grows with rows); VmHWM = kernel peak since a reset just before the download. srv CPU s = server ' +
      'process user+system CPU during the download (the database server not included); rows/CPU-s = rows per ' +
      'second of it, steadier than rows/s when the machine is busy. load = the ' +
      `machine's 1-minute load average when the download started (${cpus().length} CPUs; other processes ` +
      'compete with server, database and client). rows check = records ' +
      'counted in the download (CSV records minus header; JSON objects) / events in the database.',
  )
}
if (parts.has('pages')) {
  console.log('')
  console.log(
    `/logs/ page time at ${pagesSize === null ? '-' : countLabel(pagesSize)} events` +
      `${quick ? ' (BENCH_QUICK: tiny dataset)' : ''} - ${pageRequests} requests per case after 2 warm-up requests`,
  )
  console.log('')
  console.log(renderTable(pagesHeader, pagesTable))
  console.log('')
  console.log(
    'Times are client-observed (request sent to last byte of the HTML) over one kept-alive connection on ' +
      '127.0.0.1, requests one after the other: the server time plus loopback and HTTP parsing. load = 1-minute ' +
      'load average when the case started. "rows shown" ' +
      'must be exactly the rows the seeded history predicts for the filter (the newest 50 matches, or fewer when ' +
      'fewer events match; each row checked by time, service, environment, version and status).',
  )
}
const insightsHeader = [
  'scenario',
  'requests',
  'p50 ms',
  'p95 ms',
  'max ms',
  'server CPU ms/req',
  'load',
  `p95 <= ${PAGE_TARGET_MS} ms`,
]
const insightsTable = (insights?.pageRows ?? []).map((r) => [
  r.scenario,
  num(r.requests),
  num(r.p50, 1),
  num(r.p95, 1),
  num(r.max, 1),
  num(r.cpuMs, 1),
  num(r.load, 1),
  // The cold cases show what a page costs while events keep arriving; the target is the others'.
  r.p95 === null
    ? '-'
    : r.scenario.endsWith(', cold')
      ? 'no target'
      : r.p95 <= PAGE_TARGET_MS
        ? 'met'
        : 'NOT met',
])
if (insights) {
  console.log('')
  console.log(
    `Deployments: deriving them from ${countLabel(insightsSize ?? 0)} events, and the pages that read them` +
      `${quick ? ' (BENCH_QUICK: tiny dataset)' : ''}`,
  )
  console.log('')
  /** " + 9.1 µs in the database's backends", where they were measured. @param {number | null | undefined} us */
  const backend = (us) => (typeof us === 'number' ? ` + ${num(us, 2)} µs in the database's backends` : '')
  for (const d of insights.derivations) {
    console.log(
      `  ${d.target}: ${num(d.usPerEvent, 2)} µs of CPU per event to derive deployments${backend(d.backendUsPerEvent)} ` +
        `(budget ${DERIVE_TARGET_US} µs: ${d.usPerEvent <= DERIVE_TARGET_US ? 'met' : 'NOT met'}); ` +
        `${num(d.events)} events in ${num(d.seconds, 1)} s, one process, no HTTP`,
    )
    if (d.steadyEvents)
      console.log(
        `  ${d.target}, keeping up: ${num(d.steadyUsPerEvent, 2)} µs of CPU per event${backend(d.steadyBackendUsPerEvent)} ` +
          `for the last ${num(d.steadyEvents)} events derived again in ${num(d.steadyRuns)} runs of ${num(deriveRun)}, ` +
          `as the background task does under ingest`,
      )
    const f = d.floor
    if (f) {
      const floorUs = f.readUs + f.writeUs
      console.log(
        `  ${d.target}, the floor with no derivation logic: reading the events ${num(f.readUs, 2)} µs` +
          `${backend(f.readBackendUs)}, writing one deployment row per two events with all of its indexes ` +
          `${num(f.writeUs, 2)} µs${backend(f.writeBackendUs)} (primary key alone: ${num(f.writeKeyOnlyUs, 2)} µs` +
          `${backend(f.writeKeyOnlyBackendUs)}); this process alone ${num(floorUs, 2)} µs, ` +
          `derivation ${num(d.usPerEvent / floorUs, 2)}x that`,
      )
    }
  }
  console.log('')
  console.log(renderTable(insightsHeader, insightsTable))
  console.log('')
  console.log(
    'Derivation: `shiplog deployments rebuild` done in a process of its own (bench/lib/derive-child.mjs); its ' +
      "user+system CPU divided by the events (on a local PostgreSQL, its backends' CPU from /proc is shown beside it); keeping up: " +
      'the same process derives all but the last events again, then those in small runs. Pages: timed ' +
      'like the /logs/ pages above; each must answer 200 and show what the seeded history predicts.',
  )
}
if (startupTable.length > 0) {
  console.log('')
  console.log('Start-up: compiled JS, from spawning the process to the first 200 from GET /healthz')
  console.log('')
  console.log(renderTable(startupHeader, startupTable))
  console.log('')
  console.log(
    'start to listening: `node bin/shiplog.js serve` on an already migrated database (node start-up included), ' +
      'polled every 2 ms. npm ci: a copy of the tracked files, `npm ci` with the npm cache as it is on this ' +
      'machine (better-sqlite3 compiles from source), then `npm start` (TypeScript build + serve) to the first answer.',
  )
}
if (reads && reads.seeds.length > 0) {
  console.log(
    `datasets (seeded directly, not through HTTP): ${reads.seeds
      .map(
        (d) =>
          `${d.target} ${countLabel(d.n)} in ${num(d.seconds, 1)} s` +
          `${d.databaseBytes ? ` (${num(d.databaseBytes / 2 ** 20)} MB)` : ''}`,
      )
      .join('; ')}`,
  )
}
for (const [name, log] of Object.entries(serverLogs)) {
  if (log.warnings + log.errors === 0) continue
  console.log(`server log (${name}): ${log.errors} errors, ${log.warnings} warnings`)
  for (const sample of log.samples) console.log(`  ${sample}`)
}
/** @type {Awaited<ReturnType<typeof benchCopy>> | null} */
let copyResult = null
if (parts.has('copy') && !skipPg) {
  const copyStarted = Date.now()
  try {
    copyResult = await benchCopy({
      rows: positive('BENCH_COPY_ROWS', quick ? 20_000 : 1_000_000),
      pgServerUrl,
    })
    console.log(
      `copy SQLite → PostgreSQL: ${copyResult.copiedRows} rows in ${num(copyResult.seconds, 1)} s = ${copyResult.rowsPerSecond} rows/s (whole command: snapshot, rows, indexes, verification); the rows alone in ${copyResult.rowsPhaseSeconds === null ? '?' : num(copyResult.rowsPhaseSeconds, 1)} s = ${copyResult.rowsPhasePerSecond ?? '?'} rows/s; peak RSS ${copyResult.peakRssMb} MB`,
    )
  } catch (err) {
    problems.push(`copy: ${/** @type {Error} */ (err).message}`)
  }
  partSeconds.copy = Math.round((Date.now() - copyStarted) / 1000)
}
if (problems.length > 0) {
  console.log('checks FAILED:')
  for (const p of problems) console.log(`  - ${p}`)
} else {
  console.log(
    'checks: ok (' +
      [
        parts.has('ingest')
          ? 'every request answered 2xx, no socket errors, every acknowledged event stored exactly once'
          : '',
        exportPart ? 'every export had all rows' : '',
        parts.has('pages') ? 'every page answered 200 with the expected rows' : '',
        parts.has('insights')
          ? 'every board, service and insights page answered 200 with what was expected'
          : '',
        parts.has('startup') ? 'every start answered 200' : '',
        parts.has('install') ? 'the fresh install answered 200' : '',
      ]
        .filter(Boolean)
        .join('; ') +
      ')',
  )
}

mkdirSync(resultsDir, { recursive: true })
const jsonFile = join(resultsDir, 'latest.json')
writeFileSync(
  jsonFile,
  `${JSON.stringify(
    {
      generatedAt: new Date().toISOString(),
      elapsedSeconds: Math.round((Date.now() - started) / 1000),
      partSeconds,
      commit: gitDescribe(),
      quick,
      parts: [...parts],
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
      export: {
        sizes: exportSizes,
        columns: exportHeader,
        table: exportTable,
        rows: reads?.exportRows ?? [],
      },
      pages: {
        size: pagesSize,
        requestsPerCase: pageRequests,
        timing: 'client-observed, request sent to last byte, one kept-alive connection on 127.0.0.1',
        columns: pagesHeader,
        table: pagesTable,
        rows: reads?.pageRows ?? [],
      },
      datasets: reads?.seeds ?? [],
      insights: {
        size: insightsSize,
        derivations: insights?.derivations ?? [],
        columns: insightsHeader,
        table: insightsTable,
        rows: insights?.pageRows ?? [],
      },
      startup: { columns: startupHeader, table: startupTable, rows: startupRows, install: installRow },
      copy: copyResult,
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
console.log(
  `run time ${Math.round((Date.now() - started) / 1000)} s (${Object.entries(partSeconds)
    .map(([part, seconds]) => `${part} ${seconds} s`)
    .join(', ')}); results written to ${jsonFile}`,
)
process.exit(problems.length > 0 ? 1 : 0)
