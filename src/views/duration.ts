// Durations for people: the two largest units that matter ("4 min 12 s", "2 h 5 min", "3 d 4 h"),
// the second left out when it is zero ("10 min", "1 d").
import { html } from './html.js'

/**
 * Shown in place of a duration that would be negative: the end was received "before" the start,
 * because the clocks of two Shiplog instances disagree (domain/deployments/rules.ts, clockSkewed).
 */
export const CLOCK_SKEW = html`<span class="mark clock-skew" title="Its end was received with an earlier time than its start: the clocks of two Shiplog instances disagree. No duration is counted for it.">clock skew</span>`

const SECOND = 1000
const MINUTE = 60 * SECOND
const HOUR = 60 * MINUTE
const DAY = 24 * HOUR

/** A duration in milliseconds as people say it; null (nothing measured) as a dash. */
export function formatDuration(ms: number | null): string {
  if (ms === null || !Number.isFinite(ms)) return '—'
  const sign = ms < 0 ? '−' : ''
  const abs = Math.abs(ms)
  if (abs < SECOND) return abs === 0 ? '0 s' : `${sign}${Math.round(abs)} ms`
  // Rounded to the smallest unit shown, so 59.6 s reads "1 min 0 s", never "60 s".
  if (abs < MINUTE - SECOND / 2) return `${sign}${Math.round(abs / SECOND)} s`
  if (abs < HOUR - SECOND / 2) {
    const s = Math.round(abs / SECOND)
    return `${sign}${pair(Math.floor(s / 60), 'min', s % 60, 's')}`
  }
  if (abs < DAY - MINUTE / 2) {
    const m = Math.round(abs / MINUTE)
    return `${sign}${pair(Math.floor(m / 60), 'h', m % 60, 'min')}`
  }
  const h = Math.round(abs / HOUR)
  return `${sign}${pair(Math.floor(h / 24), 'd', h % 24, 'h')}`
}

function pair(big: number, bigUnit: string, small: number, smallUnit: string): string {
  return small === 0 ? `${big} ${bigUnit}` : `${big} ${bigUnit} ${small} ${smallUnit}`
}

/**
 * An axis scale for durations: round steps in the unit that suits the largest value (seconds,
 * minutes, hours or days), so the gridlines read "5 min", "10 min", not "347 s".
 */
export function durationScale(max: number, ticks = 4): { top: number; step: number } {
  const unit = max >= 2 * DAY ? DAY : max >= 2 * HOUR ? HOUR : max >= 2 * MINUTE ? MINUTE : SECOND
  const inUnit = max / unit
  if (!(inUnit > 0)) return { top: ticks * unit, step: unit }
  const raw = inUnit / ticks
  const magnitude = 10 ** Math.floor(Math.log10(raw))
  const step = Math.max(1, [1, 2, 5, 10].map((m) => m * magnitude).find((s) => s >= raw) ?? 10 * magnitude)
  return { top: step * Math.ceil(inUnit / step) * unit, step: step * unit }
}

/** An axis label for a duration: one unit, whole numbers ("30 min", "2 h"). */
export function formatAxisDuration(ms: number): string {
  if (ms === 0) return '0'
  if (ms % DAY === 0) return `${ms / DAY} d`
  if (ms % HOUR === 0) return `${ms / HOUR} h`
  if (ms % MINUTE === 0) return `${ms / MINUTE} min`
  return `${Math.round(ms / SECOND)} s`
}
