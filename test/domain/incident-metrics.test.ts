// Incident marks in the DORA figures (issue 27), on hand-computed histories: a marked success counts
// as a failure, its time to restore runs to the fix its mark names (else the next success), and
// without marks every figure is SPEC §6.2's. Then the same through the real ingest path and the
// audited commands, on both databases: refusals name their field, the cache sees marks at once.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { EventStatus } from '../../src/db/schema.js'
import type { AuditSource } from '../../src/domain/audit/log.js'
import { incidentsOf } from '../../src/domain/deployments/incident-store.js'
import {
  markFixed,
  markIncident,
  readIncidentInput,
  unmarkIncident,
} from '../../src/domain/deployments/incidents.js'
import {
  computeMetrics,
  DAY_MS,
  firstStartsOf,
  type IncidentMark,
  type MetricsWindow,
} from '../../src/domain/deployments/metrics.js'
import { metricsForWindow, metricsForWindowUncached } from '../../src/domain/deployments/queries.js'
import { type DeploymentEvent, deriveDeployments } from '../../src/domain/deployments/rules.js'
import { buildTestApp } from '../helper.js'
import { deploy } from '../support/ui.js'

const T0 = Date.UTC(2026, 2, 1, 12, 0, 0)
const MIN = 60_000
const WINDOW: MetricsWindow = { environment: 'prod', service: null, from: T0, to: T0 + 7 * DAY_MS }

function history(rows: [string, string, string, EventStatus, number][]): DeploymentEvent[] {
  return rows.map(([service, environment, version, status, minute], i) => ({
    id: i + 1,
    service,
    environment,
    version,
    status,
    occurredAt: T0 + minute * MIN,
    commitTime: null,
    deployer: null,
    apiKeyName: 'ci',
  }))
}

function marks(...list: [number, number | null][]): Map<number, IncidentMark> {
  return new Map(list.map(([deploymentId, fixedBy]) => [deploymentId, { deploymentId, fixedBy }]))
}

// Five instant deployments of api in prod, each its own event (deployment id = event id):
// #1 1.0 at 0 min, #2 1.1 failed at 60, #3 1.2 at 120, #4 1.3 at 180, #5 1.4 at 270.
const FIVE = deriveDeployments(
  history([
    ['api', 'prod', '1.0', 'Deployed', 0],
    ['api', 'prod', '1.1', 'Failed', 60],
    ['api', 'prod', '1.2', 'Deployed', 120],
    ['api', 'prod', '1.3', 'Deployed', 180],
    ['api', 'prod', '1.4', 'Deployed', 270],
  ]),
)
const FIRSTS = firstStartsOf(FIVE)

test('no marks: the plain figures, unchanged (1 failed of 5; #2 restored by #3 after 60 min)', () => {
  const plain = computeMetrics(WINDOW, FIVE, FIRSTS)
  assert.deepEqual(computeMetrics(WINDOW, FIVE, FIRSTS, new Map()), plain)
  assert.equal(plain.changeFailureRate, 1 / 5)
  assert.deepEqual(plain.timeToRestore.values, [{ deploymentId: 2, valueMs: 60 * MIN, relatedId: 3 }])
  assert.deepEqual(plain.timeToRestore.spread, { median: 60 * MIN, p90: 60 * MIN, count: 1 })
  assert.deepEqual(plain.incidents, { marked: [], failures: [], restoredByFix: 0 })
  // A mark on a deployment outside the window changes nothing either.
  assert.deepEqual(computeMetrics(WINDOW, FIVE, FIRSTS, marks([99, null])), plain)
})

test('5 deployments, 1 failed, #4 marked with its fix #5 90 minutes later: CFR 2/5, TTR 60 and 90 min', () => {
  const m = computeMetrics(WINDOW, FIVE, FIRSTS, marks([4, 5]))
  // (1 failed + 0 rolled back + 1 marked) ÷ (4 succeeded + 1 failed).
  assert.equal(m.changeFailureRate, 2 / 5)
  assert.equal(m.succeeded.length, 4, 'a marked success still succeeded (deployment frequency is unchanged)')
  assert.equal(m.deploymentFrequencyPerDay, 4 / 7)
  // #2: 60 → 120 (next success #3) = 60 min; #4: 180 → 270 (its fix #5) = 90 min. Median of two:
  // (60 + 90) / 2 = 75 min; p90 at rank ⌈0.9 × 2⌉ = 2: 90 min.
  assert.deepEqual(m.timeToRestore.values, [
    { deploymentId: 2, valueMs: 60 * MIN, relatedId: 3 },
    { deploymentId: 4, valueMs: 90 * MIN, relatedId: 5 },
  ])
  assert.deepEqual(m.timeToRestore.spread, { median: 75 * MIN, p90: 90 * MIN, count: 2 })
  assert.deepEqual(
    m.incidents.marked.map((d) => d.id),
    [4],
  )
  assert.deepEqual(
    m.incidents.failures.map((d) => d.id),
    [4],
  )
  assert.equal(m.incidents.restoredByFix, 1)
})

test('a mark without a fix is restored by the next success; a marked failure is not counted twice', () => {
  // #1 marked, no fix: the next success after it is #3 (the failed #2 does not restore): 120 min.
  // #4 marked, fixed by #5: 90 min. #2 failed and is marked too, fixed by #5: 270 − 60 = 210 min.
  const m = computeMetrics(WINDOW, FIVE, FIRSTS, marks([1, null], [2, 5], [4, 5]))
  // (1 failed + 0 rolled back + 2 marked successes) ÷ 5: the marked failure is one failure.
  assert.equal(m.changeFailureRate, 3 / 5)
  assert.deepEqual(
    m.timeToRestore.values.map((v) => [v.deploymentId, v.valueMs / MIN, v.relatedId]),
    [
      [1, 120, 3],
      [2, 210, 5],
      [4, 90, 5],
    ],
  )
  // Sorted 90, 120, 210: median 120; p90 at rank ⌈2.7⌉ = 3: 210.
  assert.deepEqual(m.timeToRestore.spread, { median: 120 * MIN, p90: 210 * MIN, count: 3 })
  assert.deepEqual(
    m.incidents.marked.map((d) => d.id),
    [1, 2, 4],
  )
  assert.deepEqual(
    m.incidents.failures.map((d) => d.id),
    [1, 4],
  )
  assert.equal(m.incidents.restoredByFix, 2)
})

test('a rolled-back deployment that is also marked counts once; a fix that is no success is passed over', () => {
  // #1 1.0, #2 1.1, #3 1.0 again: a rollback, so #2 is rolled back (restored by #3 after 30 min).
  // #4 1.2 failed; #5 1.3 succeeded.
  const d = deriveDeployments(
    history([
      ['api', 'prod', '1.0', 'Deployed', 0],
      ['api', 'prod', '1.1', 'Deployed', 30],
      ['api', 'prod', '1.0', 'Deployed', 60],
      ['api', 'prod', '1.2', 'Failed', 100],
      ['api', 'prod', '1.3', 'Deployed', 140],
    ]),
  )
  const plain = computeMetrics(WINDOW, d, firstStartsOf(d))
  assert.equal(plain.changeFailureRate, 2 / 5)
  // #2 marked (already rolled back): still 2/5. #1 marked with "fix" #4, which failed: its time to
  // restore runs to the next success, #2 at 30 min. CFR (1 failed + 1 rolled back + #1) ÷ 5 = 3/5.
  const m = computeMetrics(WINDOW, d, firstStartsOf(d), marks([2, 5], [1, 4]))
  assert.equal(m.changeFailureRate, 3 / 5)
  assert.deepEqual(
    m.timeToRestore.values.map((v) => [v.deploymentId, v.valueMs / MIN, v.relatedId]),
    [
      [1, 30, 2],
      [2, 110, 5],
      [4, 40, 5],
    ],
  )
  assert.equal(m.incidents.restoredByFix, 1)
})

test('incident input: each bad field is named; absent keeps, null and empty clear', () => {
  assert.deepEqual(readIncidentInput({}), { input: {}, errors: [] })
  assert.deepEqual(readIncidentInput({ link: '', note: null, fixed_by: null }), {
    input: { link: null, note: null, fixedBy: null },
    errors: [],
  })
  assert.deepEqual(readIncidentInput({ link: ' https://x.example/1 ', fixed_by: '#12' }).input, {
    link: 'https://x.example/1',
    fixedBy: 12,
  })
  const bad = readIncidentInput({ link: 'ftp://x.example', note: 'n'.repeat(501), fixed_by: 'twelve' })
  assert.deepEqual(
    bad.errors.map((e) => e.field),
    ['link', 'note', 'fixed_by'],
  )
  for (const link of ['/relative', 'javascript:alert(1)', 'example.com', 'https://', 42]) {
    assert.deepEqual(
      readIncidentInput({ link }).errors.map((e) => e.field),
      ['link'],
      String(link),
    )
  }
  assert.deepEqual(
    readIncidentInput({ note: 'a\u0007b' }).errors.map((e) => e.field),
    ['note'],
  )
  assert.deepEqual(
    readIncidentInput({ note: 'a\u202eb' }).errors.map((e) => e.field),
    ['note'],
  )
  assert.equal(readIncidentInput({ note: 'é'.repeat(500) }).errors.length, 0, '500 characters are fine')
  assert.deepEqual(
    readIncidentInput({ fixed_by: 0 }).errors.map((e) => e.field),
    ['fixed_by'],
  )
  assert.deepEqual(
    readIncidentInput({ fixed_by: 1.5 }).errors.map((e) => e.field),
    ['fixed_by'],
  )
})

test('through ingest and the audited commands: figures by hand, refusals by field, the cache sees every mark (both databases)', async (t) => {
  const ctx = await buildTestApp(t)
  const db = ctx.database.db
  const account = ctx.tenant.account.id
  const who: AuditSource = { actor: { kind: 'user', id: 1, name: 'ann@example.com' }, address: '192.0.2.1' }
  // Ten days back, on a minute; every event placed in time by occurred_at.
  const base = Math.floor((Date.now() - 10 * DAY_MS) / MIN) * MIN
  const ids: number[] = []
  const sent: [string, string, string, EventStatus, number][] = [
    ['api', 'prod', '1.0', 'Deployed', 0], // #a
    ['api', 'prod', '1.1', 'Failed', 60], // #b
    ['api', 'prod', '1.2', 'Deployed', 120], // #c: restores #b after 60 min
    ['api', 'prod', '1.3', 'Deployed', 180], // #d: to be marked
    ['api', 'prod', '1.4', 'Deployed', 270], // #e: its fix, 90 min later
    ['api', 'staging', '1.5', 'Deployed', 300], // another environment
    ['api', 'prod', '1.5', 'Deploying', 400], // still open
  ]
  for (const [service, environment, version, status, minute] of sent) {
    const res = await deploy(ctx.app, ctx.tenant.key, {
      service,
      environment,
      version,
      status,
      occurred_at: new Date(base + minute * MIN).toISOString(),
    })
    assert.equal(res.status, 201, JSON.stringify(res.body))
    ids.push(Number(res.body.id))
  }
  await ctx.app.deployments.current()
  const [a, b, c, d, e, staging, open] = ids as [number, number, number, number, number, number, number]
  const window: MetricsWindow = { environment: 'prod', service: null, from: base - DAY_MS, to: base + DAY_MS }

  const plain = await metricsForWindow(db, account, window)
  assert.equal(plain.changeFailureRate, 1 / 5)
  assert.deepEqual(plain.timeToRestore.spread, { median: 60 * MIN, p90: 60 * MIN, count: 1 })

  // Refused, nothing stored: each problem names its field.
  const refused = async (id: number, input: Parameters<typeof markIncident>[3]) => {
    const result = await markIncident(db, account, id, input, who)
    assert.equal(result.ok, false)
    return result.ok ? null : { status: result.status, fields: result.errors.map((x) => x.field) }
  }
  assert.deepEqual(await refused(999_999, {}), { status: 404, fields: ['id'] })
  assert.deepEqual(await refused(open, {}), { status: 422, fields: ['id'] })
  for (const fix of [c, d, b, staging, 999_999]) {
    // Earlier, itself, failed, another environment, unknown.
    assert.deepEqual(await refused(d, { fixedBy: fix }), { status: 422, fields: ['fixed_by'] }, `fix #${fix}`)
  }
  assert.equal((await incidentsOf(db, account, ids)).size, 0)

  const marked = await markIncident(
    db,
    account,
    d,
    { link: 'https://inc.example/7', note: 'checkout down' },
    who,
  )
  assert.equal(marked.ok, true)
  // The mark is seen at once, though the deployments did not change (same generation).
  const noFix = await metricsForWindow(db, account, window)
  assert.equal(noFix.changeFailureRate, 2 / 5)
  // #d without a fix: restored by the next success, #e, all the same: 90 min.
  assert.deepEqual(noFix.timeToRestore.spread, { median: 75 * MIN, p90: 90 * MIN, count: 2 })
  assert.equal(noFix.incidents.restoredByFix, 0)

  // "This fixed #d", from the fixing deployment: keeps link and note.
  assert.equal((await markFixed(db, account, d, e, who)).ok, true)
  const withFix = await metricsForWindow(db, account, window)
  assert.deepEqual(withFix, await metricsForWindowUncached(db, account, window))
  assert.equal(withFix.incidents.restoredByFix, 1)
  assert.deepEqual(
    withFix.timeToRestore.values.map((v) => [v.deploymentId, v.valueMs / MIN, v.relatedId]),
    [
      [b, 60, c],
      [d, 90, e],
    ],
  )
  const stored = (await incidentsOf(db, account, [d])).get(d)
  assert.deepEqual(
    { link: stored?.link, note: stored?.note, fixedBy: stored?.fixedBy, by: stored?.createdBy },
    { link: 'https://inc.example/7', note: 'checkout down', fixedBy: e, by: 'ann@example.com' },
  )
  // Marking #a too (no fix): restored by #c, the next success (the failed #b restores nothing):
  // 120 min. CFR (1 + 2) ÷ 5; sorted 60, 90, 120: median 90, p90 120.
  assert.equal((await markIncident(db, account, a, {}, who)).ok, true)
  const two = await metricsForWindow(db, account, window)
  assert.equal(two.changeFailureRate, 3 / 5)
  assert.deepEqual(two.timeToRestore.spread, { median: 90 * MIN, p90: 120 * MIN, count: 3 })
  // Staging knows nothing of prod's marks.
  const stagingWindow = { ...window, environment: 'staging' }
  assert.equal((await metricsForWindow(db, account, stagingWindow)).incidents.marked.length, 0)

  // Removing the marks gives back exactly the plain figures.
  assert.equal((await unmarkIncident(db, account, a, who)).ok, true)
  assert.equal((await unmarkIncident(db, account, d, who)).ok, true)
  assert.deepEqual(await unmarkIncident(db, account, d, who), {
    ok: false,
    status: 404,
    errors: [{ field: 'id', message: `#${d} is not marked as having caused an incident` }],
  })
  assert.deepEqual(await metricsForWindow(db, account, window), plain)

  // Every change is in the audit log, with who and what.
  const entries = await db
    .selectFrom('audit_entries')
    .select(['action', 'actor', 'target', 'details'])
    .where('account_id', '=', account)
    .where('action', 'like', 'deployment.%')
    .orderBy('id')
    .execute()
  assert.deepEqual(
    entries.map((x) => [x.action, x.actor, x.target]),
    [
      ['deployment.incident_marked', 'ann@example.com', `api 1.3 in prod (#${d})`],
      ['deployment.incident_marked', 'ann@example.com', `api 1.3 in prod (#${d})`],
      ['deployment.incident_marked', 'ann@example.com', `api 1.0 in prod (#${a})`],
      ['deployment.incident_unmarked', 'ann@example.com', `api 1.0 in prod (#${a})`],
      ['deployment.incident_unmarked', 'ann@example.com', `api 1.3 in prod (#${d})`],
    ],
  )
  assert.deepEqual(JSON.parse(entries[1]?.details ?? '{}'), {
    change: 'updated',
    link: 'https://inc.example/7',
    note: 'checkout down',
    fixed_by: e,
  })
})
