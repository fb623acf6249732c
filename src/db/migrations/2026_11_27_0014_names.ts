// Frozen: names an admin tidied (issue 28). `name_aliases` maps a service or environment name as
// events carry it to the name it was renamed or merged into: events keep their original text, and
// deployments are derived under the new name (src/domain/names/). `chain_erasures` records each
// event an admin deleted with its service's history, so `shiplog verify` tells such a deletion,
// which an audit entry records, from a row that went missing.
import type { Kysely, Migration } from 'kysely'

export function namesSchema(): Migration {
  return {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('name_aliases')
        .addColumn('account_id', 'bigint', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        // 'service' or 'environment'.
        .addColumn('kind', 'text', (c) => c.notNull())
        .addColumn('from_name', 'text', (c) => c.notNull())
        // Always a name with no alias of its own: chains are flattened when written.
        .addColumn('to_name', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('name_aliases_pk', ['account_id', 'kind', 'from_name'])
        .execute()
      await db.schema
        .createTable('chain_erasures')
        .addColumn('stream', 'text', (c) => c.notNull())
        .addColumn('row_id', 'bigint', (c) => c.notNull())
        .addColumn('account_id', 'bigint', (c) => c.notNull())
        // The `at` of the audit entry that records the deletion (action service.history_deleted).
        .addColumn('audit_at', 'bigint', (c) => c.notNull())
        // What was deleted, in words ('service "billing"').
        .addColumn('reason', 'text', (c) => c.notNull())
        .addPrimaryKeyConstraint('chain_erasures_pk', ['stream', 'row_id'])
        .execute()
    },
  }
}
