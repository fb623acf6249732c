// Frozen: the first schema — accounts, users, API keys, events, idempotency records, settings.
import { type Kysely, type Migration, sql } from 'kysely'
import type { DialectName } from '../../config.js'
import { idColumn } from '../dialect.js'

export function initialSchema(dialect: DialectName): Migration {
  return {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('accounts')
        .addColumn('id', idColumn(dialect).type, idColumn(dialect).build)
        .addColumn('name', 'text', (c) => c.notNull().unique())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .execute()

      await db.schema
        .createTable('users')
        .addColumn('id', idColumn(dialect).type, idColumn(dialect).build)
        .addColumn('account_id', 'bigint', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('email', 'text', (c) => c.notNull().unique())
        .addColumn('password_hash', 'text', (c) => c.notNull())
        .addColumn('role', 'text', (c) => c.notNull().check(sqlRoleCheck))
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .execute()
      await db.schema.createIndex('users_account_idx').on('users').columns(['account_id']).execute()

      await db.schema
        .createTable('api_keys')
        .addColumn('id', idColumn(dialect).type, idColumn(dialect).build)
        .addColumn('account_id', 'bigint', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('prefix', 'text', (c) => c.notNull())
        .addColumn('digest', 'text', (c) => c.notNull().unique())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('created_by', 'text', (c) => c.notNull())
        .addColumn('created_by_user_id', 'bigint', (c) => c.references('users.id').onDelete('set null'))
        .addColumn('last_used_at', 'bigint')
        .addColumn('revoked_at', 'bigint')
        .execute()
      await db.schema
        .createIndex('api_keys_account_idx')
        .on('api_keys')
        .columns(['account_id', 'id'])
        .execute()

      await db.schema
        .createTable('events')
        .addColumn('id', idColumn(dialect).type, idColumn(dialect).build)
        .addColumn('account_id', 'bigint', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('service', 'text', (c) => c.notNull())
        .addColumn('environment', 'text', (c) => c.notNull())
        .addColumn('version', 'text', (c) => c.notNull())
        .addColumn('status', 'text', (c) => c.notNull().check(sqlStatusCheck))
        .addColumn('url', 'text')
        .addColumn('commit_sha', 'text')
        .addColumn('description', 'text')
        .addColumn('deployer', 'text')
        .addColumn('source', 'text', (c) => c.notNull())
        .addColumn('api_key_id', 'bigint', (c) => c.references('api_keys.id').onDelete('set null'))
        .addColumn('api_key_name', 'text')
        .addColumn('received_at', 'bigint', (c) => c.notNull())
        .execute()
      // The log page and exports read one account's events newest first (by id, which follows
      // arrival), optionally narrowed by one column or a time range; each filter gets its own index
      // ending in id so keyset pagination stays an index range scan.
      await db.schema
        .createIndex('events_account_id_idx')
        .on('events')
        .columns(['account_id', 'id'])
        .execute()
      for (const column of ['service', 'environment', 'status', 'received_at'] as const) {
        await db.schema
          .createIndex(`events_account_${column}_idx`)
          .on('events')
          .columns(['account_id', column, 'id'])
          .execute()
      }

      await db.schema
        .createTable('idempotency_keys')
        .addColumn('account_id', 'bigint', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('idem_key', 'text', (c) => c.notNull())
        .addColumn('event_id', 'bigint', (c) => c.references('events.id').onDelete('cascade'))
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('idempotency_keys_pk', ['account_id', 'idem_key'])
        .execute()
      await db.schema
        .createIndex('idempotency_keys_created_idx')
        .on('idempotency_keys')
        .columns(['created_at'])
        .execute()

      await db.schema
        .createTable('settings')
        .addColumn('name', 'text', (c) => c.primaryKey())
        .addColumn('value', 'text', (c) => c.notNull())
        .execute()
    },
  }
}

const sqlRoleCheck = sql`role in ('admin', 'member')`
const sqlStatusCheck = sql`status in ('Deploying', 'Deployed', 'Failed')`
