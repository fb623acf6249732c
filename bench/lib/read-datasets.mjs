// The read parts' datasets: a fresh SQLite file or PostgreSQL database seeded directly with a
// synthetic history (bench/lib/seed.mjs), waited on until the server has derived it, then removed.

import { randomBytes } from 'node:crypto'
import { mkdirSync, rmSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { Worker } from 'node:worker_threads'
import SqliteDatabase from 'better-sqlite3'
import pg from 'pg'
import { countLabel } from './read-common.mjs'
import { postgresSeedTarget, seedPostgres, sqliteSeedTarget } from './seed.mjs'

/** @typedef {import('./read-common.mjs').ReadsOptions} ReadsOptions */

/**
 * @typedef {object} Dataset
 * @property {string} databaseUrl
 * @property {(plan: ReturnType<typeof import('./seed.mjs').historyPlan>) => Promise<{ tally: import('./seed.mjs').SeedTally } & import('./seed.mjs').StoredRange>} seed
 * @property {() => Promise<number | null>} size
 * @property {() => Promise<number>} underived events the server has not derived into deployments yet
 * @property {() => Promise<void>} remove
 */

/** Events not derived yet, and gaps waiting (as bench/lib/stores.mjs asks it). */
export const UNDERIVED_SQL =
  'SELECT (SELECT coalesce(max(id), 0) FROM events) - (SELECT through FROM deployments_progress WHERE id = 1) ' +
  '+ (SELECT count(*) FROM deployment_gaps) AS n'

/**
 * Waits (bounded) until the server has derived every seeded event into deployments. A fresh server
 * on a freshly seeded database derives them in the background, on the thread that also streams the
 * export: measured meanwhile, an export paid for that work (5.7–6.3 µs of server CPU a row, against
 * 1.7–2 µs once derived). Returns the seconds waited.
 * @param {Dataset} store
 */
export async function settleDerivation(store) {
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
export function sqliteDataset(o, n) {
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
export async function postgresDataset(o, n) {
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
