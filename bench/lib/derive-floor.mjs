// The floor under deriving deployments: what the two things every derivation must do cost on their
// own, with none of its logic. It reads every event in the shape derivation reads them, in runs of
// 20,000 (as a rebuild does), and writes one deployment row per two events (the bench history has
// about one deployment per two events) into a scratch table shaped like `deployments`: first with
// all of its indexes, then with its primary key alone. CPU per event of this process and, on a local
// PostgreSQL, of the database backend too. Run by bench/lib/insights.mjs after derive-child.mjs, on
// the same seeded database, before any server opens it; the scratch table is dropped afterwards.
import { readFileSync } from 'node:fs'
import SqliteDatabase from 'better-sqlite3'
import pg from 'pg'
import { cpuSeconds } from './proc.mjs'

/** Events per run and transaction, as in a rebuild (BACKLOG_BATCH). */
const RUN = 20_000
/** Rows per multi-row statement on PostgreSQL, as store-postgres.ts writes them. */
const ROWS_PER_STATEMENT = 500
const SCRATCH = 'bench_floor'
/** The columns derivation reads of an event (EVENT_COLUMN_LIST in derivation.ts). */
const EVENT_COLUMNS =
  'id, account_id, service, environment, version, status, received_at, deployer, api_key_name'
const DEPLOYMENT_COLUMNS =
  'id, account_id, service, environment, version, started_at, finished_at, result, instant, finish_event_id, ' +
  'rollback, rolled_back, deployer, api_key_name, event_ids'

const url = process.argv[2]
if (!url) {
  console.error('usage: node bench/lib/derive-floor.mjs DATABASE_URL   (sqlite:FILE or postgres://…)')
  process.exit(2)
}

function cpuMs() {
  const c = process.cpuUsage()
  return (c.user + c.system) / 1000
}

/**
 * The deployment row written for events i and i+1 of a run: opened by the first, closed by the second,
 * in the first one's service and environment (so its index entries land where derivation's would).
 * @param {{ id: number, accountId: number, service: string, environment: string, version: string, receivedAt: number, deployer: string | null, apiKeyName: string | null }} e
 */
function rowOf(e) {
  return [
    e.id,
    e.accountId,
    e.service,
    e.environment,
    e.version,
    e.receivedAt,
    e.receivedAt + 60_000,
    'succeeded',
    0,
    e.id + 1,
    0,
    0,
    e.deployer,
    e.apiKeyName,
    `${e.id},${e.id + 1}`,
  ]
}

/** @param {string} file */
function sqliteFloor(file) {
  const db = new SqliteDatabase(file, { fileMustExist: true })
  try {
    db.pragma('synchronous = normal')
    db.pragma('cache_size = -65536')
    const read = db.prepare(
      'SELECT id, account_id AS accountId, service, environment, version, status, received_at AS receivedAt, ' +
        'deployer, api_key_name AS apiKeyName FROM events WHERE id > ? ORDER BY id LIMIT ?',
    )
    /** @returns {Array<Parameters<typeof rowOf>[0]>} */
    const readRun = (after) => /** @type {never} */ (read.all(after, RUN))
    const readAll = () => {
      let after = 0
      let events = 0
      const start = cpuMs()
      for (;;) {
        const run = readRun(after)
        if (run.length === 0) break
        events += run.length
        after = /** @type {{ id: number }} */ (run.at(-1)).id
      }
      return { events, cpuMs: cpuMs() - start }
    }
    // Its schema as stored, renamed: the same columns, checks, key and (when asked) indexes.
    const schema = (/** @type {string} */ type) =>
      /** @type {Array<{ sql: string }>} */ (
        db
          .prepare(
            "SELECT sql FROM sqlite_master WHERE type = ? AND tbl_name = 'deployments' AND sql IS NOT NULL",
          )
          .all(type)
      ).map((r) => r.sql.replaceAll('"deployments', `"${SCRATCH}`))
    const writeAll = (/** @type {boolean} */ withIndexes) => {
      db.exec(`DROP TABLE IF EXISTS ${SCRATCH}`)
      for (const s of schema('table')) db.exec(s)
      if (withIndexes) for (const s of schema('index')) db.exec(s)
      try {
        const insert = db.prepare(
          `INSERT INTO ${SCRATCH} (${DEPLOYMENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        )
        // The events are read again for each variant, outside the measured time.
        let after = 0
        let events = 0
        let spent = 0
        for (;;) {
          const run = readRun(after)
          if (run.length === 0) break
          const start = cpuMs()
          db.exec('BEGIN IMMEDIATE')
          for (let i = 0; i < run.length; i += 2) insert.run(...rowOf(/** @type {never} */ (run[i])))
          db.exec('COMMIT')
          spent += cpuMs() - start
          events += run.length
          after = /** @type {{ id: number }} */ (run.at(-1)).id
        }
        return { events, cpuMs: spent }
      } finally {
        if (db.inTransaction) db.exec('ROLLBACK')
        db.exec(`DROP TABLE IF EXISTS ${SCRATCH}`)
      }
    }
    const reading = readAll()
    const allIndexes = writeAll(true)
    const primaryKeyOnly = writeAll(false)
    return { reading, allIndexes, primaryKeyOnly }
  } finally {
    db.close()
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

/** @param {string} connectionString */
async function postgresFloor(connectionString) {
  const client = new pg.Client({ connectionString })
  await client.connect()
  try {
    const { rows: who } = await client.query('SELECT pg_backend_pid() AS pid')
    const backendPid = Number(who[0].pid)
    // On a local server the backend's CPU is in /proc; elsewhere (another host, a container: the pid
    // is not a postgres process here) it is not counted (null).
    const local = isPostgres(backendPid)
    const backendMs = () => {
      const s = local ? cpuSeconds(backendPid) : null
      return s === null ? null : s * 1000
    }
    const readRun = async (/** @type {number} */ after) => {
      const { rows } = await client.query(
        `SELECT ${EVENT_COLUMNS} FROM events WHERE id > $1 ORDER BY id LIMIT ${RUN}`,
        [after],
      )
      // As toStoredEvent in derivation.ts shapes them (pg returns bigint columns as strings).
      return rows.map((r) => ({
        id: Number(r.id),
        accountId: Number(r.account_id),
        service: r.service,
        environment: r.environment,
        version: r.version,
        status: r.status,
        receivedAt: Number(r.received_at),
        deployer: r.deployer,
        apiKeyName: r.api_key_name,
      }))
    }
    const measure = async (
      /** @type {(after: number) => Promise<{ last: number, count: number, spent: number, spentBackend: number | null } | null>} */ step,
    ) => {
      let after = 0
      let events = 0
      let spent = 0
      /** @type {number | null} */
      let spentBackend = 0
      for (;;) {
        const done = await step(after)
        if (!done) break
        events += done.count
        spent += done.spent
        spentBackend =
          spentBackend === null || done.spentBackend === null ? null : spentBackend + done.spentBackend
        after = done.last
      }
      return { events, cpuMs: spent, backendCpuMs: spentBackend }
    }
    const reading = await measure(async (after) => {
      const start = cpuMs()
      const startBackend = backendMs()
      const run = await readRun(after)
      const endBackend = backendMs()
      if (run.length === 0) return null
      return {
        last: /** @type {{ id: number }} */ (run.at(-1)).id,
        count: run.length,
        spent: cpuMs() - start,
        spentBackend: startBackend === null || endBackend === null ? null : endBackend - startBackend,
      }
    })
    const writeAll = async (/** @type {boolean} */ withIndexes) => {
      await client.query(`DROP TABLE IF EXISTS ${SCRATCH}`)
      await client.query(
        withIndexes
          ? `CREATE TABLE ${SCRATCH} (LIKE deployments INCLUDING ALL)`
          : `CREATE TABLE ${SCRATCH} (LIKE deployments INCLUDING DEFAULTS INCLUDING CONSTRAINTS, PRIMARY KEY (id))`,
      )
      await client.query(
        `ALTER TABLE ${SCRATCH} ADD FOREIGN KEY (account_id) REFERENCES accounts (id) ON DELETE CASCADE`,
      )
      try {
        return await measure(async (after) => {
          const run = await readRun(after)
          if (run.length === 0) return null
          const start = cpuMs()
          const startBackend = backendMs()
          await client.query('BEGIN')
          for (let i = 0; i < run.length; i += 2 * ROWS_PER_STATEMENT) {
            const rows = []
            for (let j = i; j < Math.min(run.length, i + 2 * ROWS_PER_STATEMENT); j += 2)
              rows.push(rowOf(/** @type {never} */ (run[j])))
            const column = (/** @type {number} */ k) => rows.map((r) => r[k])
            await client.query(
              `INSERT INTO ${SCRATCH} (${DEPLOYMENT_COLUMNS}) SELECT * FROM unnest($1::bigint[], $2::bigint[],
              $3::text[], $4::text[], $5::text[], $6::bigint[], $7::bigint[], $8::text[], $9::integer[], $10::bigint[],
              $11::integer[], $12::integer[], $13::text[], $14::text[], $15::text[])`,
              Array.from({ length: 15 }, (_, k) => column(k)),
            )
          }
          await client.query('COMMIT')
          const endBackend = backendMs()
          return {
            last: /** @type {{ id: number }} */ (run.at(-1)).id,
            count: run.length,
            spent: cpuMs() - start,
            spentBackend: startBackend === null || endBackend === null ? null : endBackend - startBackend,
          }
        })
      } finally {
        await client.query('ROLLBACK').catch(() => {})
        await client.query(`DROP TABLE IF EXISTS ${SCRATCH}`)
      }
    }
    const allIndexes = await writeAll(true)
    const primaryKeyOnly = await writeAll(false)
    return { reading, allIndexes, primaryKeyOnly }
  } finally {
    await client.end()
  }
}

const result = url.startsWith('sqlite:') ? sqliteFloor(url.slice('sqlite:'.length)) : await postgresFloor(url)
console.log(JSON.stringify(result))
