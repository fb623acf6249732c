// The background task runner: runs each task on its timer, logs a failing task once and then counts,
// says when it works again, and stops; the app runs its background work on it.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { type TaskLogger, TaskRunner } from '../../src/domain/tasks.js'
import { buildTestApp, testDialect } from '../helper.js'

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

function recordingLog(): TaskLogger & { lines: Array<{ level: string; message: string }> } {
  const lines: Array<{ level: string; message: string }> = []
  return {
    lines,
    debug: (_, message) => lines.push({ level: 'debug', message }),
    info: (_, message) => lines.push({ level: 'info', message }),
    warn: (_, message) => lines.push({ level: 'warn', message }),
  }
}

test('a failing task is logged once, then counted; one line when it works again; stop ends it', async () => {
  const log = recordingLog()
  const runner = new TaskRunner(log)
  let calls = 0
  runner.add({
    name: 'flaky',
    intervalMs: 5,
    firstRunMs: 0,
    run: () => {
      calls++
      if (calls <= 3) throw new Error(`failure ${calls}`)
      return undefined
    },
  })
  runner.start()
  for (let waited = 0; calls < 5; waited += 10) {
    assert.ok(waited < 3000, 'the task is retried')
    await sleep(10)
  }
  await runner.stop()
  const after = calls
  await sleep(100)
  assert.equal(calls, after, 'nothing runs once stopped')
  const warnings = log.lines.filter((l) => l.level === 'warn')
  assert.equal(warnings.length, 1, 'one warning for three failures')
  assert.match(warnings[0]?.message ?? '', /flaky failed/)
  assert.equal(log.lines.filter((l) => /works again after 3 failed runs/.test(l.message)).length, 1)
  const counters = runner.counters().flaky
  assert.equal(counters?.failures, 3)
  assert.equal(counters?.runs, calls)
  assert.equal(counters?.failingFor, 0)
  assert.equal(log.lines.filter((l) => l.level === 'debug').length, calls - 3, 'a line per good run')
})

test('the app runs the key-usage flush, session clean-up, deployments catch-up, webhook delivery and (on SQLite) the version index on its runner', async (t) => {
  const ctx = await buildTestApp(t)
  await ctx.app.ready()
  const names = Object.keys(ctx.app.tasks.counters()).sort()
  const expected = [
    'chain',
    'deployments',
    'key-usage',
    'retention',
    'session-cleanup',
    'webhook-delivery',
    ...(testDialect === 'sqlite' ? ['version-index'] : []),
  ]
  assert.deepEqual(names, expected.sort())
  if (testDialect === 'sqlite') {
    for (let waited = 0; (ctx.app.tasks.counters()['version-index']?.runs ?? 0) < 1; waited += 20) {
      assert.ok(waited < 3000, 'the version index ran')
      await sleep(20)
    }
  }
})
