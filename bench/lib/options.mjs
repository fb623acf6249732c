// What a bench run measures and how long, from the environment (see the list atop bench/run.mjs);
// a bad value stops the run with exit code 2 before anything starts.
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

export const root = fileURLToPath(new URL('../..', import.meta.url))
export const shiplogBin = join(root, 'bin', 'shiplog.js')
export const bareServer = join(root, 'bench', 'bare-server.mjs')
export const resultsDir = join(root, 'bench', 'results')

export const quick = process.env.BENCH_QUICK === '1' || process.env.BENCH_QUICK === 'true'
export const warmupSeconds = positive('BENCH_WARMUP', quick ? 1 : 3)
export const measureSeconds = positive('BENCH_DURATION', quick ? 2 : 10)
export const connections = positive('BENCH_CONNECTIONS', 50)
export const pgServerUrl = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
export const skipPg = process.env.BENCH_SKIP_PG === '1' || process.env.BENCH_SKIP_PG === 'true'
export const skipSqlite = process.env.BENCH_SKIP_SQLITE === '1' || process.env.BENCH_SKIP_SQLITE === 'true'
export const serverLogLevel = process.env.BENCH_LOG_LEVEL ?? 'warn'
export const PARTS = /** @type {const} */ ([
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
export const DEFAULT_PARTS = (quick ? PARTS.filter((p) => p !== 'install') : PARTS).filter(
  (p) => p !== 'copy' && p !== 'export-compressed',
)
export const parts = new Set(
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
// The quick run checks that every part runs and its checks pass; one small export size does that (a
// second one, as the full run has, doubled the seeding and downloads for no further check).
export const exportSizes = parts.has('export')
  ? sizeList('BENCH_EXPORT_ROWS', quick ? [20_000] : [1_000_000, 3_000_000])
  : parts.has('export-compressed')
    ? sizeList('BENCH_EXPORT_ROWS', quick ? [20_000] : [1_000_000])
    : []
/**
 * The downloads per export dataset: CSV and JSON as they are (export); the CSV as it is, gzip and
 * Brotli, in the same run on the same data (export-compressed).
 * @type {Array<{ format: 'csv' | 'json', encoding: 'identity' | 'gzip' | 'br' }>}
 */
export const exportVariants = []
if (parts.has('export'))
  exportVariants.push({ format: 'csv', encoding: 'identity' }, { format: 'json', encoding: 'identity' })
if (parts.has('export-compressed')) {
  if (!parts.has('export')) exportVariants.push({ format: 'csv', encoding: 'identity' })
  exportVariants.push({ format: 'csv', encoding: 'gzip' }, { format: 'csv', encoding: 'br' })
}
export const exportPart = parts.has('export') || parts.has('export-compressed')
export const pagesSize = parts.has('pages') ? positive('BENCH_PAGES_ROWS', quick ? 20_000 : 1_000_000) : null
export const pageRequests = positive('BENCH_PAGE_REQUESTS', quick ? 10 : 50)
export const insightsSize = parts.has('insights')
  ? positive('BENCH_INSIGHTS_ROWS', quick ? 20_000 : 1_000_000)
  : null
export const insightsSettleSeconds = positive('BENCH_INSIGHTS_SETTLE_SECONDS', quick ? 30 : 900)
export const deriveOnly = process.env.BENCH_DERIVE_ONLY === '1' || process.env.BENCH_DERIVE_ONLY === 'true'
export const deriveSteady =
  process.env.BENCH_DERIVE_STEADY === '0'
    ? 0
    : Math.min(positive('BENCH_DERIVE_STEADY', quick ? 5_000 : 50_000), Math.floor((insightsSize ?? 0) / 2))
export const deriveRun = positive('BENCH_DERIVE_RUN', 300)
export const copyRows = parts.has('copy') ? positive('BENCH_COPY_ROWS', quick ? 20_000 : 1_000_000) : 0
export const startupRuns = positive('BENCH_STARTUP_RUNS', quick ? 3 : 11)
export const pageCaseSeconds = positive('BENCH_PAGE_SECONDS', quick ? 10 : 30)
export const webhookDelayMs = positive('BENCH_WEBHOOK_DELAY_MS', 2000)
/** @type {Array<'sqlite' | 'postgres'>} */
export const readDialects = [
  ...(skipSqlite ? [] : /** @type {const} */ (['sqlite'])),
  ...(skipPg ? [] : /** @type {const} */ (['postgres'])),
]

/** @param {string} name @param {number} fallback */
export function positive(name, fallback) {
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
export function sizeList(name, fallback) {
  const raw = process.env[name]
  if (raw === undefined || raw.trim() === '') return fallback
  const values = raw.split(',').map((v) => Number(v.trim().replaceAll('_', '')))
  if (values.some((v) => !Number.isInteger(v) || v < 1)) {
    console.error(`bench: ${name} must be a comma-separated list of whole numbers >= 1, got "${raw}"`)
    process.exit(2)
  }
  return [...new Set(values)].sort((a, b) => a - b)
}
