// Derives every deployment of a seeded database from its events, in this process alone, and prints
// the CPU it took: the per-event cost of deriving deployments, measured without HTTP (the way
// docs/PERFORMANCE.md measures the cost of inserting an event). Run by bench/lib/insights.mjs.
//
// With `--steady N` it also measures keeping up: the history is rebuilt except its last N events,
// then those are derived in runs of `--run R` events (default 300), as the background task does
// while ingest goes on, and the CPU of those runs alone is reported as well.
import { readFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import pg from 'pg'
import { parseDatabaseUrl } from '../../dist/config.js'
import { openDatabase } from '../../dist/db/connect.js'
import {
  BACKLOG_BATCH,
  catchUpDeployments,
  rebuildDeployments,
  resetDeployments,
} from '../../dist/domain/deployments/store.js'
import { cpuSeconds } from './proc.mjs'

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { steady: { type: 'string' }, run: { type: 'string' } },
})
const url = positionals[0]
if (!url) {
  console.error('usage: node bench/lib/derive-child.mjs [--steady N [--run R]] DATABASE_URL')
  process.exit(2)
}
const steady = Number(values.steady ?? 0)
const runSize = Number(values.run ?? 300)
const database = openDatabase(parseDatabaseUrl(url))

function cpuMs(since) {
  const cpu = process.cpuUsage(since)
  return (cpu.user + cpu.system) / 1000
}

/**
 * On PostgreSQL, the CPU so far of each of this process's backends (application_name 'shiplog', as
 * the pool names itself), by pid, read from /proc when the server is local; null on SQLite or when
 * a pid there is not a postgres process (a server elsewhere, or in a container). Derivation's
 * statements run there, so on PostgreSQL its cost is this process's CPU and theirs.
 * @returns {Promise<Map<number, number> | null>}
 */
async function backendCpu() {
  if (url.startsWith('sqlite:')) return null
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    const { rows } = await client.query(
      `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend'
        AND application_name = 'shiplog' AND pid <> pg_backend_pid()`,
    )
    const byPid = new Map()
    for (const r of rows) {
      const pid = Number(r.pid)
      const seconds = isPostgres(pid) ? cpuSeconds(pid) : null
      if (seconds === null) return null
      byPid.set(pid, seconds * 1000)
    }
    return byPid
  } finally {
    await client.end()
  }
}

/** @param {number} pid */
function isPostgres(pid) {
  try {
    return /\((postgres|postmaster)\)/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'))
  } catch {
    return false
  }
}

/**
 * The backends' CPU between two snapshots: a backend that started after the first counts whole.
 * @param {Map<number, number> | null} before @param {Map<number, number> | null} after
 */
function backendCpuMs(before, after) {
  if (before === null || after === null) return null
  let total = 0
  for (const [pid, ms] of after) total += ms - (before.get(pid) ?? 0)
  return total
}

try {
  const backendsBefore = await backendCpu()
  const before = process.cpuUsage()
  const t0 = performance.now()
  const events = await rebuildDeployments(database)
  const result = {
    events,
    cpuMs: cpuMs(before),
    seconds: (performance.now() - t0) / 1000,
    backendCpuMs: backendCpuMs(backendsBefore, await backendCpu()),
  }
  if (steady > 0) {
    // Derive all but the last `steady` events (in the rebuild's own way), then time the rest.
    await resetDeployments(database)
    const stop = events - steady
    let derived = 0
    while (derived < stop) {
      const r = await catchUpDeployments(database, { limit: Math.min(stop - derived, BACKLOG_BATCH) })
      derived += r.events
      if (r.events === 0) break
    }
    const backendsBeforeSteady = await backendCpu()
    const start = process.cpuUsage()
    const t1 = performance.now()
    let caughtUp = 0
    let runs = 0
    for (;;) {
      const r = await catchUpDeployments(database, { limit: runSize })
      caughtUp += r.events
      runs++
      if (!r.more && r.events === 0) break
    }
    Object.assign(result, {
      steadyEvents: caughtUp,
      steadyRuns: runs,
      steadyCpuMs: cpuMs(start),
      steadySeconds: (performance.now() - t1) / 1000,
    })
    result.steadyBackendCpuMs = backendCpuMs(backendsBeforeSteady, await backendCpu())
  }
  console.log(JSON.stringify(result))
} finally {
  await database.close()
}
