// The guardrails' rules as pure functions (SPEC §11): which reasons apply, in which order, until
// when; reading an admin's input; the cycle a promotion rule would close. Expectations by hand.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { cycleThrough } from '../../src/domain/guardrails/commands.js'
import { readFreezeInput, readLockInput, readPromotionInput } from '../../src/domain/guardrails/inputs.js'
import {
  brokenRules,
  type Guardrails,
  NO_GUARDRAILS,
  reasonsAgainst,
} from '../../src/domain/guardrails/rules.js'

const T = Date.parse('2026-03-27T12:00:00.000Z')
const MIN = 60_000
const by = { createdBy: 'ada@example.com', createdAt: T - 60 * MIN }
const d = { service: 'billing', environment: 'prod', version: '2.4.1' }

const all: Guardrails = {
  locks: [
    { id: 2, environment: 'prod', service: null, reason: 'DB migration', endsAt: T + 30 * MIN, ...by },
    { id: 3, environment: 'prod', service: 'search', reason: 'other service', endsAt: null, ...by },
    { id: 4, environment: 'staging', service: null, reason: 'other environment', endsAt: null, ...by },
  ],
  freezes: [
    {
      id: 7,
      environment: 'prod',
      reason: 'quarter end',
      schedule: { kind: 'once', startsAt: T - 60 * MIN, endsAt: T + 120 * MIN },
      ...by,
    },
  ],
  badVersions: [{ service: 'billing', version: '2.4.1', reason: 'corrupts invoices', ...by }],
  promotions: [
    { environment: 'prod', afterEnvironment: 'staging', minMinutes: 30, requireGood: true, ...by },
    { environment: 'prod', afterEnvironment: 'qa', minMinutes: 0, requireGood: false, ...by },
  ],
}

test('every reason that applies, in the order lock, freeze, bad version, promotion, each with its until', () => {
  const firsts = new Map([
    ['staging', T - 10 * MIN],
    ['qa', null],
  ])
  const reasons = reasonsAgainst(all, d, T, firsts)
  assert.deepEqual(
    reasons.map((r) => [r.rule, r.until === null ? null : new Date(r.until).toISOString()]),
    [
      ['lock', '2026-03-27T12:30:00.000Z'],
      ['freeze', '2026-03-27T14:00:00.000Z'],
      ['bad_version', null],
      // qa sorts before staging: never succeeded there.
      ['promotion', null],
      // Succeeded in staging at 11:50; 30 minutes after that is 12:20.
      ['promotion', '2026-03-27T12:20:00.000Z'],
      // require_good, and the version is marked bad.
      ['promotion', null],
    ],
  )
  assert.equal(
    reasons[0]?.message,
    'prod is locked by ada@example.com until 2026-03-27T12:30:00.000Z: DB migration',
  )
  assert.equal(reasons[2]?.message, 'billing 2.4.1 is marked bad by ada@example.com: corrupts invoices')
  assert.deepEqual(brokenRules(reasons), ['lock', 'freeze', 'bad_version', 'promotion'])
})

test('a lock holds until its end and not at it; a one-off freeze from its start, not at its end', () => {
  const firsts = new Map([
    ['staging', T - 100 * MIN],
    ['qa', T - 100 * MIN],
  ])
  const good = { ...d, version: '2.4.2' }
  const rules = (at: number) => brokenRules(reasonsAgainst(all, good, at, firsts))
  assert.deepEqual(rules(T + 30 * MIN - 1), ['lock', 'freeze'])
  assert.deepEqual(rules(T + 30 * MIN), ['freeze'])
  assert.deepEqual(rules(T - 60 * MIN - 1), ['lock'])
  assert.deepEqual(rules(T + 120 * MIN), [])
  // The one-service lock of another service and the other environment's lock never applied.
  assert.deepEqual(brokenRules(reasonsAgainst(all, { ...good, service: 'search' }, T + 200 * MIN, firsts)), [
    'lock',
  ])
  assert.deepEqual(reasonsAgainst(NO_GUARDRAILS, d, T, new Map()), [])
})

test('a promotion wait ends exactly N minutes after the first success', () => {
  const g: Guardrails = { ...NO_GUARDRAILS, promotions: [all.promotions[0] ?? assert.fail()] }
  const firsts = new Map([['staging', T]])
  assert.equal(reasonsAgainst(g, d, T + 30 * MIN - 1, firsts).length, 1)
  assert.equal(reasonsAgainst(g, d, T + 30 * MIN, firsts).length, 0)
})

test('input: each bad field named, nothing accepted', () => {
  const lock = readLockInput({ environment: ' ', reason: '', until: 'yesterday' }, T)
  assert.equal(lock.ok, false)
  assert.deepEqual(lock.ok ? [] : lock.errors.map((e) => e.field), ['environment', 'reason', 'until'])
  const past = readLockInput({ environment: 'prod', reason: 'x', until: '2026-03-27T11:00:00Z' }, T)
  assert.deepEqual(past.ok ? [] : past.errors.map((e) => e.message), ['until must lie in the future'])
  const span = readLockInput({ environment: 'prod', reason: 'x', until: '2h' }, T)
  assert.deepEqual(span.ok && span.value.endsAt, T + 120 * MIN)
  const empty = readFreezeInput(
    { environment: 'prod', reason: 'x', from: '2026-04-01T10:00:00Z', to: '2026-04-01T10:00:00Z' },
    T,
  )
  assert.deepEqual(empty.ok ? [] : empty.errors.map((e) => e.field), ['to'])
  const neither = readFreezeInput({ environment: 'prod', reason: 'x' }, T)
  assert.equal(neither.ok, false)
  const itself = readPromotionInput({ environment: 'prod', after_environment: 'prod', min_minutes: '-1' })
  assert.deepEqual(itself.ok ? [] : itself.errors.map((e) => e.field), ['min_minutes', 'after_environment'])
})

test('a promotion rule that would close a cycle is found with its path', () => {
  const rules = [
    { environment: 'prod', afterEnvironment: 'staging' },
    { environment: 'staging', afterEnvironment: 'dev' },
  ]
  // dev after prod: dev → prod → staging → dev.
  assert.deepEqual(cycleThrough(rules, 'dev', 'prod'), ['dev', 'prod', 'staging', 'dev'])
  assert.equal(cycleThrough(rules, 'qa', 'dev'), null)
  assert.equal(cycleThrough(rules, 'prod', 'qa'), null)
})
