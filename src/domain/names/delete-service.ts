// Deleting a service's history (issue 28): its events, under every name they carry (the service's
// own and any renamed or merged into it), and everything derived from them. Each deleted event's
// link stays in the tamper-evidence chain and a row in chain_erasures names the deletion; the audit
// entry the caller writes in the same transaction (action service.history_deleted, at the same
// instant) is what `shiplog verify` checks it against, as it checks a pruned row against retention.
import { type Kysely, sql } from 'kysely'
import type { DB } from '../../db/schema.js'
import { withTransaction } from '../audit/transaction.js'
import { type AliasRow, nameAliases, rawNames } from '../deployments/name-aliases.js'

/** Events deleted per statement: keeps each id list well under the databases' parameter limits. */
const IDS_PER_STATEMENT = 500

export interface DeletedHistory {
  service: string
  events: number
  deployments: number
}

/** The words chain_erasures and `shiplog verify` use for this deletion. */
export function erasureReason(service: string): string {
  return `history of service "${service}" deleted`
}

/**
 * Deletes the history of `service` (a name the board shows) in the caller's transaction if it is
 * one. `at` must be the audit entry's time. Takes derivation's lock row first (as retention does).
 */
export function deleteServiceHistory(
  db: Kysely<DB>,
  accountId: number,
  service: string,
  at: number,
): Promise<DeletedHistory> {
  return withTransaction(db, async (trx) => {
    await sql`update deployments_progress set generation = generation + 1 where id = 1`.execute(trx)
    const aliasRows = await trx
      .selectFrom('name_aliases')
      .select(['account_id', 'kind', 'from_name', 'to_name'])
      .where('account_id', '=', accountId)
      .execute()
    const names = rawNames(nameAliases(aliasRows as AliasRow[]), accountId, 'service', service)
    const ids = (
      await trx
        .selectFrom('events')
        .select('id')
        .where('account_id', '=', accountId)
        .where('service', 'in', names)
        .orderBy('id')
        .execute()
    ).map((r) => Number(r.id))
    const reason = erasureReason(service)
    for (let i = 0; i < ids.length; i += IDS_PER_STATEMENT) {
      const chunk = ids.slice(i, i + IDS_PER_STATEMENT)
      await trx
        .insertInto('chain_erasures')
        .values(
          chunk.map((id) => ({
            stream: 'events' as const,
            row_id: id,
            account_id: accountId,
            audit_at: at,
            reason,
          })),
        )
        .execute()
      await trx.deleteFrom('webhook_deliveries').where('event_id', 'in', chunk).execute()
      await trx.deleteFrom('idempotency_keys').where('event_id', 'in', chunk).execute()
      await trx.deleteFrom('events').where('id', 'in', chunk).execute()
    }
    // What was said about its deployments and versions goes with them; an environment-wide lock
    // or rule names no service and stays.
    await trx
      .deleteFrom('deployment_incidents')
      .where('account_id', '=', accountId)
      .where('deployment_id', 'in', (eb) =>
        eb
          .selectFrom('deployments')
          .select('id')
          .where('account_id', '=', accountId)
          .where('service', '=', service),
      )
      .execute()
    await trx
      .deleteFrom('bad_versions')
      .where('account_id', '=', accountId)
      .where('service', '=', service)
      .execute()
    await trx
      .deleteFrom('environment_locks')
      .where('account_id', '=', accountId)
      .where('service', '=', service)
      .execute()
    const deployments = await trx
      .deleteFrom('deployments')
      .where('account_id', '=', accountId)
      .where('service', '=', service)
      .executeTakeFirst()
    for (const table of ['deployment_heads', 'version_firsts'] as const) {
      await trx.deleteFrom(table).where('account_id', '=', accountId).where('service', '=', service).execute()
    }
    await trx.deleteFrom('services').where('account_id', '=', accountId).where('name', '=', service).execute()
    // New events under the old names start a service of their own again.
    await trx
      .deleteFrom('name_aliases')
      .where('account_id', '=', accountId)
      .where('kind', '=', 'service')
      .where('to_name', '=', service)
      .execute()
    return { service, events: ids.length, deployments: Number(deployments.numDeletedRows) }
  })
}
