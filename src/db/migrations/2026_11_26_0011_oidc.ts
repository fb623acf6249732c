// Frozen: single sign-on (SPEC §10): provider identities linked to users, pending logins, and a per-account switch for password login.
import type { Kysely, Migration } from 'kysely'
import type { DialectName } from '../../config.js'
import { idColumn } from '../dialect.js'

export function oidcSchema(dialect: DialectName): Migration {
  return {
    async up(db: Kysely<unknown>) {
      // Which person at which provider a user is: the (issuer, subject) pair never changes, an email can.
      await db.schema
        .createTable('user_identities')
        .addColumn('id', idColumn(dialect).type, idColumn(dialect).build)
        .addColumn('user_id', 'bigint', (c) => c.notNull().references('users.id').onDelete('cascade'))
        .addColumn('issuer', 'text', (c) => c.notNull())
        .addColumn('subject', 'text', (c) => c.notNull())
        .addColumn('email', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('last_login_at', 'bigint', (c) => c.notNull())
        // One link per user and provider; the same person may be a user of several accounts.
        .addUniqueConstraint('user_identities_user_issuer_key', ['user_id', 'issuer'])
        .execute()
      await db.schema
        .createIndex('user_identities_subject_idx')
        .on('user_identities')
        .columns(['issuer', 'subject'])
        .execute()

      // A login started at the provider and not yet back: found by the digest of its `state`,
      // deleted when it is used (a replayed state finds nothing) or when it expires.
      await db.schema
        .createTable('oidc_logins')
        .addColumn('state_digest', 'text', (c) => c.primaryKey())
        // The digest of the random value in the browser's cookie: the callback must come from the
        // browser that started the login (no logging a victim in as the attacker).
        .addColumn('browser_digest', 'text', (c) => c.notNull())
        .addColumn('code_verifier', 'text', (c) => c.notNull())
        .addColumn('nonce', 'text', (c) => c.notNull())
        .addColumn('next', 'text')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('expires_at', 'bigint', (c) => c.notNull())
        .execute()
      await db.schema
        .createIndex('oidc_logins_expires_idx')
        .on('oidc_logins')
        .columns(['expires_at'])
        .execute()

      // 1: users of the account may sign in with a password; 0: only with single sign-on.
      await db.schema
        .alterTable('accounts')
        .addColumn('password_login', 'integer', (c) => c.notNull().defaultTo(1))
        .execute()
      // The ID token a session was opened with: the provider's logout wants it back as id_token_hint.
      await db.schema.alterTable('sessions').addColumn('id_token', 'text').execute()
    },
  }
}
