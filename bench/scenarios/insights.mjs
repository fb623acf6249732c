// The insights part: deriving deployments from a seeded history (CPU per event) and the board, service
// and insights pages that read them (bench/lib/insights.mjs does the work), with its report.

import { benchInsights, DERIVE_TARGET_US, PAGE_TARGET_MS } from '../lib/insights.mjs'
import { cleanups, runDir } from '../lib/lifecycle.mjs'
import {
  deriveOnly,
  deriveRun,
  deriveSteady,
  insightsSettleSeconds,
  insightsSize,
  pageCaseSeconds,
  pageRequests,
  pgServerUrl,
  quick,
  readDialects,
  root,
  serverLogLevel,
  shiplogBin,
} from '../lib/options.mjs'
import { countLabel } from '../lib/reads.mjs'
import { num, renderTable } from '../lib/report.mjs'

/** @typedef {Awaited<ReturnType<typeof benchInsights>>} Insights */

/** @returns {Promise<Insights>} */
export async function runInsights() {
  console.error(`insights: ${countLabel(insightsSize)} events; ${readDialects.join(', ') || 'no database'}`)
  return benchInsights({
    root,
    shiplogBin,
    runDir,
    cleanups,
    dialects: readDialects,
    pgServerUrl,
    serverLogLevel,
    n: insightsSize,
    keepDir: process.env.BENCH_INSIGHTS_KEEP || null,
    settleSeconds: insightsSettleSeconds,
    deriveOnly,
    steady: deriveSteady,
    runSize: deriveRun,
    requests: pageRequests,
    caseSeconds: pageCaseSeconds,
  })
}

export const insightsHeader = [
  'scenario',
  'requests',
  'p50 ms',
  'p95 ms',
  'max ms',
  'server CPU ms/req',
  'load',
  'p95 target ms',
  'p95 target',
]
export const insightsTable = (insights) =>
  (insights?.pageRows ?? []).map((r) => [
    r.scenario,
    num(r.requests),
    num(r.p50, 1),
    num(r.p95, 1),
    num(r.max, 1),
    num(r.cpuMs, 1),
    num(r.load, 1),
    r.scenario.endsWith(', cold') ? '-' : num(r.targetMs ?? PAGE_TARGET_MS),
    // The cold cases show what a page costs while events keep arriving; the target is the others'.
    r.p95 === null
      ? '-'
      : r.scenario.endsWith(', cold')
        ? 'no target'
        : r.p95 <= (r.targetMs ?? PAGE_TARGET_MS)
          ? 'met'
          : 'NOT met',
  ])

/** @param {Insights | null} insights */
export function printInsights(insights) {
  if (!insights) return
  console.log('')
  console.log(
    `Deployments: deriving them from ${countLabel(insightsSize ?? 0)} events, and the pages that read them` +
      `${quick ? ' (BENCH_QUICK: tiny dataset)' : ''}`,
  )
  console.log('')
  /** " + 9.1 µs in the database's backends", where they were measured. @param {number | null | undefined} us */
  const backend = (us) => (typeof us === 'number' ? ` + ${num(us, 2)} µs in the database's backends` : '')
  for (const d of insights.derivations) {
    console.log(
      `  ${d.target}: ${num(d.usPerEvent, 2)} µs of CPU per event to derive deployments${backend(d.backendUsPerEvent)} ` +
        `(budget ${DERIVE_TARGET_US} µs: ${d.usPerEvent <= DERIVE_TARGET_US ? 'met' : 'NOT met'}); ` +
        `${num(d.events)} events in ${num(d.seconds, 1)} s, one process, no HTTP`,
    )
    if (d.steadyEvents)
      console.log(
        `  ${d.target}, keeping up: ${num(d.steadyUsPerEvent, 2)} µs of CPU per event${backend(d.steadyBackendUsPerEvent)} ` +
          `for the last ${num(d.steadyEvents)} events derived again in ${num(d.steadyRuns)} runs of ${num(deriveRun)}, ` +
          `as the background task does under ingest`,
      )
    const f = d.floor
    if (f) {
      const floorUs = f.readUs + f.writeUs
      console.log(
        `  ${d.target}, the floor with no derivation logic: reading the events ${num(f.readUs, 2)} µs` +
          `${backend(f.readBackendUs)}, writing one deployment row per two events with all of its indexes ` +
          `${num(f.writeUs, 2)} µs${backend(f.writeBackendUs)} (primary key alone: ${num(f.writeKeyOnlyUs, 2)} µs` +
          `${backend(f.writeKeyOnlyBackendUs)}); this process alone ${num(floorUs, 2)} µs, ` +
          `derivation ${num(d.usPerEvent / floorUs, 2)}x that`,
      )
    }
  }
  console.log('')
  console.log(renderTable(insightsHeader, insightsTable(insights)))
  console.log('')
  console.log(
    'Derivation: `shiplog deployments rebuild` done in a process of its own (bench/lib/derive-child.mjs); its ' +
      "user+system CPU divided by the events (on a local PostgreSQL, its backends' CPU from /proc is shown beside it); keeping up: " +
      'the same process derives all but the last events again, then those in small runs. Pages: timed ' +
      'like the /logs/ pages above; each must answer 200 and show what the seeded history predicts.',
  )
}
