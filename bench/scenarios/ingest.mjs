// The ingest part: a bare Fastify route as the baseline, then durable ingest through POST /deploy and
// GET /put on SQLite and PostgreSQL, with slow webhooks, the chain and the derivation held off and
// running (see the list atop bench/run.mjs).
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import { chainCpu, chainLagAfterRun, holdChain, holdDerivation } from '../lib/chain.mjs'
import { runNode, startServer } from '../lib/children.mjs'
import {
  checkStored,
  deployShape,
  dummyKey,
  loadProblems,
  putShape,
  warmAndMeasure,
} from '../lib/ingest-load.mjs'
import { cleanups, runDir, serverLogs, withTimeout } from '../lib/lifecycle.mjs'
import {
  bareServer,
  connections,
  measureSeconds,
  root,
  serverLogLevel,
  shiplogBin,
  skipPg,
  skipSqlite,
  warmupSeconds,
  webhookDelayMs,
} from '../lib/options.mjs'
import { summariseLog } from '../lib/report.mjs'
import { postgresStore, settleDerivation, sqliteStore } from '../lib/stores.mjs'
import { slowReceiver } from '../lib/webhooks.mjs'

/**
 * @typedef {object} Row
 * @property {string} scenario
 * @property {string} target 'bare' | 'sqlite' | 'postgres'
 * @property {string} request e.g. 'POST /deploy'
 * @property {import('../lib/load.mjs').LoadStats | null} warmup
 * @property {import('../lib/load.mjs').LoadStats | null} measured
 * @property {number | null} ratio 2xx/s relative to the baseline for the same request form
 * @property {number | null} cpuUs the Shiplog server process's CPU (user+system) per 2xx answer in
 *   the measured run, µs (the database server's not counted)
 * @property {number | null} acked events acknowledged (2xx), warm-up and measured run together
 * @property {number | null} stored of those, how many the database holds (exactly once each)
 * @property {number | null} unanswered events stored whose request was still in flight when a run
 *   stopped (autocannon drops those answers), at most one per connection and run
 * @property {string[]} problems
 */

/** @type {Row[]} */
export const rows = []

/** The ingest part: the bare baseline, then Shiplog on each database. */
export async function runIngest() {
  console.error(
    `ingest: ${connections} connections, warm-up ${warmupSeconds} s, measured ${measureSeconds} s`,
  )
  try {
    await benchBaseline()
  } catch (err) {
    failedGroup('bare', err)
  }
  if (skipSqlite) console.error('  sqlite: skipped (BENCH_SKIP_SQLITE=1)')
  else {
    try {
      await benchShiplog(sqliteStore())
    } catch (err) {
      failedGroup('sqlite', err)
    }
  }
  if (skipPg) console.error('  postgres: skipped (BENCH_SKIP_PG=1)')
  else {
    try {
      await benchShiplog(await postgresStore())
    } catch (err) {
      failedGroup('postgres', err)
    }
  }
}

async function benchBaseline() {
  const logFile = join(runDir, 'bare-server.log')
  const server = await startServer({
    name: 'bare Fastify server',
    args: [bareServer],
    env: process.env,
    cwd: root,
    logFile,
    readyPath: '/healthz',
  })
  cleanups.push(server.stop)
  try {
    for (const [request, shape] of /** @type {const} */ ([
      ['POST /deploy', deployShape(dummyKey)],
      ['GET /put', putShape(dummyKey)],
    ])) {
      const { warmup, measured } = await warmAndMeasure(server.url, shape, `baseline ${request}`)
      rows.push({
        scenario: `baseline ${request}`,
        target: 'bare',
        request,
        warmup,
        measured,
        ratio: 1,
        cpuUs: null,
        acked: null,
        stored: null,
        unanswered: null,
        problems: [...loadProblems(warmup, 'warm-up'), ...loadProblems(measured, 'measured')],
      })
    }
  } finally {
    await server.stop()
    serverLogs.bare = { ...summariseLog(logFile), logFile }
  }
}

/** @type {Array<{ scenario: string, behind: number, catchUpMs: number | null }>} */
export const chainLags = []
/** @type {Array<{ dialect: string, rows: number, cpuMs: number, seconds: number, usPerRow: number }>} */
export const chainCpus = []

/** @param {import('../lib/stores.mjs').Store} store */
async function benchShiplog(store) {
  const env = {
    ...process.env,
    DATABASE_URL: store.databaseUrl,
    SHIPLOG_SECRET: randomBytes(32).toString('hex'),
    SHIPLOG_RATE_LIMIT: '10000000',
    LOG_LEVEL: serverLogLevel,
    // The webhook scenario's receiver listens on 127.0.0.1.
    SHIPLOG_WEBHOOK_ALLOW_PRIVATE: '1',
  }
  // The bench measures one process with its in-memory rate limiter.
  delete env.REDIS_URL
  delete env.PORT
  await runNode(
    [shiplogBin, 'users', 'create', '--account', 'Bench', '--email', 'b@x.io', '--password-stdin'],
    {
      env,
      cwd: root,
      input: 'pw12345678\n',
    },
  )
  const key = (
    await runNode([shiplogBin, 'keys', 'create', '--account', 'Bench', '--name', 'bench'], { env, cwd: root })
  ).trim()
  if (!/^shl_[0-9A-Za-z]{32,}$/.test(key))
    throw new Error(`keys create printed something that is not a key: "${key}"`)

  const logFile = join(runDir, `shiplog-${store.dialect}.log`)
  const server = await startServer({
    name: `shiplog serve (${store.dialect})`,
    args: [shiplogBin, 'serve'],
    env,
    cwd: root,
    logFile,
    readyPath: '/readyz',
  })
  cleanups.push(server.stop)
  const receiver = await slowReceiver(webhookDelayMs)
  cleanups.push(receiver.close)
  try {
    // Three webhooks (one per format) whose receiver answers only after webhookDelayMs: a slow
    // target must not slow ingest (issue 12: within 5 %).
    const createWebhooks = async () => {
      for (const [format, triggers] of /** @type {const} */ ([
        ['json', ['--status', 'Deploying', '--status', 'Deployed', '--status', 'Failed']],
        ['slack', ['--outcome', 'succeeded', '--outcome', 'failed']],
        ['grafana', ['--outcome', 'succeeded', '--outcome', 'failed', '--grafana-token', 'bench-token']],
      ])) {
        await runNode(
          [
            shiplogBin,
            ...['webhooks', 'create', '--account', 'Bench', '--url', `${receiver.url}/${format}`],
            ...['--format', format, ...triggers],
          ],
          { env, cwd: root },
        )
      }
    }
    const deleteWebhooks = async () => {
      const listed = await runNode([shiplogBin, 'webhooks', 'list', '--account', 'Bench'], { env, cwd: root })
      const ids = [...listed.matchAll(/^(\d+)\s/gm)].map((m) => m[1])
      if (ids.length !== 3) throw new Error(`expected 3 webhooks to delete, found ${ids.length}:\n${listed}`)
      for (const id of ids) {
        await runNode([shiplogBin, 'webhooks', 'delete', '--account', 'Bench', String(id)], {
          env,
          cwd: root,
        })
      }
    }
    /** @type {Array<[string, import('../lib/ingest-load.mjs').CountedShape, string, string, string, (() => Promise<void>) | null, ('chain' | 'derivation')?]>} */
    const scenarios = [
      [`${store.dialect} POST /deploy`, deployShape(key), 'deploy', 'POST /deploy', '1.0.', null],
      [`${store.dialect} GET /put`, putShape(key), 'put-get', 'GET /put', '2.0.', null],
      // The webhooks' comparison is the same form run just before them, on a database of the same
      // size (each run adds 100k+ events, and a later run is slower for that alone).
      [
        `${store.dialect} POST /deploy, just before webhooks`,
        deployShape(key, '4.0.'),
        'deploy',
        'POST /deploy',
        '4.0.',
        null,
      ],
      [
        `${store.dialect} POST /deploy, 3 slow webhooks`,
        deployShape(key, '3.0.'),
        'deploy',
        'POST /deploy',
        '3.0.',
        createWebhooks,
      ],
      // Each run is slower than the one before it for the rows it adds: the order without, with,
      // with, without lets that fall on both sides equally.
      [
        `${store.dialect} POST /deploy, 3 slow webhooks again`,
        deployShape(key, '9.0.'),
        'deploy',
        'POST /deploy',
        '9.0.',
        null,
      ],
      [
        `${store.dialect} POST /deploy, webhooks deleted`,
        deployShape(key, '9.1.'),
        'deploy',
        'POST /deploy',
        '9.1.',
        deleteWebhooks,
      ],
    ]
    // Tamper evidence (issue 14: ingest throughput does not drop): the chain waits while a burst lasts
    // (a busy event loop, or more than 500 events a second); the rows it has not chained when a run
    // ends show that. On PostgreSQL, where a second instance could chain beside the one ingesting,
    // POST /deploy is also measured with the chain running and with it held off (its head rows held
    // FOR UPDATE by the bench, which makes the chain skip its turn), in the order off, on, on, off so
    // that the slow-down of a growing table falls on both equally.
    if (store.dialect === 'postgres') {
      // Deriving deployments (issue 11: the ingest ratio does not drop) the same way: its progress
      // row, the lock every derivation run takes first, held FOR UPDATE by the bench.
      for (const [label, prefix, hold] of /** @type {const} */ ([
        ['chain held off', '5.0.', 'chain'],
        ['chain running', '6.0.', undefined],
        ['chain running again', '7.0.', undefined],
        ['chain held off again', '8.0.', 'chain'],
        ['derivation held off', '9.2.', 'derivation'],
        ['derivation running', '9.3.', undefined],
        ['derivation running again', '9.4.', undefined],
        ['derivation held off again', '9.5.', 'derivation'],
      ])) {
        scenarios.push([
          `${store.dialect} POST /deploy, ${label}`,
          deployShape(key, prefix),
          'deploy',
          'POST /deploy',
          prefix,
          null,
          hold,
        ])
      }
    }
    for (const [scenario, shape, source, request, prefix, before, hold] of scenarios) {
      if (before) await before()
      await settleDerivation(store)
      const held =
        hold === 'chain'
          ? await holdChain(store.databaseUrl)
          : hold === 'derivation'
            ? await holdDerivation(store.databaseUrl)
            : null
      let run
      try {
        run = await warmAndMeasure(server.url, shape, scenario, server.pid)
      } finally {
        await held?.release()
      }
      const { warmup, measured, cpuUs } = run
      // Tamper evidence: rows the chain is behind as the run ends, and the time to catch up.
      chainLags.push({ scenario, ...(await chainLagAfterRun(store.databaseUrl)) })
      const problems = [...loadProblems(warmup, 'warm-up'), ...loadProblems(measured, 'measured')]
      const check = await withTimeout(
        checkStored(store, source, shape, warmup.ok + measured.ok, prefix),
        60_000,
        'checking the stored events',
      )
      problems.push(...check.problems)
      const { acked, stored, unanswered } = check
      const baseline = rows.find((r) => r.target === 'bare' && r.request === request)
      rows.push({
        scenario,
        target: store.dialect,
        request,
        warmup,
        measured,
        ratio: baseline?.measured?.okPerSecond ? measured.okPerSecond / baseline.measured.okPerSecond : null,
        cpuUs,
        acked,
        stored,
        unanswered,
        problems,
      })
    }
    const hooked = rows.find((r) => r.target === store.dialect && r.scenario.endsWith('3 slow webhooks'))
    if (hooked && receiver.received() === 0)
      hooked.problems.push('the webhook receiver got no request: the webhooks were not active')
  } finally {
    await receiver.close()
    await server.stop()
    serverLogs[store.dialect] = { ...summariseLog(logFile), logFile }
  }
  // The chain's CPU per row, without HTTP: every row of this run chained again in a process of its own.
  chainCpus.push({ dialect: store.dialect, ...(await chainCpu(store.databaseUrl)) })
}

/** Records a scenario group that could not run at all. @param {string} target @param {unknown} err */
function failedGroup(target, err) {
  const message = err instanceof Error ? err.message : String(err)
  console.error(`  ${target} failed: ${message}`)
  for (const request of ['POST /deploy', 'GET /put']) {
    if (rows.some((r) => r.target === target && r.request === request)) continue
    rows.push({
      scenario: `${target === 'bare' ? 'baseline' : target} ${request}`,
      target,
      request,
      warmup: null,
      measured: null,
      ratio: null,
      acked: null,
      stored: null,
      unanswered: null,
      problems: [`did not run: ${message.split('\n')[0]}`],
    })
  }
}
