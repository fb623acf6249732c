// The deployment rules (SPEC §6.1) and metrics (§6.2) on known histories, without a database.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { EventStatus } from '../../src/db/schema.js'
import { computeMetrics, DAY_MS, firstStartsOf, spreadOf } from '../../src/domain/deployments/metrics.js'
import {
  clockSkewed,
  type Deployment,
  type DeploymentEvent,
  deriveDeployments,
  durationMs,
  latestAt,
  outcomeAt,
  runningAt,
} from '../../src/domain/deployments/rules.js'

const T0 = Date.UTC(2026, 2, 1, 12, 0, 0)
const MIN = 60_000

function history(rows: [string, string, string, EventStatus, number][]): DeploymentEvent[] {
  return rows.map(([service, environment, version, status, minute], i) => ({
    id: i + 1,
    service,
    environment,
    version,
    status,
    occurredAt: T0 + minute * MIN,
    commitTime: null,
    deployer: `dev${i + 1}`,
    apiKeyName: 'ci',
  }))
}

function brief(d: Deployment): string {
  const end = d.finishedAt === null ? 'open' : `${d.result}@${(d.finishedAt - T0) / MIN}`
  const marks = `${d.instant ? ' instant' : ''}${d.rollback ? ' rollback' : ''}${d.rolledBack ? ' rolled-back' : ''}`
  return `#${d.id} ${d.service}/${d.environment} ${d.version} ${(d.startedAt - T0) / MIN}→${end} [${d.eventIds.join(',')}]${marks}`
}

test('retries fold, ends close, ends without a start are instant, and open ones stall', () => {
  const events = history([
    ['api', 'prod', '1.0', 'Deploying', 0],
    ['api', 'prod', '1.0', 'Deploying', 2], // retry: folded
    ['api', 'prod', '1.0', 'Deployed', 5],
    ['api', 'prod', '1.1', 'Failed', 10], // no open one: instant
    ['api', 'prod', '1.2', 'Deploying', 20],
    ['web', 'prod', '7', 'Deploying', 21],
    ['api', 'prod', '1.2', 'Deployed', 200], // a late end still closes it
  ])
  const deployments = deriveDeployments(events)
  assert.deepEqual(deployments.map(brief), [
    '#1 api/prod 1.0 0→succeeded@5 [1,2,3]',
    '#4 api/prod 1.1 10→failed@10 [4] instant',
    '#5 api/prod 1.2 20→succeeded@200 [5,7]',
    '#6 web/prod 7 21→open [6]',
  ])
  const web = deployments[3] as Deployment
  assert.equal(outcomeAt(web, T0 + 80 * MIN, 60 * MIN), 'in_progress', '59 minutes old')
  assert.equal(outcomeAt(web, T0 + 82 * MIN, 60 * MIN), 'stalled', '61 minutes old')
  assert.equal(deployments[0]?.deployer, 'dev1', 'the sender is the first event that names one')
})

test('a version that succeeded before but was not running is a rollback; the same version again is a redeploy', () => {
  const events = history([
    ['api', 'prod', '1.0', 'Deployed', 0],
    ['api', 'prod', '1.1', 'Deployed', 10],
    ['api', 'prod', '1.1', 'Deployed', 20], // redeploy
    ['api', 'prod', '1.0', 'Deploying', 30],
    ['api', 'prod', '1.0', 'Deployed', 31], // rollback of 1.1 (#3)
    ['api', 'staging', '1.1', 'Deployed', 40], // another environment: no rollback history there
    ['api', 'prod', '2.0', 'Failed', 50], // a failure changes nothing running
    ['api', 'prod', '1.0', 'Deployed', 60], // 1.0 was running: redeploy
  ])
  assert.deepEqual(deriveDeployments(events).map(brief), [
    '#1 api/prod 1.0 0→succeeded@0 [1] instant',
    '#2 api/prod 1.1 10→succeeded@10 [2] instant',
    '#3 api/prod 1.1 20→succeeded@20 [3] instant rolled-back',
    '#4 api/prod 1.0 30→succeeded@31 [4,5] rollback',
    '#6 api/staging 1.1 40→succeeded@40 [6] instant',
    '#7 api/prod 2.0 50→failed@50 [7] instant',
    '#8 api/prod 1.0 60→succeeded@60 [8] instant',
  ])
})

test('names are compared exactly; interleaved versions keep their own open deployments', () => {
  const events = history([
    ['api', 'prod', '1.0', 'Deploying', 0],
    ['API', 'prod', '1.0', 'Deployed', 1], // another service
    ['api', 'prod', '1.1', 'Deploying', 2],
    ['api', 'prod', '1.0', 'Failed', 3],
    ['api', 'prod', '1.1', 'Deployed', 4],
  ])
  assert.deepEqual(deriveDeployments(events).map(brief), [
    '#1 api/prod 1.0 0→failed@3 [1,4]',
    '#2 API/prod 1.0 1→succeeded@1 [2] instant',
    '#3 api/prod 1.1 2→succeeded@4 [3,5]',
  ])
})

test('what ran at a past instant, and the latest deployment as it stood then', () => {
  const deployments = deriveDeployments(
    history([
      ['api', 'prod', '1.0', 'Deployed', 0],
      ['api', 'prod', '1.1', 'Deploying', 10],
      ['api', 'prod', '1.1', 'Deployed', 20],
      ['api', 'prod', '1.2', 'Deploying', 30],
    ]),
  )
  assert.equal(runningAt(deployments, T0 - 1), null)
  assert.equal(runningAt(deployments, T0)?.version, '1.0', 'at the very instant it succeeded')
  assert.equal(runningAt(deployments, T0 + 15 * MIN)?.version, '1.0')
  assert.equal(runningAt(deployments, T0 + 20 * MIN)?.version, '1.1')
  const at15 = latestAt(deployments, T0 + 15 * MIN, 60 * MIN)
  assert.equal(at15?.deployment.version, '1.1')
  assert.equal(at15?.outcome, 'in_progress', 'it finished only later')
  assert.equal(latestAt(deployments, T0 + 100 * MIN, 60 * MIN)?.outcome, 'stalled')
})

test('what runs is the success that finished last in time, even when instances disagree on the clock', () => {
  // Event 3 arrives after event 2 but carries an earlier time (another instance's clock is behind):
  // 1.1 finished at minute 20, 1.0's redeploy at minute 15, so 1.1 runs, and 1.0 is no rollback.
  const deployments = deriveDeployments(
    history([
      ['api', 'prod', '1.0', 'Deployed', 0],
      ['api', 'prod', '1.1', 'Deployed', 20],
      ['api', 'prod', '1.0', 'Deployed', 15],
    ]),
  )
  assert.deepEqual(deployments.map(brief), [
    '#1 api/prod 1.0 0→succeeded@0 [1] instant',
    '#2 api/prod 1.1 20→succeeded@20 [2] instant',
    '#3 api/prod 1.0 15→succeeded@15 [3] instant',
  ])
  assert.equal(runningAt(deployments, T0 + 30 * MIN)?.id, 2)
  assert.equal(runningAt(deployments, T0 + 16 * MIN)?.id, 3, 'between the two, the earlier one ran')
  assert.equal(latestAt(deployments, T0 + 30 * MIN, 60 * MIN)?.deployment.id, 2, 'latest by start time')
})

test('spread: median of an even count is the mean of the middle two; p90 is the nearest rank', () => {
  assert.equal(spreadOf([]), null)
  assert.deepEqual(spreadOf([5]), { median: 5, p90: 5, count: 1 })
  assert.deepEqual(spreadOf([4, 1, 3, 2]), { median: 2.5, p90: 4, count: 4 })
  assert.deepEqual(spreadOf([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]), { median: 5.5, p90: 9, count: 10 })
  assert.deepEqual(spreadOf([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]), { median: 6, p90: 10, count: 11 })
})

test('every §6.2 metric of a known week, with what it counted', () => {
  const events = history([
    ['api', 'staging', '1.0', 'Deploying', 0],
    ['api', 'staging', '1.0', 'Deployed', 10],
    ['api', 'prod', '1.0', 'Deploying', 60],
    ['api', 'prod', '1.0', 'Deployed', 70], // #3: succeeded, 10 min, lead 70 min
    ['api', 'prod', '1.1', 'Deploying', 100],
    ['api', 'prod', '1.1', 'Failed', 130], // #5: failed, 30 min
    ['api', 'prod', '1.1', 'Deploying', 200],
    ['api', 'prod', '1.1', 'Deployed', 220], // #7: succeeded, restores #5 after 90 min, lead 120
    ['api', 'prod', '1.0', 'Deployed', 300], // #9: instant rollback, #7 rolled back, restored at once
    ['web', 'prod', '3', 'Deployed', 400], // #10: another service, instant
    ['api', 'prod', '1.2', 'Deploying', 500], // #11: still open: not counted
  ])
  const deployments = deriveDeployments(events)
  const window = { environment: 'prod', service: null, from: T0, to: T0 + 7 * DAY_MS }
  const m = computeMetrics(window, deployments, firstStartsOf(deployments))
  assert.deepEqual(
    m.succeeded.map((d) => d.id),
    [3, 7, 9, 10],
  )
  assert.deepEqual(
    m.failed.map((d) => d.id),
    [5],
  )
  assert.deepEqual(
    m.rolledBack.map((d) => d.id),
    [7],
  )
  assert.equal(m.days, 7)
  assert.equal(m.deploymentFrequencyPerDay, 4 / 7)
  assert.equal(m.changeFailureRate, 2 / 5)
  assert.deepEqual(m.timeToRestore.values, [
    { deploymentId: 5, valueMs: 90 * MIN, relatedId: 7 },
    { deploymentId: 7, valueMs: 80 * MIN, relatedId: 9 },
  ])
  assert.deepEqual(m.timeToRestore.spread, { median: 85 * MIN, p90: 90 * MIN, count: 2 })
  assert.deepEqual(
    m.duration.values.map((v) => [v.deploymentId, v.valueMs / MIN]),
    [
      [3, 10],
      [5, 30],
      [7, 20],
    ],
  )
  assert.deepEqual(m.duration.spread, { median: 20 * MIN, p90: 30 * MIN, count: 3 })
  assert.deepEqual(
    m.leadTime.values.map((v) => [v.deploymentId, v.valueMs / MIN, v.relatedId]),
    [
      [3, 70, 1],
      [7, 120, 5],
      [9, 300, 1],
      [10, 0, 10],
    ],
  )

  const apiOnly = computeMetrics({ ...window, service: 'api' }, deployments, firstStartsOf(deployments))
  assert.equal(apiOnly.succeeded.length, 3)
  assert.equal(apiOnly.changeFailureRate, 2 / 4)

  const empty = computeMetrics({ ...window, environment: 'qa' }, deployments, firstStartsOf(deployments))
  assert.equal(empty.changeFailureRate, null)
  assert.equal(empty.timeToRestore.spread, null)
  assert.equal(empty.deploymentFrequencyPerDay, 0)
})

test('an end received before its start (clocks of two instances disagree) has no duration, and no negative figure is counted', () => {
  const events = history([
    ['api', 'prod', '1.0', 'Deploying', 60],
    ['api', 'prod', '1.0', 'Deployed', 50], // #1: its end carries an earlier time than its start
    ['api', 'prod', '1.1', 'Deploying', 100],
    ['api', 'prod', '1.1', 'Failed', 130], // #3: failed after 30 min
    ['api', 'prod', '1.1', 'Deployed', 120], // #5: instant, restores #3 "10 min before" it failed
    ['api', 'staging', '2.0', 'Deploying', 300], // #6: the first start of 2.0
    ['api', 'prod', '2.0', 'Deployed', 290], // #7: in prod "10 min before" its first start
  ])
  const deployments = deriveDeployments(events)
  const byId = new Map(deployments.map((d) => [d.id, d]))
  const skewed = byId.get(1) as Deployment
  assert.equal(skewed.result, 'succeeded')
  assert.equal(clockSkewed(skewed), true)
  assert.equal(durationMs(skewed), null)
  for (const id of [3, 5, 6, 7]) assert.equal(clockSkewed(byId.get(id) as Deployment), false, `#${id}`)
  assert.equal(durationMs(byId.get(3) as Deployment), 30 * MIN)
  assert.equal(durationMs(byId.get(5) as Deployment), null, 'instant')

  const window = { environment: 'prod', service: null, from: T0, to: T0 + DAY_MS }
  const m = computeMetrics(window, deployments, firstStartsOf(deployments))
  assert.deepEqual(
    m.succeeded.map((d) => d.id),
    [1, 5, 7],
    'it still counts as a success',
  )
  assert.deepEqual(m.duration.values, [{ deploymentId: 3, valueMs: 30 * MIN, relatedId: null }])
  assert.deepEqual(
    m.duration.skewed.map((d) => d.id),
    [1],
  )
  assert.deepEqual(m.duration.spread, { median: 30 * MIN, p90: 30 * MIN, count: 1 })
  assert.deepEqual(m.timeToRestore.values, [], 'a restore 10 min before the failure is not a figure')
  assert.deepEqual(
    m.timeToRestore.skewed.map((d) => d.id),
    [3],
  )
  assert.deepEqual(m.timeToRestore.unrestored, [], 'it was restored all the same')
  assert.equal(m.timeToRestore.spread, null)
  assert.deepEqual(m.leadTime.values, [
    { deploymentId: 5, valueMs: 20 * MIN, relatedId: 3, from: 'first_deployment' },
  ])
  assert.deepEqual(
    m.leadTime.skewed.map((d) => d.id),
    [1, 7],
  )
  for (const figure of [m.duration, m.timeToRestore, m.leadTime]) {
    for (const v of figure.values) assert.ok(v.valueMs >= 0)
  }
})
