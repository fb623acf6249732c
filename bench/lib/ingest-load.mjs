// The ingest scenarios' requests, each valid and carrying its own version, their load runs, and the
// check that what was acknowledged is stored exactly once.

import { runLoad } from './load.mjs'
import { connections, measureSeconds, warmupSeconds } from './options.mjs'
import { cpuSeconds } from './proc.mjs'
import { num } from './report.mjs'

export const dummyKey = `shl_${'0'.repeat(40)}`

/**
 * A request shape whose requests each carry their own version (`prefix` + a counter), remembering
 * which versions were acknowledged (from the 2xx answers' bodies) and how many were sent.
 * @typedef {import('./load.mjs').RequestShape & { acked: Set<string>, sent: () => number }} CountedShape
 */

/**
 * @param {Omit<import('./load.mjs').RequestShape, 'next' | 'onAck'>} base
 * @param {(version: string) => { path: string, body?: string }} build
 * @param {string} prefix
 * @returns {CountedShape}
 */
export function countedShape(base, build, prefix) {
  let n = 0
  /** @type {Set<string>} */
  const acked = new Set()
  return {
    ...base,
    next: () => build(`${prefix}${++n}`),
    // The stored event comes back as JSON; its version says which request this answers. indexOf
    // rather than JSON.parse: the client shares the machine with the server it measures.
    onAck: (body) => {
      const at = body.indexOf('"version":"')
      if (at < 0) return
      const start = at + 11
      acked.add(body.slice(start, body.indexOf('"', start)))
    },
    acked,
    sent: () => n,
  }
}

/** Each scenario's versions start with its own prefix, so one database can hold several. */
export const VERSION_PREFIXES = [
  '1.0.',
  '2.0.',
  '3.0.',
  '4.0.',
  '5.0.',
  '6.0.',
  '7.0.',
  '8.0.',
  '9.0.',
  '9.1.',
  '9.2.',
  '9.3.',
  '9.4.',
  '9.5.',
]

/** @param {string} key @param {string} [prefix] versions are the prefix and a counter */
export function deployShape(key, prefix = '1.0.') {
  return countedShape(
    { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': key } },
    (version) => ({
      path: '/deploy',
      body: JSON.stringify({ service: 'bench-api', environment: 'Production', version, status: 'Deployed' }),
    }),
    prefix,
  )
}

/** @param {string} key */
export function putShape(key) {
  return countedShape(
    { method: 'GET', headers: { 'X-API-Key': key } },
    (version) => ({ path: `/put?app=bench-web&env=Production&version=${version}&status=Deployed` }),
    '2.0.',
  )
}

/**
 * Warm-up then measured run of one request shape; with the server's pid, also its CPU per answer.
 * @param {string} url @param {import('./load.mjs').RequestShape} shape @param {string} title
 * @param {number} [pid]
 */
export async function warmAndMeasure(url, shape, title, pid) {
  process.stderr.write(`  ${title}: warm-up ${warmupSeconds} s`)
  const warmup = await runLoad({ url, shape, seconds: warmupSeconds, connections, title: `${title} warm-up` })
  process.stderr.write(`, measuring ${measureSeconds} s`)
  const cpuBefore = pid === undefined ? null : cpuSeconds(pid)
  const measured = await runLoad({ url, shape, seconds: measureSeconds, connections, title })
  const cpuAfter = pid === undefined ? null : cpuSeconds(pid)
  const cpuUs =
    cpuBefore !== null && cpuAfter !== null && measured.ok > 0
      ? ((cpuAfter - cpuBefore) * 1e6) / measured.ok
      : null
  process.stderr.write(
    ` -> ${num(measured.okPerSecond)} 2xx/s${cpuUs === null ? '' : `, ${num(cpuUs)} µs server CPU each`}\n`,
  )
  return { warmup, measured, cpuUs }
}

/** @param {import('./load.mjs').LoadStats} stats @param {string} phase */
export function loadProblems(stats, phase) {
  const problems = []
  if (stats.ok === 0) problems.push(`${phase}: no 2xx answer at all`)
  if (stats.non2xx > 0) {
    const codes = Object.entries(stats.statusCodes)
      .filter(([code]) => !code.startsWith('2'))
      .map(([code, count]) => `${count}x ${code}`)
      .join(', ')
    problems.push(`${phase}: ${stats.non2xx} non-2xx answers (${codes})`)
  }
  if (stats.errors > 0) problems.push(`${phase}: ${stats.errors} socket errors (${stats.timeouts} timeouts)`)
  return problems
}

/**
 * Stored must equal acknowledged: every acknowledged event in the database exactly once, no version
 * twice, and nothing else but the requests cut off when a run stopped (sent, perhaps stored, their
 * answers dropped by autocannon: at most one per connection in each of the two runs).
 * Versions with another scenario's prefix belong to that scenario and are left out.
 * @param {import('./stores.mjs').Store} store @param {string} source @param {CountedShape} shape @param {number} answered
 * @param {string} prefix
 */
export async function checkStored(store, source, shape, answered, prefix) {
  /** @type {string[]} */
  const problems = []
  const counts = await store.storedVersions(source)
  const acked = shape.acked.size
  if (acked !== answered) problems.push(`${answered} 2xx answers name ${acked} distinct events`)
  let lost = 0
  for (const version of shape.acked) if (!counts.has(version)) lost++
  let duplicates = 0
  let unanswered = 0
  let unknown = 0
  for (const [version, count] of counts) {
    if (!version.startsWith(prefix) && VERSION_PREFIXES.some((p) => version.startsWith(p))) continue
    if (count > 1) duplicates += count - 1
    if (shape.acked.has(version)) continue
    const k = version.startsWith(prefix) ? Number(version.slice(prefix.length)) : Number.NaN
    if (Number.isInteger(k) && k >= 1 && k <= shape.sent()) unanswered++
    else unknown++
  }
  if (lost > 0) problems.push(`${lost} of ${acked} acknowledged events are not stored`)
  if (duplicates > 0) problems.push(`${duplicates} events stored more than once`)
  if (unknown > 0) problems.push(`${unknown} stored events were never sent`)
  if (unanswered > 2 * connections)
    problems.push(`${unanswered} events stored without an answer, more than the ${2 * connections} in flight`)
  return { acked, stored: acked - lost, unanswered, problems }
}
