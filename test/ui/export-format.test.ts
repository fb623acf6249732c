// The streamed exports are byte for byte what the plain formatters write, for any value and chunking.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { EventRow, EventSource, EventStatus } from '../../src/db/schema.js'
import {
  CSV_HEADER,
  type ExportFormat,
  eventToCsvLine,
  eventToJson,
  exportEvents,
} from '../../src/domain/events/export/index.js'
import type { EventFilter } from '../../src/domain/events/queries.js'
import { buildTestApp, type TestApp } from '../helper.js'
import { type EventSeed, insertEvents, SEED_EPOCH, userSession } from '../support/ui.js'

/** Everything a cell can hold that CSV, the formula guard or JSON treat specially. */
const CONTROL = Array.from({ length: 0x1f }, (_, i) => String.fromCharCode(i + 1))
const HOSTILE = [
  ...CONTROL.map((c) => `a${c}b`),
  ...CONTROL.map((c) => `${c}lead`),
  '"',
  '""',
  '"quoted"',
  'a"b',
  ',',
  ',,,',
  'a,b',
  'x,',
  ',x',
  "'",
  "'=already",
  '\\',
  '\\.',
  'back\\slash"quote',
  '=1+1',
  '=',
  '+1',
  '-1',
  '-',
  '@ada',
  '\ttab',
  '\rcr',
  '\ncr',
  '\r\nboth',
  'end\r',
  'end\n',
  'a"b,c\r\nd',
  ' spaced ',
  'é',
  'ÄÖÜ straße',
  '日本語のバージョン',
  '😀 emoji',
  '\u2028\u2029',
  '\ufeffbom',
  '\u007fdel',
  '</script><script>alert(1)</script>',
  '{"json":true}',
  'null',
  '1e3',
  '',
]

const STATUSES: EventStatus[] = ['Deployed', 'Deploying', 'Failed']
const SOURCES: EventSource[] = ['deploy', 'put-get', 'put-post']

/** Times that stress the ISO formatting: both sides of the epoch, day and year ends, odd milliseconds. */
const TIMES = [
  0,
  -1,
  1,
  999,
  1000,
  86_399_999,
  86_400_000,
  -86_400_000,
  Date.UTC(1900, 0, 1, 0, 0, 0, 1),
  Date.UTC(1999, 11, 31, 23, 59, 59, 999),
  Date.UTC(2000, 1, 29, 12, 0, 0, 7),
  Date.UTC(2100, 5, 30, 1, 2, 3, 45),
  Date.UTC(9999, 11, 31, 23, 59, 59, 999),
]

/** Rows that put every hostile value in every text column, nulls in between. */
function hostileSeeds(): EventSeed[] {
  const pick = (i: number, shift: number) => HOSTILE[(i * 7 + shift) % HOSTILE.length] ?? ''
  return HOSTILE.map((_, i) => ({
    service: pick(i, 0),
    environment: pick(i, 1),
    version: pick(i, 2),
    status: STATUSES[i % 3],
    url: i % 5 === 0 ? null : pick(i, 3),
    commit_sha: i % 6 === 0 ? null : pick(i, 4),
    description: i % 4 === 0 ? null : pick(i, 5),
    deployer: i % 7 === 0 ? null : pick(i, 6),
    source: SOURCES[i % 3],
    api_key_name: i % 8 === 0 ? null : pick(i, 8),
    received_at: TIMES[i % TIMES.length] ?? 0,
  }))
}

async function download(
  ctx: TestApp,
  filter: EventFilter,
  format: ExportFormat,
  chunkRows?: number,
): Promise<string> {
  const parts: Buffer[] = []
  const chunks = exportEvents(ctx.database, ctx.tenant.account.id, filter, format, { chunkRows })
  for await (const chunk of chunks) parts.push(chunk)
  return Buffer.concat(parts).toString('utf8')
}

/** The download as the plain formatters write it, for these rows in this order. */
function expected(rows: EventRow[], format: ExportFormat): string {
  if (format === 'csv') return CSV_HEADER + rows.map(eventToCsvLine).join('')
  return rows.length === 0 ? '[]\n' : `[\n${rows.map(eventToJson).join(',\n')}\n]\n`
}

async function allRows(ctx: TestApp, byTime: boolean): Promise<EventRow[]> {
  let q = ctx.database.db.selectFrom('events').selectAll().where('account_id', '=', ctx.tenant.account.id)
  q = byTime ? q.orderBy('received_at', 'desc').orderBy('id', 'desc') : q.orderBy('id', 'desc')
  return q.execute()
}

test('CSV and JSON exports are byte for byte the plain formatters, for hostile values and odd times', async (t) => {
  const ctx = await buildTestApp(t)
  await insertEvents(ctx.database, ctx.tenant.account.id, hostileSeeds())
  const rows = await allRows(ctx, false)
  assert.equal(rows.length, HOSTILE.length)
  for (const format of ['csv', 'json'] as const) {
    const want = expected(rows, format)
    // One chunk, one row a chunk, and a size that leaves a short last chunk.
    for (const chunkRows of [undefined, 1, 7]) {
      assert.equal(await download(ctx, {}, format, chunkRows), want, `${format}, chunks of ${chunkRows}`)
    }
    // Every record parses back to the values stored.
    if (format === 'json') {
      const parsed = JSON.parse(want) as Record<string, unknown>[]
      assert.deepEqual(
        parsed.map((o) => o.description),
        rows.map((r) => r.description),
      )
    }
  }
})

test('chunked exports resume exactly after each chunk, by id and by time (ties included), with filters', async (t) => {
  const ctx = await buildTestApp(t)
  // 60 events; times collide in pairs and run backwards against ids in places, so the (time, id)
  // keyset has to break ties by id.
  const seeds: EventSeed[] = Array.from({ length: 60 }, (_, i) => ({
    service: i % 3 === 0 ? 'api' : 'web',
    version: `v${i % 10}.${i}`,
    description: i % 4 === 0 ? 'with, a comma' : null,
    received_at: SEED_EPOCH + Math.floor(((i * 37) % 60) / 2) * 1000,
  }))
  // Another account's events, interleaved with these: never exported.
  const other = await ctx.addTenant('Other Co')
  for (let i = 0; i < seeds.length; i += 10) {
    await insertEvents(ctx.database, other.account.id, [
      { version: 'v3.other', received_at: SEED_EPOCH + 5000 },
    ])
    await insertEvents(ctx.database, ctx.tenant.account.id, seeds.slice(i, i + 10))
  }
  const byId = await allRows(ctx, false)
  const byTime = await allRows(ctx, true)
  const window = { from: SEED_EPOCH + 3000, to: SEED_EPOCH + 25_000 }
  const cases: [EventFilter, EventRow[]][] = [
    [{}, byId],
    [{ service: 'api' }, byId.filter((r) => r.service === 'api')],
    [window, byTime.filter((r) => r.received_at >= window.from && r.received_at <= window.to)],
    [
      { ...window, version: 'V3' },
      byTime.filter(
        (r) => r.received_at >= window.from && r.received_at <= window.to && r.version.includes('v3'),
      ),
    ],
    [{ version: '.1' }, byId.filter((r) => r.version.includes('.1'))],
    [{ service: 'nobody' }, []],
  ]
  for (const [filter, rows] of cases) {
    for (const format of ['csv', 'json'] as const) {
      for (const chunkRows of [1, 2, 5, 13]) {
        assert.equal(
          await download(ctx, filter, format, chunkRows),
          expected(rows, format),
          `${format} ${JSON.stringify(filter)} in chunks of ${chunkRows}`,
        )
      }
    }
  }
})

test('an export through the HTTP route streams the same bytes', async (t) => {
  const ctx = await buildTestApp(t)
  await insertEvents(ctx.database, ctx.tenant.account.id, hostileSeeds())
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'ada@example.com', 'member')
  const rows = await allRows(ctx, false)
  for (const format of ['csv', 'json'] as const) {
    const res = await browser.get(`/logs/export.${format}`)
    assert.equal(res.statusCode, 200)
    assert.equal(res.payload, expected(rows, format))
  }
})
