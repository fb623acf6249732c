// The background task runner: runs each task on its timer, logs a failing task once and then counts,
// says when it works again, and stops; runs a task sooner when asked, but holds back one that stands
// aside while a burst of ingest lasts; the app runs its background work on it.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { BurstPolicy } from '../../src/domain/ingest-burst.js'
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

/** Waits until `done()` holds, for at most `ms`. */
async function until(done: () => boolean, ms: number, what: string): Promise<void> {
  for (let waited = 0; !done(); waited += 10) {
    assert.ok(waited < ms, what)
    await sleep(10)
  }
}

test('a task that stands aside waits while the burst policy finds a burst, and runs once it eases', async () => {
  const burst = new BurstPolicy({ busyIngest: 500, busyLoop: 2, maxYieldMs: 60_000 })
  const runner = new TaskRunner(recordingLog(), undefined, burst)
  let derived = 0
  let other = 0
  runner.add({
    name: 'aside',
    intervalMs: 20,
    firstRunMs: 0,
    standsAside: true,
    run: () => {
      derived++
      return { nextMs: undefined, more: false }
    },
  })
  runner.add({ name: 'other', intervalMs: 20, firstRunMs: 0, run: () => void other++ })
  // A steady burst: 100 events every 10 ms, 10,000 a second.
  const arriving = setInterval(() => burst.stored(100), 10)
  try {
    await sleep(50)
    runner.start()
    await until(() => other >= 5 && (runner.counters().aside?.runs ?? 0) >= 3, 3000, 'both looked')
    assert.equal(burst.busy, true)
    assert.equal(derived, 0, 'nothing ran during the burst')
  } finally {
    clearInterval(arriving)
  }
  await until(() => derived > 0, 3000, 'it runs once the burst eased')
  assert.equal(burst.busy, false)
  await runner.stop()
})

test('runSoon runs a task before its turn; during a run, the next follows soon; not while it stands aside in a burst', async () => {
  const burst = new BurstPolicy({ busyIngest: 500, busyLoop: 2, maxYieldMs: 60_000 })
  const runner = new TaskRunner(recordingLog(), undefined, burst)
  let runs = 0
  let release: () => void = () => {}
  let hold = false
  runner.add({
    name: 'slow',
    intervalMs: 60_000,
    run: async () => {
      runs++
      if (hold) await new Promise<void>((resolve) => (release = resolve))
      return undefined
    },
  })
  let aside = 0
  runner.add({ name: 'aside', intervalMs: 60_000, standsAside: true, run: () => void aside++ })
  runner.runSoon('slow', 10)
  await sleep(50)
  assert.equal(runs, 0, 'not before the runner starts')
  runner.start()
  runner.runSoon('slow', 10)
  await until(() => runs === 1, 3000, 'asked for, it ran long before its turn')
  hold = true
  runner.runSoon('slow', 10)
  await until(() => runs === 2, 3000, 'asked again')
  runner.runSoon('slow', 10) // during the run
  hold = false
  release()
  await until(() => runs === 3, 3000, 'the run asked for during a run follows it')

  // A burst seen by any task's look: asks for the task that stands aside wait for its turn.
  const look = burst.gate()
  await sleep(50)
  burst.stored(100_000)
  look.wait()
  assert.equal(burst.busy, true)
  runner.runSoon('aside', 10)
  await sleep(100)
  assert.equal(aside, 0, 'left to its turn during a burst')
  await sleep(150)
  look.wait()
  assert.equal(burst.busy, false)
  runner.runSoon('aside', 10)
  await until(() => aside === 1, 3000, 'the burst over, it runs when asked')
  await runner.stop()
  runner.runSoon('slow', 10)
  await sleep(50)
  assert.equal(runs, 3, 'nothing runs once stopped')
})

test('the app runs the key-usage flush, session clean-up, deployments catch-up, webhook delivery, the live hub poll and (on SQLite) the version index on its runner', async (t) => {
  const ctx = await buildTestApp(t)
  await ctx.app.ready()
  const names = Object.keys(ctx.app.tasks.counters()).sort()
  const expected = [
    'chain',
    'deployments',
    'key-usage',
    'live-poll',
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
