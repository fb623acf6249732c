// The guardrail marks the board, the service page and the deployment lists draw (SPEC §11): a lock
// (who, why, until), an active freeze (until when, why), a version marked bad (why), and what a
// deployment broke when it was recorded (which rules, the override reason). Each says it in words
// on the page, so a phone needs no hover; the title repeats it whole where the text is cut short.
import {
  type ActiveFreeze,
  brokenText,
  type DeploymentFlags,
  type EnvironmentGuard,
  type UpcomingFreeze,
} from '../domain/guardrails/marks.js'
import type { BadVersion, Lock } from '../domain/guardrails/rules.js'
import { html, type SafeHtml } from './html.js'

const WEEKDAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat']
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec']
/** Closer than this, an end is named by its weekday ("Mon 08:00"); further, by its date. */
const WEEKDAY_SPAN_MS = 6 * 86_400_000

/** "Mon 08:00 UTC", "24 Dec 18:00 UTC", "3 Jan 2028 09:00 UTC": an end, short, in UTC. */
export function shortUtc(ms: number, now: number): string {
  const d = new Date(ms)
  const time = `${String(d.getUTCHours()).padStart(2, '0')}:${String(d.getUTCMinutes()).padStart(2, '0')}`
  if (Math.abs(ms - now) < WEEKDAY_SPAN_MS) return `${WEEKDAYS[d.getUTCDay()]} ${time} UTC`
  const year = d.getUTCFullYear() === new Date(now).getUTCFullYear() ? '' : ` ${d.getUTCFullYear()}`
  return `${d.getUTCDate()} ${MONTHS[d.getUTCMonth()]}${year} ${time} UTC`
}

function fullUtc(ms: number): string {
  return `${new Date(ms).toISOString().slice(0, 16).replace('T', ' ')} UTC`
}

/** An end time, short; the page's script shows it in the viewer's zone (UTC on hover). */
export function untilTag(ms: number, now: number): SafeHtml {
  return html`<time datetime="${new Date(ms).toISOString()}" title="${fullUtc(ms)}" data-local-short>${shortUtc(ms, now)}</time>`
}

/** The sentence a lock says, for titles and notices. */
export function lockSentence(lock: Lock): string {
  const what =
    lock.service === null
      ? `${lock.environment} is locked for all services`
      : `${lock.service} is locked in ${lock.environment}`
  const until = lock.endsAt === null ? 'until it is unlocked' : `until ${fullUtc(lock.endsAt)}`
  return `${what} by ${lock.createdBy} ${until}: ${lock.reason}`
}

/** "Locked by ada until Mon 18:00: release train" (the environment or service is where it stands). */
export function lockMark(lock: Lock, now: number): SafeHtml {
  return html`<div class="guard lock" title="${lockSentence(lock)}"><span class="guard-label">Locked</span> <span class="guard-text">by ${lock.createdBy}, ${lock.endsAt === null ? 'no end set' : html`until ${untilTag(lock.endsAt, now)}`}: ${lock.reason}</span></div>`
}

export function freezeSentence(environment: string, f: ActiveFreeze): string {
  return `${environment} is in a freeze window until ${fullUtc(f.until)}: ${f.freeze.reason}`
}

/** "Frozen until Mon 08:00: end-of-year freeze". */
export function freezeMark(environment: string, f: ActiveFreeze, now: number): SafeHtml {
  return html`<div class="guard freeze" title="${freezeSentence(environment, f)}"><span class="guard-label">Frozen</span> <span class="guard-text">until ${untilTag(f.until, now)}: ${f.freeze.reason}</span></div>`
}

export function badSentence(mark: BadVersion): string {
  return `${mark.service} ${mark.version} is marked bad by ${mark.createdBy} (${fullUtc(mark.createdAt)}): ${mark.reason}`
}

/** "Bad: leaks memory"; `version` names the version when it is not the one the cell shows first. */
export function badMarkHtml(mark: BadVersion, version: string | null = null): SafeHtml {
  return html`<div class="guard bad" title="${badSentence(mark)}"><span class="guard-label">Bad</span> <span class="guard-text">${version === null ? '' : html`<span class="mono">${version}</span>: `}${mark.reason}</span></div>`
}

/** "Deployed during a freeze. Override: hotfix for the outage." */
export function flagsSentence(flags: DeploymentFlags): string {
  const broke = brokenText(flags.rules)
  const override = flags.overrideReason === null ? null : `Override: ${flags.overrideReason}`
  return [broke, override].filter((s) => s !== null).join('. ')
}

/**
 * What a deployment broke when it was recorded, and the override reason; `version` names the
 * deployment when it is not the one the cell shows first.
 */
export function flagMark(flags: DeploymentFlags, version: string | null = null): SafeHtml {
  const broke = brokenText(flags.rules)
  return html`<div class="guard flagged" title="${flagsSentence(flags)}"><span class="guard-label">${flags.rules.length > 0 ? 'Broke a guardrail' : 'Override'}</span> <span class="guard-text">${version === null ? '' : html`<span class="mono">${version}</span>: `}${broke ?? ''}${broke !== null && flags.overrideReason !== null ? '; ' : ''}${flags.overrideReason === null ? '' : html`override: <q>${flags.overrideReason}</q>`}</span></div>`
}

/** The column marks of one environment: its locks, then its active freezes. */
export function environmentMarks(guard: EnvironmentGuard, now: number): SafeHtml {
  return html`${guard.locks.map((l) => lockMark(l, now))}${guard.freezes.map((f) => freezeMark(guard.environment, f, now))}`
}

/**
 * A notice of the locks and active freezes over some environments: one line each, in full words
 * (the board on a phone, where the column headers are not shown, and a service's page).
 */
export function guardNotice(
  guards: readonly EnvironmentGuard[],
  serviceLocks: readonly Lock[],
  now: number,
  options: { id: string; heading: string; className?: string; upcoming?: readonly UpcomingFreeze[] },
): SafeHtml {
  const upcoming = options.upcoming ?? []
  if (guards.length === 0 && serviceLocks.length === 0 && upcoming.length === 0) return html``
  const items: SafeHtml[] = []
  for (const g of guards) {
    for (const l of g.locks)
      items.push(
        html`<li><span class="guard-label lock">Locked</span> <strong>${g.environment}</strong>, all services, by ${l.createdBy}, ${l.endsAt === null ? 'no end set' : html`until ${untilTag(l.endsAt, now)}`}: ${l.reason}</li>`,
      )
    for (const f of g.freezes)
      items.push(
        html`<li><span class="guard-label freeze">Frozen</span> <strong>${g.environment}</strong> until ${untilTag(f.until, now)}: ${f.freeze.reason}</li>`,
      )
  }
  for (const l of serviceLocks)
    items.push(
      html`<li><span class="guard-label lock">Locked</span> <strong>${l.service ?? ''}</strong> in <strong>${l.environment}</strong>, by ${l.createdBy}, ${l.endsAt === null ? 'no end set' : html`until ${untilTag(l.endsAt, now)}`}: ${l.reason}</li>`,
    )
  for (const u of upcoming)
    items.push(
      html`<li><span class="guard-label next">Next freeze</span> <strong>${u.freeze.environment}</strong> from ${untilTag(u.start, now)} until ${untilTag(u.end, now)}: ${u.freeze.reason}</li>`,
    )
  return html`<section class="${['notice guard-notice', options.className].filter(Boolean).join(' ')}" aria-labelledby="${options.id}"><h2 id="${options.id}">${options.heading}</h2><ul>${items}</ul></section>`
}
