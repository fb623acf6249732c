// When background work stands aside for a burst of ingest (src/domain/ingest-burst.ts): above the
// rate or the event-loop bound it waits, below them it runs, and its bound counts from the first wait
// while work is left, so bursts with short pauses between them cannot hold it off for ever.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { IngestBurst, LOOK_AGAIN_MS } from '../../src/domain/ingest-burst.js'

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

test('it waits above the ingest rate and runs below it', async () => {
  let stored = 0
  const burst = new IngestBurst({ storedEvents: () => stored, busyIngest: 500, maxYieldMs: 60_000 })
  await pause(100)
  stored += 1000 // about 10,000 a second
  assert.equal(burst.wait(), LOOK_AGAIN_MS)
  assert.equal(burst.busy, true)
  await pause(200)
  stored += 10 // about 50 a second
  assert.equal(burst.wait(), null)
  assert.equal(burst.busy, false)
})

test('without a count of stored events and without a loop bound it never waits', async () => {
  const burst = new IngestBurst()
  const end = performance.now() + 200
  while (performance.now() < end) {} // a saturated loop
  assert.equal(burst.wait(), null)
})

test('a loop bound makes a saturated event loop a burst too', async () => {
  const burst = new IngestBurst({ busyLoop: 0.85, maxYieldMs: 60_000 })
  const end = performance.now() + 200
  while (performance.now() < end) {}
  assert.equal(burst.wait(), LOOK_AGAIN_MS)
})

test('the bound counts from the first wait while work is left, across pauses too short to clear it', async () => {
  let stored = 0
  const burst = new IngestBurst({ storedEvents: () => stored, maxYieldMs: 300 })
  const arrive = async (ms: number, perSecond: number) => {
    await pause(ms)
    stored += (ms * perSecond) / 1000
  }
  await arrive(100, 10_000)
  assert.equal(burst.wait(), LOOK_AGAIN_MS, 'a burst: it waits')
  await arrive(100, 0)
  assert.equal(burst.wait(), null, 'a pause: it runs')
  burst.ran(true) // and work is still left
  await arrive(250, 10_000)
  assert.equal(
    burst.wait(),
    null,
    'the next burst is seen 350 ms after the first wait: past its bound, it runs',
  )
  burst.ran(true)
  await arrive(100, 10_000)
  assert.equal(burst.wait(), null, 'catching up, burst or not, until nothing is left')
  burst.ran(false)
  await arrive(100, 10_000)
  assert.equal(burst.wait(), LOOK_AGAIN_MS, 'nothing was left: the bound starts again with this burst')
})
