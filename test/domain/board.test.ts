// The board's rows as pure functions: drift (behind, ahead, skipping empty environments), alerts,
// filters, and which `at` texts are instants.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { BoardCell } from '../../src/domain/board/cells.js'
import { boardRows } from '../../src/domain/board/rows.js'
import type { Deployment } from '../../src/domain/deployments/rules.js'

let nextId = 1
function done(service: string, environment: string, version: string, finishEventId: number): Deployment {
  const id = nextId++
  return {
    id,
    service,
    environment,
    version,
    startedAt: finishEventId * 1000,
    finishedAt: finishEventId * 1000,
    result: 'succeeded',
    instant: true,
    finishEventId,
    rollback: false,
    rolledBack: false,
    deployer: null,
    apiKeyName: 'ci',
    commitTime: null,
    eventIds: [id],
  }
}

function cell(d: Deployment): BoardCell {
  return {
    service: d.service,
    environment: d.environment,
    running: d,
    latest: { deployment: d, outcome: 'succeeded' },
  }
}

test('drift: behind when the earlier environment got its version later, ahead otherwise', () => {
  const cells: BoardCell[] = [
    cell(done('api', 'dev', '2.0', 30)),
    // qa has nothing running (its first deployment is in progress): skipped over.
    {
      service: 'api',
      environment: 'qa',
      running: null,
      latest: {
        deployment: { ...done('api', 'qa', '2.0', 31), result: null, finishedAt: null },
        outcome: 'in_progress',
      },
    },
    cell(done('api', 'staging', '1.0', 10)),
    cell(done('api', 'prod', '1.1', 40)),
    cell(done('web', 'dev', '1.0', 5)),
    cell(done('web', 'prod', '1.0', 6)),
  ]
  const rows = boardRows(cells, ['dev', 'qa', 'staging', 'prod'], new Map([['web', 'Front']]))
  const api = rows.find((r) => r.service === 'api')
  assert.deepEqual(
    api?.entries.map((e) => e?.drift ?? null),
    [
      null,
      null,
      { environment: 'dev', version: '2.0', kind: 'behind' },
      { environment: 'staging', version: '1.0', kind: 'ahead' },
    ],
  )
  assert.deepEqual(api?.entries[1]?.alert, { outcome: 'in_progress', version: '2.0', startedAt: 31_000 })
  assert.equal(api?.entries[1]?.version, null)
  const web = rows.find((r) => r.service === 'web')
  assert.deepEqual(
    web?.entries.map((e) => e?.drift ?? null),
    [null, null, null, null],
  )
  assert.equal(web?.team, 'Front')
  assert.equal(web?.entries[1], null)
  // Filters: team exactly, name case-insensitively.
  assert.deepEqual(
    boardRows(cells, ['dev', 'prod'], new Map([['web', 'Front']]), { team: 'Front' }).map((r) => r.service),
    ['web'],
  )
  assert.deepEqual(
    boardRows(cells, ['dev', 'prod'], new Map(), { name: 'AP' }).map((r) => r.service),
    ['api'],
  )
  // A service seen only in environments not shown is left out.
  assert.deepEqual(
    boardRows(cells, ['eu'], new Map()).map((r) => r.service),
    [],
  )
})
