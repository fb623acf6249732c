// Frozen: per-account retention ("keep events for N days"; null keeps them forever), and the index
// that lets events be deleted without a scan of idempotency_keys for each one (its foreign key).
import type { Kysely, Migration } from 'kysely'

export function retentionSchema(): Migration {
  return {
    async up(db: Kysely<unknown>) {
      await db.schema.alterTable('accounts').addColumn('retention_days', 'integer').execute()
      await db.schema
        .createIndex('idempotency_keys_event_idx')
        .on('idempotency_keys')
        .columns(['event_id'])
        .execute()
    },
  }
}
