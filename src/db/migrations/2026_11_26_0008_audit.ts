// Frozen: the audit log (SPEC §10): who did what, when, from where. Append-only by trigger.
import { type Kysely, type Migration, sql } from 'kysely'
import type { DialectName } from '../../config.js'
import { idColumn } from '../dialect.js'

export function auditSchema(dialect: DialectName): Migration {
  return {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('audit_entries')
        .addColumn('id', idColumn(dialect).type, idColumn(dialect).build)
        // Null for what belongs to no account (a failed login for an account that does not exist).
        .addColumn('account_id', 'bigint')
        .addColumn('at', 'bigint', (c) => c.notNull())
        .addColumn('actor_kind', 'text', (c) =>
          c.notNull().check(sql`actor_kind in ('user', 'key', 'cli', 'system', 'anonymous')`),
        )
        .addColumn('actor_id', 'bigint')
        .addColumn('actor', 'text', (c) => c.notNull())
        .addColumn('address', 'text')
        .addColumn('action', 'text', (c) => c.notNull())
        .addColumn('target', 'text')
        // A JSON object of what changed; never a secret.
        .addColumn('details', 'text', (c) => c.notNull())
        .execute()
      await db.schema
        .createIndex('audit_entries_account_idx')
        .on('audit_entries')
        .columns(['account_id', 'id'])
        .execute()
      // No route or command edits or deletes an entry; the triggers make a slip in code fail loudly
      // too. (A database owner can drop them: that is what the hash chain is for.)
      if (dialect === 'sqlite') {
        await sql`CREATE TRIGGER audit_entries_no_update BEFORE UPDATE ON audit_entries
          BEGIN SELECT RAISE(ABORT, 'audit entries are append-only'); END`.execute(db)
        await sql`CREATE TRIGGER audit_entries_no_delete BEFORE DELETE ON audit_entries
          BEGIN SELECT RAISE(ABORT, 'audit entries are append-only'); END`.execute(db)
      } else {
        await sql`CREATE FUNCTION shiplog_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
          BEGIN RAISE EXCEPTION 'audit entries are append-only'; END $$`.execute(db)
        await sql`CREATE TRIGGER audit_entries_append_only BEFORE UPDATE OR DELETE ON audit_entries
          FOR EACH ROW EXECUTE FUNCTION shiplog_audit_append_only()`.execute(db)
      }
    },
  }
}
