// The read benchmarks: streamed CSV/JSON exports (throughput and the server's memory) and /logs/ page
// times, against the real server (`shiplog serve`, a child process) over a database seeded directly
// with a synthetic history (bench/lib/seed.mjs). Each dataset gets a fresh SQLite file or PostgreSQL
// database, removed as soon as its measurements are done. The datasets (read-datasets.mjs), one export
// download (read-export.mjs) and the page cases (read-pages.mjs) are modules of their own.

// Other parts and bench/export-cpu.mjs import these from here.
export {
  countLabel,
  EMAIL,
  EXPORT_COLUMNS,
  exportLimitSeconds,
  loadAverage,
  PASSWORD,
  seedLimitSeconds,
} from './read-common.mjs'

import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { runNode, startServer } from './children.mjs'
import { closeSession, login } from './http.mjs'
import { countLabel, EMAIL, PASSWORD, seedLimitSeconds } from './read-common.mjs'
import { postgresDataset, settleDerivation, sqliteDataset } from './read-datasets.mjs'
import { measureExport } from './read-export.mjs'
import { measurePage, pageCases } from './read-pages.mjs'
import { summariseLog } from './report.mjs'
import { historyPlan } from './seed.mjs'

/** @typedef {import('./read-common.mjs').ReadsOptions} ReadsOptions */
/** @typedef {import('./read-common.mjs').ExportRow} ExportRow */
/** @typedef {import('./read-common.mjs').PageRow} PageRow */
/** @typedef {import('./read-common.mjs').SeedInfo} SeedInfo */
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
