// Frozen: server-side login sessions, and one-time passwords that must be changed at first login.
import type { Kysely, Migration } from 'kysely'

export function sessionsSchema(): Migration {
  return {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('sessions')
        // SHA-256 of the cookie's token: a leaked table does not let anyone log in.
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('user_id', 'bigint', (c) => c.notNull().references('users.id').onDelete('cascade'))
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('last_seen_at', 'bigint', (c) => c.notNull())
        .addColumn('expires_at', 'bigint', (c) => c.notNull())
        .execute()
      await db.schema.createIndex('sessions_user_idx').on('sessions').columns(['user_id']).execute()
      await db.schema.createIndex('sessions_expires_idx').on('sessions').columns(['expires_at']).execute()
      // 0 or 1 in both databases (one runtime form for booleans).
      await db.schema
        .alterTable('users')
        .addColumn('must_change_password', 'integer', (c) => c.notNull().defaultTo(0))
        .execute()
    },
  }
}
