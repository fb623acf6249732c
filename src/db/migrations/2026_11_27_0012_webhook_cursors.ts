// Frozen: webhook deliveries are queued per webhook by the sender, not per event by derivation. Each
// webhook gets a cursor (the last event id matched against it), and the sender finds a webhook's
// deliveries waiting for their first attempt by an index of their own.
import { type Kysely, type Migration, sql } from 'kysely'
import type { DialectName } from '../../config.js'

export function webhookCursors(dialect: DialectName): Migration {
  return {
    async up(db: Kysely<unknown>) {
      await db.schema
        .alterTable('webhooks')
        .addColumn('queued_through', 'bigint', (c) => c.notNull().defaultTo(0))
        .execute()
      // Until now derivation queued every webhook's deliveries with the events it derived: each
      // cursor starts where derivation stands, short of a gap it still waits on (an event that
      // fills it is matched then; one already queued is not queued twice, by the unique constraint).
      const greatest = dialect === 'postgres' ? 'greatest' : 'max'
      const least = dialect === 'postgres' ? 'least' : 'min'
      await sql`update webhooks set queued_through = ${sql.raw(greatest)}(since_event_id, coalesce((
          select ${sql.raw(least)}(p.through, coalesce((select min(g.from_id) - 1 from deployment_gaps g), p.through))
          from deployments_progress p where p.id = 1), 0))`.execute(db)
      await db.schema
        .createIndex('webhook_deliveries_fresh_idx')
        .on('webhook_deliveries')
        .columns(['webhook_id'])
        .where(sql.ref('state'), '=', 'pending')
        .where(sql.ref('attempts'), '=', 0)
        .execute()
    },
  }
}
