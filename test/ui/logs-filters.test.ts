// The /logs/ filters and the exports' query strings: bad parameters refused with 422 naming each (never a
// 5xx, never an outage), names matched ignoring case by one rule on both databases, every known name
// suggested, From and To read in the viewer's zone across daylight-saving changes.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import fc from 'fast-check'
import { sql } from 'kysely'
import type { EventStatus } from '../../src/db/schema.js'
import { isDatabaseUnavailable, isQueryError } from '../../src/domain/database-errors.js'
import { parseLogsQuery } from '../../src/domain/events/logs-query.js'
import { zonedToInstant } from '../../src/domain/time-zones.js'
import { buildTestApp, testDialect } from '../helper.js'
import {
  insertEvents,
  linkHref,
  parseCsv,
  type Response,
  SEED_EPOCH,
  sharedFixture,
  shownVersions,
  userSession,
} from '../support/ui.js'

const seeded = sharedFixture(async (cleanup) => {
  const ctx = await buildTestApp(cleanup)
  await insertEvents(ctx.database, ctx.tenant.account.id, [
    { service: 'api', environment: 'prod', version: 'a-1' },
    { service: 'web', environment: 'staging', version: 'w-1' },
  ])
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'ada@example.com', 'member')
  return { ctx, browser }
})

interface Problem {
  type: string
  status: number
  errors: { field: string; message: string }[]
}

/** The page answer to a refused filter: 422, every bad parameter named, nothing listed or offered. */
function assertRefusedPage(res: Response, fields: string[], url: string): void {
  assert.equal(res.statusCode, 422, `${url}: status`)
  assert.match(String(res.headers['content-type']), /^text\/html/, url)
  const box = /<div class="error-box" role="alert"[^>]*>([\s\S]*?)<\/div>/.exec(res.payload)?.[1] ?? ''
  for (const field of fields) assert.match(box, new RegExp(`<li>${field} `), `${url}: names ${field}`)
  assert.deepEqual(shownVersions(res.payload), [], `${url}: no event listed`)
  assert.doesNotMatch(res.payload, /<table/, `${url}: no table`)
  assert.doesNotMatch(res.payload, /Events matching|All events/, `${url}: no listing heading`)
  assert.equal(linkHref(res.payload, 'Download CSV'), undefined, `${url}: no download offered`)
}

function assertRefusedExport(res: Response, fields: string[], url: string): void {
  assert.equal(res.statusCode, 422, `${url}: status`)
  assert.match(String(res.headers['content-type']), /^application\/problem\+json/, url)
  const problem = res.json() as Problem
  assert.equal(problem.type, 'urn:shiplog:problem:invalid-filter')
  assert.deepEqual([...new Set(problem.errors.map((e) => e.field))].sort(), [...fields].sort(), url)
}

const REFUSED: { query: string; fields: string[] }[] = [
  // The review's reproductions: an FTS5 syntax error on SQLite, a NUL byte on PostgreSQL.
  { query: 'version=ab%00cd', fields: ['version'] },
  { query: 'service=%00', fields: ['service'] },
  { query: 'environment=a%1Fb', fields: ['environment'] },
  { query: 'version=%7F', fields: ['version'] },
  { query: 'status=%00', fields: ['status'] },
  { query: 'from=2026-01-01%00', fields: ['from'] },
  { query: 'tz=Europe%2FBerlin%00', fields: ['tz'] },
  { query: `service=${'x'.repeat(101)}`, fields: ['service'] },
  { query: `environment=${'é'.repeat(101)}`, fields: ['environment'] },
  { query: `version=${'v'.repeat(201)}`, fields: ['version'] },
  { query: 'service=a&service=b', fields: ['service'] },
  { query: 'status=Deployed&status=Failed', fields: ['status'] },
  { query: 'status=Exploded', fields: ['status'] },
  { query: 'from=yesterday', fields: ['from'] },
  { query: 'to=2026-02-30T10:00', fields: ['to'] },
  { query: 'from=2026-02-01&to=2026-01-01', fields: ['to'] },
  { query: 'tz=Mars%2FOlympus&from=2026-01-01T10:00', fields: ['tz'] },
  { query: 'limit=abc', fields: ['limit'] },
  { query: 'limit=0', fields: ['limit'] },
  { query: 'before=-1', fields: ['before'] },
  { query: 'after=1e3', fields: ['after'] },
  // Every bad parameter at once, each named.
  {
    query: 'service=%00&environment=x&environment=y&version=%01&status=nope&from=x&to=y',
    fields: ['service', 'environment', 'version', 'status', 'from', 'to'],
  },
]

test('bad filters (control characters, over-long, repeated, wrong types) are a 422 naming each parameter, with nothing listed; the exports answer problem+json', async () => {
  // A lone surrogate cannot arrive percent-encoded (that is invalid UTF-8), but is refused all the same.
  assert.deepEqual(parseLogsQuery({ service: 'a\uD800b', version: '\uDC00' }).errors, [
    { field: 'service', message: 'service must be valid Unicode text' },
    { field: 'version', message: 'version must be valid Unicode text' },
  ])
  const { browser } = await seeded()
  for (const { query, fields } of REFUSED) {
    const page = `/logs/?${query}`
    assertRefusedPage(await browser.get(page), fields, page)
    for (const format of ['csv', 'json']) {
      const url = `/logs/export.${format}?${query}`
      // Page parameters mean nothing to an export; the filter's own rules are the same.
      const exportFields = fields.filter((f) => !['limit', 'before', 'after'].includes(f))
      const res = await browser.get(url)
      if (exportFields.length === 0) assert.equal(res.statusCode, 200, url)
      else assertRefusedExport(res, exportFields, url)
    }
  }
  // A person whose browser follows an edited export link gets the same 422 as a page.
  const asPage = await browser.get('/logs/export.csv?service=%00&status=nope', { accept: 'text/html' })
  assert.equal(asPage.statusCode, 422)
  assert.match(String(asPage.headers['content-type']), /^text\/html/)
  assert.match(asPage.payload, /<h1>Invalid filter<\/h1>/)
  assert.match(asPage.payload, /service must not contain control characters\. status must be one of/)
  assert.match(asPage.payload, /Log out/)
  // Unknown parameters are ignored, and a valid filter still lists.
  const ok = await browser.get('/logs/?service=api&utm_source=x&utm_source=y')
  assert.equal(ok.statusCode, 200)
  assert.deepEqual(shownVersions(ok.payload), ['a-1'])
})

test('a query the database refuses is never counted as an outage (PostgreSQL SQLSTATE 22, 42, 08P01; SQLite syntax and FTS5 errors)', async (t) => {
  const ctx = await buildTestApp(t)
  const failures: unknown[] = []
  const attempt = async (query: ReturnType<typeof sql>) => {
    try {
      await query.execute(ctx.database.db)
      assert.fail('the query should have failed')
    } catch (err) {
      failures.push(err)
    }
  }
  await attempt(sql`selec 1`)
  if (testDialect === 'postgres') {
    // A NUL byte bound as a parameter (22021), and written into the statement text itself, as the
    // COPY export inlines its filter values: the server calls the message malformed (08P01).
    await attempt(sql`select ${'a\u0000b'}::text`)
    await attempt(sql.raw("select 'a\u0000b'"))
    await attempt(sql`select 1 / 0`)
    await attempt(sql`select * from no_such_table`)
  } else {
    await attempt(sql`select rowid from events_version_fts where events_version_fts match ${'"ab'}`)
    await attempt(sql`select rowid from events_version_fts where events_version_fts match ${'"ab\u0000cd"'}`)
    await attempt(sql`select * from no_such_table`)
  }
  for (const err of failures) {
    const code = (err as { code?: string }).code
    assert.equal(isQueryError(err), true, `${code}: ${String(err)}`)
    assert.equal(isDatabaseUnavailable(err), false, `${code}: ${String(err)} is not an outage`)
  }
  // The database is still there for the next request.
  const res = await ctx.app.inject({ method: 'GET', url: '/readyz' })
  assert.equal(res.statusCode, 200)
})

/** Values for the fuzzer: plain text, control characters, lone surrogates, odd percent escapes. */
const fuzzValue = fc.oneof(
  fc.string({ maxLength: 8 }),
  fc.string({ unit: 'binary', maxLength: 12 }),
  fc.constantFrom('', ' ', '%00', '%ff', '%ED%A0%80', '%', '"', '"ab', '*', 'NEAR(', 'a"b', "'", '\\', '%25'),
  fc.constantFrom('Deployed', 'failed', '2026-01-01', '2026-03-29T02:30', '2026-01-01T00:00Z', '12', '-1'),
  fc.constantFrom('Europe/Berlin', 'UTC', 'Mars/Olympus', 'x'.repeat(300)),
)
const fuzzName = fc.constantFrom(
  'service',
  'environment',
  'status',
  'version',
  'from',
  'to',
  'tz',
  'before',
  'after',
  'limit',
  'x',
  'service[]',
  '__proto__',
  'constructor',
)

/** A query string as a browser or a script might send it: names and values percent-encoded or not. */
const fuzzQuery = fc.array(fc.tuple(fuzzName, fuzzValue, fc.boolean()), { maxLength: 6 }).map((pairs) =>
  pairs
    .map(([name, value, raw]) => {
      if (raw && /^[\x21-\x7e]*$/.test(value) && !/[#&]/.test(value)) return `${name}=${value}`
      try {
        return `${name}=${encodeURIComponent(value)}`
      } catch {
        // A lone surrogate cannot be encoded; send its UTF-16 unit as escaped bytes instead.
        return `${name}=${[...value].map((c) => `%${(c.charCodeAt(0) & 0xff).toString(16).padStart(2, '0')}`).join('')}`
      }
    })
    .join('&'),
)

test('fuzzed query strings on /logs/ and both exports: never a 5xx, and a refusal is a 422 that lists nothing', async () => {
  const { browser } = await seeded()
  await fc.assert(
    fc.asyncProperty(
      fuzzQuery,
      fc.constantFrom('/logs/', '/logs/export.csv', '/logs/export.json'),
      async (query, path) => {
        const url = `${path}?${query}`
        const res = await browser.get(url)
        assert.ok(res.statusCode < 500, `${url} answered ${res.statusCode}: ${res.payload.slice(0, 300)}`)
        assert.ok([200, 422].includes(res.statusCode), `${url} answered ${res.statusCode}`)
        if (res.statusCode === 422) {
          if (path === '/logs/') assert.deepEqual(shownVersions(res.payload), [], url)
          else assert.match(String(res.headers['content-type']), /^application\/problem\+json/, url)
        }
      },
    ),
    { numRuns: 300 },
  )
})

// Names chosen so that the cases differ between JavaScript's lower-casing, PostgreSQL's lower() (C:
// ASCII only; libc: "İ" to "i") and SQLite's LIKE (ASCII only).
const NAMES = [
  'App1',
  'app1',
  'APP1',
  'ÄPP',
  'äpp',
  'İstanbul',
  'i̇stanbul',
  'istanbul',
  'ΣΟΦΙΑ',
  'σοφια',
  'Straße',
  'K\u212A',
  'kk',
]

/** The one rule, stated independently: equal after JavaScript's default lower-casing. */
function sameByRule(a: string, b: string): boolean {
  return a.toLowerCase() === b.toLowerCase()
}

test('service and environment filters ignore case by one rule on both databases, and the page and both exports agree', async (t) => {
  const ctx = await buildTestApp(t)
  const accountId = ctx.tenant.account.id
  const events = NAMES.flatMap((service, i) =>
    NAMES.slice(0, 4).map((environment, j) => ({
      service,
      environment: j % 2 === 0 ? environment : `env-${environment}`,
      version: `v${i}-${j}`,
      status: 'Deployed' as EventStatus,
      received_at: SEED_EPOCH + (i * 4 + j) * 60_000,
    })),
  )
  await insertEvents(ctx.database, accountId, events)
  // Another account's same names are never found.
  const other = await ctx.addTenant('Other')
  await insertEvents(ctx.database, other.account.id, [
    { service: 'app1', environment: 'App1', version: 'foreign' },
  ])
  const { browser } = await userSession(ctx, accountId, 'ada@example.com')

  const expected = (service?: string, environment?: string) =>
    events
      .filter((e) => service === undefined || sameByRule(e.service, service))
      .filter((e) => environment === undefined || sameByRule(e.environment, environment))
      .map((e) => e.version)
      .reverse()

  // The cases the review named, spelled out.
  const fixed: [string, string[]][] = [
    ['service=app1', expected('app1')],
    ['service=%C3%A4pp', expected('äpp')],
    ['service=%C3%84PP', expected('ÄPP')],
    ['service=%C4%B0stanbul', expected('İstanbul')],
    ['service=istanbul', expected('istanbul')],
    ['environment=APP1', expected(undefined, 'APP1')],
  ]
  assert.equal(expected('app1').length, 12, 'App1, app1 and APP1 are one service')
  assert.equal(expected('äpp').length, 8, 'ÄPP and äpp are one service')
  assert.deepEqual(expected('İstanbul').length, 8, 'İstanbul is i̇stanbul (with the dot), not istanbul')

  const check = async (query: string, want: string[]) => {
    const page = await browser.get(`/logs/?${query}&limit=500`)
    assert.equal(page.statusCode, 200, query)
    assert.deepEqual(shownVersions(page.payload), want, `page ${query}`)
    const csv = await browser.get(`/logs/export.csv?${query}`)
    assert.deepEqual(
      parseCsv(csv.payload)
        .slice(1)
        .map((r) => r[4]),
      want,
      `CSV ${query}`,
    )
    const json = await browser.get(`/logs/export.json?${query}`)
    assert.deepEqual(
      (json.json() as { version: string }[]).map((e) => e.version),
      want,
      `JSON ${query}`,
    )
  }
  for (const [query, want] of fixed) await check(query, want)

  // Any mix of case over the known names, as a property.
  const mixCase = (name: string) =>
    fc
      .array(fc.boolean(), { minLength: [...name].length, maxLength: [...name].length })
      .map((flips) => [...name].map((c, i) => (flips[i] ? c.toUpperCase() : c.toLowerCase())).join(''))
  await fc.assert(
    fc.asyncProperty(
      fc.option(fc.constantFrom(...NAMES).chain(mixCase), { nil: undefined }),
      fc.option(fc.constantFrom(...NAMES.slice(0, 4)).chain(mixCase), { nil: undefined }),
      async (service, environment) => {
        const query = new URLSearchParams()
        if (service !== undefined) query.set('service', service)
        if (environment !== undefined) query.set('environment', environment)
        await check(
          query.toString(),
          expected(service?.trim() || undefined, environment?.trim() || undefined),
        )
      },
    ),
    { numRuns: 40 },
  )
})

test('every known service and environment is suggested, not only those of the latest events', async (t) => {
  const ctx = await buildTestApp(t)
  const accountId = ctx.tenant.account.id
  await insertEvents(ctx.database, accountId, [{ service: 'old-billing', environment: 'legacy-dc' }])
  await insertEvents(
    ctx.database,
    accountId,
    Array.from({ length: 1200 }, (_, i) => ({ service: `svc-${i % 3}`, environment: 'prod' })),
  )
  const { browser } = await userSession(ctx, accountId, 'ada@example.com')
  const res = await browser.get('/logs/')
  const options = (id: string) =>
    [
      ...(new RegExp(`<datalist id="${id}">([\\s\\S]*?)</datalist>`).exec(res.payload)?.[1] ?? '').matchAll(
        /<option value="([^"]*)">/g,
      ),
    ].map((m) => m[1])
  assert.deepEqual(options('services'), ['old-billing', 'svc-0', 'svc-1', 'svc-2'])
  assert.deepEqual(options('environments'), ['legacy-dc', 'prod'])
  assert.match(res.payload, /<input id="f-service" name="service" type="text" list="services"/)
})

test('with more names than are suggested, a filter still finds any of them in any case', async (t) => {
  const ctx = await buildTestApp(t)
  const accountId = ctx.tenant.account.id
  const services = Array.from({ length: 520 }, (_, i) => `Svc-${String(i).padStart(3, '0')}`)
  await insertEvents(
    ctx.database,
    accountId,
    services.map((service, i) => ({ service, version: `v${i}` })),
  )
  const { browser } = await userSession(ctx, accountId, 'ada@example.com')
  const res = await browser.get('/logs/?service=SVC-519')
  assert.equal(res.statusCode, 200)
  assert.deepEqual(shownVersions(res.payload), ['v519'])
  const suggested = /<datalist id="services">([\s\S]*?)<\/datalist>/.exec(res.payload)?.[1] ?? ''
  assert.equal([...suggested.matchAll(/<option /g)].length, 500, 'the suggestions stop at 500')
  assert.doesNotMatch(suggested, /Svc-519/)
})

test('From and To without a zone are read in the zone the page sends (tz), correctly across the March change', async (t) => {
  // Europe/Berlin moves from +01:00 to +02:00 at 2026-03-29 01:00 UTC (02:00 local becomes 03:00).
  const at = (iso: string) => Date.parse(iso)
  assert.equal(zonedToInstant('Europe/Berlin', at('2026-03-29T01:30:00Z')), at('2026-03-29T00:30:00Z'))
  assert.equal(zonedToInstant('Europe/Berlin', at('2026-03-29T03:30:00Z')), at('2026-03-29T01:30:00Z'))
  // 02:30 does not exist that night: read as 03:30 summer time, as the clock would have said.
  assert.equal(zonedToInstant('Europe/Berlin', at('2026-03-29T02:30:00Z')), at('2026-03-29T01:30:00Z'))
  // 02:30 happens twice on 25 October: the first.
  assert.equal(zonedToInstant('Europe/Berlin', at('2026-10-25T02:30:00Z')), at('2026-10-25T00:30:00Z'))
  assert.deepEqual(
    parseLogsQuery({ from: '2026-03-29T03:00', to: '2026-03-29T03:00', tz: 'Europe/Berlin' }).filter,
    {
      from: at('2026-03-29T01:00:00Z'),
      to: at('2026-03-29T01:00:59.999Z'),
    },
  )
  // Without tz (no script) they are UTC, as the form then says.
  assert.equal(parseLogsQuery({ from: '2026-03-29T03:00' }).filter.from, at('2026-03-29T03:00:00Z'))

  const ctx = await buildTestApp(t)
  const accountId = ctx.tenant.account.id
  const times = [
    '2026-03-29T00:30:00Z',
    '2026-03-29T00:59:59Z',
    '2026-03-29T01:00:00Z',
    '2026-03-29T01:30:00Z',
  ]
  await insertEvents(
    ctx.database,
    accountId,
    times.map((iso, i) => ({ version: `t${i}`, received_at: at(iso) })),
  )
  const { browser } = await userSession(ctx, accountId, 'ada@example.com')
  const page = await browser.get('/logs/?from=2026-03-29T03%3A00&tz=Europe%2FBerlin')
  assert.equal(page.statusCode, 200)
  assert.deepEqual(shownVersions(page.payload), ['t3', 't2'])
  // The links carry the instant in UTC, so they mean the same whoever follows them.
  const csv = new URL(linkHref(page.payload, 'Download CSV') ?? '', 'http://x')
  assert.equal(csv.searchParams.get('from'), '2026-03-29T01:00:00.000Z')
  assert.equal(csv.searchParams.has('tz'), false)
  const early = await browser.get('/logs/?to=2026-03-29T01%3A59&tz=Europe%2FBerlin')
  assert.deepEqual(shownVersions(early.payload), ['t1', 't0'])
})

test('a filter from a link (UTC) refills From and To with the instant, for the script to show in local time', async () => {
  const { browser } = await seeded()
  const res = await browser.get('/logs/?from=2026-01-01T02%3A00%3A00.000Z&to=2026-01-01T04%3A00%3A59.999Z')
  assert.match(
    res.payload,
    /id="f-from" name="from" type="datetime-local" step="1" value="2026-01-01T02:00:00" data-utc="2026-01-01T02:00:00.000Z"/,
  )
  assert.match(
    res.payload,
    /id="f-to" name="to" type="datetime-local" step="1" value="2026-01-01T04:00:59" data-utc="2026-01-01T04:00:59.999Z"/,
  )
  // As typed without a zone: shown as typed, the zone the form named when it was sent.
  const typed = await browser.get('/logs/?from=2026-01-01T03%3A00')
  assert.match(
    typed.payload,
    /id="f-from" name="from" type="datetime-local" step="1" value="2026-01-01T03:00"\s*>/,
  )
})
