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
// Each part is a module of bench/scenarios/ (its run and its report); this file reads the options
// (bench/lib/options.mjs), runs the parts in turn under a watchdog, and writes the report.
// Every server is its own child process on 127.0.0.1 on a free port; children are killed, temporary
// files and databases removed, on every exit path (including SIGINT/SIGTERM and the watchdog).
//
// Environment:
//   BENCH_ONLY               comma-separated parts to run: ingest, export, export-compressed, pages,
//                            insights, startup, install, copy (default: all but copy and
//                            export-compressed; the quick run leaves install out)
//   BENCH_COPY_ROWS          events seeded in SQLite for the copy part (default 1000000; quick 20000)
//   BENCH_QUICK=1            CI smoke run: ingest 1 s warm-up + 2 s measured; exports of 20,000
//                            events; pages on 20,000 events with 10 requests each
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
import { mkdirSync, writeFileSync } from 'node:fs'
import { cpus } from 'node:os'
import { join } from 'node:path'
import { abort, cleanUp, serverLogs } from './lib/lifecycle.mjs'
import {
  connections,
  copyRows,
  deriveOnly,
  deriveSteady,
  exportPart,
  exportSizes,
  exportVariants,
  insightsSettleSeconds,
  insightsSize,
  measureSeconds,
  pageCaseSeconds,
  pageRequests,
  pagesSize,
  parts,
  quick,
  readDialects,
  resultsDir,
  root,
  serverLogLevel,
  skipPg,
  startupRuns,
  warmupSeconds,
} from './lib/options.mjs'
import { exportLimitSeconds, seedLimitSeconds } from './lib/reads.mjs'
import { runCopy } from './scenarios/copy.mjs'
import { rows, runIngest } from './scenarios/ingest.mjs'
import { header, printIngest, tableRows } from './scenarios/ingest-report.mjs'
import { insightsHeader, insightsTable, printInsights, runInsights } from './scenarios/insights.mjs'
import {
  exportHeader,
  exportTable,
  pagesHeader,
  pagesTable,
  printDatasets,
  printReads,
  runReads,
} from './scenarios/reads.mjs'
import { printStartup, runInstall, runStartup, startupHeader, startupTable } from './scenarios/startup.mjs'

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
  if (parts.has('copy')) seconds += 60 + (2 * copyRows) / 10_000
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

/** @type {import('./scenarios/reads.mjs').Reads | null} */
let reads = null
/** @type {import('./scenarios/insights.mjs').Insights | null} */
let insights = null
/** @type {Awaited<ReturnType<typeof runStartup>>} */
const startupRows = []
/** @type {Awaited<ReturnType<typeof runInstall>> | null} */
let installRow = null
/** @type {Record<string, number>} wall-clock seconds of each part */
const partSeconds = {}
/** Runs one part and records its wall-clock seconds. @template T @param {string} name @param {() => Promise<T>} fn */
async function timed(name, fn) {
  const partStarted = Date.now()
  try {
    return await fn()
  } finally {
    partSeconds[name] = Math.round((Date.now() - partStarted) / 1000)
  }
}
try {
  if (parts.has('ingest')) await timed('ingest', runIngest)
  if (exportPart || parts.has('pages')) {
    const name = [...parts].filter((p) => p.startsWith('export') || p === 'pages').join('+')
    reads = await timed(name, runReads)
  }
  if (insightsSize !== null) insights = await timed('insights', runInsights)
  if (parts.has('startup')) startupRows.push(...(await timed('startup', runStartup)))
  if (parts.has('install')) installRow = await timed('install', runInstall)
} finally {
  await cleanUp()
}

// ---------------------------------------------------------------------------------------------
// Report

const ingestTable = tableRows()
const startup = startupTable(startupRows, installRow)
const problems = [
  ...rows.flatMap((r) => r.problems.map((p) => `${r.scenario}: ${p}`)),
  ...(reads?.problems ?? []),
  ...(insights?.problems ?? []),
  ...startupRows.flatMap((r) => r.problems.map((p) => `${r.scenario}: ${p}`)),
  ...(installRow?.problems ?? []).map((p) => `${installRow?.scenario}: ${p}`),
]
if (parts.has('ingest')) printIngest(machine)
printReads(reads)
printInsights(insights)
printStartup(startup)
printDatasets(reads)
for (const [name, log] of Object.entries(serverLogs)) {
  if (log.warnings + log.errors === 0) continue
  console.log(`server log (${name}): ${log.errors} errors, ${log.warnings} warnings`)
  for (const sample of log.samples) console.log(`  ${sample}`)
}
/** @type {Awaited<ReturnType<typeof runCopy>> | null} */
let copyResult = null
if (parts.has('copy') && !skipPg) {
  try {
    copyResult = await timed('copy', runCopy)
  } catch (err) {
    problems.push(`copy: ${/** @type {Error} */ (err).message}`)
  }
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
      table: ingestTable,
      rows,
      export: {
        sizes: exportSizes,
        columns: exportHeader,
        table: exportTable(reads),
        rows: reads?.exportRows ?? [],
      },
      pages: {
        size: pagesSize,
        requestsPerCase: pageRequests,
        timing: 'client-observed, request sent to last byte, one kept-alive connection on 127.0.0.1',
        columns: pagesHeader,
        table: pagesTable(reads),
        rows: reads?.pageRows ?? [],
      },
      datasets: reads?.seeds ?? [],
      insights: {
        size: insightsSize,
        derivations: insights?.derivations ?? [],
        columns: insightsHeader,
        table: insightsTable(insights),
        rows: insights?.pageRows ?? [],
      },
      startup: { columns: startupHeader, table: startup, rows: startupRows, install: installRow },
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
