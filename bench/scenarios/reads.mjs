// The read parts: full exports (CSV and JSON, and compressed CSV) of seeded datasets, and /logs/ page
// times at one dataset size (bench/lib/reads.mjs does the work), with their report.
import { cpus } from 'node:os'
import { cleanups, runDir, serverLogs, withTimeout } from '../lib/lifecycle.mjs'
import {
  exportPart,
  exportSizes,
  exportVariants,
  pageCaseSeconds,
  pageRequests,
  pagesSize,
  parts,
  pgServerUrl,
  quick,
  readDialects,
  root,
  serverLogLevel,
  shiplogBin,
} from '../lib/options.mjs'
import { benchReads, countLabel } from '../lib/reads.mjs'
import { num, renderTable } from '../lib/report.mjs'

/** @typedef {Awaited<ReturnType<typeof benchReads>>} Reads */

/** Seeds the datasets, downloads the exports and times the pages. @returns {Promise<Reads>} */
export async function runReads() {
  console.error(
    `reads: exports at ${exportSizes.map(countLabel).join(', ') || '-'} events, pages at ` +
      `${pagesSize === null ? '-' : countLabel(pagesSize)} events; ${readDialects.join(', ') || 'no database'}`,
  )
  const reads = await benchReads({
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
  return reads
}

const mib = (/** @type {number | null | undefined} */ bytes) =>
  bytes === null || bytes === undefined ? '-' : num(bytes / 2 ** 20, 1)

export const exportHeader = [
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
export const exportTable = (reads) =>
  (reads?.exportRows ?? []).map((r) => [
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

export const pagesHeader = ['scenario', 'requests', 'p50 ms', 'p95 ms', 'max ms', 'load', 'rows shown']
export const pagesTable = (reads) =>
  (reads?.pageRows ?? []).map((r) => [
    r.scenario,
    num(r.requests),
    num(r.p50, 1),
    num(r.p95, 1),
    num(r.max, 1),
    num(r.load, 1),
    r.rowsOk ? `${r.shown} ok` : `${r.shown ?? '-'}/${r.expected} WRONG`,
  ])

/** Prints the export and page tables and the datasets. @param {Reads | null} reads */
export function printReads(reads) {
  if (exportPart) {
    console.log('')
    console.log(
      `Export: full, unfiltered GET /logs/export.csv|json of one account${quick ? ' (BENCH_QUICK: tiny datasets)' : ''}` +
        ` - a fresh server per download, read to the end by a client on 127.0.0.1`,
    )
    console.log('')
    console.log(renderTable(exportHeader, exportTable(reads)))
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
    console.log(renderTable(pagesHeader, pagesTable(reads)))
    console.log('')
    console.log(
      'Times are client-observed (request sent to last byte of the HTML) over one kept-alive connection on ' +
        '127.0.0.1, requests one after the other: the server time plus loopback and HTTP parsing. load = 1-minute ' +
        'load average when the case started. "rows shown" ' +
        'must be exactly the rows the seeded history predicts for the filter (the newest 50 matches, or fewer when ' +
        'fewer events match; each row checked by time, service, environment, version and status).',
    )
  }
}

/** The datasets the read parts seeded, with their time and size. @param {Reads | null} reads */
export function printDatasets(reads) {
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
}
