// Frozen: outbound webhooks (SPEC §8) and their deliveries, queued durably by deployment derivation.
import { type Kysely, type Migration, sql } from 'kysely'
import type { DialectName } from '../../config.js'
import { idColumn } from '../dialect.js'

export function webhooksSchema(dialect: DialectName): Migration {
  return {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('webhooks')
        .addColumn('id', idColumn(dialect).type, idColumn(dialect).build)
        .addColumn('account_id', 'bigint', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('url', 'text', (c) => c.notNull())
        .addColumn('format', 'text', (c) => c.notNull().check(sql`format in ('json', 'slack', 'grafana')`))
        // JSON arrays of names; an empty array means every one.
        .addColumn('statuses', 'text', (c) => c.notNull())
        .addColumn('outcomes', 'text', (c) => c.notNull())
        .addColumn('environments', 'text', (c) => c.notNull())
        .addColumn('services', 'text', (c) => c.notNull())
        // Sealed (AES-256-GCM) with a key derived from the app secret: it must be usable to sign.
        .addColumn('secret', 'text', (c) => c.notNull())
        .addColumn('grafana_token', 'text')
        // Events up to this id were there before the webhook: they never trigger it (rebuilds).
        .addColumn('since_event_id', 'bigint', (c) => c.notNull())
        .addColumn('enabled', 'integer', (c) => c.notNull().defaultTo(1))
        .addColumn('disabled_at', 'bigint')
        .addColumn('failing_since', 'bigint')
        .addColumn('created_by', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .execute()
      await db.schema
        .createIndex('webhooks_account_idx')
        .on('webhooks')
        .columns(['account_id', 'id'])
        .execute()

      await db.schema
        .createTable('webhook_deliveries')
        .addColumn('id', idColumn(dialect).type, idColumn(dialect).build)
        .addColumn('webhook_id', 'bigint', (c) => c.notNull().references('webhooks.id').onDelete('cascade'))
        .addColumn('account_id', 'bigint', (c) => c.notNull())
        .addColumn('event_id', 'bigint', (c) => c.notNull())
        .addColumn('deployment_id', 'bigint')
        .addColumn('kind', 'text', (c) => c.notNull().check(sql`kind in ('status', 'outcome')`))
        // What the receiver dedupes on (Shiplog-Delivery): the same for every attempt.
        .addColumn('delivery_id', 'text', (c) => c.notNull().unique())
        .addColumn('state', 'text', (c) =>
          c.notNull().check(sql`state in ('pending', 'succeeded', 'failed')`),
        )
        .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('next_attempt_at', 'bigint', (c) => c.notNull())
        // A sender holds a delivery until this time; past it another may take it over.
        .addColumn('lease_until', 'bigint')
        .addColumn('last_status', 'integer')
        .addColumn('last_error', 'text')
        .addColumn('response_head', 'text')
        .addColumn('latency_ms', 'integer')
        // What the receiver called it (Grafana's annotation id), to update it when the deployment ends.
        .addColumn('remote_id', 'text')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('first_attempt_at', 'bigint')
        .addColumn('last_attempt_at', 'bigint')
        .addColumn('finished_at', 'bigint')
        .addUniqueConstraint('webhook_deliveries_once', ['webhook_id', 'event_id', 'kind'])
        .execute()
      await db.schema
        .createIndex('webhook_deliveries_due_idx')
        .on('webhook_deliveries')
        .columns(['next_attempt_at'])
        .where(sql.ref('state'), '=', 'pending')
        .execute()
      await db.schema
        .createIndex('webhook_deliveries_log_idx')
        .on('webhook_deliveries')
        .columns(['webhook_id', 'id'])
        .execute()
    },
  }
}
