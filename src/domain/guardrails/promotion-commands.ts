// Promotion rules as audited commands (SPEC §11): "deploying to this environment needs success in
// that one at least N minutes before"; a rule that names the environment itself or closes a cycle is
// refused.
import type { Kysely } from 'kysely'
import type { DB } from '../../db/schema.js'
import { type AuditSource, recordAudit } from '../audit/log.js'
import type { Validation } from '../events/event.js'
import { refused, unknownEnvironment } from './commands.js'
import type { PromotionInput } from './inputs.js'
import { loadPromotionRules } from './store.js'

/**
 * Sets "deploying to environment needs success in after_environment at least N minutes before"
 * (replacing the rule for the same pair). Refused when it would close a cycle: the chain it would
 * make is named.
 */
export function setPromotionRule(
  db: Kysely<DB>,
  accountId: number,
  input: PromotionInput,
  who: AuditSource,
  now = Date.now(),
): Promise<Validation<{ replaced: boolean }>> {
  return db.transaction().execute(async (trx) => {
    const errors = await unknownEnvironment(trx, accountId, {
      environment: input.environment,
      after_environment: input.afterEnvironment,
    })
    if (errors.length > 0) return refused(errors)
    const rules = await loadPromotionRules(trx, accountId)
    const cycle = cycleThrough(
      rules.filter(
        (r) => !(r.environment === input.environment && r.afterEnvironment === input.afterEnvironment),
      ),
      input.environment,
      input.afterEnvironment,
    )
    if (cycle) {
      return refused([
        {
          field: 'after_environment',
          message: `the rule would make a cycle: ${cycle.join(' → ')} (each needs the next first)`,
        },
      ])
    }
    const before = rules.find(
      (r) => r.environment === input.environment && r.afterEnvironment === input.afterEnvironment,
    )
    if (before) {
      await trx
        .deleteFrom('promotion_rules')
        .where('account_id', '=', accountId)
        .where('environment', '=', input.environment)
        .where('after_environment', '=', input.afterEnvironment)
        .execute()
    }
    await trx
      .insertInto('promotion_rules')
      .values({
        account_id: accountId,
        environment: input.environment,
        after_environment: input.afterEnvironment,
        min_minutes: input.minMinutes,
        require_good: input.requireGood ? 1 : 0,
        created_by: who.actor.name,
        created_at: now,
      })
      .execute()
    await recordAudit(trx, {
      accountId,
      ...who,
      action: 'promotion_rule.set',
      target: `environment ${input.environment}`,
      details: {
        after: input.afterEnvironment,
        min_minutes: input.minMinutes,
        require_good: input.requireGood,
        ...(before ? { before: `${before.minMinutes} min${before.requireGood ? ', not bad' : ''}` } : {}),
      },
      at: now,
    })
    return { ok: true, value: { replaced: before !== undefined } }
  })
}

/**
 * With the rule environment ← after added, a path after → … → environment among the rules (each
 * rule an arrow from an environment to the one it needs first) would close a cycle: that path, from
 * environment round to itself, or null.
 */
export function cycleThrough(
  rules: readonly { environment: string; afterEnvironment: string }[],
  environment: string,
  after: string,
): string[] | null {
  const needs = new Map<string, string[]>()
  for (const r of rules) needs.set(r.environment, [...(needs.get(r.environment) ?? []), r.afterEnvironment])
  const seen = new Set<string>()
  const walk = (from: string, path: string[]): string[] | null => {
    if (from === environment) return path
    if (seen.has(from)) return null
    seen.add(from)
    for (const next of (needs.get(from) ?? []).sort()) {
      const found = walk(next, [...path, next])
      if (found) return found
    }
    return null
  }
  return walk(after, [environment, after])
}

export function removePromotionRule(
  db: Kysely<DB>,
  accountId: number,
  target: { environment: string; afterEnvironment: string },
  who: AuditSource,
  now = Date.now(),
): Promise<Validation<{ removed: number }>> {
  return db.transaction().execute(async (trx) => {
    const deleted = await trx
      .deleteFrom('promotion_rules')
      .where('account_id', '=', accountId)
      .where('environment', '=', target.environment)
      .where('after_environment', '=', target.afterEnvironment)
      .returning('min_minutes')
      .execute()
    if (deleted.length === 0) {
      return refused([
        {
          field: 'after_environment',
          message: `${target.environment} has no promotion rule naming ${target.afterEnvironment}`,
        },
      ])
    }
    await recordAudit(trx, {
      accountId,
      ...who,
      action: 'promotion_rule.removed',
      target: `environment ${target.environment}`,
      details: { after: target.afterEnvironment },
      at: now,
    })
    return { ok: true, value: { removed: deleted.length } }
  })
}
