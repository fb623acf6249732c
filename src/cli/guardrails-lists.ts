// What `shiplog env show`, `freeze list`, `promotion list` and `versions list` print: the account's
// guardrails as tables, freeze windows with their schedule in words and their next occurrence.
import type { Kysely } from 'kysely'
import type { DB } from '../db/schema.js'
import { environmentListing } from '../domain/board/environments.js'
import { nextOccurrence, type Occurrence } from '../domain/guardrails/freeze-calendar.js'
import { type Freeze, type FreezeSchedule, freezeOccurrence } from '../domain/guardrails/rules.js'
import { durationWords, recurringWords } from '../domain/guardrails/schedule-words.js'
import { loadBadVersions, loadGuardrails } from '../domain/guardrails/store.js'
import { printableName as p } from '../text-rules.js'
import { CliError } from './common.js'
import { formatTime, printTable } from './options.js'

export type Section = 'locks' | 'freezes' | 'promotions'

/**
 * A schedule in words: "every Fri 16:00 to Mon 08:00 (Europe/Berlin)", "every day 22:00 to 06:00
 * (UTC)" (as Settings says it, schedule-words.ts), and the two instants of a one-off window.
 */
export function scheduleWords(s: FreezeSchedule): string {
  if (s.kind === 'once') return `once, ${formatTime(s.startsAt)} to ${formatTime(s.endsAt)}`
  return `${recurringWords(s.cron, s.durationMinutes)} (${s.timeZone})`
}

function nextOf(f: Freeze, now: number): Occurrence | null {
  const s = f.schedule
  if (s.kind === 'once') return s.startsAt > now ? { start: s.startsAt, end: s.endsAt } : null
  return nextOccurrence({ cron: s.cron, durationMinutes: s.durationMinutes, timeZone: s.timeZone }, now)
}

const span = (o: Occurrence | null) => (o === null ? '-' : `${formatTime(o.start)} to ${formatTime(o.end)}`)

function section(title: string, rows: string[][]): void {
  process.stdout.write(`${title}:\n`)
  if (rows.length <= 1) process.stdout.write('  none\n')
  else printTable(rows)
}

/**
 * Prints the chosen sections of the account's guardrails, only those of `environment` when one is
 * given (a promotion rule belongs to the environment it guards). Locks that have ended stay listed,
 * marked ended, until someone unlocks them: they no longer apply, and `env unlock` lifts them too.
 */
export async function printGuardrails(
  db: Kysely<DB>,
  accountId: number,
  options: { environment: string | undefined; sections: readonly Section[]; now: number },
): Promise<void> {
  const { environment, sections, now } = options
  const g = await loadGuardrails(db, accountId)
  if (environment !== undefined) {
    const known = (await environmentListing(db, accountId)).all.some((e) => e.name === environment)
    const named = [...g.locks, ...g.freezes, ...g.promotions].some((r) => r.environment === environment)
    if (!known && !named) throw new CliError(`this account has no environment "${p(environment)}"`, 2)
  }
  const mine = <T extends { environment: string }>(rows: readonly T[]) =>
    environment === undefined ? rows : rows.filter((r) => r.environment === environment)
  let first = true
  const gap = () => {
    if (!first) process.stdout.write('\n')
    first = false
  }
  if (sections.includes('locks')) {
    gap()
    section('locks', [
      ['ID', 'ENVIRONMENT', 'SERVICE', 'BY', 'SINCE', 'UNTIL', 'STATE', 'REASON'],
      ...mine(g.locks).map((l) => [
        String(l.id),
        p(l.environment),
        l.service === null ? '(every service)' : p(l.service),
        p(l.createdBy),
        formatTime(l.createdAt),
        l.endsAt === null ? 'unlocked by hand' : formatTime(l.endsAt),
        l.endsAt !== null && l.endsAt <= now ? 'ended' : 'active',
        p(l.reason),
      ]),
    ])
  }
  if (sections.includes('freezes')) {
    gap()
    section('freeze windows', [
      ['ID', 'ENVIRONMENT', 'SCHEDULE', 'NEXT', 'ACTIVE NOW', 'REASON'],
      ...mine(g.freezes).map((f) => {
        const active = freezeOccurrence(f, now)
        return [
          String(f.id),
          p(f.environment),
          p(scheduleWords(f.schedule)),
          span(nextOf(f, now)),
          active === null ? 'no' : `yes, until ${formatTime(active.end)}`,
          p(f.reason),
        ]
      }),
    ])
  }
  if (sections.includes('promotions')) {
    gap()
    section('promotion rules', [
      ['ENVIRONMENT', 'AFTER', 'WAIT', 'NOT BAD', 'BY', 'SET'],
      ...mine(g.promotions).map((r) => [
        p(r.environment),
        p(r.afterEnvironment),
        durationWords(r.minMinutes),
        r.requireGood ? 'required' : '-',
        p(r.createdBy),
        formatTime(r.createdAt),
      ]),
    ])
  }
}

/** The versions marked bad (of one service when given). */
export async function printVersions(
  db: Kysely<DB>,
  accountId: number,
  service: string | undefined,
): Promise<void> {
  const rows = (await loadBadVersions(db, accountId)).filter(
    (b) => service === undefined || b.service === service,
  )
  section('versions marked bad', [
    ['SERVICE', 'VERSION', 'BY', 'MARKED', 'REASON'],
    ...rows.map((b) => [p(b.service), p(b.version), p(b.createdBy), formatTime(b.createdAt), p(b.reason)]),
  ])
}
