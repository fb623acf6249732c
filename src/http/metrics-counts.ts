// The deployments-by-outcome figures of GET /metrics (metrics.ts reuses them between scrapes).
import { sql } from 'kysely'
import type { Database } from '../db/connect.js'

export const DEPLOYMENT_OUTCOMES = ['in_progress', 'succeeded', 'failed', 'stalled'] as const
export type DeploymentOutcome = (typeof DEPLOYMENT_OUTCOMES)[number]

/**
 * Deployments by outcome across all accounts (SPEC §6.1): finished ones by result, open ones
 * stalled when older than their account's stall time, else in progress. Three counts that the
 * indexes answer (all rows by the primary key, successes by their partial index, open rows with
 * their account's stall time) rather than one GROUP BY, which sorted every row: at a million
 * deployments on SQLite that took 0.6 to 2 s, these about a quarter of it.
 */
export async function countDeploymentsByOutcome(
  database: Database,
  now: number,
): Promise<Record<DeploymentOutcome, number>> {
  const { db } = database
  const total = await db
    .selectFrom('deployments')
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .executeTakeFirstOrThrow()
  const succeeded = await db
    .selectFrom('deployments')
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .where('result', '=', 'succeeded')
    .executeTakeFirstOrThrow()
  const { rows } = await sql<{ n: number | string; stalled: number | string | null }>`
    SELECT COUNT(*) AS n,
      SUM(CASE WHEN d.started_at < CAST(${now} AS BIGINT) - a.stall_minutes * 60000 THEN 1 ELSE 0 END) AS stalled
    FROM deployments d JOIN accounts a ON a.id = d.account_id
    WHERE d.finished_at IS NULL`.execute(db)
  const open = Number(rows[0]?.n ?? 0)
  const stalled = Number(rows[0]?.stalled ?? 0)
  return {
    in_progress: open - stalled,
    stalled,
    succeeded: Number(succeeded.n),
    // Every finished deployment that did not succeed failed (result is succeeded or failed).
    // (The three counts are separate reads: a run deriving between them can move one by a few.)
    failed: Math.max(0, Number(total.n) - Number(succeeded.n) - open),
  }
}
