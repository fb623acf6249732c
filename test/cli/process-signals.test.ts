// `npm start` and `npx shiplog serve` stop the server when they are sent SIGTERM or SIGINT (as a
// supervisor or `kill` does): the node process ends and the port is free again. And `npm start`
// with a current build starts without building.
import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { connect } from 'node:net'
import { join } from 'node:path'
import { type TestContext, test } from 'node:test'
import { databaseForServers } from '../helper.js'
import {
  assertBuilt,
  freePort,
  listensOn,
  processEnv,
  REPO_ROOT,
  sleep,
  withTimeout,
} from '../support/processes.js'

/** The pids of a process's descendants, read from /proc. */
function descendants(pid: number): number[] {
  const children = new Map<number, number[]>()
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      // The parent pid is the 4th field after the command name, which is in parentheses.
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8')
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      children.set(ppid, [...(children.get(ppid) ?? []), Number(name)])
    } catch {
      // The process ended meanwhile.
    }
  }
  const out: number[] = []
  const walk = (p: number) => {
    for (const child of children.get(p) ?? []) {
      out.push(child)
      walk(child)
    }
  }
  walk(pid)
  return out
}

function alive(pid: number): boolean {
  try {
    // A zombie has exited: it only waits for its parent to read its status.
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'))
  } catch {
    return false
  }
}

function portAnswers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: '127.0.0.1' })
    socket.once('connect', () => {
      socket.destroy()
      resolve(true)
    })
    socket.once('error', () => resolve(false))
  })
}

async function healthy(port: number): Promise<boolean> {
  try {
    const res = await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(1000) })
    await res.arrayBuffer()
    return res.status === 200
  } catch {
    return false
  }
}

interface Launched {
  launcher: ChildProcess
  server: number
  port: number
  output: () => string
}

/** Runs `npm start` or `npx shiplog serve` and waits until the node process inside answers. */
async function launch(t: TestContext, command: string[], databaseUrl: string): Promise<Launched> {
  const port = await freePort()
  const launcher = spawn(command[0] ?? 'npm', command.slice(1), {
    cwd: REPO_ROOT,
    env: processEnv(databaseUrl, { PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'info' }),
    stdio: ['ignore', 'pipe', 'pipe'],
    // Its own process group, as a terminal gives a command: Ctrl-C signals that whole group.
    detached: true,
  })
  let text = ''
  launcher.stdout?.on('data', (chunk) => {
    text += chunk
  })
  launcher.stderr?.on('data', (chunk) => {
    text += chunk
  })
  const launcherPid = launcher.pid
  assert.ok(launcherPid, 'npm started')
  t.after(() => {
    // Whatever is left of this launch (never more than it started), by pid.
    for (const pid of [launcherPid, ...descendants(launcherPid)]) {
      try {
        process.kill(pid, 'SIGKILL')
      } catch {
        // Already gone.
      }
    }
  })
  const deadline = Date.now() + 60_000
  for (;;) {
    const server = descendants(launcherPid).find((pid) => listensOn(pid, port))
    if (server !== undefined && (await healthy(port))) {
      // A server that outlived its launcher (the bug this file tests for) is no longer among its
      // descendants: it is ended by its own pid.
      t.after(() => {
        if (alive(server)) process.kill(server, 'SIGKILL')
      })
      return { launcher, server, port, output: () => text }
    }
    if (launcher.exitCode !== null || Date.now() > deadline) {
      assert.fail(`${command.join(' ')} did not start a server on ${port}; output:\n${text}`)
    }
    await sleep(100)
  }
}

// How each stop arrives. A supervisor or `kill` signals the launcher's pid alone; Ctrl-C on a
// terminal signals the whole foreground process group. `npx` runs the command under `sh -c`, and a
// non-interactive shell waits for its command before acting on SIGINT, so SIGINT sent to npx alone
// never reaches node (see README, "Run it"); from a terminal, Ctrl-C reaches node itself.
const CASES: Array<{ command: string[]; signal: 'SIGTERM' | 'SIGINT'; to: 'pid' | 'group' }> = [
  { command: ['npm', 'start'], signal: 'SIGTERM', to: 'pid' },
  { command: ['npm', 'start'], signal: 'SIGINT', to: 'pid' },
  { command: ['npm', 'start'], signal: 'SIGINT', to: 'group' },
  { command: ['npx', 'shiplog', 'serve'], signal: 'SIGTERM', to: 'pid' },
  { command: ['npx', 'shiplog', 'serve'], signal: 'SIGINT', to: 'group' },
]

for (const { command, signal, to } of CASES) {
  const how = to === 'pid' ? `${signal} to its pid` : `${signal} to its process group (Ctrl-C)`
  test(`${command.join(' ')}: ${how} stops the server, frees the port and ends node`, async (t) => {
    assertBuilt()
    const { databaseUrl } = await databaseForServers(t)
    const { launcher, server, port, output } = await launch(t, command, databaseUrl)
    const exited = new Promise<void>((resolve) => {
      if (launcher.exitCode !== null || launcher.signalCode !== null) resolve()
      else launcher.once('exit', () => resolve())
    })
    const pid = launcher.pid ?? assert.fail('npm has a pid')
    process.kill(to === 'pid' ? pid : -pid, signal)
    await withTimeout(exited, 15_000, `${command.join(' ')} did not exit after ${how}`)
    const deadline = Date.now() + 15_000
    while ((alive(server) || (await portAnswers(port))) && Date.now() < deadline) await sleep(100)
    assert.equal(alive(server), false, `the server (pid ${server}) ended; output:\n${output()}`)
    assert.equal(await portAnswers(port), false, `port ${port} is free`)
    assert.match(output(), /finishing in-flight requests/, 'it stopped gracefully')
  })
}

test('npm start with a current build starts without building', async (t) => {
  assertBuilt()
  const bundle = join(REPO_ROOT, 'dist', 'bundle', 'shiplog.mjs')
  const before = statSync(bundle).mtimeMs
  const { databaseUrl } = await databaseForServers(t)
  const started = Date.now()
  const { launcher, output } = await launch(t, ['npm', 'start'], databaseUrl)
  const took = Date.now() - started
  t.diagnostic(`npm start answered /healthz after ${took} ms`)
  assert.equal(statSync(bundle).mtimeMs, before, 'dist/ was not rebuilt')
  assert.doesNotMatch(output(), /building/)
  assert.ok(took < 10_000, `started in ${took} ms`)
  launcher.kill('SIGTERM')
})
