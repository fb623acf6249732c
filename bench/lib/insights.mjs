// The insights part of `npm run bench`: a history of deployments (500 services promoted through 6
// environments over two years, some failures and retries) seeded straight into a fresh database; the CPU it takes
// to derive its deployments from the events (`derive-child.mjs`, no HTTP); then the board now and
// at a past instant, a service page, and /insights/ over 30 and 90 days, timed through a real
// server like the /logs/ pages (bench/lib/reads.mjs).
import { randomBytes } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import SqliteDatabase from 'better-sqlite3'
import pg from 'pg'
import { runNode, startServer } from './children.mjs'
import {
  CHECK_TARGET_MS,
  checkCases,
  seedGuardrailsPostgres,
  seedGuardrailsSqlite,
} from './guardrails-seed.mjs'
import { closeSession, login, timedGet } from './http.mjs'
import { benchAccountEnv, countLabel, EMAIL, loadAverage, PASSWORD } from './reads.mjs'
import { mix } from './seed.mjs'

export const SERVICE_COUNT = 500
export const ENVIRONMENTS = ['dev', 'test', 'qa', 'staging', 'preprod', 'prod']
const DAY_MS = 86_400_000
/** The history covers this many days, ending a minute before the run. */
export const SPAN_DAYS = 730
/** What the issue asks of every page here. */
export const PAGE_TARGET_MS = 50
/** What deriving deployments may add per event. */
export const DERIVE_TARGET_US = 5

export function serviceName(s) {
  return `svc-${String(s).padStart(3, '0')}`
}

/**
 * The events 0..n-1 in arrival order. Each step picks a service at random (deterministically); the
 * service either opens a deployment of its current version in its current environment (Deploying)
 * or ends the open one: Deployed (the version moves on to the next environment, after prod a new
 * version starts at dev) or, one time in twelve, Failed (the same environment is tried again).
 * @param {number} n @param {number} endMs
 */
export function* deploymentEvents(n, endMs) {
  const startMs = endMs - SPAN_DAYS * DAY_MS
  const step = (SPAN_DAYS * DAY_MS) / n
  const state = Array.from({ length: SERVICE_COUNT }, () => ({ version: 1, env: 0, open: false }))
  for (let i = 0; i < n; i++) {
    const s = mix(i, 0x5eed) % SERVICE_COUNT
    const st = state[s]
    const environment = ENVIRONMENTS[st.env]
    const version = `2.${st.version}.0`
    let status
    if (!st.open) {
      status = 'Deploying'
      st.open = true
    } else {
      st.open = false
      if (mix(i, 0xfa11) % 12 === 0) status = 'Failed'
      else {
        status = 'Deployed'
        st.env++
        if (st.env === ENVIRONMENTS.length) {
          st.env = 0
          st.version++
        }
      }
    }
    yield {
      service: serviceName(s),
      environment,
      version,
      status,
      deployer: `dev${mix(i, 0xde9) % 40}`,
      receivedAt: Math.floor(startMs + i * step),
    }
  }
}

/** @param {string} file @param {number} n @param {number} endMs */
function seedSqlite(file, n, endMs) {
  const db = new SqliteDatabase(file, { fileMustExist: true })
  try {
    db.pragma('journal_mode = WAL')
    db.pragma('synchronous = OFF')
    const target = db
      .prepare(
        `SELECT k.account_id AS accountId, k.id AS keyId, k.name AS keyName FROM api_keys k
         JOIN accounts a ON a.id = k.account_id WHERE a.name = 'Bench' ORDER BY k.id LIMIT 1`,
      )
      .get()
    const insert = db.prepare(
      `INSERT INTO events (account_id, service, environment, version, status, deployer, source, api_key_id,
        api_key_name, received_at, occurred_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)`,
    )
    db.transaction(() => {
      for (const e of deploymentEvents(n, endMs)) {
        insert.run(
          target.accountId,
          e.service,
          e.environment,
          e.version,
          e.status,
          e.deployer,
          'deploy',
          target.keyId,
          target.keyName,
          e.receivedAt,
          e.receivedAt,
        )
      }
    })()
    db.pragma('wal_checkpoint(TRUNCATE)')
    return db.prepare('SELECT count(*) AS c FROM events').get().c
  } finally {
    db.close()
  }
}

/** @param {string} databaseUrl @param {number} n @param {number} endMs */
async function seedPostgres(databaseUrl, n, endMs) {
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  try {
    const { rows } = await client.query(
      `SELECT k.account_id::int AS "accountId", k.id::int AS "keyId", k.name AS "keyName" FROM api_keys k
       JOIN accounts a ON a.id = k.account_id WHERE a.name = 'Bench' ORDER BY k.id LIMIT 1`,
    )
    const target = rows[0]
    /** @type {Array<ReturnType<typeof deploymentEvents> extends Generator<infer T> ? T : never>} */
    let batch = []
    const flush = async () => {
      if (batch.length === 0) return
      await client.query(
        `INSERT INTO events (account_id, service, environment, version, status, deployer, source, api_key_id,
          api_key_name, received_at, occurred_at)
         SELECT $1, s, e, v, st, d, 'deploy', $2, $3, r, r
         FROM unnest($4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::bigint[]) AS t(s, e, v, st, d, r)`,
        [
          target.accountId,
          target.keyId,
          target.keyName,
          batch.map((x) => x.service),
          batch.map((x) => x.environment),
          batch.map((x) => x.version),
          batch.map((x) => x.status),
          batch.map((x) => x.deployer),
          batch.map((x) => x.receivedAt),
        ],
      )
      batch = []
    }
    for (const e of deploymentEvents(n, endMs)) {
      batch.push(e)
      if (batch.length === 5000) await flush()
    }
    await flush()
    await client.query('VACUUM ANALYZE events')
    const count = await client.query('SELECT count(*)::int AS c FROM events')
    return count.rows[0].c
  } finally {
    await client.end()
  }
}

function percentile(sorted, p) {
  if (sorted.length === 0) return null
  return sorted[Math.max(1, Math.ceil((p / 100) * sorted.length)) - 1] ?? null
}

/**
 * @typedef {object} InsightsOptions
 * @property {string} root @property {string} shiplogBin @property {string} runDir
 * @property {Array<() => Promise<void>>} cleanups
 * @property {Array<'sqlite' | 'postgres'>} dialects @property {string} pgServerUrl
 * @property {string} serverLogLevel @property {number} n @property {number} requests
 * @property {boolean} deriveOnly @property {number} steady @property {number} runSize
 * @property {number} caseSeconds
 * @property {number} [settleSeconds] how long to wait at most for the server's background catch-up
 * @property {string | null} [keepDir] BENCH_INSIGHTS_KEEP: seed and derive once into this directory
 *   (SQLite file) and a PostgreSQL database named after it, keep both, and reuse them on later runs
 *   of the same size (their seeding and derivation are then skipped, and reported from the run that
 *   made them)
 */

/** @param {InsightsOptions} o */
export async function benchInsights(o) {
  /** @type {Array<{ target: string, n: number, events: number, cpuMs: number, seconds: number, usPerEvent: number }>} */
  const derivations = []
  /** @type {Array<{ scenario: string, target: string, path: string, requests: number, p50: number | null, p95: number | null, max: number | null, cpuMs: number | null, load: number, problems: string[] }>} */
  const pageRows = []
  /** @type {string[]} */
  const problems = []
  for (const dialect of o.dialects) {
    const label = `${dialect} ${countLabel(o.n)}`
    try {
      await oneDatabase(o, dialect, label, derivations, pageRows)
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err)
      console.error(`  ${label} insights failed: ${message}`)
      problems.push(`${label} insights: did not complete: ${message.split('\n')[0]}`)
    }
  }
  for (const r of pageRows) for (const p of r.problems) problems.push(`${r.scenario}: ${p}`)
  return { derivations, pageRows, problems }
}

async function oneDatabase(o, dialect, label, derivations, pageRows) {
  let databaseUrl
  /** @type {() => Promise<void>} */
  let remove
  const keep = o.keepDir ?? null
  const pgName = keep
    ? `shiplog_bench_insights_kept_${o.n}_${Buffer.from(keep).toString('hex').slice(-16)}`
    : `shiplog_bench_insights_${randomBytes(4).toString('hex')}`
  const admin = async (text) => {
    const client = new pg.Client({ connectionString: o.pgServerUrl })
    await client.connect()
    try {
      return await client.query(text)
    } finally {
      await client.end()
    }
  }
  if (dialect === 'sqlite') {
    const dir = keep ? join(keep, `sqlite-${o.n}`) : join(o.runDir, 'insights-sqlite')
    mkdirSync(dir, { recursive: true })
    databaseUrl = `sqlite:${join(dir, 'shiplog.db')}`
    remove = async () => rmSync(dir, { recursive: true, force: true })
  } else {
    const url = new URL(o.pgServerUrl)
    url.pathname = `/${pgName}`
    databaseUrl = url.toString()
    let dropped = false
    remove = async () => {
      if (dropped) return
      dropped = true
      await admin(`DROP DATABASE IF EXISTS "${pgName}" WITH (FORCE)`)
    }
  }
  // What a kept dataset needs to be measured again: its end, its server secret and how long
  // deriving it took when it was made.
  const metaFile = keep ? join(keep, `${dialect}-${o.n}.json`) : null
  /** @type {{ endMs: number, secret: string, derived: { events: number, cpuMs: number, seconds: number } } | null} */
  let kept = null
  if (metaFile && existsSync(metaFile)) {
    kept = JSON.parse(readFileSync(metaFile, 'utf8'))
    if (dialect === 'postgres') {
      const found = await admin(`SELECT 1 FROM pg_database WHERE datname = '${pgName}'`)
      if (found.rowCount === 0) kept = null
    }
  }
  if (!kept) {
    if (metaFile) rmSync(metaFile, { force: true })
    await remove()
    if (dialect === 'sqlite')
      mkdirSync(databaseUrl.slice('sqlite:'.length, -'/shiplog.db'.length), { recursive: true })
    else await admin(`CREATE DATABASE "${pgName}"`)
  }
  if (!keep) o.cleanups.push(remove)
  try {
    /** @type {NodeJS.ProcessEnv} */
    let env
    let endMs
    if (kept) {
      env = {
        ...process.env,
        DATABASE_URL: databaseUrl,
        SHIPLOG_SECRET: kept.secret,
        LOG_LEVEL: o.serverLogLevel,
      }
      delete env.REDIS_URL
      delete env.PORT
      endMs = kept.endMs
      const d = kept.derived
      const usPerEvent = (d.cpuMs * 1000) / d.events
      derivations.push({ target: dialect, n: o.n, ...d, usPerEvent, reused: true })
      process.stderr.write(
        `  ${label}: reusing the kept dataset (derived earlier: ${usPerEvent.toFixed(2)} µs per event)\n`,
      )
    } else {
      env = await benchAccountEnv(o, databaseUrl)
      endMs = Date.now() - 60_000
      process.stderr.write(`  ${label}: seeding ${o.n.toLocaleString('en-US')} deployment events`)
      const t0 = performance.now()
      const count =
        dialect === 'sqlite'
          ? seedSqlite(databaseUrl.slice('sqlite:'.length), o.n, endMs)
          : await seedPostgres(databaseUrl, o.n, endMs)
      process.stderr.write(` in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`)
      if (count !== o.n) throw new Error(`the database holds ${count} events after seeding ${o.n}`)

      const deriveArgs = o.steady > 0 ? ['--steady', String(o.steady), '--run', String(o.runSize)] : []
      const out = await runNode(
        [join(o.root, 'bench', 'lib', 'derive-child.mjs'), ...deriveArgs, databaseUrl],
        {
          env,
          cwd: o.root,
          timeoutMs: 30 * 60_000,
        },
      )
      const derived = JSON.parse(out.trim().split('\n').at(-1) ?? '{}')
      const usPerEvent = (derived.cpuMs * 1000) / derived.events
      const steadyUsPerEvent = derived.steadyEvents
        ? (derived.steadyCpuMs * 1000) / derived.steadyEvents
        : null
      const perEvent = (/** @type {number | null | undefined} */ ms, /** @type {number} */ events) =>
        typeof ms === 'number' ? (ms * 1000) / events : null
      // The floor under it, on the same database: reading the events and writing deployment rows,
      // with no derivation logic (bench/lib/derive-floor.mjs).
      const floorOut = await runNode([join(o.root, 'bench', 'lib', 'derive-floor.mjs'), databaseUrl], {
        env,
        cwd: o.root,
        timeoutMs: 15 * 60_000,
      })
      const f = JSON.parse(floorOut.trim().split('\n').at(-1) ?? '{}')
      const floor = {
        readUs: perEvent(f.reading.cpuMs, f.reading.events),
        readBackendUs: perEvent(f.reading.backendCpuMs, f.reading.events),
        writeUs: perEvent(f.allIndexes.cpuMs, f.allIndexes.events),
        writeBackendUs: perEvent(f.allIndexes.backendCpuMs, f.allIndexes.events),
        writeKeyOnlyUs: perEvent(f.primaryKeyOnly.cpuMs, f.primaryKeyOnly.events),
        writeKeyOnlyBackendUs: perEvent(f.primaryKeyOnly.backendCpuMs, f.primaryKeyOnly.events),
      }
      derivations.push({
        target: dialect,
        n: o.n,
        ...derived,
        usPerEvent,
        backendUsPerEvent: perEvent(derived.backendCpuMs, derived.events),
        steadyUsPerEvent,
        steadyBackendUsPerEvent: derived.steadyEvents
          ? perEvent(derived.steadyBackendCpuMs, derived.steadyEvents)
          : null,
        floor,
      })
      process.stderr.write(
        `  ${label}: derived deployments of ${derived.events.toLocaleString('en-US')} events: ` +
          `${usPerEvent.toFixed(2)} µs CPU per event (${derived.seconds.toFixed(1)} s)` +
          `${steadyUsPerEvent === null ? '' : `; keeping up in runs of ${o.runSize}: ${steadyUsPerEvent.toFixed(2)} µs`}\n`,
      )
      if (derived.events !== o.n) throw new Error(`derivation took ${derived.events} of ${o.n} events`)
      if (o.steady > 0 && derived.steadyEvents !== o.steady)
        throw new Error(`keeping up derived ${derived.steadyEvents} of the last ${o.steady} events`)
      if (dialect === 'postgres') {
        // This server runs without autovacuum; in production it would have analysed the tables
        // the derivation just filled (as the seed's own VACUUM ANALYZE does for the events), and
        // without statistics the planner guesses one row for every deployments index.
        const client = new pg.Client({ connectionString: databaseUrl })
        await client.connect()
        try {
          await client.query('ANALYZE deployments, deployment_heads, version_firsts')
        } finally {
          await client.end()
        }
      }
      if (metaFile) writeFileSync(metaFile, JSON.stringify({ endMs, secret: env.SHIPLOG_SECRET, derived }))
    }
    if (o.deriveOnly) return
    if (dialect === 'sqlite') seedGuardrailsSqlite(databaseUrl.slice('sqlite:'.length), serviceName(42))
    else await seedGuardrailsPostgres(databaseUrl, serviceName(42))

    const server = await startServer({
      name: `shiplog serve (${label} insights)`,
      args: [o.shiplogBin, 'serve'],
      env,
      cwd: o.root,
      logFile: join(o.runDir, `shiplog-${dialect}-insights.log`),
      readyPath: '/readyz',
    })
    o.cleanups.push(server.stop)
    try {
      const session = await login(server.url, EMAIL, PASSWORD)
      try {
        // Seeding wrote the events straight into the tables, so the server starts with a backlog
        // that live ingest never leaves: every event to chain (tamper evidence) and to index by
        // version. It would compete with every page for the CPU; let it finish first.
        const settled = await settle(server.pid, o.settleSeconds ?? 900)
        process.stderr.write(
          `  ${label}: the server's background catch-up ${settled.idle ? 'finished' : 'was still running'} after ${settled.seconds.toFixed(0)} s\n`,
        )
        const past = new Date(endMs - (SPAN_DAYS / 2) * DAY_MS).toISOString()
        const cases = [
          {
            name: 'board now',
            path: '/services/',
            expect: [serviceName(0), serviceName(SERVICE_COUNT - 1), '2.'],
          },
          {
            name: 'board ?at= a year back',
            path: `/services/?at=${encodeURIComponent(past)}`,
            expect: [serviceName(0), serviceName(SERVICE_COUNT - 1)],
          },
          { name: 'service page', path: `/services/${serviceName(42)}/`, expect: [serviceName(42), '2.'] },
          { name: 'insights 30 days', path: '/insights/?range=30&environment=prod', expect: ['prod'] },
          { name: 'insights 90 days', path: '/insights/?range=90&environment=prod', expect: ['prod'] },
          // The same pages with nothing remembered: the derivation's generation is moved before
          // each request, as a derivation run does while events keep arriving.
          { name: 'board now, cold', path: '/services/', expect: [serviceName(0)], cold: true },
          {
            name: 'board ?at= a year back, cold',
            path: `/services/?at=${encodeURIComponent(past)}`,
            expect: [serviceName(0)],
            cold: true,
          },
          {
            name: 'insights 30 days, cold',
            path: '/insights/?range=30&environment=prod',
            expect: ['prod'],
            cold: true,
          },
          {
            name: 'insights 90 days, cold',
            path: '/insights/?range=90&environment=prod',
            expect: ['prod'],
            cold: true,
          },
          ...checkCases(serviceName).map((c) => ({ ...c, targetMs: CHECK_TARGET_MS })),
        ]
        const forget = await generationMover(dialect, databaseUrl)
        for (const c of cases) {
          const row = await measure(session, c, o, `${label} ${c.name}`, dialect, {
            pid: server.pid,
            before: c.cold ? forget.move : async () => {},
          })
          pageRows.push(row)
          process.stderr.write(
            `  ${row.scenario}: p50 ${row.p50?.toFixed(1) ?? '-'} ms, p95 ${row.p95?.toFixed(1) ?? '-'} ms, ` +
              `server CPU ${row.cpuMs?.toFixed(1) ?? '-'} ms per request` +
              `${row.problems.length ? ` (${row.problems.join('; ')})` : ''}\n`,
          )
        }
        await forget.close()
      } finally {
        closeSession(session)
      }
    } finally {
      await server.stop()
    }
  } finally {
    if (!keep) await remove()
  }
}

/** The process's user+system CPU in ms (Linux /proc), or null where there is none. */
function cpuMs(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? []
    return (Number(fields[11]) + Number(fields[12])) * 10
  } catch {
    return null
  }
}

/** Waits until the process uses under 5 % of a CPU over 2 s, or `limitSeconds` have passed. */
async function settle(pid, limitSeconds) {
  const started = performance.now()
  for (;;) {
    const before = cpuMs(pid)
    await new Promise((resolve) => setTimeout(resolve, 2000))
    const after = cpuMs(pid)
    const seconds = (performance.now() - started) / 1000
    if (before === null || after === null || after - before < 100) return { idle: true, seconds }
    if (seconds > limitSeconds) return { idle: false, seconds }
  }
}

/**
 * Moves the derivation's generation (deployments_progress), which every derivation run moves: the
 * server's remembered board and metrics no longer hold and the next request reads them again.
 */
async function generationMover(dialect, databaseUrl) {
  const statement = 'UPDATE deployments_progress SET generation = generation + 1 WHERE id = 1'
  if (dialect === 'sqlite') {
    const db = new SqliteDatabase(databaseUrl.slice('sqlite:'.length), { fileMustExist: true })
    db.pragma('busy_timeout = 5000')
    const update = db.prepare(statement)
    return { move: async () => void update.run(), close: async () => db.close() }
  }
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  return { move: async () => void (await client.query(statement)), close: () => client.end() }
}

async function measure(session, c, o, scenario, target, server) {
  const problems = []
  const times = []
  let cpuUsed = 0
  const load = loadAverage()
  const deadline = performance.now() + o.caseSeconds * 1000
  for (let k = 0; k < 2 + o.requests; k++) {
    let res
    try {
      await server.before()
      const cpuBefore = cpuMs(server.pid)
      res = await timedGet(session, c.path, 60_000)
      const cpuAfter = cpuMs(server.pid)
      if (k >= 2 && cpuBefore !== null && cpuAfter !== null) cpuUsed += cpuAfter - cpuBefore
    } catch (err) {
      problems.push(`request failed: ${err instanceof Error ? err.message : String(err)}`)
      break
    }
    if (res.status !== 200) {
      problems.push(`HTTP ${res.status}`)
      break
    }
    const missing = c.expect.filter((text) => !res.text.includes(text))
    if (missing.length > 0) {
      problems.push(`the page does not show ${missing.map((m) => JSON.stringify(m)).join(', ')}`)
      break
    }
    if (k >= 2) times.push(res.ms)
    if (performance.now() > deadline && times.length >= 5) break
  }
  const sorted = [...times].sort((a, b) => a - b)
  return {
    scenario,
    target,
    targetMs: c.targetMs ?? PAGE_TARGET_MS,
    path: c.path,
    requests: times.length,
    p50: percentile(sorted, 50),
    p95: percentile(sorted, 95),
    max: sorted.at(-1) ?? null,
    cpuMs: times.length > 0 ? cpuUsed / times.length : null,
    load,
    problems,
  }
}
