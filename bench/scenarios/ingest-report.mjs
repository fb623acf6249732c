// The ingest part's report: its table, the comparisons with webhooks, the chain and the derivation
// running and held off, and the chain's lag and CPU.
import {
  connections,
  measureSeconds,
  quick,
  serverLogLevel,
  warmupSeconds,
  webhookDelayMs,
} from '../lib/options.mjs'
import { num, renderTable } from '../lib/report.mjs'
import { chainCpus, chainLags, rows } from './ingest.mjs'

export const header = [
  'scenario',
  '2xx/s',
  'p50 ms',
  'p99 ms',
  '2xx',
  'non-2xx',
  'errors',
  'vs bare',
  'srv µs/2xx',
  'stored/acked',
]
export const tableRows = () =>
  rows.map((r) => {
    const m = r.measured
    return [
      r.scenario,
      num(m?.okPerSecond),
      num(m?.p50),
      num(m?.p99),
      num(m?.ok),
      num(m?.non2xx),
      num(m?.errors),
      r.ratio === null ? '-' : `${num(r.ratio, 2)}x`,
      num(r.cpuUs),
      r.stored === null
        ? '-'
        : `${r.stored}/${r.acked} ${r.stored === r.acked ? 'ok' : 'LOST'}` +
          (r.unanswered ? ` (+${r.unanswered} cut off)` : ''),
    ]
  })

/** Prints the ingest tables and comparisons. @param {string} machine */
export function printIngest(machine) {
  console.log('')
  console.log(
    `Shiplog ingest benchmark${quick ? ' (BENCH_QUICK: smoke run, numbers not meaningful)' : ''} - ` +
      `${connections} connections, no pipelining, ${warmupSeconds} s warm-up + ${measureSeconds} s measured; ` +
      `server LOG_LEVEL=${serverLogLevel}`,
  )
  console.log(`node ${process.version}, ${machine} (autocannon shares the machine with the servers)`)
  console.log('')
  console.log(renderTable(header, tableRows()))
  console.log('')
  console.log(
    '2xx/s and latencies are from the measured run (latency of 2xx answers only); "stored/acked": of the events ' +
      'acknowledged (2xx) in warm-up plus measured run, how many the database holds, each exactly once; "cut off" = ' +
      'events stored whose answer autocannon dropped when a run stopped (at most one per connection and run). ' +
      'A duplicate or an event never sent fails the checks. "srv µs/2xx": the Shiplog process\'s user+system ' +
      'CPU during the measured run per 2xx answer (the database server not counted).',
  )
  /** Mean rate and CPU per answer of the runs with `labels` of one database, when all ran. */
  const meanOf = (dialect, labels) => {
    const found = labels.map((l) => rows.find((r) => r.scenario === `${dialect} POST /deploy, ${l}`))
    if (!found.every((r) => r?.measured)) return null
    const mean = (pick) => found.reduce((sum, r) => sum + pick(r), 0) / found.length
    return {
      rate: mean((r) => r.measured.okPerSecond),
      cpu: found.every((r) => r.cpuUs) ? mean((r) => r.cpuUs) : null,
    }
  }
  /** "ran at X % of its rate <against> and used Y % of the server CPU per answer" of `on` against `off`. */
  const compared = (on, off, against) =>
    `ran at ${num((on.rate / off.rate) * 100, 1)} % of its rate ${against}` +
    (on.cpu && off.cpu ? ` and used ${num((on.cpu / off.cpu) * 100, 1)} % of the server CPU per answer` : '')
  for (const dialect of ['sqlite', 'postgres']) {
    const off = meanOf(dialect, ['just before webhooks', 'webhooks deleted'])
    const on = meanOf(dialect, ['3 slow webhooks', '3 slow webhooks again'])
    if (!off || !on) continue
    console.log(
      `${dialect}: with 3 webhooks whose receiver answers after ${webhookDelayMs} ms, POST /deploy ` +
        `${compared(on, off, 'without them')} (two runs each, in the order without, with, with, without; ` +
        'target: within 5 % of the rate)',
    )
  }
  for (const dialect of ['sqlite', 'postgres']) {
    const off = meanOf(dialect, ['chain held off', 'chain held off again'])
    const on = meanOf(dialect, ['chain running', 'chain running again'])
    if (!off || !on) continue
    console.log(
      `chain: ${dialect}: with the chain running, POST /deploy ${compared(on, off, 'with the chain held off')} ` +
        '(two runs each, in the order off, on, on, off)',
    )
  }
  for (const dialect of ['sqlite', 'postgres']) {
    const off = meanOf(dialect, ['derivation held off', 'derivation held off again'])
    const on = meanOf(dialect, ['derivation running', 'derivation running again'])
    if (!off || !on) continue
    console.log(
      `deployments: ${dialect}: with derivation running, POST /deploy ` +
        `${compared(on, off, 'with it held off')} (two runs each, in the order off, on, on, off)`,
    )
  }
  for (const c of chainLags) {
    console.log(
      `chain: ${c.scenario}: ${num(c.behind)} rows not chained when the measured run ended; ` +
        (c.catchUpMs === null
          ? 'NOT caught up within 60 s'
          : `caught up ${num(c.catchUpMs / 1000, 2)} s later`),
    )
  }
  for (const c of chainCpus) {
    console.log(
      `chain: ${c.dialect}: ${num(c.usPerRow, 2)} µs of CPU per row to chain (${num(c.rows)} rows in ` +
        `${num(c.seconds, 1)} s, one process, no HTTP; the database server not counted)`,
    )
  }
}
