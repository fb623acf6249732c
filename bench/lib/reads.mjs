// The read benchmarks: streamed CSV/JSON exports (throughput and the server's memory) and /logs/ page
// times, against the real server (`shiplog serve`, a child process) over a database seeded directly
// with a synthetic history (bench/lib/seed.mjs). Each dataset gets a fresh SQLite file or PostgreSQL
// database, removed as soon as its measurements are done.
import { randomBytes } from 'node:crypto'
import { mkdirSync, readFileSync, rmSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { Worker } from 'node:worker_threads'
import { createBrotliDecompress, createGunzip } from 'node:zlib'
import SqliteDatabase from 'better-sqlite3'
import pg from 'pg'
import { runNode, startServer } from './children.mjs'
import { closeSession, csvCounter, jsonLinesCounter, login, request, timedGet } from './http.mjs'
import { cpuSeconds, idleRss, memory, resetPeak, sampleRss } from './proc.mjs'
import { summariseLog } from './report.mjs'
import { historyPlan, makeHistory, postgresSeedTarget, seedPostgres, sqliteSeedTarget } from './seed.mjs'

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
const PAGE_SIZE = 50
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

/**
 * The environment `shiplog` runs with on a fresh bench database, after creating the Bench account
 * with its user (EMAIL / PASSWORD) and an API key there.
 * @param {{ root: string, shiplogBin: string, serverLogLevel: string }} o @param {string} databaseUrl
 */
export async function benchAccountEnv(o, databaseUrl) {
  /** @type {NodeJS.ProcessEnv} */
  const env = {
    ...process.env,
    DATABASE_URL: databaseUrl,
    SHIPLOG_SECRET: randomBytes(32).toString('hex'),
    LOG_LEVEL: o.serverLogLevel,
  }
  delete env.REDIS_URL
  delete env.PORT
  await runNode(
    [o.shiplogBin, 'users', 'create', '--account', 'Bench', '--email', EMAIL, '--password-stdin'],
    {
      env,
      cwd: o.root,
      input: `${PASSWORD}\n`,
    },
  )
  await runNode([o.shiplogBin, 'keys', 'create', '--account', 'Bench', '--name', 'bench'], {
    env,
    cwd: o.root,
  })
  return env
}

/** @param {ReadsOptions} o */
export async function benchReads(o) {
  /** @type {ExportRow[]} */
  const exportRows = []
  /** @type {PageRow[]} */
  const pageRows = []
  /** @type {SeedInfo[]} */
  const seeds = []
  /** @type {Record<string, ReturnType<typeof summariseLog>>} */
  const serverLogs = {}
  /** @type {string[]} */
  const problems = []

  const sizes = [...new Set([...o.exportSizes, ...(o.pagesSize === null ? [] : [o.pagesSize])])].sort(
    (a, b) => a - b,
  )
  for (const dialect of o.dialects) {
    for (const n of sizes) {
      const label = `${dialect} ${countLabel(n)}`
      try {
        await oneDataset(o, dialect, n, { exportRows, pageRows, seeds, serverLogs, problems })
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err)
        console.error(`  ${label} failed: ${message}`)
        problems.push(`${label}: did not complete: ${message.split('\n')[0]}`)
      }
    }
  }
  for (const r of exportRows) for (const p of r.problems) problems.push(`${r.scenario}: ${p}`)
  for (const r of pageRows) for (const p of r.problems) problems.push(`${r.scenario}: ${p}`)
  return { exportRows, pageRows, seeds, serverLogs, problems }
}

/**
 * A fresh database with n events: set up (CLI), seeded, measured, removed.
 * @param {ReadsOptions} o @param {'sqlite' | 'postgres'} dialect @param {number} n
 * @param {{ exportRows: ExportRow[], pageRows: PageRow[], seeds: SeedInfo[],
 *   serverLogs: Record<string, ReturnType<typeof summariseLog>>, problems: string[] }} out
 */
async function oneDataset(o, dialect, n, out) {
  const label = `${dialect} ${countLabel(n)}`
  const store = dialect === 'sqlite' ? sqliteDataset(o, n) : await postgresDataset(o, n)
  try {
    const env = await benchAccountEnv(o, store.databaseUrl)

    const plan = historyPlan(n, Date.now() - 60_000)
    process.stderr.write(`  ${label}: seeding ${n.toLocaleString('en-US')} events`)
    const t0 = performance.now()
    const { tally, count, minId, maxId } = await o.withTimeout(
      store.seed(plan),
      seedLimitSeconds(n) * 1000,
      `seeding ${label}`,
    )
    const seconds = (performance.now() - t0) / 1000
    const databaseBytes = await store.size()
    process.stderr.write(
      ` in ${seconds.toFixed(1)} s (${Math.round(n / seconds).toLocaleString('en-US')} rows/s` +
        `${databaseBytes ? `, ${(databaseBytes / 2 ** 20).toFixed(0)} MB` : ''})\n`,
    )
    // Counted in the database, not by the seeding loop: a batch that went missing shows here. The
    // ids must be one run, so that event i of the history is the row with id minId + i.
    if (count !== n) throw new Error(`the database holds ${count} events after seeding ${n}`)
    if (maxId - minId + 1 !== n) throw new Error(`seeded ids ${minId}..${maxId} are not one run of ${n}`)
    out.seeds.push({ target: dialect, n, seconds, maxId, databaseBytes, tally })

    /**
     * Starts `shiplog serve` on this dataset, logs in, runs `fn`, stops the server. A failure is
     * recorded and the dataset's other measurements still run.
     */
    const withServer = async (
      /** @type {string} */ tag,
      /** @type {(server: import('./children.mjs').Server, session: import('./http.mjs').Session) => Promise<void>} */ fn,
    ) => {
      try {
        await serveAndRun(tag, fn)
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err)
        console.error(`  ${label} ${tag} failed: ${message}`)
        out.problems.push(`${label} ${tag}: did not complete: ${message.split('\n')[0]}`)
      }
    }
    const serveAndRun = async (
      /** @type {string} */ tag,
      /** @type {(server: import('./children.mjs').Server, session: import('./http.mjs').Session) => Promise<void>} */ fn,
    ) => {
      const logFile = join(o.runDir, `shiplog-${dialect}-${countLabel(n)}-${tag}.log`)
      const server = await startServer({
        name: `shiplog serve (${label})`,
        args: [o.shiplogBin, 'serve'],
        env,
        cwd: o.root,
        logFile,
        readyPath: '/readyz',
      })
      o.cleanups.push(server.stop)
      try {
        const session = await login(server.url, EMAIL, PASSWORD)
        try {
          await fn(server, session)
        } finally {
          closeSession(session)
        }
      } finally {
        await server.stop()
        out.serverLogs[`${dialect}-${countLabel(n)}-${tag}`] = summariseLog(logFile)
      }
    }

    if (o.exportSizes.includes(n)) {
      for (const { format, encoding } of o.exportVariants) {
        const plain = encoding === 'identity'
        // A fresh server per download: its idle RSS is not inflated by a previous export.
        await withServer(`export-${format}${plain ? '' : `-${encoding}`}`, async (server, session) => {
          const waited = await settleDerivation(store)
          if (waited > 1)
            process.stderr.write(`  ${label}: waited ${waited.toFixed(0)} s for deriving to finish\n`)
          const row = await measureExport(
            server.pid,
            session,
            format,
            encoding,
            n,
            `${label} export.${format}${plain ? '' : ` (${encoding})`}`,
            dialect,
            o.settleMs,
          )
          out.exportRows.push(row)
          const mb = (/** @type {number | null} */ v) => (v === null ? '-' : (v / 2 ** 20).toFixed(0))
          process.stderr.write(
            `  ${row.scenario}: ${row.rowsPerSecond ? Math.round(row.rowsPerSecond).toLocaleString('en-US') : '-'} rows/s, ` +
              `RSS idle ${mb(row.idleRss)} MB, peak ${mb(row.peakRss)} MB${row.problems.length ? ` (${row.problems.join('; ')})` : ''}\n`,
          )
        })
      }
    }

    if (o.pagesSize === n) {
      await withServer('pages', async (_server, session) => {
        for (const c of pageCases(plan, tally, minId, maxId)) {
          const row = await measurePage(session, c, o, `${label} ${c.name}`, dialect, n)
          out.pageRows.push(row)
          process.stderr.write(
            `  ${row.scenario}: p50 ${row.p50?.toFixed(1) ?? '-'} ms, p95 ${row.p95?.toFixed(1) ?? '-'} ms ` +
              `(${row.requests} requests)${row.problems.length ? ` (${row.problems.join('; ')})` : ''}\n`,
          )
        }
      })
    }
  } finally {
    await store.remove()
  }
}

/**
 * @typedef {object} Dataset
 * @property {string} databaseUrl
 * @property {(plan: ReturnType<typeof historyPlan>) => Promise<{ tally: import('./seed.mjs').SeedTally } & import('./seed.mjs').StoredRange>} seed
 * @property {() => Promise<number | null>} size
 * @property {() => Promise<number>} underived events the server has not derived into deployments yet
 * @property {() => Promise<void>} remove
 */

/** Events not derived yet, and gaps waiting (as bench/run.mjs asks it). */
const UNDERIVED_SQL =
  'SELECT (SELECT coalesce(max(id), 0) FROM events) - (SELECT through FROM deployments_progress WHERE id = 1) ' +
  '+ (SELECT count(*) FROM deployment_gaps) AS n'

/**
 * Waits (bounded) until the server has derived every seeded event into deployments. A fresh server
 * on a freshly seeded database derives them in the background, on the thread that also streams the
 * export: measured meanwhile, an export paid for that work (5.7–6.3 µs of server CPU a row, against
 * 1.7–2 µs once derived). Returns the seconds waited.
 * @param {Dataset} store
 */
async function settleDerivation(store) {
  const t0 = performance.now()
  const deadline = Date.now() + 900_000
  for (;;) {
    const behind = await store.underived()
    if (behind <= 0) return (performance.now() - t0) / 1000
    if (Date.now() > deadline) throw new Error(`the server still had ${behind} events to derive after 900 s`)
    await new Promise((resolve) => setTimeout(resolve, 500))
  }
}

/** @param {ReadsOptions} o @param {number} n @returns {Dataset} */
function sqliteDataset(o, n) {
  const dir = join(o.runDir, `reads-sqlite-${countLabel(n)}`)
  mkdirSync(dir, { recursive: true })
  const file = join(dir, 'shiplog.db')
  /** @type {Worker | null} */
  let worker = null
  const remove = async () => {
    await worker?.terminate()
    rmSync(dir, { recursive: true, force: true })
  }
  o.cleanups.push(remove)
  return {
    databaseUrl: `sqlite:${file}`,
    seed: (plan) =>
      new Promise((resolve, reject) => {
        const target = sqliteSeedTarget(file)
        if (!target) return reject(new Error('no API key of account Bench to attribute the events to'))
        const w = new Worker(new URL('./seed-worker.mjs', import.meta.url), {
          workerData: { file, plan, target },
        })
        worker = w
        w.once('message', (result) => resolve(result))
        w.once('error', reject)
        w.once('exit', (code) => {
          worker = null
          if (code !== 0) reject(new Error(`seed worker exited with ${code}`))
        })
      }),
    size: async () => {
      try {
        return statSync(file).size
      } catch {
        return null
      }
    },
    underived: async () => {
      const db = new SqliteDatabase(file, { readonly: true, fileMustExist: true })
      try {
        return /** @type {{ n: number }} */ (db.prepare(UNDERIVED_SQL).get()).n
      } finally {
        db.close()
      }
    },
    remove,
  }
}

/** A fresh PostgreSQL database, dropped by `remove` (and at cleanup). @param {ReadsOptions} o @param {number} n */
async function postgresDataset(o, n) {
  const name = `shiplog_bench_${countLabel(n).toLowerCase()}_${randomBytes(4).toString('hex')}`
  const admin = async (/** @type {string} */ text) => {
    const client = new pg.Client({ connectionString: o.pgServerUrl, connectionTimeoutMillis: 5000 })
    await client.connect()
    try {
      return await client.query(text)
    } finally {
      await client.end()
    }
  }
  await admin(`CREATE DATABASE "${name}"`)
  let dropped = false
  const remove = async () => {
    if (dropped) return
    await admin(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)
    dropped = true
  }
  o.cleanups.push(remove)
  const url = new URL(o.pgServerUrl)
  url.pathname = `/${name}`
  const databaseUrl = url.toString()
  return /** @type {Dataset} */ ({
    databaseUrl,
    seed: async (plan) => seedPostgres(databaseUrl, plan, await postgresSeedTarget(databaseUrl)),
    size: async () => {
      const res = await admin(`SELECT pg_database_size('${name}')::bigint AS size`)
      return Number(res.rows[0]?.size ?? 0) || null
    },
    underived: async () => {
      const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 5000 })
      await client.connect()
      try {
        return Number((await client.query(UNDERIVED_SQL)).rows[0]?.n ?? 0)
      } finally {
        await client.end()
      }
    },
    remove,
  })
}

/**
 * Downloads /logs/export.<format> whole, counting records and bytes while sampling the server's RSS.
 * With a compressed encoding the client inflates as the bytes arrive, as a browser does, and the
 * time runs to the last inflated byte.
 * @param {number} pid @param {import('./http.mjs').Session} session @param {'csv' | 'json'} format
 * @param {'identity' | 'gzip' | 'br'} encoding
 * @param {number} n @param {string} scenario @param {string} target @param {number} settleMs
 * @returns {Promise<ExportRow>}
 */
async function measureExport(pid, session, format, encoding, n, scenario, target, settleMs) {
  /** @type {string[]} */
  const problems = []
  const idle = await idleRss(pid, settleMs)
  const load = loadAverage()
  const hwmReset = resetPeak(pid)
  const cpuBefore = cpuSeconds(pid)
  const counter = format === 'csv' ? csvCounter() : jsonLinesCounter()
  let bytes = 0
  /** @type {number | null} */
  let firstByteMs = null
  const sampler = sampleRss(pid, 50)
  const t0 = performance.now()
  /** @type {Awaited<ReturnType<typeof request>> | null} */
  let res = null
  let seconds = null
  let sampling = null
  const inflater = encoding === 'gzip' ? createGunzip() : encoding === 'br' ? createBrotliDecompress() : null
  const inflated = inflater
    ? new Promise((resolve, reject) => {
        inflater.on('data', (/** @type {Buffer} */ chunk) => counter.push(chunk))
        inflater.once('end', resolve)
        inflater.once('error', reject)
      })
    : null
  try {
    res = await request(session, {
      path: `/logs/export.${format}`,
      headers: encoding === 'identity' ? {} : { 'accept-encoding': encoding },
      timeoutMs: exportLimitSeconds(n) * 1000,
      onData: (chunk) => {
        if (firstByteMs === null) firstByteMs = performance.now() - t0
        bytes += chunk.length
        if (inflater) inflater.write(chunk)
        else counter.push(chunk)
      },
    })
    if (inflater) {
      inflater.end()
      await inflated
    }
    seconds = (performance.now() - t0) / 1000
  } catch (err) {
    problems.push(`download failed: ${err instanceof Error ? err.message : String(err)}`)
  } finally {
    sampling = sampler.stop()
  }
  const cpuAfter = cpuSeconds(pid)
  const hwm = memory(pid)?.hwm ?? null
  const counted = counter.result()
  if (res) {
    if (res.status !== 200) problems.push(`HTTP ${res.status}`)
    const sent = res.headers['content-encoding'] ?? 'identity'
    if (sent !== encoding) problems.push(`Content-Encoding ${sent}, ${encoding} asked for`)
    const type = String(res.headers['content-type'] ?? '')
    if (!type.startsWith(format === 'csv' ? 'text/csv' : 'application/json'))
      problems.push(`content-type ${type}`)
    const disposition = String(res.headers['content-disposition'] ?? '')
    if (!new RegExp(`^attachment; filename="shiplog-events-[^"]+\\.${format}"$`).test(disposition))
      problems.push(`content-disposition ${disposition}`)
    if (counted.records !== n) problems.push(`${counted.records} records downloaded, ${n} in the database`)
    if ('header' in counted) {
      if (counted.header !== EXPORT_COLUMNS.join(',')) problems.push(`CSV header "${counted.header}"`)
      if (!counted.endsWithNewline || counted.unbalancedQuotes) problems.push('CSV does not end cleanly')
    } else {
      if (!counted.startsWithBracket || !counted.endsWithBracket) problems.push('JSON is not one array')
      if (n > 0 && counted.firstKeys?.join(',') !== EXPORT_COLUMNS.join(','))
        problems.push(`JSON keys ${counted.firstKeys?.join(',') ?? '(unparsable first object)'}`)
    }
  }
  const peak = sampling.peak || null
  return {
    scenario,
    target,
    n,
    format,
    encoding,
    records: res ? counted.records : null,
    bytes: res ? bytes : null,
    seconds,
    firstByteMs,
    rowsPerSecond: seconds && res ? counted.records / seconds : null,
    idleRss: idle,
    peakRss: peak,
    growth: peak !== null && idle !== null ? peak - idle : null,
    quarterPeaks: sampling.quarters,
    hwm,
    hwmReset,
    serverCpuSeconds: cpuBefore !== null && cpuAfter !== null ? cpuAfter - cpuBefore : null,
    sampling: { samples: sampling.samples, longestGapMs: sampling.longestGapMs },
    load,
    problems,
  }
}

/**
 * @typedef {object} PageCase
 * @property {string} name
 * @property {string} path
 * @property {(e: import('./seed.mjs').SeedEvent, id: number) => boolean} match which seeded events the
 *   filter selects, written from the filter's meaning, independently of the server's query
 * @property {ExpectedRow[]} expected filled by expectPages: the newest PAGE_SIZE matches, newest first
 */

/**
 * @typedef {object} ExpectedRow
 * @property {number} id
 * @property {string} receivedAt ISO 8601, as the page's <time datetime> carries it
 * @property {string} service
 * @property {string} environment
 * @property {string} version
 * @property {string} status
 */

/**
 * The /logs/ requests measured, each with the exact rows it must show: the seeded history is
 * generated again and every case's filter applied to it, so a filter the server ignores, or
 * applies wrongly, shows as the wrong rows (not only as a wrong count).
 * @param {ReturnType<typeof historyPlan>} plan @param {import('./seed.mjs').SeedTally} tally
 * @param {number} minId @param {number} maxId
 * @returns {PageCase[]}
 */
function pageCases(plan, tally, minId, maxId) {
  const iso = (/** @type {number} */ ms) => encodeURIComponent(new Date(ms).toISOString())
  const deepBefore = Math.max(1, maxId - Math.round(plan.n * 0.9))
  const pct = (/** @type {number} */ count) =>
    `${((100 * count) / plan.n).toFixed(count * 1000 < plan.n ? 3 : 0)}%`
  const service = 'checkout'
  const within =
    (/** @type {{ from: number, to: number }} */ w) => (/** @type {import('./seed.mjs').SeedEvent} */ e) =>
      e.receivedAt >= w.from && e.receivedAt <= w.to
  /** @type {Array<Omit<PageCase, 'expected'>>} */
  const cases = [
    { name: 'first page', path: '/logs/', match: () => true },
    {
      name: `deep page (before=${deepBefore}, 90% back)`,
      path: `/logs/?before=${deepBefore}`,
      match: (_e, id) => id < deepBefore,
    },
    {
      name: `service=${service} (${pct(tally.service[service] ?? 0)})`,
      path: `/logs/?service=${service}`,
      match: (e) => e.service === service,
    },
    {
      // Names are matched ignoring case (issue 10.21): the same rows as the exact spelling.
      name: `service=CHECKOUT, any case (${pct(tally.service[service] ?? 0)})`,
      path: `/logs/?service=${service.toUpperCase()}`,
      match: (e) => e.service === service,
    },
    {
      name: `environment=Production (${pct(tally.environment.Production ?? 0)})`,
      path: '/logs/?environment=Production',
      match: (e) => e.environment === 'Production',
    },
    {
      name: `status=Failed (${pct(tally.status.Failed ?? 0)})`,
      path: '/logs/?status=Failed',
      match: (e) => e.status === 'Failed',
    },
    {
      name: `version contains "-rc" (${pct(tally.rc)})`,
      path: '/logs/?version=-rc',
      match: (e) => e.version.toLowerCase().includes('-rc'),
    },
    {
      name: `version contains "-hotfix" (${tally.hotfix} rows)`,
      path: '/logs/?version=-hotfix',
      match: (e) => e.version.toLowerCase().includes('-hotfix'),
    },
    {
      name: `from/to 30 days mid-history (${pct(tally.narrow)})`,
      path: `/logs/?from=${iso(plan.narrow.from)}&to=${iso(plan.narrow.to)}`,
      match: within(plan.narrow),
    },
    {
      name: `from/to middle half of history (${pct(tally.wide)})`,
      path: `/logs/?from=${iso(plan.wide.from)}&to=${iso(plan.wide.to)}`,
      match: within(plan.wide),
    },
  ]
  return expectPages(plan, minId, cases)
}

/**
 * Walks the seeded history once and keeps, for each case, the last PAGE_SIZE events it matches
 * (ids rise with arrival, so these are the page's rows), newest first.
 * @param {ReturnType<typeof historyPlan>} plan @param {number} minId
 * @param {Array<Omit<PageCase, 'expected'>>} cases
 * @returns {PageCase[]}
 */
function expectPages(plan, minId, cases) {
  /** @type {ExpectedRow[][]} */
  const newest = cases.map(() => [])
  const history = makeHistory(plan)
  let i = 0
  for (let e = history.next(); e !== null; e = history.next(), i++) {
    const id = minId + i
    for (const [k, c] of cases.entries()) {
      if (!c.match(e, id)) continue
      const kept = /** @type {ExpectedRow[]} */ (newest[k])
      if (kept.length === PAGE_SIZE) kept.shift()
      kept.push({
        id,
        receivedAt: new Date(e.receivedAt).toISOString(),
        service: e.service,
        environment: e.environment,
        version: e.version,
        status: e.status,
      })
    }
  }
  return cases.map((c, k) => ({ ...c, expected: [...(newest[k] ?? [])].reverse() }))
}

/** Text of an HTML fragment: tags dropped, the entities the templates write decoded. @param {string} s */
function textOf(s) {
  return s
    .replace(/<[^>]*>/g, '')
    .replace(/&(#x[0-9a-f]+|#\d+|amp|lt|gt|quot|apos);/gi, (_m, entity) => {
      const named = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" }
      const lower = String(entity).toLowerCase()
      if (lower in named) return named[/** @type {keyof typeof named} */ (lower)]
      const code = lower.startsWith('#x') ? Number.parseInt(lower.slice(2), 16) : Number(lower.slice(1))
      return String.fromCodePoint(code)
    })
    .trim()
}

/**
 * The event rows of a /logs/ page: each row's <time datetime> and its cells' text. Independent of
 * the column order and of classes, so a page redesign does not break the check, only wrong rows do.
 * @param {string} html
 */
export function pageRows(html) {
  const body = /<tbody[^>]*>([\s\S]*?)<\/tbody>/.exec(html)?.[1] ?? ''
  return body
    .split(/<tr[\s>]/)
    .slice(1)
    .map((row) => ({
      receivedAt: /<time[^>]*\sdatetime="([^"]+)"/.exec(row)?.[1] ?? null,
      cells: [...row.matchAll(/<td[^>]*>([\s\S]*?)<\/td>/g)].map((m) => textOf(m[1] ?? '')),
    }))
}

/**
 * What is wrong with the rows a page shows, compared with the rows it must show, or null.
 * @param {ReturnType<typeof pageRows>} shown @param {ExpectedRow[]} expected
 */
function rowMismatch(shown, expected) {
  if (shown.length !== expected.length) return `page shows ${shown.length} rows, ${expected.length} expected`
  for (const [k, want] of expected.entries()) {
    const got = /** @type {ReturnType<typeof pageRows>[number]} */ (shown[k])
    const missing = [want.service, want.environment, want.version, want.status].filter(
      (value) => !got.cells.includes(value),
    )
    if (got.receivedAt !== want.receivedAt || missing.length > 0) {
      return (
        `row ${k + 1} is not event ${want.id} (${want.receivedAt} ${want.service} ${want.environment} ` +
        `${want.version} ${want.status}): shows ${got.receivedAt} ${got.cells.slice(1, 5).join(' ')}`
      )
    }
  }
  return null
}

/** Nearest-rank percentile of sorted values. @param {number[]} sorted @param {number} p */
function percentile(sorted, p) {
  if (sorted.length === 0) return null
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length))
  return sorted[rank - 1] ?? null
}

/**
 * Two warm-up requests, then up to `pageRequests` measured ones, one after the other on the same socket.
 * @param {import('./http.mjs').Session} session @param {PageCase} c
 * @param {ReadsOptions} o @param {string} scenario @param {string} target @param {number} n
 * @returns {Promise<PageRow>}
 */
async function measurePage(session, c, o, scenario, target, n) {
  /** @type {string[]} */
  const problems = []
  /** @type {number[]} */
  const times = []
  /** @type {number | null} */
  let shown = null
  let rowsOk = true
  let reused = 0
  const load = loadAverage()
  const deadline = performance.now() + o.pageCaseSeconds * 1000
  const requestTimeout = Math.max(30_000, o.pageCaseSeconds * 1000)
  for (let k = 0; k < 2 + o.pageRequests; k++) {
    const measured = k >= 2
    let res
    try {
      res = await timedGet(session, c.path, requestTimeout)
    } catch (err) {
      rowsOk = false
      problems.push(`request failed: ${err instanceof Error ? err.message : String(err)}`)
      break
    }
    if (res.status !== 200) {
      rowsOk = false
      problems.push(`HTTP ${res.status}`)
      break
    }
    const rows = pageRows(res.text)
    shown = rows.length
    const mismatch = rowMismatch(rows, c.expected)
    if (mismatch) {
      rowsOk = false
      problems.push(mismatch)
      break
    }
    if (measured) {
      times.push(res.ms)
      if (res.reused) reused++
    }
    if (performance.now() > deadline && times.length >= Math.min(5, o.pageRequests)) break
  }
  if (times.length > 0 && reused < times.length)
    problems.push(`${times.length - reused} requests on a new socket`)
  const sorted = [...times].sort((a, b) => a - b)
  return {
    scenario,
    target,
    n,
    name: c.name,
    path: c.path,
    requests: times.length,
    p50: percentile(sorted, 50),
    p95: percentile(sorted, 95),
    max: sorted.at(-1) ?? null,
    shown,
    expected: c.expected.length,
    rowsOk: rowsOk && shown !== null,
    reused,
    load,
    problems,
  }
}
