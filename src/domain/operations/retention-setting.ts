// Changing how long an account keeps its events, with the audit entry in one transaction: what
// Settings and `shiplog retention set` call (an entry exists exactly when the change does).
import type { Kysely } from 'kysely'
import type { DB } from '../../db/schema.js'
import { type AuditSource, recordAudit } from '../audit/log.js'
import { getRetention, setRetention } from './retention.js'

/** Sets the account's retention (days, null for forever); false, and no entry, when it already was. */
export function setRetentionAudited(
  db: Kysely<DB>,
  accountId: number,
  days: number | null,
  who: AuditSource,
): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const before = await getRetention(trx, accountId)
    if (before === days) return false
    await setRetention(trx, accountId, days)
    await recordAudit(trx, {
      accountId,
      ...who,
      action: 'settings.changed',
      target: 'retention',
      details: { from_days: before, to_days: days },
    })
    return true
  })
}
