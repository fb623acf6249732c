// Frozen: an event's own times (SPEC §1.2 "Event time"). `occurred_at` is when it happened, as the
// sender said: every event stored so far said nothing, so it is its arrival (received_at).
// `commit_time` is when the change was committed, for lead time; deployments keep the first one
// their events gave. Deployments, the board at a past instant, metrics and retention go by
// occurred_at: retention finds the newest id older than its cut-off by (account, occurred_at), and
// `shiplog import` finds an event it already stored by the same index.
import { type Kysely, type Migration, sql } from 'kysely'
import type { DialectName } from '../../config.js'

export function eventTimeSchema(dialect: DialectName): Migration {
  return {
    async up(db: Kysely<unknown>) {
      if (dialect === 'postgres') {
        // One statement: the rows are rewritten once, and the column is NOT NULL with no default
        // left behind (every insert names it).
        await sql`alter table events add column occurred_at bigint`.execute(db)
        await sql`update events set occurred_at = received_at`.execute(db)
        await sql`alter table events alter column occurred_at set not null`.execute(db)
      } else {
        // SQLite adds a NOT NULL column only with a default; every insert names it, so the 0 is never
        // used once the backfill has run.
        await db.schema
          .alterTable('events')
          .addColumn('occurred_at', 'bigint', (c) => c.notNull().defaultTo(0))
          .execute()
        await sql`update events set occurred_at = received_at`.execute(db)
      }
      await db.schema.alterTable('events').addColumn('commit_time', 'bigint').execute()
      await db.schema.alterTable('deployments').addColumn('commit_time', 'bigint').execute()
      await db.schema
        .createIndex('events_account_occurred_at_idx')
        .on('events')
        .columns(['account_id', 'occurred_at', 'id'])
        .execute()
    },
  }
}
