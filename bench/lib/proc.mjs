// Memory and CPU of a child process, read from Linux's /proc.
import { readFileSync, writeFileSync } from 'node:fs'

const CLOCK_TICKS = 100 // USER_HZ: 100 on every Linux architecture Node supports

/** VmRSS and VmHWM (peak RSS) of a process in bytes; null when /proc has no entry. @param {number} pid */
export function memory(pid) {
  let text
  try {
    text = readFileSync(`/proc/${pid}/status`, 'utf8')
  } catch {
    return null
  }
  const kb = (/** @type {string} */ field) => {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text)
    return m ? Number(m[1]) * 1024 : null
  }
  return { rss: kb('VmRSS'), hwm: kb('VmHWM') }
}

/** User plus system CPU seconds the process has used so far. @param {number} pid */
export function cpuSeconds(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // The command name (field 2) may contain spaces; the fields after its closing parenthesis do not.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS
  } catch {
    return null
  }
}

/**
 * Resets VmHWM to the current RSS (writing 5 to /proc/<pid>/clear_refs, Linux 4.0+), so VmHWM read later
 * is the peak since now. Returns false where that is not allowed.
 * @param {number} pid
 */
export function resetPeak(pid) {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5')
    return true
  } catch {
    return false
  }
}

/**
 * Samples VmRSS every `intervalMs` until stopped; `stop()` returns the peak, the peak within each
 * quarter of the sampled time (flat when memory does not grow as the work goes on), the sample count
 * and the longest gap between two samples (a sign the sampler itself was starved).
 * @param {number} pid @param {number} intervalMs
 */
export function sampleRss(pid, intervalMs = 50) {
  let peak = 0
  let samples = 0
  let last = Date.now()
  let longestGap = 0
  /** @type {Array<[number, number]>} time, rss */
  const series = []
  const take = () => {
    const now = Date.now()
    longestGap = Math.max(longestGap, now - last)
    last = now
    const m = memory(pid)
    if (m?.rss) {
      samples++
      peak = Math.max(peak, m.rss)
      series.push([now, m.rss])
    }
  }
  take()
  const timer = setInterval(take, intervalMs)
  return {
    stop() {
      clearInterval(timer)
      take()
      const start = series[0]?.[0] ?? 0
      const span = Math.max(1, (series.at(-1)?.[0] ?? start) - start)
      /** @type {number[]} */
      const quarters = [0, 0, 0, 0]
      for (const [at, rss] of series) {
        const q = Math.min(3, Math.floor((4 * (at - start)) / span))
        quarters[q] = Math.max(quarters[q] ?? 0, rss)
      }
      return { peak, quarters, samples, longestGapMs: longestGap }
    },
  }
}

/**
 * RSS of an idle process: the median of a few samples after `settleMs`.
 * @param {number} pid @param {number} settleMs
 */
export async function idleRss(pid, settleMs = 1000) {
  await new Promise((resolve) => setTimeout(resolve, settleMs))
  /** @type {number[]} */
  const values = []
  for (let k = 0; k < 5; k++) {
    const m = memory(pid)
    if (m?.rss) values.push(m.rss)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  values.sort((a, b) => a - b)
  return values[Math.floor(values.length / 2)] ?? null
}
