// What an operator beside a running server does to its SQLite file, and what the kernel says of it:
// the `sqlite3` shell, the POSIX locks a process holds (/proc/locks) and its descriptors of deleted files.
import { spawn, spawnSync } from 'node:child_process'
import { readdirSync, readFileSync, readlinkSync, statSync } from 'node:fs'

/**
 * Runs SQL with Debian's `sqlite3` shell, which opens the file, runs it and closes its connection
 * properly, as an operator's session does. Fails (never skips) when the shell is missing: .ci/run
 * installs it.
 */
export function sqliteShell(path: string, text: string): string {
  const result = spawnSync('sqlite3', ['-batch', path, text], { encoding: 'utf8', timeout: 30_000 })
  if (result.error)
    throw new Error(`the sqlite3 shell could not run (apt-get install sqlite3): ${result.error.message}`)
  if (result.status !== 0) throw new Error(`sqlite3 exited ${result.status}: ${result.stderr}`)
  return result.stdout.trim()
}

/**
 * sqliteShell without blocking the event loop, for tests whose clients must keep running meanwhile
 * (the crash harness): the shell is killed, and the promise rejects, after `timeoutMs`. With
 * `busyTimeoutMs` the shell waits that long for a lock (`.timeout`), as a careful operator's does;
 * without, it gives up at once with "database is locked", the shell's default.
 */
export function sqliteShellAsync(
  path: string,
  text: string,
  options: { timeoutMs?: number; busyTimeoutMs?: number } = {},
): Promise<string> {
  const timeoutMs = options.timeoutMs ?? 30_000
  const busy = options.busyTimeoutMs === undefined ? [] : ['-cmd', `.timeout ${options.busyTimeoutMs}`]
  return new Promise((resolve, reject) => {
    const child = spawn('sqlite3', ['-batch', ...busy, path, text], { stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk
    })
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk
    })
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs)
    child.once('error', (err) => {
      clearTimeout(timer)
      reject(new Error(`the sqlite3 shell could not run (apt-get install sqlite3): ${err.message}`))
    })
    child.once('close', (code, signal) => {
      clearTimeout(timer)
      if (signal !== null)
        reject(new Error(`sqlite3 was killed (${signal}) after ${timeoutMs} ms: ${stderr}`))
      else if (code !== 0) reject(new Error(`sqlite3 exited ${code}: ${stderr}`))
      else resolve(stdout.trim())
    })
  })
}

/** The POSIX (fcntl) locks process `pid` holds on the file at `path`, as /proc/locks lists them. */
export function posixLocksOn(pid: number, path: string): string[] {
  const inode = statSync(path).ino
  return readFileSync('/proc/locks', 'utf8')
    .split('\n')
    .filter((line) => {
      // "1: POSIX  ADVISORY  READ 5638 fe:00:1234 128 128" ("->" marks a waiter, which holds nothing).
      const m = /^\d+:\s+(POSIX)\s+\S+\s+\S+\s+(\d+)\s+[0-9a-f]+:[0-9a-f]+:(\d+)\s/.exec(line)
      return m !== null && Number(m[2]) === pid && Number(m[3]) === inode
    })
}

/** The files process `pid` still has open although they were deleted ("… (deleted)" in /proc). */
export function deletedFilesOpen(pid: number): string[] {
  const targets: string[] = []
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const target = readlinkSync(`/proc/${pid}/fd/${fd}`)
      if (target.endsWith(' (deleted)')) targets.push(target)
    } catch {
      // Closed meanwhile.
    }
  }
  return targets
}
