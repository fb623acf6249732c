// Derives every deployment of a seeded database from its events, in this process alone, and prints
// the CPU it took: the per-event cost of deriving deployments, measured without HTTP (the way
// docs/PERFORMANCE.md measures the cost of inserting an event). Run by bench/lib/insights.mjs.
//
// With `--steady N` it also measures keeping up: the history is rebuilt except its last N events,
// then those are derived in runs of `--run R` events (default 300), as the background task does
// while ingest goes on, and the CPU of those runs alone is reported as well.
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
 * On PostgreSQL, the CPU so far of the database's other backends (this process's pool), read from
 * /proc when the server is local; null on SQLite or when it is not. Derivation's statements run there,
 * so on PostgreSQL its cost is this process's CPU and theirs.
 */
async function backendCpuMs() {
  if (url.startsWith('sqlite:')) return null
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    const { rows } = await client.query(
      'SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()',
    )
    let total = 0
    for (const r of rows) {
      const s = cpuSeconds(Number(r.pid))
      if (s === null) return null
      total += s * 1000
    }
    return total
  } finally {
    await client.end()
  }
}

try {
  const before = process.cpuUsage()
  const t0 = performance.now()
  const events = await rebuildDeployments(database)
  const result = {
    events,
    cpuMs: cpuMs(before),
    seconds: (performance.now() - t0) / 1000,
    backendCpuMs: await backendCpuMs(),
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
    const backendBefore = await backendCpuMs()
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
    const backendAfter = await backendCpuMs()
    result.steadyBackendCpuMs =
      backendBefore === null || backendAfter === null ? null : backendAfter - backendBefore
  }
  console.log(JSON.stringify(result))
} finally {
  await database.close()
}
