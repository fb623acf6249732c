// What the guardrails say about deploying one version of a service to one environment (SPEC §11):
// pure rules over the account's guardrails as loaded (store.ts) and the facts the promotion rules
// need. The check (`GET /api/v1/check`) and recording (the `guardrails` an event carries) both ask
// here, so they can never disagree.
import type { GuardrailRule } from '../../text-rules.js'
import { activeOccurrence } from './freeze-calendar.js'

export interface Lock {
  readonly id: number
  readonly environment: string
  /** Null: every service in the environment. */
  readonly service: string | null
  readonly reason: string
  readonly endsAt: number | null
  readonly createdBy: string
  readonly createdAt: number
}

export type FreezeSchedule =
  | {
      readonly kind: 'recurring'
      readonly cron: string
      readonly durationMinutes: number
      readonly timeZone: string
    }
  | { readonly kind: 'once'; readonly startsAt: number; readonly endsAt: number }

export interface Freeze {
  readonly id: number
  readonly environment: string
  readonly reason: string
  readonly schedule: FreezeSchedule
  readonly createdBy: string
  readonly createdAt: number
}

export interface BadVersion {
  readonly service: string
  readonly version: string
  readonly reason: string
  readonly createdBy: string
  readonly createdAt: number
}

export interface PromotionRule {
  /** Deploying here requires ... */
  readonly environment: string
  /** ... that the version succeeded here, at least `minMinutes` before. */
  readonly afterEnvironment: string
  readonly minMinutes: number
  /** And that the version is not marked bad. */
  readonly requireGood: boolean
  readonly createdBy: string
  readonly createdAt: number
}

/** One account's guardrails, as store.ts loads them. Names are the names deployments go by. */
export interface Guardrails {
  readonly locks: readonly Lock[]
  readonly freezes: readonly Freeze[]
  readonly badVersions: readonly BadVersion[]
  readonly promotions: readonly PromotionRule[]
}

export const NO_GUARDRAILS: Guardrails = { locks: [], freezes: [], badVersions: [], promotions: [] }

/** Whether an account has any guardrail at all: recording asks nothing more of one that has none. */
export function hasAny(g: Guardrails): boolean {
  return g.locks.length + g.freezes.length + g.badVersions.length + g.promotions.length > 0
}

export interface Deployment {
  readonly service: string
  readonly environment: string
  readonly version: string
}

/** One reason the check gives: which rule, in words, and until when it holds (null: not known). */
export interface Reason {
  readonly rule: GuardrailRule
  readonly message: string
  readonly until: number | null
}

/**
 * For each promotion rule of the target environment: when the version first succeeded in the
 * rule's environment (the finish of its earliest succeeded deployment there), or null if never.
 */
export type FirstSuccesses = ReadonlyMap<string, number | null>

/** A lock applies while it has not ended, to its one service or (service null) to every one. */
export function activeLocks(g: Guardrails, d: Deployment, at: number): Lock[] {
  return g.locks.filter(
    (l) =>
      l.environment === d.environment &&
      (l.service === null || l.service === d.service) &&
      (l.endsAt === null || at < l.endsAt),
  )
}

/** The occurrence of a freeze that holds at `at`, or null. */
export function freezeOccurrence(f: Freeze, at: number): { start: number; end: number } | null {
  const s = f.schedule
  if (s.kind === 'once')
    return s.startsAt <= at && at < s.endsAt ? { start: s.startsAt, end: s.endsAt } : null
  return activeOccurrence({ cron: s.cron, durationMinutes: s.durationMinutes, timeZone: s.timeZone }, at)
}

export function badVersion(g: Guardrails, service: string, version: string): BadVersion | undefined {
  return g.badVersions.find((b) => b.service === service && b.version === version)
}

/** The promotion rules of an environment, in a stable order. */
export function promotionRulesOf(g: Guardrails, environment: string): PromotionRule[] {
  return g.promotions
    .filter((p) => p.environment === environment)
    .sort((a, b) => a.afterEnvironment.localeCompare(b.afterEnvironment))
}

const iso = (ms: number) => new Date(ms).toISOString()

function minutesText(n: number): string {
  return n === 1 ? '1 minute' : `${n} minutes`
}

/**
 * Every reason deploying `d` at `at` is not allowed, in GUARDRAIL_RULES order (lock, freeze,
 * bad_version, promotion) and within a rule in a stable order. Empty: allowed.
 */
export function reasonsAgainst(g: Guardrails, d: Deployment, at: number, firsts: FirstSuccesses): Reason[] {
  const reasons: Reason[] = []
  for (const l of activeLocks(g, d, at).sort((a, b) => a.id - b.id)) {
    const what =
      l.service === null ? `${d.environment} is locked` : `${d.service} is locked in ${d.environment}`
    const until = l.endsAt === null ? ' until it is unlocked' : ` until ${iso(l.endsAt)}`
    reasons.push({ rule: 'lock', message: `${what} by ${l.createdBy}${until}: ${l.reason}`, until: l.endsAt })
  }
  for (const f of [...g.freezes].sort((a, b) => a.id - b.id)) {
    if (f.environment !== d.environment) continue
    const occurrence = freezeOccurrence(f, at)
    if (occurrence === null) continue
    reasons.push({
      rule: 'freeze',
      message: `${d.environment} is in a freeze window until ${iso(occurrence.end)}: ${f.reason}`,
      until: occurrence.end,
    })
  }
  const bad = badVersion(g, d.service, d.version)
  if (bad) {
    reasons.push({
      rule: 'bad_version',
      message: `${d.service} ${d.version} is marked bad by ${bad.createdBy}: ${bad.reason}`,
      until: null,
    })
  }
  for (const p of promotionRulesOf(g, d.environment)) {
    const first = firsts.get(p.afterEnvironment) ?? null
    const wait = p.minMinutes * 60_000
    if (first === null) {
      reasons.push({
        rule: 'promotion',
        message:
          `${d.service} ${d.version} has not succeeded in ${p.afterEnvironment}` +
          (p.minMinutes > 0
            ? `; it must succeed there at least ${minutesText(p.minMinutes)} before ${d.environment}`
            : `; it must succeed there before ${d.environment}`),
        until: null,
      })
    } else if (at < first + wait) {
      reasons.push({
        rule: 'promotion',
        message: `${d.service} ${d.version} succeeded in ${p.afterEnvironment} at ${iso(first)}; ${d.environment} must wait ${minutesText(p.minMinutes)} after that, until ${iso(first + wait)}`,
        until: first + wait,
      })
    }
    if (p.requireGood && bad) {
      reasons.push({
        rule: 'promotion',
        message: `${d.environment} takes only versions not marked bad after ${p.afterEnvironment}, and ${d.service} ${d.version} is marked bad`,
        until: null,
      })
    }
  }
  return reasons
}

/** The rules an event broke, once each, in GUARDRAIL_RULES order: what an event stores. */
export function brokenRules(reasons: readonly Reason[]): GuardrailRule[] {
  const order: readonly GuardrailRule[] = ['lock', 'freeze', 'bad_version', 'promotion']
  return order.filter((rule) => reasons.some((r) => r.rule === rule))
}
