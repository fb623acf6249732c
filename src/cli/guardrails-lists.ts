// What `shiplog env show`, `freeze list`, `promotion list` and `versions list` print: the account's
// guardrails as tables, freeze windows with their schedule in words and their next occurrence.
import type { Kysely } from 'kysely'
import type { DB } from '../db/schema.js'
import { environmentListing } from '../domain/board/environments.js'
import { nextOccurrence, type Occurrence } from '../domain/guardrails/freeze-calendar.js'
import { type Freeze, type FreezeSchedule, freezeOccurrence } from '../domain/guardrails/rules.js'
import { loadBadVersions, loadGuardrails } from '../domain/guardrails/store.js'
import { printableName as p } from '../text-rules.js'
import { CliError } from './common.js'
import { formatTime, printTable } from './options.js'

export type Section = 'locks' | 'freezes' | 'promotions'

const DAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat']
const WEEK_MINUTES = 7 * 24 * 60

/** "2 d 16 h", "45 min": a length of time as people say it. */
export function durationWords(minutes: number): string {
  const parts = [
    [Math.floor(minutes / 1440), 'd'],
    [Math.floor((minutes % 1440) / 60), 'h'],
    [minutes % 60, 'min'],
  ] as const
  const said = parts.filter(([n]) => n > 0).map(([n, unit]) => `${n} ${unit}`)
  return said.length === 0 ? '0 min' : said.join(' ')
}

const clock = (minuteOfDay: number) =>
  `${String(Math.floor(minuteOfDay / 60)).padStart(2, '0')}:${String(minuteOfDay % 60).padStart(2, '0')}`

/**
 * A schedule in words: "weekly Fri 16:00 to Mon 08:00 (Europe/Berlin)" for a window that starts
 * once a week at one time (what `--weekly` makes), "daily 22:00 for 8 h (UTC)" for one a day, the
 * cron expression with its length otherwise, and the two instants of a one-off window.
 */
export function scheduleWords(s: FreezeSchedule): string {
  if (s.kind === 'once') return `once, ${formatTime(s.startsAt)} to ${formatTime(s.endsAt)}`
  const zone = `(${s.timeZone})`
  const simple = /^(\d{1,2}) (\d{1,2}) \* \* (\*|[0-7])$/.exec(s.cron.trim().replace(/\s+/g, ' '))
  if (simple && s.durationMinutes < WEEK_MINUTES) {
    const start = Number(simple[2]) * 60 + Number(simple[1])
    if (simple[3] === '*') return `daily ${clock(start)} for ${durationWords(s.durationMinutes)} ${zone}`
    const day = Number(simple[3]) % 7
    const end = (day * 1440 + start + s.durationMinutes) % WEEK_MINUTES
    return `weekly ${DAYS[day]} ${clock(start)} to ${DAYS[Math.floor(end / 1440)]} ${clock(end % 1440)} ${zone}`
  }
  return `cron "${s.cron}" for ${durationWords(s.durationMinutes)} ${zone}`
}

/** The next occurrence of a window that starts after `now` (a one-off window has at most one). */
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
