// The copy's progress (issue 28, point 13): no rate and no time left until a few seconds of copying
// stand behind them, and the time left in hours, minutes and seconds, not "80065 s".
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { copyRate, durationText, ESTIMATE_AFTER_MS, timeLeftText } from '../../src/cli/eta.js'

test('durations read in the largest units that matter', () => {
  assert.equal(durationText(0), '0 s')
  assert.equal(durationText(44.2), '45 s')
  assert.equal(durationText(60), '1 min 0 s')
  assert.equal(durationText(125), '2 min 5 s')
  assert.equal(durationText(80_065), '22 h 14 min')
})

test('no time left is given before there is a rate to base it on', () => {
  // The first batch of a small table, moments after starting: nothing to estimate from.
  assert.equal(copyRate(7, 40), null)
  assert.equal(timeLeftText(1_000_000, 7, 40), null)
  assert.equal(timeLeftText(1_000_000, 0, 10_000), null, 'nothing copied yet')
  // A few seconds in, an estimate: 2000 rows/s, 250 000 rows to go.
  assert.equal(copyRate(10_000, 5000), 2000)
  assert.equal(timeLeftText(250_000, 10_000, 5000), 'about 2 min 5 s left')
  assert.notEqual(timeLeftText(1, 1, ESTIMATE_AFTER_MS), null)
})
