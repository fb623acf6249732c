// When a service or an environment is renamed or merged (rename.ts), the guardrails that name it
// (SPEC §11: locks, freeze windows, bad versions, promotion rules) follow to the new name, in the
// rename's transaction. On a merge the target's own rows win where two would share a key, and a
// promotion rule that would name the environment itself, or close a cycle, is dropped and reported.
import type { Kysely } from 'kysely'
import type { DB } from '../../db/schema.js'
import { cycleThrough } from '../guardrails/commands.js'
import type { PromotionRule } from '../guardrails/rules.js'
import { loadPromotionRules } from '../guardrails/store.js'

/** A promotion rule a merge dropped, and why. */
export interface DroppedPromotionRule {
  /** As it was before the merge. */
  environment: string
  afterEnvironment: string
  why: 'would name the environment itself' | 'the new name has its own' | 'would make a cycle'
}

export async function followGuardrails(
  trx: Kysely<DB>,
  accountId: number,
  kind: 'service' | 'environment',
  from: string,
  to: string,
): Promise<DroppedPromotionRule[]> {
  if (kind === 'service') {
    await trx
      .updateTable('environment_locks')
      .set({ service: to })
      .where('account_id', '=', accountId)
      .where('service', '=', from)
      .execute()
    // A version marked bad under both names keeps the mark (and reason) it had under the new one.
    const marked = trx
      .selectFrom('bad_versions')
      .select('version')
      .where('account_id', '=', accountId)
      .where('service', '=', to)
    await trx
      .deleteFrom('bad_versions')
      .where('account_id', '=', accountId)
      .where('service', '=', from)
      .where('version', 'in', marked)
      .execute()
    await trx
      .updateTable('bad_versions')
      .set({ service: to })
      .where('account_id', '=', accountId)
      .where('service', '=', from)
      .execute()
    return []
  }
  for (const table of ['environment_locks', 'freeze_windows'] as const) {
    await trx
      .updateTable(table)
      .set({ environment: to })
      .where('account_id', '=', accountId)
      .where('environment', '=', from)
      .execute()
  }
  return followPromotionRules(trx, accountId, from, to)
}

async function followPromotionRules(
  trx: Kysely<DB>,
  accountId: number,
  from: string,
  to: string,
): Promise<DroppedPromotionRule[]> {
  const rules = await loadPromotionRules(trx, accountId)
  // In code-unit order, the same on both databases (their collations differ): it decides which
  // of two rules that would close a cycle together is dropped.
  const byNames = (a: PromotionRule, b: PromotionRule) =>
    a.environment < b.environment
      ? -1
      : a.environment > b.environment
        ? 1
        : a.afterEnvironment < b.afterEnvironment
          ? -1
          : a.afterEnvironment > b.afterEnvironment
            ? 1
            : 0
  const moving = rules.filter((r) => r.environment === from || r.afterEnvironment === from).sort(byNames)
  if (moving.length === 0) return []
  const kept = rules.filter((r) => !moving.includes(r))
  const dropped: DroppedPromotionRule[] = []
  const placed: PromotionRule[] = []
  const renamed = (name: string) => (name === from ? to : name)
  for (const rule of moving) {
    const environment = renamed(rule.environment)
    const afterEnvironment = renamed(rule.afterEnvironment)
    const was = { environment: rule.environment, afterEnvironment: rule.afterEnvironment }
    if (environment === afterEnvironment) dropped.push({ ...was, why: 'would name the environment itself' })
    else if (kept.some((k) => k.environment === environment && k.afterEnvironment === afterEnvironment))
      dropped.push({ ...was, why: 'the new name has its own' })
    else if (cycleThrough(kept, environment, afterEnvironment))
      dropped.push({ ...was, why: 'would make a cycle' })
    else {
      const moved = { ...rule, environment, afterEnvironment }
      kept.push(moved)
      placed.push(moved)
    }
  }
  await trx
    .deleteFrom('promotion_rules')
    .where('account_id', '=', accountId)
    .where((eb) => eb.or([eb('environment', '=', from), eb('after_environment', '=', from)]))
    .execute()
  if (placed.length > 0) {
    await trx
      .insertInto('promotion_rules')
      .values(
        placed.map((r) => ({
          account_id: accountId,
          environment: r.environment,
          after_environment: r.afterEnvironment,
          min_minutes: r.minMinutes,
          require_good: r.requireGood ? 1 : 0,
          created_by: r.createdBy,
          created_at: r.createdAt,
        })),
      )
      .execute()
  }
  return dropped
}

/** A dropped rule in words, for the rename's answer and its audit entry. */
export function droppedRuleText(d: DroppedPromotionRule): string {
  return `${d.environment} after ${d.afterEnvironment} (${d.why})`
}
