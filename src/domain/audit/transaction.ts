// A change and its audit entry commit together: callers open one transaction and hand it down, so a
// domain function that needs its own transaction joins the caller's instead of opening a second one
// (Kysely cannot nest them, and on SQLite a second connection would wait for the first forever).
import type { Kysely } from 'kysely'
import type { DB } from '../../db/schema.js'

/** Runs `work` in the caller's transaction when `db` is one, else in a new transaction. */
export function withTransaction<T>(db: Kysely<DB>, work: (trx: Kysely<DB>) => Promise<T>): Promise<T> {
  return db.isTransaction ? work(db) : db.transaction().execute(work)
}
