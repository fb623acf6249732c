// When background work stands aside for a burst of ingest (the runner's burst policy,
// src/domain/ingest-burst.ts): one load signal, the ingest rate or the event loop above its bound,
// read by each task over the time since it last looked; below them it runs, and its bound counts from
// the first wait while work is left, so bursts with short pauses between them cannot hold it off for
// ever.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { BurstPolicy } from '../../src/domain/ingest-burst.js'
import { LOOK_AGAIN_MS } from '../../src/domain/pacing.js'

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

test('it waits above the ingest rate and runs below it', async () => {
  // busyLoop above 1: only the rate counts here (the test's own work may keep the loop busy).
  const burst = new BurstPolicy({ busyIngest: 500, busyLoop: 2, maxYieldMs: 60_000 })
  const gate = burst.gate()
  await pause(100)
  burst.stored(1000) // about 10,000 a second
  assert.equal(gate.wait(), LOOK_AGAIN_MS)
  assert.equal(burst.busy, true)
  await pause(200)
  burst.stored(10) // about 50 a second
  assert.equal(gate.wait(), null)
  assert.equal(burst.busy, false)
})

test('one signal for every task: each reads it since its own last look, and the last look is the verdict', async () => {
  const burst = new BurstPolicy({ busyIngest: 500, busyLoop: 2, maxYieldMs: 60_000 })
  const chain = burst.gate()
  const deployments = burst.gate()
  await pause(100)
  burst.stored(1000)
  assert.equal(chain.wait(), LOOK_AGAIN_MS, 'a burst since the chain looked')
  await pause(200)
  burst.stored(10)
  assert.equal(deployments.wait(), LOOK_AGAIN_MS, 'the same burst, since the deployments task looked')
  assert.equal(burst.busy, true)
  assert.equal(chain.wait(), null, 'since the chain last looked, 50 a second')
  assert.equal(burst.busy, false, 'the last look found none')
})

test('a saturated event loop is a burst too', async () => {
  const burst = new BurstPolicy({ maxYieldMs: 60_000 })
  const gate = burst.gate()
  const end = performance.now() + 200
  while (performance.now() < end) {}
  assert.equal(gate.wait(), LOOK_AGAIN_MS)
  assert.equal(burst.busy, true)
})

test('the bound counts from the first wait while work is left, across pauses too short to clear it', async () => {
  const burst = new BurstPolicy({ busyLoop: 2, maxYieldMs: 300 })
  const gate = burst.gate()
  const arrive = async (ms: number, perSecond: number) => {
    await pause(ms)
    burst.stored((ms * perSecond) / 1000)
  }
  await arrive(100, 10_000)
  assert.equal(gate.wait(), LOOK_AGAIN_MS, 'a burst: it waits')
  await arrive(100, 0)
  assert.equal(gate.wait(), null, 'a pause: it runs')
  gate.ran(true) // and work is still left
  await arrive(250, 10_000)
  assert.equal(
    gate.wait(),
    null,
    'the next burst is seen 350 ms after the first wait: past its bound, it runs',
  )
  assert.equal(burst.busy, true, 'though it runs, the burst goes on: runs asked for sooner wait their turn')
  gate.ran(true)
  await arrive(100, 10_000)
  assert.equal(gate.wait(), null, 'catching up, burst or not, until nothing is left')
  gate.ran(false)
  await arrive(100, 10_000)
  assert.equal(gate.wait(), LOOK_AGAIN_MS, 'nothing was left: the bound starts again with this burst')
})
