// The guardrail tables read and written (SPEC §11): one account's guardrails loaded whole (they are
// few: a handful of locks, windows, rules and marked versions), and the one fact the promotion
// rules need from the deployments.
import type { Kysely } from 'kysely'
import type { DB } from '../../db/schema.js'
import type { BadVersion, Freeze, Guardrails, Lock, PromotionRule } from './rules.js'

export async function loadLocks(db: Kysely<DB>, accountId: number): Promise<Lock[]> {
  const rows = await db
    .selectFrom('environment_locks')
    .selectAll()
    .where('account_id', '=', accountId)
    .orderBy('id')
    .execute()
  return rows.map((r) => ({
    id: Number(r.id),
    environment: r.environment,
    service: r.service,
    reason: r.reason,
    endsAt: r.ends_at === null ? null : Number(r.ends_at),
    createdBy: r.created_by,
    createdAt: Number(r.created_at),
  }))
}

export async function loadFreezes(db: Kysely<DB>, accountId: number): Promise<Freeze[]> {
  const rows = await db
    .selectFrom('freeze_windows')
    .selectAll()
    .where('account_id', '=', accountId)
    .orderBy('id')
    .execute()
  return rows.map((r) => ({
    id: Number(r.id),
    environment: r.environment,
    reason: r.reason,
    schedule:
      r.cron !== null
        ? {
            kind: 'recurring' as const,
            cron: r.cron,
            durationMinutes: Number(r.duration_minutes ?? 0),
            timeZone: r.time_zone ?? 'UTC',
          }
        : { kind: 'once' as const, startsAt: Number(r.starts_at ?? 0), endsAt: Number(r.ends_at ?? 0) },
    createdBy: r.created_by,
    createdAt: Number(r.created_at),
  }))
}

export async function loadBadVersions(db: Kysely<DB>, accountId: number): Promise<BadVersion[]> {
  const rows = await db
    .selectFrom('bad_versions')
    .selectAll()
    .where('account_id', '=', accountId)
    .orderBy('service')
    .orderBy('version')
    .execute()
  return rows.map((r) => ({
    service: r.service,
    version: r.version,
    reason: r.reason,
    createdBy: r.created_by,
    createdAt: Number(r.created_at),
  }))
}

export async function loadPromotionRules(db: Kysely<DB>, accountId: number): Promise<PromotionRule[]> {
  const rows = await db
    .selectFrom('promotion_rules')
    .selectAll()
    .where('account_id', '=', accountId)
    .orderBy('environment')
    .orderBy('after_environment')
    .execute()
  return rows.map((r) => ({
    environment: r.environment,
    afterEnvironment: r.after_environment,
    minMinutes: Number(r.min_minutes),
    requireGood: Number(r.require_good) === 1,
    createdBy: r.created_by,
    createdAt: Number(r.created_at),
  }))
}

/** Everything one account has set. */
export async function loadGuardrails(db: Kysely<DB>, accountId: number): Promise<Guardrails> {
  const [locks, freezes, badVersions, promotions] = await Promise.all([
    loadLocks(db, accountId),
    loadFreezes(db, accountId),
    loadBadVersions(db, accountId),
    loadPromotionRules(db, accountId),
  ])
  return { locks, freezes, badVersions, promotions }
}

/**
 * When `version` of `service` first succeeded in each of `environments` (the finish of its
 * earliest succeeded deployment there), null where it never did. Deployments must be derived up to
 * the moment asked about (the caller derives first: read-your-writes).
 */
export async function firstSuccesses(
  db: Kysely<DB>,
  accountId: number,
  service: string,
  version: string,
  environments: readonly string[],
): Promise<Map<string, number | null>> {
  const firsts = new Map<string, number | null>(environments.map((e) => [e, null]))
  if (environments.length === 0) return firsts
  const rows = await db
    .selectFrom('deployments')
    .select(['environment', (eb) => eb.fn.min('finished_at').as('first')])
    .where('account_id', '=', accountId)
    .where('service', '=', service)
    .where('environment', 'in', environments)
    .where('result', '=', 'succeeded')
    .where('version', '=', version)
    .groupBy('environment')
    .execute()
  for (const r of rows) if (r.first !== null) firsts.set(r.environment, Number(r.first))
  return firsts
}

/** Names as deployments know them: what an admin renamed or merged, mapped to the new name. */
export async function currentNames(
  db: Kysely<DB>,
  accountId: number,
): Promise<{ service: Map<string, string>; environment: Map<string, string> }> {
  const rows = await db
    .selectFrom('name_aliases')
    .select(['kind', 'from_name', 'to_name'])
    .where('account_id', '=', accountId)
    .execute()
  const names = { service: new Map<string, string>(), environment: new Map<string, string>() }
  for (const r of rows) (r.kind === 'service' ? names.service : names.environment).set(r.from_name, r.to_name)
  return names
}
