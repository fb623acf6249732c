// Frozen: the guardrail check's one question of the deployments (SPEC §11) — when did this version
// of a service first succeed in each environment a promotion rule names — answered by a seek. The
// group index by service and environment held every deployment there (tens of thousands at a
// million events), each read from the table for its version. Only successes are indexed, and
// deployments are written off the request path, so recording pays nothing for it.
import { type Kysely, type Migration, sql } from 'kysely'

export function guardrailCheckIndex(): Migration {
  return {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createIndex('deployments_version_success_idx')
        .on('deployments')
        .columns(['account_id', 'service', 'version', 'environment', 'finished_at'])
        .where(sql.ref('result'), '=', 'succeeded')
        .execute()
    },
  }
}
