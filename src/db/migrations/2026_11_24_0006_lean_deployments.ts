// Frozen: the deployments' indexes for what they are read by. Time travel (the board at a past
// instant) looks up the last success and the last start before an instant: one seek each in an
// index ordered by time, where the index by finishing event walked back over every later one.
// Open deployments and earlier successes are read per service and environment (the group index),
// and account-wide listings walk the primary key, so two indexes go: fewer to write per event.
import { type Kysely, type Migration, sql } from 'kysely'

export function leanDeployments(): Migration {
  return {
    async up(db: Kysely<unknown>) {
      await db.schema.dropIndex('deployments_version_idx').execute()
      await db.schema.dropIndex('deployments_account_idx').execute()
      await db.schema.dropIndex('deployments_success_idx').execute()
      await db.schema
        .createIndex('deployments_success_time_idx')
        .on('deployments')
        .columns(['account_id', 'service', 'environment', 'finished_at', 'finish_event_id'])
        .where(sql.ref('result'), '=', 'succeeded')
        .execute()
      await db.schema
        .createIndex('deployments_started_idx')
        .on('deployments')
        .columns(['account_id', 'service', 'environment', 'started_at', 'id'])
        .execute()
    },
  }
}
