// Start-up timings for the benchmark: how long `shiplog serve` (compiled JS) takes from spawn to a
// 200 from GET /healthz, and how long a fresh checkout takes from `npm ci` to its first answer.
import { execFileSync, spawn } from 'node:child_process'
import { cpSync, mkdirSync } from 'node:fs'
import http from 'node:http'
import { join } from 'node:path'
import { freePort, runNode } from './children.mjs'

/** Resolves with the status of GET /healthz, or 0 when nothing answers yet. */
function probe(port) {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/healthz', agent: false }, (res) => {
      res.resume()
      resolve(res.statusCode ?? 0)
    })
    req.on('error', () => resolve(0))
    req.setTimeout(1000, () => req.destroy())
  })
}

/**
 * Spawns `command args` with PORT set, polls /healthz every 2 ms and resolves with the milliseconds
 * from spawn to the first 200; the child is then stopped with SIGTERM (SIGKILL after 15 s).
 * @param {{ command: string, args: string[], env: NodeJS.ProcessEnv, cwd: string, timeoutMs: number }} o
 */
async function spawnToFirstAnswer(o) {
  const port = await freePort()
  const started = performance.now()
  const child = spawn(o.command, o.args, {
    env: { ...o.env, PORT: String(port), HOST: '127.0.0.1' },
    cwd: o.cwd,
    stdio: ['ignore', 'ignore', 'pipe'],
    // Its own process group: `npm start` runs the server as a grandchild, and the whole group is
    // stopped at the end.
    detached: true,
  })
  const signal = (name) => {
    try {
      process.kill(-(child.pid ?? 0), name)
    } catch {
      // already gone
    }
  }
  let stderr = ''
  child.stderr?.on('data', (chunk) => {
    stderr = (stderr + chunk).slice(-2000)
  })
  const exited = new Promise((resolve) => child.once('exit', resolve))
  let ms = null
  try {
    while (performance.now() - started < o.timeoutMs) {
      if (child.exitCode !== null) throw new Error(`exited with ${child.exitCode}: ${stderr.trim()}`)
      if ((await probe(port)) === 200) {
        ms = performance.now() - started
        break
      }
      await new Promise((resolve) => setTimeout(resolve, 2))
    }
    if (ms === null) throw new Error(`no 200 from /healthz within ${o.timeoutMs} ms: ${stderr.trim()}`)
    return ms
  } finally {
    signal('SIGTERM')
    const timer = setTimeout(() => signal('SIGKILL'), 15_000)
    await exited
    clearTimeout(timer)
  }
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)] ?? null
}

/**
 * Start-up to listening for each database: the schema is migrated first (as after a first start),
 * then `node bin/shiplog.js serve` is started `runs` times.
 * @param {{ root: string, shiplogBin: string, targets: Array<{ dialect: string, databaseUrl: string }>,
 *   runs: number }} o
 */
export async function benchStartup(o) {
  const rows = []
  for (const target of o.targets) {
    const env = {
      ...process.env,
      DATABASE_URL: target.databaseUrl,
      SHIPLOG_SECRET: 'bench-startup-secret-0123456789abcdef0123456789',
      LOG_LEVEL: 'warn',
    }
    delete env.REDIS_URL
    await runNode([o.shiplogBin, 'migrate'], { env, cwd: o.root })
    const times = []
    const problems = []
    for (let i = 0; i < o.runs; i++) {
      try {
        times.push(
          await spawnToFirstAnswer({
            command: process.execPath,
            args: [o.shiplogBin, 'serve'],
            env,
            cwd: o.root,
            timeoutMs: 30_000,
          }),
        )
      } catch (err) {
        problems.push(err instanceof Error ? err.message : String(err))
      }
    }
    rows.push({
      scenario: `start to listening, ${target.dialect}`,
      runs: times.length,
      min: times.length ? Math.min(...times) : null,
      median: median(times),
      max: times.length ? Math.max(...times) : null,
      problems,
    })
  }
  return rows
}

/**
 * A fresh copy of the committed tree (git ls-files, plus uncommitted edits of those files), then
 * `npm ci` with the machine's npm cache, then `npm start` until /healthz answers: what a new user
 * waits for. better-sqlite3 compiles from source during `npm ci`, which dominates.
 * @param {{ root: string, runDir: string }} o
 */
export async function benchInstall(o) {
  const dir = join(o.runDir, 'fresh-checkout')
  mkdirSync(dir, { recursive: true })
  const files = execFileSync('git', ['ls-files', '-z'], { cwd: o.root, encoding: 'utf8' })
    .split('\0')
    .filter(Boolean)
  for (const file of files) {
    try {
      cpSync(join(o.root, file), join(dir, file), { recursive: true })
    } catch {
      // a file deleted in the working tree but not yet in git: a fresh clone would not have it either
    }
  }
  const env = {
    ...process.env,
    SHIPLOG_SECRET: 'bench-install-secret-0123456789abcdef0123456789',
    DATABASE_URL: `sqlite:${join(dir, 'data', 'shiplog.db')}`,
    LOG_LEVEL: 'warn',
    npm_config_update_notifier: 'false',
    npm_config_fund: 'false',
    npm_config_audit: 'false',
  }
  delete env.REDIS_URL
  const started = performance.now()
  const problems = []
  let ciSeconds = null
  let startSeconds = null
  try {
    execFileSync('npm', ['ci', '--no-progress'], { cwd: dir, env, stdio: 'ignore', timeout: 600_000 })
    ciSeconds = (performance.now() - started) / 1000
    const ms = await spawnToFirstAnswer({
      command: 'npm',
      args: ['start', '--silent'],
      env,
      cwd: dir,
      timeoutMs: 120_000,
    })
    startSeconds = ms / 1000
  } catch (err) {
    problems.push(err instanceof Error ? err.message.split('\n')[0] : String(err))
  }
  return {
    scenario: 'npm ci, then npm start, to first answer (SQLite)',
    ciSeconds,
    startSeconds,
    totalSeconds: ciSeconds !== null && startSeconds !== null ? ciSeconds + startSeconds : null,
    problems,
  }
}
