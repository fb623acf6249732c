// CSV and JSON downloads follow the contract format, neutralise formulas, honour filters and include every match.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { defaultChunkRows } from '../../src/domain/events/export/index.js'
import { buildTestApp, testDialect } from '../helper.js'
import {
  type Browser,
  insertEvents,
  parseCsv,
  type Response,
  SEED_EPOCH,
  userSession,
} from '../support/ui.js'

const HEADER =
  'id,received_at,service,environment,version,status,url,commit,description,deployer,source,api_key_name'
const KEYS = HEADER.split(',')

function assertDownload(res: Response, extension: 'csv' | 'json'): void {
  assert.equal(res.statusCode, 200)
  assert.match(
    String(res.headers['content-type']),
    extension === 'csv' ? /^text\/csv(;|$)/ : /^application\/json(;|$)/,
  )
  assert.match(
    String(res.headers['content-disposition']),
    new RegExp(`^attachment; filename="shiplog-events-[^"/\\\\]+\\.${extension}"$`),
  )
  assert.equal(res.headers['cache-control'], 'no-store')
}

async function exportBoth(browser: Browser, query = '') {
  const csv = await browser.get(`/logs/export.csv${query}`)
  const json = await browser.get(`/logs/export.json${query}`)
  assertDownload(csv, 'csv')
  assertDownload(json, 'json')
  return { csv, json, rows: parseCsv(csv.payload), objects: json.json() as Record<string, unknown>[] }
}

test('CSV: exact header, CRLF records, RFC 4180 quoting, formula cells prefixed; JSON: same keys, nulls', async (t) => {
  const ctx = await buildTestApp(t)
  const accountId = ctx.tenant.account.id
  const [plainId, trickyId, formulaId] = await insertEvents(ctx.database, accountId, [
    { service: 'api', environment: 'prod', version: '1-2', api_key_name: null, received_at: SEED_EPOCH },
    {
      service: 'web, "the" site',
      environment: 'prod',
      version: '2.0.0',
      status: 'Failed',
      url: 'https://ci.example/run?a=1,b=2',
      commit_sha: 'abc123',
      description: 'line one, with "quotes"\r\nline two\nline three',
      deployer: 'ada',
      source: 'put-get',
      received_at: SEED_EPOCH + 1234,
    },
    {
      service: '=SUM(A1:A9)',
      environment: '+prod',
      version: '-1',
      status: 'Deploying',
      commit_sha: '\rcarriage',
      description: '\ttabbed',
      deployer: '@ada',
      source: 'put-post',
      api_key_name: '=cmd|calc',
      received_at: SEED_EPOCH + 2000,
    },
  ])
  assert.ok(plainId !== undefined && trickyId !== undefined && formulaId !== undefined)
  const { browser } = await userSession(ctx, accountId, 'ada@example.com', 'member')
  const { csv, rows, objects } = await exportBoth(browser)

  assert.ok(csv.payload.startsWith(`${HEADER}\r\n`), 'header first, exactly, no byte-order mark')
  assert.ok(csv.payload.endsWith('\r\n'))
  assert.deepEqual(rows[0], KEYS)
  assert.equal(rows.length, 4)
  assert.deepEqual(rows[1], [
    String(formulaId),
    new Date(SEED_EPOCH + 2000).toISOString(),
    "'=SUM(A1:A9)",
    "'+prod",
    "'-1",
    'Deploying',
    '',
    "'\rcarriage",
    "'\ttabbed",
    "'@ada",
    'put-post',
    "'=cmd|calc",
  ])
  assert.deepEqual(rows[2], [
    String(trickyId),
    '2026-01-01T00:00:01.234Z',
    'web, "the" site',
    'prod',
    '2.0.0',
    'Failed',
    'https://ci.example/run?a=1,b=2',
    'abc123',
    'line one, with "quotes"\r\nline two\nline three',
    'ada',
    'put-get',
    'ci',
  ])
  assert.deepEqual(rows[3], [
    String(plainId),
    '2026-01-01T00:00:00.000Z',
    'api',
    'prod',
    '1-2',
    'Deployed',
    '',
    '',
    '',
    '',
    'deploy',
    '',
  ])
  // The quoting itself, as bytes: quotes doubled, the whole cell quoted.
  assert.ok(csv.payload.includes('"web, ""the"" site"'))
  assert.ok(csv.payload.includes('"line one, with ""quotes""\r\nline two\nline three"'))

  assert.ok(Array.isArray(objects))
  assert.equal(objects.length, 3)
  for (const o of objects) assert.deepEqual(Object.keys(o), KEYS, 'the CSV columns, in order')
  assert.deepEqual(objects[2], {
    id: plainId,
    received_at: '2026-01-01T00:00:00.000Z',
    service: 'api',
    environment: 'prod',
    version: '1-2',
    status: 'Deployed',
    url: null,
    commit: null,
    description: null,
    deployer: null,
    source: 'deploy',
    api_key_name: null,
  })
  // JSON carries values verbatim: the formula guard is for spreadsheets only.
  assert.equal(objects[0]?.service, '=SUM(A1:A9)')
  assert.equal(objects[1]?.description, 'line one, with "quotes"\r\nline two\nline three')
})

test('an account with no events downloads a header-only CSV and an empty JSON array', async (t) => {
  const ctx = await buildTestApp(t)
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'ada@example.com')
  const { csv, objects } = await exportBoth(browser)
  assert.equal(csv.payload, `${HEADER}\r\n`)
  assert.deepEqual(objects, [])
})

/** Rows per chunk of the download route on this test run's database (1000 SQLite, 10,000 PostgreSQL). */
const CHUNK_ROWS = defaultChunkRows(testDialect)

test('exports include ALL matching events across chunk boundaries of this database and honour the filters', async (t) => {
  const ctx = await buildTestApp(t)
  const accountId = ctx.tenant.account.id
  // Exactly two full chunks: the unfiltered download ends on a boundary (a last, empty read), and
  // the filtered one (about 88% of them) crosses one in the middle of a chunk.
  const total = 2 * CHUNK_ROWS
  const seeds = Array.from({ length: total }, (_, i) => ({
    service: i % 50 === 0 ? 'small' : 'big',
    status: i % 10 === 3 ? ('Failed' as const) : ('Deployed' as const),
    version: `x-${i}`,
  }))
  const ids = await insertEvents(ctx.database, accountId, seeds)
  const { browser } = await userSession(ctx, accountId, 'ada@example.com')

  const all = await exportBoth(browser)
  const csvIds = all.rows.slice(1).map((r) => Number(r[0]))
  assert.equal(csvIds.length, total)
  assert.deepEqual(csvIds, [...ids].reverse(), 'every event once, newest first')
  assert.deepEqual(
    all.objects.map((o) => o.id),
    [...ids].reverse(),
  )

  const wanted = seeds
    .map((s, i) => ({ ...s, id: ids[i] }))
    .filter((s) => s.service === 'big' && s.status === 'Deployed')
    .map((s) => s.id)
    .reverse()
  assert.ok(
    wanted.length > CHUNK_ROWS && wanted.length % CHUNK_ROWS !== 0,
    `the filtered set (${wanted.length}) crosses a ${CHUNK_ROWS}-row chunk boundary mid-chunk`,
  )
  const filtered = await exportBoth(browser, '?service=big&status=deployed')
  assert.deepEqual(
    filtered.rows.slice(1).map((r) => Number(r[0])),
    wanted,
  )
  assert.deepEqual(
    filtered.objects.map((o) => o.id),
    wanted,
  )
  for (const o of filtered.objects) {
    assert.equal(o.service, 'big')
    assert.equal(o.status, 'Deployed')
  }

  const few = await exportBoth(browser, '?service=small&version=X-1')
  const expectedFew = seeds
    .map((s, i) => ({ ...s, id: ids[i] }))
    .filter((s) => s.service === 'small' && s.version.includes('x-1'))
    .map((s) => s.id)
    .reverse()
  assert.deepEqual(
    few.objects.map((o) => o.id),
    expectedFew,
  )
})
