// What the pages mark (SPEC §11 "the board, timelines … show it"): which deployments broke a
// guardrail when they were recorded (read from their flagged events), and which locks and freeze
// windows hold over an environment now. The board, the service page and the details cells ask here.
import type { Kysely } from 'kysely'
import type { DB } from '../../db/schema.js'
import { GUARDRAIL_RULES, type GuardrailRule } from '../../text-rules.js'
import type { Deployment } from '../deployments/rules.js'
import { nextOccurrence } from './freeze-calendar.js'
import { type BadVersion, type Freeze, freezeOccurrence, type Guardrails, type Lock } from './rules.js'

/** What a deployment's events said when they were recorded: the rules broken, and why anyway. */
export interface DeploymentFlags {
  /** Every rule any of its events broke, once each, in GUARDRAIL_RULES order. */
  readonly rules: readonly GuardrailRule[]
  /** The override reason its newest event that gave one gave; null when none did. */
  readonly overrideReason: string | null
}

/** One flagged event as stored: `guardrails` is the comma-separated list (null: none). */
export interface FlaggedEvent {
  readonly guardrails: string | null
  readonly overrideReason: string | null
}

/** The flags of one deployment from its flagged events, oldest first. Null when none says anything. */
export function flagsOf(events: readonly FlaggedEvent[]): DeploymentFlags | null {
  const broken = new Set<string>()
  let overrideReason: string | null = null
  for (const e of events) {
    for (const rule of (e.guardrails ?? '').split(',')) broken.add(rule.trim())
    if (e.overrideReason !== null) overrideReason = e.overrideReason
  }
  const rules = GUARDRAIL_RULES.filter((r) => broken.has(r))
  return rules.length === 0 && overrideReason === null ? null : { rules, overrideReason }
}

/** Ids per statement: far below both databases' limits on bound parameters. */
const CHUNK = 1000

/**
 * The flags of each given deployment that has any, by deployment id. Only flagged events are read:
 * the statement carries the condition of events_guardrails_idx, so a database may answer from that
 * small partial index; deployments none of whose events were flagged cost nothing more.
 */
export async function deploymentFlags(
  db: Kysely<DB>,
  accountId: number,
  deployments: readonly Pick<Deployment, 'id' | 'eventIds'>[],
): Promise<Map<number, DeploymentFlags>> {
  const ids = [...new Set(deployments.flatMap((d) => d.eventIds))]
  const flagged = new Map<number, FlaggedEvent>()
  for (let start = 0; start < ids.length; start += CHUNK) {
    const rows = await db
      .selectFrom('events')
      .select(['id', 'guardrails', 'override_reason'])
      .where('account_id', '=', accountId)
      .where((eb) => eb.or([eb('guardrails', 'is not', null), eb('override_reason', 'is not', null)]))
      .where('id', 'in', ids.slice(start, start + CHUNK))
      .execute()
    for (const r of rows)
      flagged.set(Number(r.id), { guardrails: r.guardrails, overrideReason: r.override_reason })
  }
  const out = new Map<number, DeploymentFlags>()
  if (flagged.size === 0) return out
  for (const d of deployments) {
    const events = d.eventIds.flatMap((id) => {
      const e = flagged.get(id)
      return e ? [e] : []
    })
    const flags = flagsOf(events)
    if (flags) out.set(d.id, flags)
  }
  return out
}

/** What breaking each rule says of a deployment, after "Deployed": "Deployed during a freeze". */
export const BROKEN_RULE_TEXT: Record<GuardrailRule, string> = {
  lock: 'while locked',
  freeze: 'during a freeze',
  bad_version: 'while its version was marked bad',
  promotion: 'before its promotion rule allowed',
}

/** "Deployed while locked, during a freeze", or null when it broke none (an override alone). */
export function brokenText(rules: readonly GuardrailRule[]): string | null {
  return rules.length === 0 ? null : `Deployed ${rules.map((r) => BROKEN_RULE_TEXT[r]).join(', ')}`
}

/** A freeze window that holds now, with the end of its occurrence. */
export interface ActiveFreeze {
  readonly freeze: Freeze
  readonly start: number
  readonly until: number
}

/** What guards one environment at an instant: the locks on every service there, and active freezes. */
export interface EnvironmentGuard {
  readonly environment: string
  /** Locks of the whole environment (service null) that have not ended. */
  readonly locks: readonly Lock[]
  readonly freezes: readonly ActiveFreeze[]
}

/** The guards of each of `environments` that has any at `at`, in the order given. */
export function environmentGuards(
  g: Guardrails,
  environments: readonly string[],
  at: number,
): EnvironmentGuard[] {
  const out: EnvironmentGuard[] = []
  for (const environment of environments) {
    const locks = g.locks.filter(
      (l) => l.environment === environment && l.service === null && (l.endsAt === null || at < l.endsAt),
    )
    const freezes: ActiveFreeze[] = []
    for (const freeze of g.freezes) {
      if (freeze.environment !== environment) continue
      const occurrence = freezeOccurrence(freeze, at)
      if (occurrence) freezes.push({ freeze, start: occurrence.start, until: occurrence.end })
    }
    if (locks.length + freezes.length > 0) out.push({ environment, locks, freezes })
  }
  return out
}

/** A freeze window's next opening: it has not begun yet. */
export interface UpcomingFreeze {
  readonly freeze: Freeze
  readonly start: number
  readonly end: number
}

/**
 * The next opening of each freeze window of `environments` that begins after `at` and within
 * `withinMs`, soonest first, for windows not open at `at`: what a team planning a deployment wants
 * to know next.
 */
export function upcomingFreezes(
  g: Guardrails,
  environments: readonly string[],
  at: number,
  withinMs: number,
): UpcomingFreeze[] {
  const out: UpcomingFreeze[] = []
  for (const freeze of g.freezes) {
    // One that holds now is said as active; its next opening can wait until this one ends.
    if (!environments.includes(freeze.environment) || freezeOccurrence(freeze, at)) continue
    const s = freeze.schedule
    const next =
      s.kind === 'once'
        ? s.startsAt > at
          ? { start: s.startsAt, end: s.endsAt }
          : null
        : nextOccurrence({ cron: s.cron, durationMinutes: s.durationMinutes, timeZone: s.timeZone }, at)
    if (next && next.start <= at + withinMs) out.push({ freeze, start: next.start, end: next.end })
  }
  return out.sort((a, b) => a.start - b.start || a.freeze.id - b.freeze.id)
}

/** The locks on one service alone in an environment (not the environment-wide ones) that hold at `at`. */
export function serviceLocks(g: Guardrails, service: string, environment: string, at: number): Lock[] {
  return g.locks.filter(
    (l) => l.environment === environment && l.service === service && (l.endsAt === null || at < l.endsAt),
  )
}

/**
 * The bad mark of a version as it stood at `at` (null: now). A mark made later was not known then;
 * marking a version again replaces the mark, so one made before `at` has held since.
 */
export function badMark(
  g: Guardrails,
  service: string,
  version: string,
  at: number | null,
): BadVersion | undefined {
  const bad = g.badVersions.find((b) => b.service === service && b.version === version)
  return bad && (at === null || bad.createdAt <= at) ? bad : undefined
}
