// Runs the built `shiplog` command as real child processes (server and CLI), bounded in time and always cleaned up.
import { type ChildProcess, spawn } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, readlinkSync, statSync } from 'node:fs'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { after } from 'node:test'
import { fileURLToPath } from 'node:url'
import { type Cleanup, TEST_SECRET } from '../helper.js'

export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url))
export const SHIPLOG_BIN = join(REPO_ROOT, 'bin', 'shiplog.js')

/** How long a CLI command may run before it is killed and the test fails. */
const CLI_TIMEOUT_MS = 30_000
/** How long `serve` may take to answer GET /healthz. */
const START_TIMEOUT_MS = 20_000
/** Most output kept per stream, so a chatty process cannot fill memory. */
const OUTPUT_LIMIT = 256 * 1024

export interface ExitStatus {
  code: number | null
  signal: NodeJS.Signals | null
}

export interface ProcessResult extends ExitStatus {
  stdout: string
  stderr: string
}

// Only these are passed on from the test's environment: configuration the developer happens to have
// exported (PORT, REDIS_URL, DATABASE_URL, …) must not leak into the processes under test.
const INHERITED = ['PATH', 'HOME', 'TMPDIR', 'TZ', 'LANG', 'LC_ALL', 'SYSTEMROOT']

/** The environment a spawned `shiplog` sees: a known database, secret and log level, plus `extra`. */
export function processEnv(
  databaseUrl: string | undefined,
  extra: Record<string, string> = {},
): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {}
  for (const name of INHERITED) {
    const value = process.env[name]
    if (value !== undefined) env[name] = value
  }
  if (databaseUrl !== undefined) env.DATABASE_URL = databaseUrl
  env.SHIPLOG_SECRET = TEST_SECRET
  env.LOG_LEVEL = 'warn'
  return { ...env, ...extra }
}

function newestMtime(dir: string): number {
  let newest = 0
  for (const name of readdirSync(dir)) {
    const path = join(dir, name)
    const stat = statSync(path)
    newest = Math.max(newest, stat.isDirectory() ? newestMtime(path) : stat.mtimeMs)
  }
  return newest
}

let buildChecked = false

/** The processes run dist/; testing a missing or stale build would test old code, so say so plainly. */
export function assertBuilt(): void {
  if (buildChecked) return
  // bin/shiplog.js runs the bundle, which `npm run build` writes last.
  const entry = join(REPO_ROOT, 'dist', 'bundle', 'shiplog.mjs')
  if (!existsSync(entry)) throw new Error('dist/ is missing: run `npm run build` before these tests')
  if (newestMtime(join(REPO_ROOT, 'src')) > statSync(entry).mtimeMs) {
    throw new Error('dist/ is older than src/: run `npm run build` before these tests')
  }
  buildChecked = true
}

/** A TCP port that was free a moment ago on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.unref()
    server.on('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() => {
        if (address !== null && typeof address === 'object') resolve(address.port)
        else reject(new Error('could not read the port of a probe server'))
      })
    })
  })
}

/** Collects a stream's text, keeping at most OUTPUT_LIMIT characters (the end, where errors are). */
function collect(stream: NodeJS.ReadableStream | null): () => string {
  let text = ''
  stream?.setEncoding('utf8')
  stream?.on('data', (chunk: string) => {
    text += chunk
    if (text.length > OUTPUT_LIMIT) text = text.slice(-OUTPUT_LIMIT)
  })
  return () => text
}

/** Resolves when the child has exited; at once when it already has. */
function exitOf(child: ChildProcess): Promise<ExitStatus> {
  if (child.exitCode !== null || child.signalCode !== null) {
    return Promise.resolve({ code: child.exitCode, signal: child.signalCode })
  }
  return new Promise((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }))
  })
}

function running(child: ChildProcess): boolean {
  return child.exitCode === null && child.signalCode === null
}

/** SIGKILLs the child if it still runs and waits (bounded) for it to be gone. */
async function killHard(child: ChildProcess): Promise<void> {
  if (!running(child)) return
  child.kill('SIGKILL')
  await withTimeout(exitOf(child), 5_000, 'a killed process did not exit').catch(() => {})
}

export function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${message} (after ${ms} ms)`)), ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

export interface RunOptions {
  /** Environment for the command (see processEnv). */
  env: NodeJS.ProcessEnv
  /** Written to standard input, which is then closed; stdin is closed at once without it. */
  stdin?: string
  timeoutMs?: number
}

/** Runs `shiplog ARGS…` to completion; fails the test if it does not finish in time. */
export async function runCli(t: Cleanup, args: string[], options: RunOptions): Promise<ProcessResult> {
  assertBuilt()
  const timeoutMs = options.timeoutMs ?? CLI_TIMEOUT_MS
  const child = spawn(process.execPath, [SHIPLOG_BIN, ...args], {
    cwd: REPO_ROOT,
    env: options.env,
    stdio: ['pipe', 'pipe', 'pipe'],
  })
  t.after(() => killHard(child))
  const stdout = collect(child.stdout)
  const stderr = collect(child.stderr)
  const spawned = new Promise<void>((resolve, reject) => {
    child.once('spawn', resolve)
    child.once('error', reject)
  })
  // A command that exits before reading its input (a usage error) closes the pipe: not our failure.
  child.stdin?.on('error', () => {})
  child.stdin?.end(options.stdin ?? '')
  await spawned
  const exited = exitOf(child)
  // 'exit' can come before the last output is read; 'close' waits for the streams too.
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()))
  try {
    const status = await withTimeout(exited, timeoutMs, `shiplog ${args.join(' ')} did not finish`)
    await withTimeout(closed, 5_000, `shiplog ${args.join(' ')} left its output streams open`)
    return { ...status, stdout: stdout(), stderr: stderr() }
  } catch (err) {
    await killHard(child)
    throw new Error(`${(err as Error).message}; stdout: ${stdout()} stderr: ${stderr()}`)
  }
}

export interface ServerProcess {
  /** http://127.0.0.1:PORT */
  readonly url: string
  readonly port: number
  readonly pid: number
  /** Everything the server wrote on stdout and stderr so far (its log). */
  output(): string
  signal(signal: NodeJS.Signals): void
  /** Waits for the process to end; rejects after timeoutMs. */
  waitForExit(timeoutMs: number): Promise<ExitStatus>
  isRunning(): boolean
}

export interface StartOptions {
  databaseUrl: string
  /** More environment variables (SHIPLOG_RATE_LIMIT, SHIPLOG_KEY_CACHE_SECONDS, …). */
  env?: Record<string, string>
  startTimeoutMs?: number
  /**
   * Listen on this port rather than a free one: a server restarted after a crash comes back where
   * its clients (and a load balancer) expect it.
   */
  port?: number
}

async function healthy(url: string): Promise<boolean> {
  try {
    const response = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(1_000) })
    await response.arrayBuffer()
    return response.status === 200
  } catch {
    return false
  }
}

/**
 * Whether process `pid` holds the socket listening on `port`, read from /proc on Linux; undefined
 * where /proc is not available. Another program may take a port between freePort() and the
 * child's listen(); then /healthz answers from that program while the child fails, and this tells.
 */
export function listensOn(pid: number, port: number): boolean | undefined {
  let fds: string[]
  try {
    fds = readdirSync(`/proc/${pid}/fd`)
  } catch {
    return undefined
  }
  const inodes = new Set<string>()
  for (const fd of fds) {
    try {
      const inode = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`))?.[1]
      if (inode) inodes.add(inode)
    } catch {
      // The descriptor was closed meanwhile.
    }
  }
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string
    try {
      text = readFileSync(table, 'utf8')
    } catch {
      continue
    }
    for (const line of text.split('\n').slice(1)) {
      // sl local_address rem_address st … inode: state 0A is LISTEN, the port is hex after the colon.
      const columns = line.trim().split(/\s+/)
      const localPort = Number.parseInt(columns[1]?.split(':')[1] ?? '', 16)
      if (columns[3] === '0A' && localPort === port && inodes.has(columns[9] ?? '')) return true
    }
  }
  return false
}

async function startOnce(t: Cleanup, options: StartOptions, port: number): Promise<ServerProcess> {
  const child = spawn(process.execPath, [SHIPLOG_BIN, 'serve'], {
    cwd: REPO_ROOT,
    env: processEnv(options.databaseUrl, { PORT: String(port), HOST: '127.0.0.1', ...options.env }),
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  t.after(() => killHard(child))
  const stdout = collect(child.stdout)
  const stderr = collect(child.stderr)
  const output = () => `${stdout()}${stderr()}`
  const pid = child.pid
  if (pid === undefined) {
    const error = await new Promise<Error>((resolve) => child.once('error', resolve))
    throw new Error(`could not spawn shiplog serve: ${error.message}`)
  }
  const url = `http://127.0.0.1:${port}`
  const deadline = Date.now() + (options.startTimeoutMs ?? START_TIMEOUT_MS)
  for (;;) {
    if (!running(child)) {
      const { code, signal } = await exitOf(child)
      throw new Error(
        `shiplog serve exited (code ${code}, signal ${signal}) before it answered; output:\n${output()}`,
      )
    }
    if ((await healthy(url)) && listensOn(pid, port) !== false) break
    if (Date.now() > deadline) {
      await killHard(child)
      throw new Error(`shiplog serve did not answer GET /healthz on ${url} in time; output:\n${output()}`)
    }
    await sleep(100)
  }
  return {
    url,
    port,
    pid,
    output,
    signal: (signal) => {
      if (running(child)) child.kill(signal)
    },
    waitForExit: (timeoutMs) =>
      withTimeout(exitOf(child), timeoutMs, `shiplog serve (pid ${pid}) did not exit`),
    isRunning: () => running(child),
  }
}

/**
 * Starts `shiplog serve` on a free port (or options.port) and waits until GET /healthz answers 200.
 * The process is SIGKILLed after the test if it still runs. Another process may take the probed port
 * first, so a start that fails with EADDRINUSE is tried again (on a new port unless one was given).
 */
export async function startServer(t: Cleanup, options: StartOptions): Promise<ServerProcess> {
  assertBuilt()
  for (let attempt = 1; ; attempt++) {
    const port = options.port ?? (await freePort())
    try {
      return await startOnce(t, options, port)
    } catch (err) {
      if (attempt >= 3 || !(err as Error).message.includes('EADDRINUSE')) throw err
      // A fixed port held by a process that is still going away frees up in a moment.
      if (options.port !== undefined) await sleep(200 * attempt)
    }
  }
}

/**
 * A clean-up scope as long as the test file: what is registered runs, newest first, after the
 * file's last test. For fixtures shared by a whole file (a server, its database).
 */
export function fileScope(): Cleanup {
  const cleanups: Array<() => Promise<void> | void> = []
  after(async () => {
    const errors: unknown[] = []
    for (const fn of cleanups.reverse()) {
      try {
        await fn()
      } catch (err) {
        errors.push(err)
      }
    }
    if (errors.length > 0) throw errors[0]
  })
  return { after: (fn) => void cleanups.push(fn) }
}
