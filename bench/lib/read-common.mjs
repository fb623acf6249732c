// What the read benchmarks share: the export's columns, the page size, the bench user, the time
// limits, and the shapes of their results.
import { readFileSync } from 'node:fs'

export const EXPORT_COLUMNS = [
  'id',
  'received_at',
  'service',
  'environment',
  'version',
  'status',
  'url',
  'commit',
  'description',
  'deployer',
  'source',
  'api_key_name',
]
export const PAGE_SIZE = 50
export const EMAIL = 'b@x.io'
export const PASSWORD = 'pw12345678'

/** The machine's 1-minute load average (other processes compete with the server and the client). */
export function loadAverage() {
  try {
    return Number(readFileSync('/proc/loadavg', 'utf8').split(' ')[0])
  } catch {
    return null
  }
}

/** 1000000 -> "1M", 20000 -> "20k". @param {number} n */
export function countLabel(n) {
  if (n >= 1_000_000 && n % 100_000 === 0) return `${n / 1_000_000}M`
  if (n >= 1000 && n % 100 === 0) return `${n / 1000}k`
  return String(n)
}

/** Seconds a seed may take: at least 10,000 rows/s. @param {number} n */
export const seedLimitSeconds = (n) => 60 + Math.ceil(n / 10_000)
/** Seconds one export download may take: at least 15,000 rows/s. @param {number} n */
export const exportLimitSeconds = (n) => 30 + Math.ceil(n / 15_000)

/**
 * @typedef {object} ReadsOptions
 * @property {string} root
 * @property {string} shiplogBin
 * @property {string} runDir
 * @property {Array<() => Promise<void>>} cleanups
 * @property {<T>(p: Promise<T>, ms: number, what: string) => Promise<T>} withTimeout
 * @property {Array<'sqlite' | 'postgres'>} dialects
 * @property {string} pgServerUrl
 * @property {string} serverLogLevel
 * @property {number[]} exportSizes empty: no export part
 * @property {Array<{ format: 'csv' | 'json', encoding: 'identity' | 'gzip' | 'br' }>} exportVariants
 *   the downloads per export dataset (a format, asked for with this Accept-Encoding)
 * @property {number | null} pagesSize null: no pages part
 * @property {number} pageRequests measured requests per page case
 * @property {number} pageCaseSeconds time budget of one page case (it stops early, after >= 5 requests)
 * @property {number} settleMs wait after login before the idle RSS is read
 */

/**
 * @typedef {object} ExportRow
 * @property {string} scenario
 * @property {string} target
 * @property {number} n events in the database
 * @property {'csv' | 'json'} format
 * @property {'identity' | 'gzip' | 'br'} encoding what the client accepted (and the server must send)
 * @property {number | null} records counted in the download
 * @property {number | null} bytes on the wire (compressed, when it was)
 * @property {number | null} seconds request sent to last byte
 * @property {number | null} firstByteMs
 * @property {number | null} rowsPerSecond
 * @property {number | null} idleRss bytes, before the download
 * @property {number | null} peakRss bytes, highest VmRSS sample during the download
 * @property {number | null} growth peakRss - idleRss
 * @property {number[] | null} quarterPeaks bytes, the peak VmRSS in each quarter of the download's duration
 * @property {number | null} hwm VmHWM at the end (reset just before the download)
 * @property {boolean} hwmReset
 * @property {number | null} serverCpuSeconds
 * @property {{ samples: number, longestGapMs: number } | null} sampling
 * @property {number | null} load 1-minute load average when the download started
 * @property {string[]} problems
 */

/**
 * @typedef {object} PageRow
 * @property {string} scenario
 * @property {string} target
 * @property {number} n
 * @property {string} name
 * @property {string} path
 * @property {number} requests measured
 * @property {number | null} p50 ms
 * @property {number | null} p95 ms
 * @property {number | null} max ms
 * @property {number | null} shown rows on the page
 * @property {number} expected rows the page must show
 * @property {boolean} rowsOk every response showed exactly the expected rows, in order
 * @property {number} reused measured requests that went over the kept-alive socket
 * @property {number | null} load 1-minute load average when the case started
 * @property {string[]} problems
 */

/**
 * @typedef {object} SeedInfo
 * @property {string} target
 * @property {number} n
 * @property {number} seconds
 * @property {number} maxId
 * @property {number | null} databaseBytes
 * @property {import('./seed.mjs').SeedTally} tally
 */
