// The app secret (signs session and CSRF cookies and read-API cursors, seals webhook secrets and
// Grafana tokens): where it comes from, who may make it, and the keyed check that refuses to run a
// database with a secret other than the one its data was sealed with. docs/SECURITY.md, "The
// secret's journey", says why it works this way.
import { createHmac, randomBytes } from 'node:crypto'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname } from 'node:path'
import type { Kysely } from 'kysely'
import type { Config } from '../config.js'
import type { DB } from '../db/schema.js'
import { ensureSecret } from './settings.js'
import { opensWith } from './webhooks/secrets.js'

/** The settings row holding the check value (never the secret). */
export const SECRET_CHECK = 'secret_check'
const CHECK_LABEL = 'shiplog secret check v1'

/** HMAC-SHA256 of a fixed label under the secret: proves which secret, and does not give it away. */
export function secretCheck(secret: string): string {
  return createHmac('sha256', secret).update(CHECK_LABEL).digest('hex')
}

/** The secret does not fit the database (or is missing): one line, said before anything starts. */
export class SecretError extends Error {}

/** Where this configuration's secret is kept, in words for a message. */
export function secretSource(config: Config): string {
  if (config.secretFile !== null) return config.secretFile
  if (config.database.dialect === 'postgres' && config.secret === null)
    return "the database's session_secret row"
  if (config.database.dialect === 'sqlite' && config.database.path === ':memory:')
    return 'this process (in-memory database)'
  return 'SHIPLOG_SECRET'
}

export interface SecretStatus {
  /** The secret this configuration runs with, when there is one already. */
  secret: string | null
  /** Where it is (or would be) kept. */
  source: string
  /** The stored check value, when the secret has been used with this database. */
  check: string | null
  /** Whether the database holds anything sealed or signed with a secret (a check or a webhook). */
  sealed: boolean
  /** What is wrong, in one line; null when the secret fits the database (or none is needed yet). */
  problem: string | null
}

/** What to do about it: put the right secret where this installation looks for one. */
function advice(config: Config): string {
  const origin =
    'the secret of the installation this data came from (a default SQLite installation keeps it in the file "secret" beside its database)'
  return config.secretFile !== null
    ? `put ${origin} at ${config.secretFile}, or set SHIPLOG_SECRET to it; see README "The secret"`
    : `set SHIPLOG_SECRET to ${origin}; see README "The secret"`
}

/** Where this configuration looked for a secret and found none. */
function missing(config: Config): string {
  if (config.secretFile !== null) return `SHIPLOG_SECRET is unset and there is no ${config.secretFile}`
  return 'SHIPLOG_SECRET is unset and the database has no session_secret row'
}

/** How the configured secret stands with `db`; reads only, creates nothing. */
export async function secretStatus(config: Config, db: Kysely<DB>): Promise<SecretStatus> {
  const rows = await db
    .selectFrom('settings')
    .select(['name', 'value'])
    .where('name', 'in', ['session_secret', SECRET_CHECK])
    .execute()
  const stored = new Map(rows.map((r) => [r.name, r.value]))
  let secret = config.secret
  if (secret === null && config.database.dialect === 'postgres') secret = stored.get('session_secret') ?? null
  const check = stored.get(SECRET_CHECK) ?? null
  // A database sealed before checks were written has no check: its first webhook tells.
  const webhook = await db.selectFrom('webhooks').select('secret').orderBy('id').limit(1).executeTakeFirst()
  const source = secretSource(config)
  const sealed = check !== null || webhook !== undefined
  let problem: string | null = null
  if (secret === null) {
    if (sealed)
      problem = `the database holds data sealed with a secret this installation does not have (${missing(config)}): ${advice(config)}`
  } else if (check !== null ? check !== secretCheck(secret) : webhook && !opensWith(secret, webhook.secret)) {
    problem = `the database holds data sealed with another secret than the one in ${source}: ${advice(config)}`
  }
  return { secret, source, check, sealed, problem }
}

/**
 * The secret to run with, for the commands that sign or seal (serve, webhooks create). Refuses with
 * one line when the database was sealed with another secret, or when it has sealed data and this
 * installation has no secret. Otherwise makes the secret when there is none yet (SQLite: the file
 * beside the database, created exclusively, mode 0600; PostgreSQL without SHIPLOG_SECRET: a
 * settings row) and records the check value the first time the secret meets the database.
 */
export async function resolveAppSecret(config: Config, db: Kysely<DB>): Promise<string> {
  const status = await secretStatus(config, db)
  if (status.problem !== null) throw new SecretError(status.problem)
  const secret = status.secret ?? (await makeSecret(config, db))
  if (status.check === null) {
    await db
      .insertInto('settings')
      .values({ name: SECRET_CHECK, value: secretCheck(secret) })
      .onConflict((oc) => oc.column('name').doNothing())
      .execute()
    // Another instance starting at the same moment with another secret wrote first.
    const written = await db
      .selectFrom('settings')
      .select('value')
      .where('name', '=', SECRET_CHECK)
      .executeTakeFirstOrThrow()
    if (written.value !== secretCheck(secret))
      throw new SecretError(
        `the database holds data sealed with another secret than the one in ${status.source}: ${advice(config)}`,
      )
  }
  return secret
}

async function makeSecret(config: Config, db: Kysely<DB>): Promise<string> {
  if (config.secretFile === null) return ensureSecret(db)
  const file = config.secretFile
  const secret = randomBytes(32).toString('hex')
  try {
    // The directory holds the secret and the database: its owner's only, when Shiplog makes it.
    mkdirSync(dirname(file), { recursive: true, mode: 0o700 })
    // wx: a secret made by another process at the same moment is read, never replaced.
    writeFileSync(file, `${secret}\n`, { mode: 0o600, flag: 'wx' })
    return secret
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return readFileSync(file, 'utf8').trim()
    throw new SecretError(`cannot create the secret ${file}: ${(err as Error).message}`)
  }
}
