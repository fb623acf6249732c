// `shiplog import` (issue 28.3): CSV in the export's columns and NDJSON, checked whole before anything
// is stored, idempotent on re-run, an export read back, and deployments derived at the events' times.
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { gzipSync } from 'node:zlib'
import { CSV_HEADER, eventToCsvLine } from '../../src/domain/events/export/format.js'
import { createApiKey } from '../../src/domain/keys.js'
import { buildTestApp, type Cleanup, type TestApp } from '../helper.js'
import { processEnv, runCli } from '../support/processes.js'

const MIN = 60_000
const DAY = 24 * 60 * MIN

function dir(t: Cleanup): string {
  const path = mkdtempSync(join(tmpdir(), 'shiplog-import-'))
  t.after(() => rmSync(path, { recursive: true, force: true }))
  return path
}

async function setUp(t: Cleanup): Promise<{ ctx: TestApp; url: string; tmp: string }> {
  const { freshDatabaseUrl } = await import('../helper.js')
  const url = await freshDatabaseUrl(t)
  const ctx = await buildTestApp(t, { databaseUrl: url })
  return { ctx, url, tmp: dir(t) }
}

const importCli = (t: Cleanup, url: string, ...args: string[]) =>
  runCli(t, ['import', ...args], { env: processEnv(url) })

async function rows(ctx: TestApp, accountId = ctx.tenant.account.id) {
  return ctx.database.db
    .selectFrom('events')
    .selectAll()
    .where('account_id', '=', accountId)
    .orderBy('id')
    .execute()
}

test('CSV in the export columns plus occurred_at and commit_time: stored with their times; the same file again stores nothing', async (t) => {
  const { ctx, url, tmp } = await setUp(t)
  const now = Date.now()
  const at = (ms: number) => new Date(ms).toISOString()
  const t0 = now - 40 * DAY
  const csv = [
    'id,received_at,service,environment,version,status,url,commit,description,deployer,source,api_key_name,occurred_at,commit_time',
    `1,${at(now)},api,prod,1.0,Deploying,,abc,,ann,deploy,old-ci,${at(t0)},${at(t0 - 3 * 60 * MIN)}`,
    `2,${at(now)},api,prod,1.0,Deployed,https://ci.example/1,abc,"a, ""quoted"" note",ann,put-get,,${at(t0 + 10 * MIN)},`,
    // No occurred_at: the file's received_at is the event's time; a formula-guarded cell read back.
    `3,${at(t0 + DAY)},web,prod,2.0,Failed,,,'=cmd|x,,,,,`,
  ].join('\r\n')
  const file = join(tmp, 'history.csv')
  writeFileSync(file, `${csv}\r\n`)
  const first = await importCli(t, url, file, '--account', 'Acme')
  assert.equal(first.code, 0, first.stderr)
  assert.match(first.stdout, /^imported 3 events into Acme \(0 already there\) from 3 rows/)
  const stored = await rows(ctx)
  assert.deepEqual(
    stored.map((r) => [
      r.service,
      r.version,
      r.status,
      Number(r.occurred_at),
      r.commit_time === null ? null : Number(r.commit_time),
    ]),
    [
      ['api', '1.0', 'Deploying', t0, t0 - 3 * 60 * MIN],
      ['api', '1.0', 'Deployed', t0 + 10 * MIN, null],
      ['web', '2.0', 'Failed', t0 + DAY, null],
    ],
  )
  assert.equal(stored[1]?.description, 'a, "quoted" note')
  assert.equal(stored[1]?.source, 'put-get')
  assert.equal(stored[0]?.api_key_name, 'old-ci')
  assert.equal(stored[0]?.api_key_id, null)
  assert.equal(stored[2]?.description, '=cmd|x')
  for (const r of stored) assert.ok(Number(r.received_at) >= now, 'received_at is the import, not the file')

  const again = await importCli(t, url, file, '--account', 'Acme')
  assert.equal(again.code, 0, again.stderr)
  assert.match(again.stdout, /^imported 0 events into Acme \(3 already there\)/)
  assert.equal((await rows(ctx)).length, 3)

  // Deployments are derived at the events' times: one 40 days ago with a 10-minute duration.
  const { key } = await createApiKey(ctx.database.db, {
    accountId: ctx.tenant.account.id,
    name: 'reader',
    createdBy: 'test',
    scopes: ['read'],
  })
  const res = await ctx.app.inject({
    method: 'GET',
    url: '/api/v1/deployments?service=api',
    headers: { 'x-api-key': key },
  })
  assert.equal(res.statusCode, 200, res.body)
  const [deployment] = res.json().deployments
  assert.equal(deployment.started_at, at(t0))
  assert.equal(deployment.duration_ms, 10 * MIN)
})

test('NDJSON (gzip) with bad rows: every bad row named with its line, nothing stored; fixed, it imports', async (t) => {
  const { ctx, url, tmp } = await setUp(t)
  const now = Date.now()
  const good = (version: string, minutes: number) =>
    JSON.stringify({
      service: 'api',
      environment: 'prod',
      version,
      status: 'Deployed',
      occurred_at: new Date(now - minutes * MIN).toISOString(),
    })
  const lines = [
    good('1.0', 300),
    JSON.stringify({
      service: 'api',
      environment: 'prod',
      version: '1.1',
      status: 'Shipped',
      occurred_at: '2026-01-01T00:00:00Z',
    }),
    good('1.2', 200),
    JSON.stringify({
      service: 'api',
      environment: 'prod',
      version: '1.3',
      status: 'Deployed',
      occurred_at: new Date(now + DAY).toISOString(),
    }),
    '{not json',
    JSON.stringify({ service: 'api', environment: 'prod', version: '1.4', status: 'Deployed' }),
  ]
  const bad = join(tmp, 'bad.ndjson.gz')
  writeFileSync(bad, gzipSync(`${lines.join('\n')}\n`))
  const refused = await importCli(t, url, bad, '--account', 'Acme')
  assert.equal(refused.code, 1)
  assert.match(refused.stderr, /bad\.ndjson\.gz:2: status /)
  assert.match(refused.stderr, /bad\.ndjson\.gz:4: occurred_at must not be more than 5 minutes in the future/)
  assert.match(refused.stderr, /bad\.ndjson\.gz:5: not JSON/)
  assert.match(refused.stderr, /bad\.ndjson\.gz:6: occurred_at \(or received_at\) is required/)
  assert.match(refused.stderr, /4 of 6 rows are bad; nothing was imported/)
  assert.equal(await ctx.eventCount(), 0)

  const fixed = join(tmp, 'fixed.jsonl.gz')
  writeFileSync(fixed, gzipSync(`${[good('1.0', 300), good('1.2', 200)].join('\n')}\n`))
  const ok = await importCli(t, url, fixed, '--account', 'Acme')
  assert.equal(ok.code, 0, ok.stderr)
  assert.match(ok.stdout, /^imported 2 events/)
  const unknown = await importCli(t, url, fixed, '--account', 'Nobody')
  assert.equal(unknown.code, 1)
  assert.match(unknown.stderr, /no account named "Nobody"/)
})

test('an export read back: into its own account nothing new; into another, every event with its time', async (t) => {
  const { ctx, url, tmp } = await setUp(t)
  for (const [version, status] of [
    ['1.0', 'Deploying'],
    ['1.0', 'Deployed'],
    ['1.1', 'Deployed'],
  ]) {
    const res = await ctx.app.inject({
      method: 'POST',
      url: '/deploy',
      headers: { 'x-api-key': ctx.tenant.key, 'content-type': 'application/json' },
      payload: JSON.stringify({
        service: 'api',
        environment: 'prod',
        version,
        status,
        description: '-1 = x',
      }),
    })
    assert.equal(res.statusCode, 201, res.body)
  }
  const original = await rows(ctx)
  // The export's own bytes (src/domain/events/export/format.ts), as /logs/ downloads them.
  const file = join(tmp, 'export.csv')
  writeFileSync(file, CSV_HEADER + original.map((r) => eventToCsvLine(r)).join(''))
  const same = await importCli(t, url, file, '--account', 'Acme')
  assert.equal(same.code, 0, same.stderr)
  assert.match(same.stdout, /^imported 0 events into Acme \(3 already there\)/)

  const other = await ctx.addTenant('Other')
  const moved = await importCli(t, url, file, '--account', 'Other')
  assert.equal(moved.code, 0, moved.stderr)
  assert.match(moved.stdout, /^imported 3 events into Other/)
  const copies = await rows(ctx, other.account.id)
  assert.deepEqual(
    copies.map((r) => [r.version, r.status, r.description, Number(r.occurred_at), r.api_key_name, r.source]),
    original.map((r) => [r.version, r.status, '-1 = x', Number(r.received_at), 'ci', 'deploy']),
  )
})
