// Frozen: the tamper-evidence chain (SPEC §10). One link per chained row of events and of audit
// entries, and one head per stream; src/domain/chain/ computes them, `shiplog verify` checks them.
import { createHash } from 'node:crypto'
import { type Kysely, type Migration, sql } from 'kysely'

export function chainSchema(): Migration {
  return {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('chain_links')
        // 'events' or 'audit'.
        .addColumn('stream', 'text', (c) => c.notNull())
        .addColumn('row_id', 'bigint', (c) => c.notNull())
        // Lower-case hex SHA-256 of the row's canonical bytes, and the link: SHA-256 of the
        // previous link, the digest, the account and the time (src/domain/chain/canonical.ts).
        .addColumn('digest', 'text', (c) => c.notNull())
        .addColumn('link', 'text', (c) => c.notNull())
        // Copied from the row when it was chained, so a row that retention pruned can be told from
        // one that went missing: its account and time (events: received_at; audit: at).
        .addColumn('account_id', 'bigint')
        .addColumn('at', 'bigint')
        .addPrimaryKeyConstraint('chain_links_pk', ['stream', 'row_id'])
        .execute()
      await db.schema
        .createTable('chain_heads')
        .addColumn('stream', 'text', (c) => c.primaryKey())
        // The last row id chained (0: none yet), and its link.
        .addColumn('through', 'bigint', (c) => c.notNull())
        .addColumn('link', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        // The first id the chain waits for (a gap in the ids: a transaction that may still commit
        // below rows already visible), since when, and on PostgreSQL the transactions writing to
        // the table then (pg_locks virtualtransaction ids, comma-separated): once none of them
        // holds its lock any more, nothing can commit in the gap.
        .addColumn('hole_from', 'bigint')
        .addColumn('hole_seen_at', 'bigint')
        .addColumn('hole_writers', 'text')
        .execute()
      for (const stream of ['events', 'audit']) {
        await sql`insert into chain_heads (stream, through, link, updated_at)
          values (${stream}, 0, ${createHash('sha256').update(`shiplog chain v1 ${stream}`).digest('hex')}, 0)`.execute(
          db,
        )
      }
    },
  }
}
