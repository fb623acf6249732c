// Counts in words (issue 28: "Stall time is now 1 minutes"): one is singular, every other count
// plural, irregular plurals given.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { counted } from '../../src/domain/plural.js'

test('one is singular, zero and many are plural', () => {
  assert.equal(counted(1, 'minute'), '1 minute')
  assert.equal(counted(0, 'event'), '0 events')
  assert.equal(counted(90, 'minute'), '90 minutes')
  assert.equal(counted(1, 'webhook delivery', 'webhook deliveries'), '1 webhook delivery')
  assert.equal(counted(3, 'webhook delivery', 'webhook deliveries'), '3 webhook deliveries')
})
