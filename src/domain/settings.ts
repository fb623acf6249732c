// Installation-wide settings kept in the database, such as the generated session secret.
import { randomBytes } from 'node:crypto'
import type { Kysely } from 'kysely'
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
 * Proves the database accepts writes: a row is inserted and rolled back. `select 1` alone would
 * pass on a read-only SQLite file or a PostgreSQL standby, where no event could be recorded.
 */
export async function checkWritable(db: Kysely<DB>): Promise<void> {
  try {
    await db.transaction().execute(async (trx) => {
      await trx
        .insertInto('settings')
        .values({ name: 'readiness_probe', value: String(Date.now()) })
        .onConflict((oc) => oc.column('name').doNothing())
        .execute()
      throw new ProbeRollback()
    })
  } catch (err) {
    if (!(err instanceof ProbeRollback)) throw err
  }
}
