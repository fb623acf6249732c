// The time left of a long copy, in words a person reads at a glance ("about 2 min 5 s left"), and
// only once there is a rate to base it on: the first batches (a small table, a cold cache) say
// nothing about the rest, and an estimate from them read "ETA 80065 s" (issue 28).

/** How long the rows must have been flowing, at least, before a rate is worth an estimate. */
export const ESTIMATE_AFTER_MS = 3000

/** "45 s", "2 min 5 s", "1 h 20 min": a duration in the largest units that matter. */
export function durationText(seconds: number): string {
  const s = Math.max(0, Math.ceil(seconds))
  if (s < 60) return `${s} s`
  const m = Math.floor(s / 60)
  if (m < 60) return `${m} min ${s % 60} s`
  return `${Math.floor(m / 60)} h ${m % 60} min`
}

/** Rows per second over this run, or null while there is no rate to speak of yet. */
export function copyRate(copied: number, elapsedMs: number): number | null {
  if (elapsedMs < ESTIMATE_AFTER_MS || copied <= 0) return null
  return copied / (elapsedMs / 1000)
}

/** "about 2 min 5 s left", or null while there is no rate to base it on. */
export function timeLeftText(left: number, copied: number, elapsedMs: number): string | null {
  const rate = copyRate(copied, elapsedMs)
  if (rate === null) return null
  return `about ${durationText(Math.max(0, left) / rate)} left`
}
