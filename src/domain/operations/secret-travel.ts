// What `copy`, `dump`, `load` and `backup` do about the app secret, which the data they move was
// sealed with. `copy` carries the secret where it lived with the data (the file beside a SQLite
// database, the settings row of a PostgreSQL one) into the operator's other database; dumps and
// backups never hold it, so those commands say what to keep beside the file. docs/SECURITY.md,
// "The secret's journey".
import { existsSync, mkdirSync, writeFileSync } from 'node:fs'
import { dirname } from 'node:path'
import { type Config, type DatabaseTarget, readSecretFile, secretFileBeside } from '../../config.js'
import type { Database } from '../../db/connect.js'
import { SECRET_CHECK, secretCheck } from '../app-secret.js'
import { opensWith } from '../webhooks/secrets.js'

/** How the source's secret will reach the target of a copy. */
export interface SecretCarry {
  /** The secret to write into the target, and where it came from; null when none is carried. */
  carried: { secret: string; from: string } | null
  /** The source's secret, when known, for the target's check row. */
  secret: string | null
  /** One line for the operator: what the target's servers need. */
  note: string
}

/** Where a database target keeps its secret when SHIPLOG_SECRET is unset (null: in the database). */
function fileOf(target: DatabaseTarget): string | null {
  return target.dialect === 'sqlite' && target.path !== ':memory:' ? secretFileBeside(target.path) : null
}

/**
 * Works out the source's secret before anything is copied: SHIPLOG_SECRET (as the copy runs), the
 * file beside a SQLite source, or a PostgreSQL source's settings row, whichever its check value
 * (or first webhook) says it was sealed with. Refuses when the target already keeps another secret.
 */
export async function planSecretCarry(
  source: Database,
  from: DatabaseTarget,
  to: DatabaseTarget,
  envSecret: string | null,
): Promise<SecretCarry> {
  const rows = await source.db
    .selectFrom('settings')
    .select(['name', 'value'])
    .where('name', 'in', ['session_secret', SECRET_CHECK])
    .execute()
  const stored = new Map(rows.map((r) => [r.name, r.value]))
  const check = stored.get(SECRET_CHECK) ?? null
  const webhook = await source.db.selectFrom('webhooks').select('secret').limit(1).executeTakeFirst()
  const fits = (secret: string) =>
    check !== null ? check === secretCheck(secret) : webhook ? opensWith(secret, webhook.secret) : null
  const sourceFile = fileOf(from)
  const withData: { secret: string; from: string }[] = []
  const fileSecret = sourceFile ? readSecretFile(sourceFile) : null
  if (sourceFile && fileSecret) withData.push({ secret: fileSecret, from: sourceFile })
  const rowSecret = stored.get('session_secret')
  if (rowSecret) withData.push({ secret: rowSecret, from: 'the settings row session_secret' })

  // SHIPLOG_SECRET is the operator's to set on the target too: it is never written anywhere.
  if (
    envSecret !== null &&
    fits(envSecret) !== false &&
    (fits(envSecret) === true || withData.length === 0)
  ) {
    return {
      carried: null,
      secret: envSecret,
      note: 'the data is sealed with SHIPLOG_SECRET: start the servers on the target with the same SHIPLOG_SECRET',
    }
  }
  const carried = withData.find((c) => fits(c.secret) !== false) ?? null
  if (carried === null) {
    return {
      carried: null,
      secret: null,
      note:
        check === null && !webhook
          ? 'nothing in the source is sealed yet: the target makes its own secret on first start'
          : 'the source is sealed with a secret that is neither SHIPLOG_SECRET nor kept with its data: start the servers on the target with SHIPLOG_SECRET set to it (they refuse to start otherwise)',
    }
  }
  const targetFile = fileOf(to)
  if (targetFile) {
    const existing = readSecretFile(targetFile)
    if (existing !== null && existing !== carried.secret) {
      throw new Error(
        `${targetFile} already holds another secret, and the data being copied is sealed with the one in ${carried.from}: move that file away first`,
      )
    }
  }
  return {
    carried,
    secret: carried.secret,
    note: `the secret came along from ${carried.from} to ${targetFile ?? 'the target database (settings row session_secret)'}: start the servers on the target without SHIPLOG_SECRET`,
  }
}

/**
 * After a verified copy: writes the carried secret where the target keeps it (the file beside a
 * SQLite target, created exclusively and mode 0600, and never also as a row there; the settings row
 * of a PostgreSQL target), and the check value when the source had none.
 */
export async function carrySecret(target: Database, to: DatabaseTarget, carry: SecretCarry): Promise<void> {
  const file = fileOf(to)
  if (carry.carried) {
    if (file) {
      if (!existsSync(file)) {
        mkdirSync(dirname(file), { recursive: true, mode: 0o700 })
        writeFileSync(file, `${carry.carried.secret}\n`, { mode: 0o600, flag: 'wx' })
      }
      // A SQLite installation reads its secret from the file: a copy of it in the database would
      // only travel on in every backup of the file.
      await target.db.deleteFrom('settings').where('name', '=', 'session_secret').execute()
    } else {
      await target.db
        .insertInto('settings')
        .values({ name: 'session_secret', value: carry.carried.secret })
        .onConflict((oc) => oc.column('name').doNothing())
        .execute()
    }
  }
  if (carry.secret !== null) {
    await target.db
      .insertInto('settings')
      .values({ name: SECRET_CHECK, value: secretCheck(carry.secret) })
      .onConflict((oc) => oc.column('name').doNothing())
      .execute()
  }
}

/**
 * What to keep beside a dump or backup of the database `config` names, so that a restore can run:
 * the secret is never in the file.
 */
export function keepBeside(config: Config, file: string): string {
  if (config.secretFile !== null) {
    return existsSync(config.secretFile)
      ? `keep the secret ${config.secretFile} with ${file}, stored apart from it (it is not in the file): a restore needs it beside the database, or as SHIPLOG_SECRET, or the servers refuse to start`
      : `no secret ${config.secretFile} yet: nothing in ${file} is sealed with one`
  }
  if (config.database.dialect === 'postgres' && config.secret === null) {
    return `the secret (settings row session_secret) is not in ${file}: keep it apart (psql "$DATABASE_URL" -Atc "select value from settings where name = 'session_secret'") and start the restored servers with SHIPLOG_SECRET set to it, or they refuse to start`
  }
  return `keep SHIPLOG_SECRET with ${file}, stored apart from it (it is not in the file): the restored servers need the same SHIPLOG_SECRET, or they refuse to start`
}
