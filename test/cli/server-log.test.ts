// The server's log at info (issue 28, point 13): one "listening" line, not two; one line per request,
// not two; none for the health probes a load balancer sends every few seconds.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { freshDatabaseUrl } from '../helper.js'
import { sleep, startServer } from '../support/processes.js'

interface LogLine {
  level: number
  msg: string
  req?: { method: string; url: string }
  res?: { statusCode: number }
  responseTime?: number
}

test('one listening line, one line per request, and no line per health probe at info', {
  timeout: 60_000,
}, async (t) => {
  const databaseUrl = await freshDatabaseUrl(t)
  const server = await startServer(t, { databaseUrl, env: { LOG_LEVEL: 'info' } })
  for (let i = 0; i < 3; i++) {
    assert.equal((await fetch(`${server.url}/healthz`)).status, 200)
    await (await fetch(`${server.url}/readyz?verbose=1`)).text()
  }
  assert.equal((await fetch(`${server.url}/login`, { redirect: 'manual' })).status, 303)
  assert.equal((await fetch(`${server.url}/no-such-page`)).status, 404)
  // The lines are written as the responses finish: wait until the last one is there.
  let lines: LogLine[] = []
  for (let tries = 0; tries < 50; tries++) {
    lines = server
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as LogLine)
    if (lines.some((l) => l.req?.url === '/no-such-page')) break
    await sleep(100)
  }
  const listening = lines.filter((l) => /listening/i.test(l.msg))
  assert.equal(listening.length, 1, JSON.stringify(listening))
  assert.match(
    listening[0]?.msg ?? '',
    /^shiplog listening on http:\/\/127\.0\.0\.1:\d+ \(database: (sqlite|postgres)\)$/,
  )
  assert.deepEqual(
    lines.filter((l) => l.msg === 'incoming request'),
    [],
    'no separate line when a request comes in',
  )
  assert.deepEqual(
    lines.filter((l) => /^\/(healthz|readyz)/.test(l.req?.url ?? '')),
    [],
    'the probes (the start-up wait sent some too) are not logged at info',
  )
  const login = lines.filter((l) => l.req?.url === '/login')
  assert.equal(login.length, 1, JSON.stringify(login))
  assert.equal(login[0]?.msg, 'request completed')
  assert.equal(login[0]?.req?.method, 'GET')
  assert.equal(login[0]?.res?.statusCode, 303)
  assert.equal(typeof login[0]?.responseTime, 'number')
  const missing = lines.filter((l) => l.req?.url === '/no-such-page' || /no-such-page/.test(l.msg))
  assert.equal(missing.length, 1, JSON.stringify(missing))
  assert.equal(missing[0]?.res?.statusCode, 404)
})
