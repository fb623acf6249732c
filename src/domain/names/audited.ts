// Renames, merges and deletions with their audit entries, in one transaction: what the Settings
// pages and the command line call (an entry exists exactly when the change does).
import type { Kysely } from 'kysely'
import type { DB } from '../../db/schema.js'
import { type AuditSource, recordAudit } from '../audit/log.js'
import { type DeletedHistory, deleteServiceHistory } from './delete-service.js'
import { droppedRuleText } from './guardrails-follow.js'
import { type CheckedRename, type RenameResult, renameName } from './rename.js'

export function renameAudited(
  db: Kysely<DB>,
  accountId: number,
  rename: CheckedRename,
  source: AuditSource,
): Promise<RenameResult> {
  return db.transaction().execute(async (trx) => {
    const result = await renameName(trx, accountId, rename)
    await recordAudit(trx, {
      accountId,
      ...source,
      action: rename.kind === 'service' ? 'service.renamed' : 'environment.renamed',
      target: `${rename.kind} ${rename.from}`,
      details: {
        from: rename.from,
        to: rename.to,
        change: rename.merge ? 'merged' : 'renamed',
        events: result.events,
        ...(result.droppedPromotionRules.length > 0
          ? { dropped_promotion_rules: result.droppedPromotionRules.map(droppedRuleText) }
          : {}),
      },
    })
    return result
  })
}

export function deleteServiceAudited(
  db: Kysely<DB>,
  accountId: number,
  service: string,
  source: AuditSource,
  at = Date.now(),
): Promise<DeletedHistory> {
  return db.transaction().execute(async (trx) => {
    const result = await deleteServiceHistory(trx, accountId, service, at)
    // Its time is what chain_erasures point at: `shiplog verify` accepts the deletion by it.
    await recordAudit(trx, {
      accountId,
      ...source,
      at,
      action: 'service.history_deleted',
      target: `service ${service}`,
      details: { events: result.events, deployments: result.deployments },
    })
    return result
  })
}
