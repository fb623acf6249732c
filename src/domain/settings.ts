// Installation-wide settings kept in the database, such as the generated session secret.
import { randomBytes } from 'node:crypto'
import type { Kysely } from 'kysely'
import type { DialectName } from '../config.js'
import type { DB } from '../db/schema.js'

/**
 * Returns the session secret stored in the database, creating it on first start. Used on PostgreSQL
 * when SHIPLOG_SECRET is unset, so that every instance signs cookies with the same secret.
 */
export async function ensureSecret(db: Kysely<DB>): Promise<string> {
  await db
    .insertInto('settings')
    .values({ name: 'session_secret', value: randomBytes(32).toString('hex') })
    .onConflict((oc) => oc.column('name').doNothing())
    .execute()
  const row = await db
    .selectFrom('settings')
    .select('value')
    .where('name', '=', 'session_secret')
    .executeTakeFirstOrThrow()
  return row.value
}

class ProbeRollback extends Error {}

/**
 * Proves the database accepts writes. `select 1` alone would pass on a read-only SQLite file or a
 * PostgreSQL standby, where no event could be recorded. PostgreSQL refuses a write on a standby or
 * a full disk as soon as the row is inserted, so the row is rolled back. SQLite only touches the
 * disk when a transaction commits (a rolled-back one never reaches the WAL), so there the probe's
 * row is committed: one small write and fsync per probe.
 */
export async function checkWritable(db: Kysely<DB>, dialect: DialectName): Promise<void> {
  const probe = { name: 'readiness_probe', value: String(Date.now()) }
  if (dialect === 'sqlite') {
    await db
      .insertInto('settings')
      .values(probe)
      .onConflict((oc) => oc.column('name').doUpdateSet({ value: probe.value }))
      .execute()
    return
  }
  try {
    await db.transaction().execute(async (trx) => {
      await trx
        .insertInto('settings')
        .values(probe)
        .onConflict((oc) => oc.column('name').doNothing())
        .execute()
      throw new ProbeRollback()
    })
  } catch (err) {
    if (!(err instanceof ProbeRollback)) throw err
  }
}
