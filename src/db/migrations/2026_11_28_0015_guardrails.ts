// Frozen: guardrails (SPEC §11, issue 27). What an admin sets: environment locks, freeze windows,
// bad versions and promotion rules; and the failure links (a deployment caused an incident, another
// fixed it) that change failure rate and time to restore go by when present. Events gain what
// recording found: `guardrails` (the rules the event broke, comma-separated in the order lock,
// freeze, bad_version, promotion; null when none) and `override_reason` (why a sender recorded
// anyway with `shiplog-deploy --force --reason`). A partial index lists the flagged events of an
// account for the board and timelines; unflagged events (nearly all) add nothing to it. The check's
// one question of the deployments (when did this version of a service first succeed in each
// environment a promotion rule names) is a seek in an index of successes by version: the group
// index by service and environment holds every deployment there (tens of thousands at a million
// events), each read from the table for its version. Deployments are written off the request
// path, so recording pays nothing for it.
import { type ColumnDefinitionBuilder, type Kysely, type Migration, sql } from 'kysely'
import type { DialectName } from '../../config.js'
import { idColumn } from '../dialect.js'

export function guardrailsSchema(dialect: DialectName): Migration {
  return {
    async up(db: Kysely<unknown>) {
      const account = (c: ColumnDefinitionBuilder) =>
        c.notNull().references('accounts.id').onDelete('cascade')
      await db.schema
        .createTable('environment_locks')
        .addColumn('id', idColumn(dialect).type, idColumn(dialect).build)
        .addColumn('account_id', 'bigint', account)
        .addColumn('environment', 'text', (c) => c.notNull())
        // Null: every service in the environment.
        .addColumn('service', 'text')
        .addColumn('reason', 'text', (c) => c.notNull())
        // Null: until someone unlocks it.
        .addColumn('ends_at', 'bigint')
        .addColumn('created_by', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .execute()
      await db.schema
        .createIndex('environment_locks_account_idx')
        .on('environment_locks')
        .columns(['account_id', 'environment'])
        .execute()
      await db.schema
        .createTable('freeze_windows')
        .addColumn('id', idColumn(dialect).type, idColumn(dialect).build)
        .addColumn('account_id', 'bigint', account)
        .addColumn('environment', 'text', (c) => c.notNull())
        .addColumn('reason', 'text', (c) => c.notNull())
        // Recurring: a cron expression for each start, its length on the local wall clock, the zone.
        .addColumn('cron', 'text')
        .addColumn('duration_minutes', 'integer')
        .addColumn('time_zone', 'text')
        // One-off: from and to (instants); null for a recurring window.
        .addColumn('starts_at', 'bigint')
        .addColumn('ends_at', 'bigint')
        .addColumn('created_by', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .execute()
      await db.schema
        .createIndex('freeze_windows_account_idx')
        .on('freeze_windows')
        .columns(['account_id', 'environment'])
        .execute()
      await db.schema
        .createTable('bad_versions')
        .addColumn('account_id', 'bigint', account)
        .addColumn('service', 'text', (c) => c.notNull())
        .addColumn('version', 'text', (c) => c.notNull())
        .addColumn('reason', 'text', (c) => c.notNull())
        .addColumn('created_by', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('bad_versions_pk', ['account_id', 'service', 'version'])
        .execute()
      await db.schema
        .createTable('promotion_rules')
        .addColumn('account_id', 'bigint', account)
        // Deploying here requires ...
        .addColumn('environment', 'text', (c) => c.notNull())
        // ... that the version succeeded here, at least min_minutes before.
        .addColumn('after_environment', 'text', (c) => c.notNull())
        .addColumn('min_minutes', 'integer', (c) => c.notNull())
        // 1: and that the version is not marked bad.
        .addColumn('require_good', 'integer', (c) => c.notNull())
        .addColumn('created_by', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('promotion_rules_pk', ['account_id', 'environment', 'after_environment'])
        .execute()
      await db.schema
        .createTable('deployment_incidents')
        .addColumn('account_id', 'bigint', account)
        // The deployment that caused the incident (a deployment's id is the id of its first event).
        .addColumn('deployment_id', 'bigint', (c) => c.notNull())
        // Where the incident is described (the tracker's page); null when none was given.
        .addColumn('link', 'text')
        .addColumn('note', 'text')
        // The deployment that fixed it; null while none is marked.
        .addColumn('fixed_by', 'bigint')
        .addColumn('created_by', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('deployment_incidents_pk', ['account_id', 'deployment_id'])
        .execute()
      await db.schema.alterTable('events').addColumn('guardrails', 'text').execute()
      await db.schema.alterTable('events').addColumn('override_reason', 'text').execute()
      await db.schema
        .createIndex('events_guardrails_idx')
        .on('events')
        .columns(['account_id', 'service', 'environment', 'id'])
        .where(sql<boolean>`guardrails is not null or override_reason is not null`)
        .execute()
      await db.schema
        .createIndex('deployments_version_success_idx')
        .on('deployments')
        .columns(['account_id', 'service', 'version', 'environment', 'finished_at'])
        .where(sql.ref('result'), '=', 'succeeded')
        .execute()
    },
  }
}
