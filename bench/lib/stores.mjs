// The databases the ingest scenarios write to: a SQLite file in the run's directory or a fresh
// PostgreSQL database (dropped at clean-up), and what the checks ask of them.
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import SqliteDatabase from 'better-sqlite3'
import pg from 'pg'
import { cleanups, runDir } from './lifecycle.mjs'
import { pgServerUrl } from './options.mjs'

/**
 * @typedef {object} Store
 * @property {'sqlite' | 'postgres'} dialect
 * @property {string} databaseUrl
 * @property {(source: string) => Promise<Map<string, number>>} storedVersions how many rows of that
 *   form the database holds per version
 * @property {() => Promise<number>} underived events the server has not derived into deployments yet
 */

/** Events not derived yet, and whether gaps wait: the same question on both databases. */
export const UNDERIVED_SQL =
  'SELECT (SELECT coalesce(max(id), 0) FROM events) - (SELECT through FROM deployments_progress WHERE id = 1) ' +
  '+ (SELECT count(*) FROM deployment_gaps) AS n'

/**
 * Waits (bounded) until the server has derived every event: each scenario then starts without the
 * previous one's backlog competing with it.
 * @param {Store} store
 */
export async function settleDerivation(store) {
  const deadline = Date.now() + 120_000
  for (;;) {
    const behind = await store.underived()
    if (behind <= 0) return
    if (Date.now() > deadline) throw new Error(`the server still had ${behind} events to derive after 120 s`)
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
}

/** @returns {Store} */
export function sqliteStore() {
  const file = join(runDir, 'sqlite', 'shiplog.db')
  return {
    dialect: 'sqlite',
    databaseUrl: `sqlite:${file}`,
    storedVersions: async (source) => {
      const db = new SqliteDatabase(file, { readonly: true, fileMustExist: true })
      try {
        const rows = /** @type {Array<{ version: string, n: number }>} */ (
          db
            .prepare('SELECT version, count(*) AS n FROM events WHERE source = ? GROUP BY version')
            .all(source)
        )
        return new Map(rows.map((r) => [r.version, r.n]))
      } finally {
        db.close()
      }
    },
    underived: async () => {
      const db = new SqliteDatabase(file, { readonly: true, fileMustExist: true })
      try {
        return Number(/** @type {{ n: number }} */ (db.prepare(UNDERIVED_SQL).get()).n)
      } finally {
        db.close()
      }
    },
  }
}

/** Creates a fresh database on the PostgreSQL server (dropped at cleanup). @returns {Promise<Store>} */
export async function postgresStore() {
  const name = `shiplog_bench_${randomBytes(6).toString('hex')}`
  const admin = async (/** @type {string} */ sql) => {
    const client = new pg.Client({ connectionString: pgServerUrl, connectionTimeoutMillis: 5000 })
    await client.connect()
    try {
      await client.query(sql)
    } finally {
      await client.end()
    }
  }
  await admin(`CREATE DATABASE "${name}"`)
  cleanups.push(() => admin(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`))
  const url = new URL(pgServerUrl)
  url.pathname = `/${name}`
  const databaseUrl = url.toString()
  return {
    dialect: 'postgres',
    databaseUrl,
    storedVersions: async (source) => {
      const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 5000 })
      await client.connect()
      try {
        const res = await client.query(
          'SELECT version, count(*)::int AS n FROM events WHERE source = $1 GROUP BY version',
          [source],
        )
        return new Map(res.rows.map((r) => [String(r.version), Number(r.n)]))
      } finally {
        await client.end()
      }
    },
    underived: async () => {
      const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 5000 })
      await client.connect()
      try {
        return Number((await client.query(UNDERIVED_SQL)).rows[0].n)
      } finally {
        await client.end()
      }
    },
  }
}
