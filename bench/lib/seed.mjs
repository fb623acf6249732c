// Synthetic event history for the read benchmarks (exports, /logs/ pages), written straight into the
// database: far faster than ingesting millions of events over HTTP, and identical on SQLite and
// PostgreSQL because both are fed from the same deterministic generator.
//
// The history: 20 services, 5 environments (skewed), 3 statuses (80% Deployed, 15% Deploying,
// 5% Failed), per-service semantic versions (3% release candidates "-rc.N", about 1 in 100,000 a
// "-hotfix" build, and always one at 10%, 50% and 90% of the history, so the rare-version page has
// rows to check even on a small dataset), 40% with a CI url, 60% with a commit, 25% with a description (some with commas,
// quotes, line breaks or a leading "=" / "-" to exercise CSV quoting and formula escaping), received_at
// strictly increasing over the last two years, so ids follow arrival as in a real database. On SQLite
// the version search index is then brought up to date, as the server's background indexer would have.
import SqliteDatabase from 'better-sqlite3'
import pg from 'pg'

export const SERVICES = [
  'api-gateway',
  'auth',
  'billing',
  'catalog',
  'checkout',
  'search',
  'notifications',
  'payments',
  'inventory',
  'orders',
  'shipping',
  'reviews',
  'recommendations',
  'media',
  'analytics',
  'admin-web',
  'storefront',
  'mobile-bff',
  'scheduler',
  'reporting',
]
/** [name, weight out of 100] */
const ENVIRONMENTS = /** @type {const} */ ([
  ['Production', 30],
  ['Staging', 30],
  ['Development', 20],
  ['QA', 15],
  ['Canary', 5],
])
const DEPLOYERS = ['ci-bot', 'alice@example.com', 'bob@example.com', 'carol@example.com', 'dave@example.com']
const DESCRIPTIONS = [
  'Routine release',
  'Bump dependencies, fix flaky test',
  'Rollback of the previous release: "checkout" errors',
  'Feature flag cleanup\nand a second line from the commit message',
  '=HYPERLINK("http://example.com") should stay text',
  '-revert "add cache"',
  'Schema migration 42, 3 tables',
  'Hotfix for the payment timeout, see incident #1234',
]

export const SPAN_MS = 730 * 24 * 60 * 60 * 1000
const DAY_MS = 24 * 60 * 60 * 1000

/** Deterministic 32-bit mix (murmur3 finaliser) of a row number and a salt. @param {number} i @param {number} salt */
export function mix(i, salt) {
  let h = Math.imul(i ^ salt, 0x9e3779b1)
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  h ^= h >>> 16
  return h >>> 0
}

/**
 * Where the history of `n` events lies in time, and the filter values the page benchmark uses.
 * @param {number} n @param {number} endMs
 */
export function historyPlan(n, endMs) {
  const startMs = endMs - SPAN_MS
  return {
    n,
    startMs,
    endMs,
    /** A 30-day window half-way back. */
    narrow: { from: startMs + SPAN_MS / 2, to: startMs + SPAN_MS / 2 + 30 * DAY_MS - 1 },
    /** A window over the middle half of the history (about n/2 events). */
    wide: { from: startMs + SPAN_MS / 4, to: startMs + (3 * SPAN_MS) / 4 },
  }
}

/**
 * @typedef {object} SeedTally how many seeded events match each benchmarked filter
 * @property {number} rows
 * @property {Record<string, number>} service
 * @property {Record<string, number>} environment
 * @property {Record<string, number>} status
 * @property {number} rc versions containing "-rc"
 * @property {number} hotfix versions containing "-hotfix"
 * @property {number} narrow events in plan.narrow
 * @property {number} wide events in plan.wide
 */

/**
 * @typedef {object} SeedEvent
 * @property {string} service
 * @property {string} environment
 * @property {string} version
 * @property {string} status
 * @property {string | null} url
 * @property {string | null} commit
 * @property {string | null} description
 * @property {string | null} deployer
 * @property {string} source
 * @property {number} receivedAt
 */

/**
 * The events 0..n-1 in arrival order: `next()` returns the following one (null at the end) and
 * counts it in `tally`.
 * @param {ReturnType<typeof historyPlan>} plan
 */
export function makeHistory(plan) {
  const { n, startMs } = plan
  const step = SPAN_MS / n
  const jitter = Math.max(0, Math.floor(step / 2) - 1)
  const perService = new Array(SERVICES.length).fill(0)
  const hotfixAt = new Set([Math.floor(n * 0.1), Math.floor(n * 0.5), Math.floor(n * 0.9)])
  /** @type {SeedTally} */
  const tally = { rows: 0, service: {}, environment: {}, status: {}, rc: 0, hotfix: 0, narrow: 0, wide: 0 }
  let i = 0
  /** @returns {SeedEvent | null} */
  const next = () => {
    if (i >= n) return null
    const svcIndex = mix(i, 1) % SERVICES.length
    const service = /** @type {string} */ (SERVICES[svcIndex])
    const s = perService[svcIndex]++
    let version = `${1 + Math.floor(s / 2000)}.${Math.floor(s / 50) % 40}.${s % 50}`
    const v = mix(i, 2) % 100_000
    if (v === 0 || hotfixAt.has(i)) version += '-hotfix'
    else if (v % 100 < 3) version += `-rc.${1 + (v % 3)}`
    /** @type {string} */
    let environment = ENVIRONMENTS[0][0]
    let e = mix(i, 3) % 100
    for (const [name, weight] of ENVIRONMENTS) {
      if (e < weight) {
        environment = name
        break
      }
      e -= weight
    }
    const st = mix(i, 4) % 100
    const status = st < 80 ? 'Deployed' : st < 95 ? 'Deploying' : 'Failed'
    const r = mix(i, 5)
    const url = r % 10 < 4 ? `https://ci.example.com/${service}/builds/${i + 1}` : null
    const commit =
      (r >>> 8) % 10 < 6 ? `${mix(i, 6).toString(16).padStart(8, '0')}${'0123456789abcdef'.repeat(2)}` : null
    const description = (r >>> 16) % 4 === 0 ? (DESCRIPTIONS[(r >>> 20) % DESCRIPTIONS.length] ?? null) : null
    const deployer = (r >>> 24) % 2 === 0 ? (DEPLOYERS[(r >>> 25) % DEPLOYERS.length] ?? null) : null
    const so = mix(i, 7) % 10
    const source = so < 6 ? 'deploy' : so < 9 ? 'put-get' : 'put-post'
    const receivedAt = Math.floor(startMs + i * step) + (jitter > 0 ? mix(i, 8) % jitter : 0)
    i++

    tally.rows++
    tally.service[service] = (tally.service[service] ?? 0) + 1
    tally.environment[environment] = (tally.environment[environment] ?? 0) + 1
    tally.status[status] = (tally.status[status] ?? 0) + 1
    if (version.includes('-rc')) tally.rc++
    if (version.includes('-hotfix')) tally.hotfix++
    if (receivedAt >= plan.narrow.from && receivedAt <= plan.narrow.to) tally.narrow++
    if (receivedAt >= plan.wide.from && receivedAt <= plan.wide.to) tally.wide++
    return { service, environment, version, status, url, commit, description, deployer, source, receivedAt }
  }
  return { tally, next }
}

/**
 * @typedef {object} SeedTarget
 * @property {number} accountId
 * @property {number} apiKeyId
 * @property {string} apiKeyName
 */

/**
 * Fills a SQLite database (schema already migrated, server not running): one transaction, one prepared
 * statement. Returns the tally and the largest event id.
 * @param {string} file @param {ReturnType<typeof historyPlan>} plan @param {SeedTarget} target
 */
export function seedSqlite(file, plan, target) {
  const db = new SqliteDatabase(file, { fileMustExist: true })
  try {
    db.pragma('journal_mode = WAL')
    db.pragma('synchronous = OFF')
    db.pragma('cache_size = -262144')
    // The version search index (migration 0003) holds casefold(version), the function Shiplog
    // registers on its own connections (src/db/connect.ts); this one needs the same.
    db.function('casefold', { deterministic: true }, (value) =>
      typeof value === 'string' ? value.toLowerCase() : value,
    )
    const insert = db.prepare(
      `INSERT INTO events (account_id, service, environment, version, status, url, commit_sha, description,
        deployer, source, api_key_id, api_key_name, received_at, occurred_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
    )
    const history = makeHistory(plan)
    db.transaction(() => {
      for (let e = history.next(); e !== null; e = history.next()) {
        insert.run(
          target.accountId,
          e.service,
          e.environment,
          e.version,
          e.status,
          e.url,
          e.commit,
          e.description,
          e.deployer,
          e.source,
          target.apiKeyId,
          target.apiKeyName,
          e.receivedAt,
          e.receivedAt,
        )
      }
    })()
    // A running server indexes versions in the background (src/domain/events/version-index.ts), a few
    // tens of thousands of events a second; the pages are measured as they are once it has caught
    // up, so the seed indexes its events itself, the same way, in one go.
    db.transaction(() => {
      db.exec(`INSERT INTO events_version_fts (rowid, version)
        SELECT id, casefold(version) FROM events WHERE id > (SELECT through FROM events_version_index)`)
      db.exec('UPDATE events_version_index SET through = (SELECT max(id) FROM events)')
    })()
    db.pragma('wal_checkpoint(TRUNCATE)')
    return { tally: history.tally, ...sqliteStoredRange(db, target.accountId) }
  } finally {
    db.close()
  }
}

/**
 * @typedef {object} StoredRange what the database holds after seeding, counted there (not the loop's
 *   own counter): the account's events and the first and last id
 * @property {number} count
 * @property {number} minId
 * @property {number} maxId
 */

/**
 * @param {SqliteDatabase.Database} db @param {number} accountId
 * @returns {StoredRange}
 */
function sqliteStoredRange(db, accountId) {
  const row = /** @type {{ count: number, minId: number | null, maxId: number | null }} */ (
    db
      .prepare(
        'SELECT count(*) AS count, min(id) AS minId, max(id) AS maxId FROM events WHERE account_id = ?',
      )
      .get(accountId)
  )
  return { count: row.count, minId: row.minId ?? 0, maxId: row.maxId ?? 0 }
}

/** Reads the ids the seed needs from a freshly set-up SQLite database. @param {string} file */
export function sqliteSeedTarget(file) {
  const db = new SqliteDatabase(file, { readonly: true, fileMustExist: true })
  try {
    return /** @type {SeedTarget} */ (
      db
        .prepare(
          `SELECT k.account_id AS accountId, k.id AS apiKeyId, k.name AS apiKeyName
           FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE a.name = 'Bench' ORDER BY k.id LIMIT 1`,
        )
        .get()
    )
  } finally {
    db.close()
  }
}

/** @param {string} databaseUrl */
export async function postgresSeedTarget(databaseUrl) {
  const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 5000 })
  await client.connect()
  try {
    const res = await client.query(
      `SELECT k.account_id::int AS "accountId", k.id::int AS "apiKeyId", k.name AS "apiKeyName"
       FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE a.name = 'Bench' ORDER BY k.id LIMIT 1`,
    )
    return /** @type {SeedTarget} */ (res.rows[0])
  } finally {
    await client.end()
  }
}

const PG_BATCH = 5000

/**
 * Fills a PostgreSQL database (schema already migrated) in multi-row batches (INSERT ... SELECT FROM
 * unnest of one array per column), then VACUUM ANALYZE, as autovacuum would do after a bulk load.
 * @param {string} databaseUrl @param {ReturnType<typeof historyPlan>} plan @param {SeedTarget} target
 */
export async function seedPostgres(databaseUrl, plan, target) {
  const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 5000 })
  await client.connect()
  try {
    await client.query('SET synchronous_commit = off')
    const history = makeHistory(plan)
    /** @type {Promise<unknown> | null} */
    let inFlight = null
    for (;;) {
      // One batch is built while the previous one is being inserted.
      /** @type {Array<Array<string | number | null>>} */
      const c = Array.from({ length: 10 }, () => [])
      for (let k = 0; k < PG_BATCH; k++) {
        const e = history.next()
        if (e === null) break
        c[0]?.push(e.service)
        c[1]?.push(e.environment)
        c[2]?.push(e.version)
        c[3]?.push(e.status)
        c[4]?.push(e.url)
        c[5]?.push(e.commit)
        c[6]?.push(e.description)
        c[7]?.push(e.deployer)
        c[8]?.push(e.source)
        c[9]?.push(e.receivedAt)
      }
      if (inFlight) await inFlight
      if (c[0]?.length === 0) break
      inFlight = client.query(
        `INSERT INTO events (account_id, service, environment, version, status, url, commit_sha, description,
           deployer, source, api_key_id, api_key_name, received_at, occurred_at)
         SELECT $1, t.service, t.environment, t.version, t.status, t.url, t.commit_sha, t.description,
           t.deployer, t.source, $2, $3, t.received_at, t.received_at
         FROM unnest($4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[],
           $11::text[], $12::text[], $13::bigint[]) WITH ORDINALITY
           AS t(service, environment, version, status, url, commit_sha, description, deployer, source,
             received_at, n)
         ORDER BY t.n`,
        [target.accountId, target.apiKeyId, target.apiKeyName, ...c],
      )
    }
    await client.query('VACUUM (ANALYZE) events')
    const res = await client.query(
      `SELECT count(*)::bigint AS count, min(id)::bigint AS "minId", max(id)::bigint AS "maxId"
       FROM events WHERE account_id = $1`,
      [target.accountId],
    )
    const row = res.rows[0]
    return {
      tally: history.tally,
      count: Number(row?.count ?? 0),
      minId: Number(row?.minId ?? 0),
      maxId: Number(row?.maxId ?? 0),
    }
  } finally {
    await client.end()
  }
}
