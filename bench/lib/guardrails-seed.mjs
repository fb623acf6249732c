// Guardrails for the insights bench's account (issue 27): a lock, a recurring freeze, a bad version
// and a promotion chain, written straight into the tables of a seeded dataset so that
// `GET /api/v1/check` does all of its work (every rule kind, the promotion's look-up in the
// deployments) at the dataset's size. Written again on a kept dataset (old rows removed first).
import SqliteDatabase from 'better-sqlite3'
import pg from 'pg'

/**
 * The checks the bench times, each with what its answer must say.
 * @param {(s: number) => string} serviceName the seeded services' names
 */
export const checkCases = (serviceName) => [
  {
    name: 'check, promoted version (allowed)',
    path: `/api/v1/check?service=${serviceName(42)}&environment=prod&version=2.1.0`,
    expect: ['"allowed":true'],
  },
  {
    name: 'check, locked + bad + not promoted',
    path: `/api/v1/check?service=${serviceName(42)}&environment=preprod&version=2.2.0`,
    expect: ['"allowed":false', '"lock"', '"bad_version"'],
  },
  {
    name: 'check, version never deployed',
    path: `/api/v1/check?service=${serviceName(7)}&environment=prod&version=9.9.9`,
    expect: ['"allowed":false', '"promotion"'],
  },
]

/** What the check must answer within at p95 (issue 27). */
export const CHECK_TARGET_MS = 10

const TABLES = ['environment_locks', 'freeze_windows', 'bad_versions', 'promotion_rules']

/** The rows, for the account `accountId`, made at `now`. */
function rows(accountId, now, service42) {
  const by = { created_by: 'bench', created_at: now }
  return {
    environment_locks: [
      {
        account_id: accountId,
        environment: 'preprod',
        service: null,
        reason: 'bench: release train',
        ends_at: null,
        ...by,
      },
    ],
    freeze_windows: [
      // Weekends in Berlin on dev (a case in prod must not depend on the day the bench runs), and a
      // week-long one-off in prod a year ago (never active now, but read and evaluated).
      {
        account_id: accountId,
        environment: 'dev',
        reason: 'bench: weekend freeze',
        cron: '0 16 * * 5',
        duration_minutes: 3840,
        time_zone: 'Europe/Berlin',
        starts_at: null,
        ends_at: null,
        ...by,
      },
      {
        account_id: accountId,
        environment: 'prod',
        reason: 'bench: last year',
        cron: null,
        duration_minutes: null,
        time_zone: null,
        starts_at: now - 365 * 86_400_000,
        ends_at: now - 358 * 86_400_000,
        ...by,
      },
    ],
    bad_versions: [
      {
        account_id: accountId,
        service: service42,
        version: '2.2.0',
        reason: 'bench: bad build',
        ...by,
      },
    ],
    promotion_rules: [
      {
        account_id: accountId,
        environment: 'prod',
        after_environment: 'preprod',
        min_minutes: 60,
        require_good: 1,
        ...by,
      },
      {
        account_id: accountId,
        environment: 'preprod',
        after_environment: 'staging',
        min_minutes: 30,
        require_good: 0,
        ...by,
      },
      {
        account_id: accountId,
        environment: 'staging',
        after_environment: 'qa',
        min_minutes: 0,
        require_good: 0,
        ...by,
      },
    ],
  }
}

const ACCOUNT = `SELECT id FROM accounts WHERE name = 'Bench'`

/** @param {string} file @param {string} service42 the service the bad version belongs to */
export function seedGuardrailsSqlite(file, service42) {
  const db = new SqliteDatabase(file, { fileMustExist: true })
  try {
    const { id } = db.prepare(ACCOUNT).get()
    const all = rows(id, Date.now(), service42)
    db.transaction(() => {
      for (const table of TABLES) {
        db.prepare(`DELETE FROM ${table} WHERE account_id = ?`).run(id)
        for (const row of all[table]) {
          const names = Object.keys(row)
          db.prepare(
            `INSERT INTO ${table} (${names.join(', ')}) VALUES (${names.map(() => '?').join(', ')})`,
          ).run(...names.map((n) => row[n]))
        }
      }
    })()
  } finally {
    db.close()
  }
}

/** @param {string} databaseUrl @param {string} service42 */
export async function seedGuardrailsPostgres(databaseUrl, service42) {
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  try {
    const { id } = (await client.query(ACCOUNT)).rows[0]
    const all = rows(Number(id), Date.now(), service42)
    await client.query('BEGIN')
    for (const table of TABLES) {
      await client.query(`DELETE FROM ${table} WHERE account_id = $1`, [id])
      for (const row of all[table]) {
        const names = Object.keys(row)
        await client.query(
          `INSERT INTO ${table} (${names.join(', ')}) VALUES (${names.map((_, i) => `$${i + 1}`).join(', ')})`,
          names.map((n) => row[n]),
        )
      }
    }
    await client.query('COMMIT')
  } finally {
    await client.end()
  }
}
