// Child processes for the benchmark: servers on free ports, one-shot CLI commands, and the guarantee
// that every child this process started is gone when it exits, however it exits.
import { spawn } from 'node:child_process'
import { closeSync, openSync, readFileSync } from 'node:fs'
import { createServer } from 'node:net'

/** @type {Set<import('node:child_process').ChildProcess>} */
const live = new Set()

/** Kills, by pid, every child still running. Synchronous, so it also works from process.on('exit'). */
export function killAllChildren() {
  for (const child of live) {
    if (child.exitCode === null && child.signalCode === null) {
      try {
        child.kill('SIGKILL')
      } catch {
        // already gone
      }
    }
  }
  live.clear()
}

process.on('exit', killAllChildren)

/**
 * @param {string} command
 * @param {string[]} args
 * @param {import('node:child_process').SpawnOptions} options
 */
function track(command, args, options) {
  const child = spawn(command, args, options)
  live.add(child)
  child.once('exit', () => live.delete(child))
  return child
}

/** A TCP port on 127.0.0.1 that was free a moment ago. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.unref()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      const port = typeof address === 'object' && address ? address.port : 0
      server.close(() => resolve(port))
    })
  })
}

/**
 * Runs a command to completion (bounded by timeoutMs); resolves with its stdout, rejects with its stderr.
 * @param {string[]} args arguments to node
 * @param {{ env: NodeJS.ProcessEnv, cwd: string, input?: string, timeoutMs?: number }} options
 * @returns {Promise<string>}
 */
export function runNode(args, { env, cwd, input, timeoutMs = 30_000 }) {
  return new Promise((resolve, reject) => {
    const child = track(process.execPath, args, {
      env,
      cwd,
      stdio: ['pipe', 'pipe', 'pipe'],
      timeout: timeoutMs,
      killSignal: 'SIGKILL',
    })
    let stdout = ''
    let stderr = ''
    child.stdout?.on('data', (chunk) => {
      stdout += chunk
    })
    child.stderr?.on('data', (chunk) => {
      stderr += chunk
    })
    child.once('error', reject)
    child.once('close', (code, signal) => {
      if (code === 0) resolve(stdout)
      else
        reject(
          new Error(
            `node ${args.join(' ')} failed (${signal ? `killed by ${signal}` : `exit ${code}`}): ${stderr.trim()}`,
          ),
        )
    })
    child.stdin?.end(input ?? '')
  })
}

/**
 * @typedef {object} Server
 * @property {string} url base URL, e.g. http://127.0.0.1:41234
 * @property {number} pid
 * @property {string} logFile where its stdout and stderr went
 * @property {() => Promise<void>} stop SIGTERM, then SIGKILL if it has not exited in time
 */

/**
 * Starts a node server on a free port and waits until `readyPath` answers 200.
 * @param {{ name: string, args: string[], env: NodeJS.ProcessEnv, cwd: string, logFile: string,
 *   readyPath: string, startTimeoutMs?: number }} options
 * @returns {Promise<Server>}
 */
export async function startServer(options) {
  const { startTimeoutMs = 30_000 } = options
  let lastError = /** @type {unknown} */ (null)
  // A port can be taken between freePort() and the child's listen(): try again on a new one.
  for (let attempt = 1; attempt <= 3; attempt++) {
    const port = await freePort()
    const fd = openSync(options.logFile, 'a')
    const child = track(process.execPath, options.args, {
      env: { ...options.env, PORT: String(port), HOST: '127.0.0.1' },
      cwd: options.cwd,
      stdio: ['ignore', fd, fd],
    })
    closeSync(fd)
    const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })))
    const url = `http://127.0.0.1:${port}`
    const stop = async () => {
      if (child.exitCode !== null || child.signalCode !== null) return
      child.kill('SIGTERM')
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000)
      await exited
      clearTimeout(timer)
    }
    try {
      await waitUntilReady(`${url}${options.readyPath}`, exited, startTimeoutMs)
      return { url, pid: child.pid ?? -1, logFile: options.logFile, stop }
    } catch (err) {
      lastError = err
      await stop()
      const log = tail(options.logFile)
      if (!/EADDRINUSE/.test(log)) break
    }
  }
  throw new Error(
    `${options.name} did not start: ${lastError instanceof Error ? lastError.message : String(lastError)}\n` +
      `--- last lines of ${options.logFile} ---\n${tail(options.logFile)}`,
  )
}

/**
 * @param {string} url
 * @param {Promise<unknown>} exited
 * @param {number} timeoutMs
 */
async function waitUntilReady(url, exited, timeoutMs) {
  const deadline = Date.now() + timeoutMs
  let gone = /** @type {unknown} */ (null)
  exited.then((how) => {
    gone = how
  })
  let last = 'no answer'
  while (Date.now() < deadline) {
    if (gone) throw new Error(`process exited before it was ready (${JSON.stringify(gone)})`)
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(1000) })
      await res.arrayBuffer()
      if (res.status === 200) return
      last = `HTTP ${res.status}`
    } catch (err) {
      last = err instanceof Error ? err.message : String(err)
    }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`not ready after ${timeoutMs} ms (${url}: ${last})`)
}

/** The last lines of a file, for error messages. */
export function tail(file, lines = 20) {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n')
  } catch {
    return '(no log)'
  }
}
