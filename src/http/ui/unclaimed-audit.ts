// Audit entries that belong to no account (a sign-in for an unknown address, a broken single sign-on answer): bounded for the whole installation.
import type { Database } from '../../db/connect.js'
import { type AuditEntryInput, recordAudit } from '../../domain/audit/log.js'
import { checkRateLimit, type RateLimitStore } from '../rate-limit.js'

/**
 * Anyone can cause these entries, and the audit log is append-only: per-address limits alone let
 * a client with many addresses (an IPv6 block) grow it for ever. So besides them, at most this many
 * are written per window for the whole installation (per instance without Redis); beyond, the
 * attempt is counted in shiplog_audit_entries_dropped_total instead of recorded one by one.
 * Entries of an account (a failed login for one of its users) are bounded by the per-email limit.
 */
export const UNCLAIMED_AUDIT_PER_WINDOW = 300
export const UNCLAIMED_AUDIT_WINDOW_MS = 15 * 60 * 1000

export interface UnclaimedAuditOptions {
  store: RateLimitStore
  onDropped: (action: string) => void
  onStoreError: (err: unknown) => void
}

/** Records `entry` (which belongs to no account) while the installation's budget lasts; says whether it did. */
export async function recordUnclaimedAudit(
  db: Database['db'],
  entry: AuditEntryInput & { accountId: null },
  options: UnclaimedAuditOptions,
): Promise<boolean> {
  const budget = await checkRateLimit(
    options.store,
    'audit:unclaimed',
    UNCLAIMED_AUDIT_PER_WINDOW,
    UNCLAIMED_AUDIT_WINDOW_MS,
    options.onStoreError,
  )
  if (!budget.allowed) {
    options.onDropped(entry.action)
    return false
  }
  await recordAudit(db, entry)
  return true
}
