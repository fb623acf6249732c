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
