// The streamed exports are byte for byte SPEC §3.1 and RFC 4180, as an encoder of this test's own writes them, for any values.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { parse as parseCsvStrictly } from 'csv-parse/sync'
import fc from 'fast-check'
import type { EventRow, EventSource, EventStatus } from '../../src/db/schema.js'
import {
  CSV_HEADER,
  csvCell,
  type ExportFormat,
  eventToCsvLine,
  eventToJson,
  exportEvents,
} from '../../src/domain/events/export/index.js'
import type { EventFilter } from '../../src/domain/events/logs-query.js'
import { buildTestApp, type TestApp } from '../helper.js'
import { assertNoFormulaInAnyLocale } from '../support/csv-locale.js'
import { type EventSeed, insertEvents, SEED_EPOCH, userSession } from '../support/ui.js'

// ---------------------------------------------------------------------------------------------
// The contract, written here from SPEC §3.1 and RFC 4180 without the module under test.

/** SPEC §3.1: the header, in this order. */
const SPEC_COLUMNS = [
  'id',
  'received_at',
  'service',
  'environment',
  'version',
  'status',
  'url',
  'commit',
  'description',
  'deployer',
  'source',
  'api_key_name',
] as const

type SpecRecord = Record<(typeof SPEC_COLUMNS)[number], string | number | null>

/** A stored row as the export's record: the stored column commit_sha is the key "commit". */
function specRecord(row: EventRow): SpecRecord {
  return {
    id: row.id,
    received_at: new Date(row.received_at).toISOString(),
    service: row.service,
    environment: row.environment,
    version: row.version,
    status: row.status,
    url: row.url,
    commit: row.commit_sha,
    description: row.description,
    deployer: row.deployer,
    source: row.source,
    api_key_name: row.api_key_name,
  }
}

/** SPEC §3.1: a cell beginning with = + - @ tab or CR gets a leading '. */
function specGuarded(value: string | number | null): string {
  const text = value === null ? '' : String(value)
  const first = text.charAt(0)
  return first === '=' || first === '+' || first === '-' || first === '@' || first === '\t' || first === '\r'
    ? `'${text}`
    : text
}

/**
 * RFC 4180 §2.6–2.7 and OWASP's advice on CSV injection (issue 25): every text field is quoted, its
 * quotes doubled, so that no separator of any locale (`,`, `;`, tab) in a value splits its cell; an
 * absent value is the quoted empty text. The id, an integer, stays bare.
 */
function quotedField(text: string): string {
  return `"${text.replaceAll('"', '""')}"`
}

function specCell(column: (typeof SPEC_COLUMNS)[number], value: string | number | null): string {
  if (column === 'id') return String(value)
  return quotedField(specGuarded(value))
}

function specCsv(rows: EventRow[]): string {
  // RFC 4180 §2.1: every record, the last one too, ends with CRLF. The header is bare.
  const line = (cells: string[]) => `${cells.join(',')}\r\n`
  return (
    line([...SPEC_COLUMNS]) +
    rows
      .map((row) => {
        const record = specRecord(row)
        return line(SPEC_COLUMNS.map((column) => specCell(column, record[column])))
      })
      .join('')
  )
}

/** One array; this service writes one object a line (the layout is its choice, kept stable). */
function specJson(rows: EventRow[]): string {
  if (rows.length === 0) return '[]\n'
  return `[\n${rows.map((row) => JSON.stringify(specRecord(row))).join(',\n')}\n]\n`
}

function specExport(rows: EventRow[], format: ExportFormat): string {
  return format === 'csv' ? specCsv(rows) : specJson(rows)
}

/**
 * Reads the CSV back with csv-parse, strictly (quotes only around whole fields, every record of
 * the header's length), and checks each cell is the stored value with the formula guard.
 */
function assertCellsAreValues(csv: string, rows: EventRow[]): void {
  const records = parseCsvStrictly(csv, { record_delimiter: '\r\n', bom: false }) as string[][]
  assert.deepEqual(records[0], [...SPEC_COLUMNS])
  assert.equal(records.length, rows.length + 1)
  rows.forEach((row, i) => {
    const record = specRecord(row)
    assert.deepEqual(
      records[i + 1],
      SPEC_COLUMNS.map((column) => specGuarded(record[column])),
      `record ${i + 1}`,
    )
  })
  assertNoFormulaInAnyLocale(csv)
}

// ---------------------------------------------------------------------------------------------
// Values

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
  "x;=cmd|' /C calc'!A0",
  'a;-1',
  ';+x',
  'a|@x',
  'tab\t=1',
  'null',
  '1e3',
  // Joined by SQLite's export query, a value like this would read as a record of its own.
  `x\u001e7${'\u001f0'.repeat(11)}`,
  '',
]

const STATUSES: EventStatus[] = ['Deployed', 'Deploying', 'Failed']
const SOURCES: EventSource[] = ['deploy', 'put-get', 'put-post']

/**
 * Times that stress the ISO formatting: both sides of the epoch, day and year ends, odd
 * milliseconds, and years outside 0000–9999, whose ISO form starts with - or +.
 */
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
  Date.UTC(9999, 11, 31, 23, 59, 59, 999) + 1,
  -62_167_219_200_000,
  -62_167_219_200_001,
  8_640_000_000_000_000,
  -8_640_000_000_000_000,
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

async function allRows(ctx: TestApp, byTime: boolean): Promise<EventRow[]> {
  let q = ctx.database.db.selectFrom('events').selectAll().where('account_id', '=', ctx.tenant.account.id)
  q = byTime ? q.orderBy('received_at', 'desc').orderBy('id', 'desc') : q.orderBy('id', 'desc')
  return q.execute()
}

// ---------------------------------------------------------------------------------------------
// Fixed cases

test('CSV and JSON exports are byte for byte the contract, for hostile values and odd times', async (t) => {
  const ctx = await buildTestApp(t)
  await insertEvents(ctx.database, ctx.tenant.account.id, hostileSeeds())
  const rows = await allRows(ctx, false)
  assert.equal(rows.length, HOSTILE.length)
  for (const format of ['csv', 'json'] as const) {
    const want = specExport(rows, format)
    // One chunk, one row a chunk, and a size that leaves a short last chunk.
    for (const chunkRows of [undefined, 1, 7]) {
      assert.equal(await download(ctx, {}, format, chunkRows), want, `${format}, chunks of ${chunkRows}`)
    }
    if (format === 'csv') assertCellsAreValues(want, rows)
    else assert.deepEqual(JSON.parse(want), rows.map(specRecord))
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
          specExport(rows, format),
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
    assert.equal(res.payload, specExport(rows, format))
  }
})

// ---------------------------------------------------------------------------------------------
// Properties

/**
 * Text for one field: pieces the CSV and JSON rules look at (quotes, commas, line breaks, formula
 * starts, backslashes, control characters) mixed with plain text and any code point. NUL is left
 * out: PostgreSQL text cannot hold it, and ingest refuses it like every control character.
 */
const fieldText = fc
  .array(
    fc.oneof(
      {
        weight: 4,
        arbitrary: fc.constantFrom('"', '""', ',', ';', '|', '\r', '\n', '\r\n', '=', '+', '-', '@', '\t'),
      },
      {
        weight: 2,
        arbitrary: fc.constantFrom(
          "'",
          '\\',
          '\u0001',
          '\u001f',
          '\u007f',
          '\u2028',
          'é',
          '😀',
          '=SUM(',
          ')',
        ),
      },
      { weight: 3, arbitrary: fc.constantFrom('a', 'b', 'x y', '1', '2.0', 'prod') },
      { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 3 }) },
    ),
    { maxLength: 6 },
  )
  .map((parts) => parts.join(''))
  .filter((text) => text.isWellFormed() && !text.includes('\0'))

const optionalText = fc.option(fieldText, { nil: null, freq: 4 })

/** One row whose every text field may hold hostile text at once, so cells can try to combine. */
const hostileSeed: fc.Arbitrary<EventSeed> = fc.record({
  service: fieldText,
  environment: fieldText,
  version: fieldText,
  status: fc.constantFrom(...STATUSES),
  url: optionalText,
  commit_sha: optionalText,
  description: optionalText,
  deployer: optionalText,
  // The column has no CHECK (ingest sets it): the export must escape whatever it holds.
  source: fc.oneof(
    fc.constantFrom(...SOURCES),
    fieldText.map((text) => text as EventSource),
  ),
  api_key_name: optionalText,
  received_at: fc.oneof(
    { weight: 4, arbitrary: fc.integer({ min: SEED_EPOCH - 86_400_000, max: SEED_EPOCH + 86_400_000 }) },
    { weight: 1, arbitrary: fc.integer({ min: -8_640_000_000_000_000, max: 8_640_000_000_000_000 }) },
  ),
})

test('property: any rows, hostile in several cells at once, export byte for byte as the contract says (CSV and JSON, any chunking)', async (t) => {
  const ctx = await buildTestApp(t)
  const accountId = ctx.tenant.account.id
  await fc.assert(
    fc.asyncProperty(
      fc.array(hostileSeed, { minLength: 1, maxLength: 6 }),
      fc.constantFrom(undefined, 1, 2, 3),
      async (seeds, chunkRows) => {
        await ctx.database.db.deleteFrom('events').where('account_id', '=', accountId).execute()
        await insertEvents(ctx.database, accountId, seeds)
        const rows = await allRows(ctx, false)
        const csv = await download(ctx, {}, 'csv', chunkRows)
        assert.equal(csv, specCsv(rows))
        assertCellsAreValues(csv, rows)
        const json = await download(ctx, {}, 'json', chunkRows)
        assert.equal(json, specJson(rows))
        assert.deepEqual(JSON.parse(json), rows.map(specRecord))
      },
    ),
    { numRuns: 150 },
  )
})

test("property: the module's own plain encoder (csvCell, the header, eventToCsvLine, eventToJson) is the contract", () => {
  assert.equal(CSV_HEADER, specCsv([]))
  fc.assert(
    fc.property(fieldText, (text) => {
      assert.equal(csvCell(text), quotedField(specGuarded(text)))
    }),
    { numRuns: 1000 },
  )
  fc.assert(
    fc.property(hostileSeed, fc.integer({ min: 1, max: 2 ** 40 }), (seed, id) => {
      const row: EventRow = {
        id,
        account_id: 1,
        service: seed.service ?? '',
        environment: seed.environment ?? '',
        version: seed.version ?? '',
        status: seed.status ?? 'Deployed',
        url: seed.url ?? null,
        commit_sha: seed.commit_sha ?? null,
        description: seed.description ?? null,
        deployer: seed.deployer ?? null,
        source: seed.source ?? 'deploy',
        api_key_id: null,
        api_key_name: seed.api_key_name ?? null,
        received_at: seed.received_at ?? 0,
        occurred_at: seed.received_at ?? 0,
        commit_time: null,
        guardrails: null,
        override_reason: null,
      }
      assert.equal(eventToCsvLine(row), specCsv([row]).slice(CSV_HEADER.length))
      assert.equal(eventToJson(row), JSON.stringify(specRecord(row)))
    }),
    { numRuns: 1000 },
  )
})
