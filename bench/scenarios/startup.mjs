// The start-up part (compiled server, from spawn to the first answer, on each database) and the install
// part (npm ci on a fresh copy of the tree, then npm start), with their report.
import { join } from 'node:path'
import { runDir } from '../lib/lifecycle.mjs'
import { root, shiplogBin, skipPg, skipSqlite, startupRuns } from '../lib/options.mjs'
import { num, renderTable } from '../lib/report.mjs'
import { benchInstall, benchStartup } from '../lib/startup.mjs'
import { postgresStore } from '../lib/stores.mjs'

/** @returns {Promise<Awaited<ReturnType<typeof benchStartup>>>} */
export async function runStartup() {
  console.error(`startup: ${startupRuns} starts of the compiled server per database`)
  const targets = []
  if (!skipSqlite)
    targets.push({ dialect: 'sqlite', databaseUrl: `sqlite:${join(runDir, 'startup', 'shiplog.db')}` })
  if (!skipPg) targets.push({ dialect: 'postgres', databaseUrl: (await postgresStore()).databaseUrl })
  return benchStartup({ root, shiplogBin, targets, runs: startupRuns })
}

/** @returns {Promise<Awaited<ReturnType<typeof benchInstall>>>} */
export async function runInstall() {
  console.error('install: a fresh copy of the tree, npm ci (warm npm cache), npm start, first answer')
  return benchInstall({ root, runDir })
}

/**
 * @param {Awaited<ReturnType<typeof benchStartup>>} startupRows
 * @param {Awaited<ReturnType<typeof benchInstall>> | null} installRow
 */
export const startupHeader = ['scenario', 'runs', 'min ms', 'median ms', 'max ms']
export const startupTable = (startupRows, installRow) => [
  ...startupRows.map((r) => [r.scenario, num(r.runs), num(r.min), num(r.median), num(r.max)]),
  ...(installRow
    ? [
        [
          installRow.scenario,
          '1',
          `npm ci ${num(installRow.ciSeconds, 1)} s`,
          `start ${num(installRow.startSeconds, 1)} s`,
          `total ${num(installRow.totalSeconds, 1)} s`,
        ],
      ]
    : []),
]

/** @param {string[][]} table */
export function printStartup(table) {
  if (table.length === 0) return
  console.log('')
  console.log('Start-up: compiled JS, from spawning the process to the first 200 from GET /healthz')
  console.log('')
  console.log(renderTable(startupHeader, table))
  console.log('')
  console.log(
    'start to listening: `node bin/shiplog.js serve` on an already migrated database (node start-up included), ' +
      'polled every 2 ms. npm ci: a copy of the tracked files, `npm ci` with the npm cache as it is on this ' +
      'machine (better-sqlite3 compiles from source), then `npm start` (TypeScript build + serve) to the first answer.',
  )
}
