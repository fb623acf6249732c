// On a terminal `shiplog serve` tells a person where to go, in one line, and logs readable lines;
// piped (a supervisor, a container) it logs JSON lines only. The terminal is a real pseudo-terminal
// from util-linux `script`, and Ctrl-C typed into it stops the server.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { type TestContext, test } from 'node:test'
import { parseDatabaseUrl } from '../../src/config.js'
import { openDatabase } from '../../src/db/connect.js'
import { databaseForServers } from '../helper.js'
import {
  assertBuilt,
  freePort,
  processEnv,
  REPO_ROOT,
  SHIPLOG_BIN,
  sleep,
  startServer,
  withTimeout,
} from '../support/processes.js'
import { createUserIn } from '../support/ui.js'

/** Runs `shiplog serve` on a pseudo-terminal until it says it is ready, then types Ctrl-C. */
async function serveOnTerminal(
  t: TestContext,
  databaseUrl: string,
): Promise<{ port: number; output: string }> {
  const port = await freePort()
  const child = spawn('script', ['-qec', `exec "${process.execPath}" "${SHIPLOG_BIN}" serve`, '/dev/null'], {
    cwd: REPO_ROOT,
    env: processEnv(databaseUrl, { PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'info', TERM: 'xterm' }),
    stdio: ['pipe', 'pipe', 'pipe'],
  })
  t.after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  })
  let output = ''
  child.stdout?.on('data', (chunk) => {
    output += chunk
  })
  child.stderr?.on('data', (chunk) => {
    output += chunk
  })
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  const deadline = Date.now() + 30_000
  while (!/Shiplog is ready at [^\n]*\n/.test(output)) {
    if (Date.now() > deadline || child.exitCode !== null) assert.fail(`no ready line; output:\n${output}`)
    await sleep(100)
  }
  // Ctrl-C, as typed: the terminal turns it into SIGINT for the server.
  child.stdin?.write('\x03')
  const code = await withTimeout(exited, 15_000, `Ctrl-C did not stop the server; output:\n${output}`)
  assert.equal(code, 0, output)
  return { port, output }
}

test('on a terminal: one line says where to go (create the first account, later log in), logs are readable, Ctrl-C stops it', async (t) => {
  assertBuilt()
  const { databaseUrl } = await databaseForServers(t)
  const first = await serveOnTerminal(t, databaseUrl)
  assert.ok(
    first.output.includes(
      `Shiplog is ready at http://127.0.0.1:${first.port} — open it to create the first account`,
    ),
    first.output,
  )
  assert.doesNotMatch(first.output, /^\{"level"/m, 'no JSON lines on a terminal')
  assert.match(
    first.output,
    /\[\d\d:\d\d:\d\d\] .*INFO.*shiplog listening on/,
    'readable lines with the time of day',
  )
  assert.match(first.output, /SIGINT received: finishing in-flight requests/)

  const database = openDatabase(parseDatabaseUrl(databaseUrl))
  try {
    const [account] = await database.db.selectFrom('accounts').select('id').execute()
    await createUserIn(database, account?.id ?? assert.fail('the account exists'), 'ada@example.com')
  } finally {
    await database.close()
  }
  const second = await serveOnTerminal(t, databaseUrl)
  assert.ok(second.output.includes(`Shiplog is ready at http://127.0.0.1:${second.port} — open it to log in`))
})

test('piped (not a terminal): JSON lines only, no line for people', async (t) => {
  const { databaseUrl } = await databaseForServers(t)
  const server = await startServer(t, { databaseUrl, env: { LOG_LEVEL: 'info' } })
  server.signal('SIGTERM')
  assert.deepEqual(await server.waitForExit(15_000), { code: 0, signal: null })
  const lines = server.output().split('\n').filter(Boolean)
  assert.ok(lines.length >= 2, server.output())
  for (const line of lines) assert.equal(typeof JSON.parse(line).level, 'number', line)
  assert.doesNotMatch(server.output(), /Shiplog is ready/)
})
