// Clean-up on every exit path (the end of the run, SIGINT/SIGTERM, the watchdog), a time limit for
// any one step, and the run's temporary directory and server log summaries, shared by the scenarios.
// The options first: a bad environment stops the run before the temporary directory exists.
import './options.mjs'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { killAllChildren } from './children.mjs'

/** @type {Array<() => Promise<void>>} run in reverse order, once */
export const cleanups = []
let cleaningUp = null

export function cleanUp() {
  cleaningUp ??= (async () => {
    for (const fn of cleanups.reverse()) {
      try {
        await withTimeout(fn(), 20_000, 'cleanup step')
      } catch (err) {
        console.error(`bench: cleanup: ${err instanceof Error ? err.message : String(err)}`)
      }
    }
    killAllChildren()
  })()
  return cleaningUp
}

/**
 * @template T
 * @param {Promise<T>} promise
 * @param {number} ms
 * @param {string} what
 * @returns {Promise<T>}
 */
export function withTimeout(promise, ms, what) {
  let timer
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms)
    }),
  ])
}

export async function abort(code, message) {
  console.error(`\nbench: ${message}`)
  const force = setTimeout(() => process.exit(code), 30_000)
  force.unref()
  await cleanUp()
  process.exit(code)
}

for (const signal of /** @type {const} */ (['SIGINT', 'SIGTERM'])) {
  process.on(signal, () => abort(130, `${signal} received; stopping servers and cleaning up`))
}

/** @type {Record<string, ReturnType<typeof import('./report.mjs').summariseLog> & { logFile: string }>} */
export const serverLogs = {}
export const runDir = mkdtempSync(join(tmpdir(), 'shiplog-bench-'))
if (process.env.BENCH_KEEP_TMP === '1') console.error(`bench: keeping ${runDir} (server logs, SQLite file)`)
else cleanups.push(async () => rmSync(runDir, { recursive: true, force: true }))
