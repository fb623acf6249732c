// Frozen: deployments derived from events (SPEC §6.1), the board's settings and service metadata,
// badge tokens (§6.3) and API key scopes (§7).
import { type Kysely, type Migration, sql } from 'kysely'

export function deploymentsSchema(): Migration {
  return {
    async up(db: Kysely<unknown>) {
      // One row a deployment; its id is the id of the event that opened it, so it is stable when
      // deployments are derived again from the events.
      await db.schema
        .createTable('deployments')
        .addColumn('id', 'bigint', (c) => c.primaryKey())
        .addColumn('account_id', 'bigint', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('service', 'text', (c) => c.notNull())
        .addColumn('environment', 'text', (c) => c.notNull())
        .addColumn('version', 'text', (c) => c.notNull())
        .addColumn('started_at', 'bigint', (c) => c.notNull())
        .addColumn('finished_at', 'bigint')
        // null while open; in progress or stalled is decided when read, from the account's stall time.
        .addColumn('result', 'text', (c) => c.check(sql`result in ('succeeded', 'failed')`))
        .addColumn('instant', 'integer', (c) => c.notNull())
        .addColumn('finish_event_id', 'bigint')
        .addColumn('rollback', 'integer', (c) => c.notNull())
        .addColumn('rolled_back', 'integer', (c) => c.notNull())
        .addColumn('deployer', 'text')
        .addColumn('api_key_name', 'text')
        // The ids of its events, comma-separated in arrival order.
        .addColumn('event_ids', 'text', (c) => c.notNull())
        .execute()
      // A service and environment's history: timelines, the board, rollback state.
      await db.schema
        .createIndex('deployments_group_idx')
        .on('deployments')
        .columns(['account_id', 'service', 'environment', 'id'])
        .execute()
      // What ran at an instant: the last success (by finishing event) that had finished by then.
      await db.schema
        .createIndex('deployments_success_idx')
        .on('deployments')
        .columns(['account_id', 'service', 'environment', 'finish_event_id'])
        .where(sql.ref('result'), '=', 'succeeded')
        .execute()
      // Metrics windows and the read API's time filters.
      await db.schema
        .createIndex('deployments_finished_idx')
        .on('deployments')
        .columns(['account_id', 'environment', 'finished_at'])
        .execute()
      await db.schema
        .createIndex('deployments_account_idx')
        .on('deployments')
        .columns(['account_id', 'id'])
        .execute()
      // The open deployment of a version, and whether a version succeeded before (rollbacks).
      await db.schema
        .createIndex('deployments_version_idx')
        .on('deployments')
        .columns(['account_id', 'service', 'environment', 'version', 'result'])
        .execute()

      // Each service and environment's deployment running now and its latest one: the board as it
      // is now, and where deriving the next events starts from.
      await db.schema
        .createTable('deployment_heads')
        .addColumn('account_id', 'bigint', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('service', 'text', (c) => c.notNull())
        .addColumn('environment', 'text', (c) => c.notNull())
        .addColumn('running_id', 'bigint')
        .addColumn('latest_id', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('deployment_heads_pk', ['account_id', 'service', 'environment'])
        .execute()

      // The first deployment of each version of a service, in any environment: where lead time
      // starts (SPEC §6.2).
      await db.schema
        .createTable('version_firsts')
        .addColumn('account_id', 'bigint', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('service', 'text', (c) => c.notNull())
        .addColumn('version', 'text', (c) => c.notNull())
        .addColumn('deployment_id', 'bigint', (c) => c.notNull())
        .addColumn('started_at', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('version_firsts_pk', ['account_id', 'service', 'version'])
        .execute()

      // How far deployments have been derived: every event up to `through` is in them, except
      // those still in `deployment_gaps` (ids PostgreSQL handed out to transactions not yet
      // committed when their neighbours were derived). The one row is also the lock that keeps two
      // derivations (two instances, or the server and `shiplog deployments rebuild`) apart.
      await db.schema
        .createTable('deployments_progress')
        .addColumn('id', 'integer', (c) => c.primaryKey())
        .addColumn('through', 'bigint', (c) => c.notNull())
        // Counts derivations, so an instance can tell whether another one wrote since its last.
        .addColumn('generation', 'bigint', (c) => c.notNull())
        .execute()
      await db
        .insertInto('deployments_progress' as never)
        .values({ id: 1, through: 0, generation: 0 } as never)
        .execute()
      await db.schema
        .createTable('deployment_gaps')
        .addColumn('from_id', 'bigint', (c) => c.primaryKey())
        .addColumn('to_id', 'bigint', (c) => c.notNull())
        .addColumn('seen_at', 'bigint', (c) => c.notNull())
        .execute()

      // Per-account settings of the board and insights.
      await db.schema
        .alterTable('accounts')
        .addColumn('stall_minutes', 'integer', (c) => c.notNull().defaultTo(60))
        .execute()
      await db.schema.alterTable('accounts').addColumn('badge_token', 'text').execute()
      await db.schema
        .createIndex('accounts_badge_token_idx')
        .on('accounts')
        .column('badge_token')
        .unique()
        .execute()

      // The account's environment order and which are hidden; environments not listed follow in the
      // built-in order, then first-seen order.
      await db.schema
        .createTable('environment_settings')
        .addColumn('account_id', 'bigint', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('position', 'integer', (c) => c.notNull())
        .addColumn('hidden', 'integer', (c) => c.notNull().defaultTo(0))
        .addPrimaryKeyConstraint('environment_settings_pk', ['account_id', 'name'])
        .execute()

      // What people know about a service: the board's team filter and links.
      await db.schema
        .createTable('services')
        .addColumn('account_id', 'bigint', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('team', 'text')
        .addColumn('description', 'text')
        .addColumn('repository_url', 'text')
        .addColumn('runbook_url', 'text')
        .addColumn('dashboard_url', 'text')
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('services_pk', ['account_id', 'name'])
        .execute()

      // "ingest", "read" or "ingest,read": what a key may do. Existing keys only recorded events.
      await db.schema
        .alterTable('api_keys')
        .addColumn('scopes', 'text', (c) => c.notNull().defaultTo('ingest'))
        .execute()
    },
  }
}
