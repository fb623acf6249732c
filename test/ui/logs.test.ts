// /logs/ lists the account's events newest first, filters them, pages by keyset and links matching downloads.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { EventStatus } from '../../src/db/schema.js'
import { buildTestApp } from '../helper.js'
import {
  type Browser,
  insertEvents,
  linkHref,
  parseCsv,
  relHref,
  SEED_EPOCH,
  sharedFixture,
  shownVersions,
  userSession,
} from '../support/ui.js'

const HOUR = 3_600_000

// One row per event, oldest first: [service, environment, version, status]. Event i arrives at
// SEED_EPOCH + i hours, i.e. 2026-01-01T0i:00:00Z.
const EVENTS: [string, string, string, EventStatus][] = [
  ['api', 'prod', '1.0.0', 'Deployed'],
  ['api', 'staging', '1.0.1-RC1', 'Deploying'],
  ['web', 'prod', '2.0.0', 'Failed'],
  ['web', 'prod', '100', 'Deployed'],
  ['api', 'prod', '1.0%', 'Deployed'],
  ['api', 'prod', '1_0', 'Deployed'],
  ['api', 'prod', '1x0', 'Deployed'],
  ['api', 'prod', 'rc-2', 'Failed'],
  ['web', 'staging', 'Beta', 'Deploying'],
]

// Built once for the file's read-only tests.
const seeded = sharedFixture(async (cleanup) => {
  const ctx = await buildTestApp(cleanup)
  await insertEvents(
    ctx.database,
    ctx.tenant.account.id,
    EVENTS.map(([service, environment, version, status], i) => ({
      service,
      environment,
      version,
      status,
      received_at: SEED_EPOCH + i * HOUR,
    })),
  )
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'ada@example.com', 'member')
  return { ctx, browser }
})

function versionsWhere(match: (e: (typeof EVENTS)[number], i: number) => boolean): string[] {
  return EVENTS.map((e, i) => [e, i] as const)
    .filter(([e, i]) => match(e, i))
    .map(([e]) => e[2])
    .reverse()
}

async function csvVersions(browser: Browser, href: string): Promise<string[]> {
  const res = await browser.get(href)
  assert.equal(res.statusCode, 200, `GET ${href}`)
  return parseCsv(res.payload)
    .slice(1)
    .map((row) => row[4] ?? '')
    .map((v) => (v.startsWith("'") ? v.slice(1) : v))
}

async function jsonVersions(browser: Browser, href: string): Promise<string[]> {
  const res = await browser.get(href)
  assert.equal(res.statusCode, 200, `GET ${href}`)
  return (res.json() as { version: string }[]).map((e) => e.version)
}

test('/logs/ shows the account events newest first, with both download links', async () => {
  const { browser } = await seeded()
  const res = await browser.get('/logs/')
  assert.equal(res.statusCode, 200)
  assert.match(String(res.headers['content-type']), /^text\/html; charset=utf-8/)
  assert.deepEqual(shownVersions(res.payload), EVENTS.map((e) => e[2]).reverse())
  assert.equal(linkHref(res.payload, 'Download CSV'), '/logs/export.csv')
  assert.equal(linkHref(res.payload, 'Download JSON'), '/logs/export.json')
  // Times are machine-readable UTC, with the UTC text on hover.
  assert.match(res.payload, /<time datetime="2026-01-01T08:00:00.000Z" title="2026-01-01 08:00:00 UTC"/)
})

const FILTER_CASES: {
  query: Record<string, string>
  expected: string[]
  /** What the download links must carry (canonical forms). */
  carried: Record<string, string>
}[] = [
  { query: { service: 'api' }, expected: versionsWhere((e) => e[0] === 'api'), carried: { service: 'api' } },
  {
    query: { environment: 'staging' },
    expected: versionsWhere((e) => e[1] === 'staging'),
    carried: { environment: 'staging' },
  },
  {
    query: { status: 'deployed' },
    expected: versionsWhere((e) => e[3] === 'Deployed'),
    carried: { status: 'Deployed' },
  },
  { query: { status: 'FAILED' }, expected: ['rc-2', '2.0.0'], carried: { status: 'Failed' } },
  { query: { version: 'rc' }, expected: ['rc-2', '1.0.1-RC1'], carried: { version: 'rc' } },
  { query: { version: 'BETA' }, expected: ['Beta'], carried: { version: 'BETA' } },
  { query: { version: '%' }, expected: ['1.0%'], carried: { version: '%' } },
  { query: { version: '_' }, expected: ['1_0'], carried: { version: '_' } },
  { query: { version: '1_0' }, expected: ['1_0'], carried: { version: '1_0' } },
  { query: { version: '1.0%' }, expected: ['1.0%'], carried: { version: '1.0%' } },
  {
    // As an HTML datetime-local field sends them: no zone (taken as UTC); "to" covers its minute.
    query: { from: '2026-01-01T02:00', to: '2026-01-01T04:00' },
    expected: ['1.0%', '100', '2.0.0'],
    carried: { from: '2026-01-01T02:00:00.000Z', to: '2026-01-01T04:00:59.999Z' },
  },
  {
    query: { from: '2026-01-01T06:00:00.000Z' },
    expected: ['Beta', 'rc-2', '1x0'],
    carried: { from: '2026-01-01T06:00:00.000Z' },
  },
  {
    query: { to: '2026-01-01T01:00:00Z' },
    expected: ['1.0.1-RC1', '1.0.0'],
    carried: { to: '2026-01-01T01:00:00.000Z' },
  },
  {
    query: {
      service: 'api',
      environment: 'prod',
      status: 'Deployed',
      version: '1',
      from: '2026-01-01T01:00Z',
    },
    expected: ['1x0', '1_0', '1.0%'],
    carried: {
      service: 'api',
      environment: 'prod',
      status: 'Deployed',
      version: '1',
      from: '2026-01-01T01:00:00.000Z',
    },
  },
  { query: { service: 'nothing-like-this' }, expected: [], carried: { service: 'nothing-like-this' } },
]

test('filters: service, environment, status (any case), version text (literal % and _), time range', async () => {
  const { browser } = await seeded()
  for (const { query, expected, carried } of FILTER_CASES) {
    const url = `/logs/?${new URLSearchParams(query)}`
    const res = await browser.get(url)
    assert.equal(res.statusCode, 200, url)
    assert.deepEqual(shownVersions(res.payload), expected, `page ${url}`)
    if (expected.length === 0) assert.match(res.payload, /No events match these filters/)

    for (const [text, path] of [
      ['Download CSV', '/logs/export.csv'],
      ['Download JSON', '/logs/export.json'],
    ] as const) {
      const href = linkHref(res.payload, text)
      assert.ok(href, `${text} link on ${url}`)
      const link = new URL(href, 'http://x')
      assert.equal(link.pathname, path)
      assert.deepEqual(Object.fromEntries(link.searchParams), carried, `${text} on ${url}`)
    }
    // Following the links downloads exactly the events the page shows.
    const csvHref = linkHref(res.payload, 'Download CSV') ?? ''
    const jsonHref = linkHref(res.payload, 'Download JSON') ?? ''
    assert.deepEqual(await csvVersions(browser, csvHref), expected, `CSV for ${url}`)
    assert.deepEqual(await jsonVersions(browser, jsonHref), expected, `JSON for ${url}`)
  }
})

test('the filter form is refilled with what was typed, and a bad filter is a 422 with a message and nothing listed', async () => {
  const { browser } = await seeded()
  const res = await browser.get('/logs/?service=api&status=failed&version=rc')
  assert.match(
    res.payload,
    /<input id="f-service" name="service" type="text" list="services" autocomplete="off" value="api" >/,
  )
  assert.match(res.payload, /<option value="Failed" selected>Failed<\/option>/)
  assert.match(res.payload, /<input id="f-version" name="version" type="text" value="rc" >/)

  const bad = await browser.get('/logs/?status=Exploded')
  assert.equal(bad.statusCode, 422)
  assert.match(bad.payload, /status must be one of Deploying, Deployed, Failed/)
  assert.deepEqual(shownVersions(bad.payload), [], 'nothing is listed under an invalid filter')
  const badTime = await browser.get('/logs/?from=yesterday')
  assert.equal(badTime.statusCode, 422)
  const badExport = await browser.get('/logs/export.csv?status=Exploded')
  assert.equal(badExport.statusCode, 422)
})

async function walk(browser: Browser, start: string, rel: 'next' | 'prev') {
  const pages: string[][] = []
  const hrefs: string[] = []
  let url: string | undefined = start
  while (url) {
    const res = await browser.get(url)
    assert.equal(res.statusCode, 200, url)
    pages.push(shownVersions(res.payload))
    hrefs.push(url)
    url = relHref(res.payload, rel)
    assert.ok(pages.length < 20, 'pagination ends')
  }
  return { pages, hrefs }
}

test('keyset pagination: 120 events in pages of 50 show every event exactly once, both ways', async (t) => {
  const ctx = await buildTestApp(t)
  const versions = Array.from({ length: 120 }, (_, i) => `p-${String(i).padStart(3, '0')}`)
  await insertEvents(
    ctx.database,
    ctx.tenant.account.id,
    versions.map((version) => ({ version })),
  )
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'ada@example.com')

  const first = await browser.get('/logs/')
  assert.equal(relHref(first.payload, 'prev'), undefined, 'no Newer link on the first page')
  const older = await walk(browser, '/logs/', 'next')
  assert.deepEqual(
    older.pages.map((p) => p.length),
    [50, 50, 20],
  )
  assert.deepEqual(older.pages.flat(), [...versions].reverse(), 'every event once, newest first')
  for (const href of older.hrefs.slice(1)) assert.match(href, /^\/logs\/\?before=\d+$/)

  // From the last page back to the first with the Newer links: the same pages again.
  const last = older.hrefs.at(-1) ?? ''
  const newer = await walk(browser, last, 'prev')
  assert.deepEqual(newer.pages, [...older.pages].reverse())
  for (const href of newer.hrefs.slice(1)) assert.match(href, /^\/logs\/\?after=\d+$/)
})

test('with a time range, pages and downloads follow received_at, every event once, even when ids disagree', async (t) => {
  const ctx = await buildTestApp(t)
  // 130 events whose ids do not follow their times (another instance's clock, say): ids run
  // forwards while received_at runs in a zigzag. 10 fall outside the range on each side.
  const base = Date.UTC(2026, 0, 1)
  const times = Array.from({ length: 150 }, (_, i) => base + ((i * 37) % 150) * 60_000)
  const versions = times.map((_, i) => `t-${String(i).padStart(3, '0')}`)
  await insertEvents(
    ctx.database,
    ctx.tenant.account.id,
    versions.map((version, i) => ({ version, received_at: times[i] })),
  )
  const from = new Date(base + 10 * 60_000).toISOString()
  const to = new Date(base + 139 * 60_000 + 59_999).toISOString()
  const expected = versions
    .map((version, i) => ({ version, at: times[i] ?? 0 }))
    .filter((e) => e.at >= base + 10 * 60_000 && e.at <= base + 139 * 60_000 + 59_999)
    .sort((a, b) => b.at - a.at)
    .map((e) => e.version)
  assert.equal(expected.length, 130)
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'ada@example.com')

  const start = `/logs/?${new URLSearchParams({ from, to }).toString()}`
  const older = await walk(browser, start, 'next')
  assert.deepEqual(
    older.pages.map((p) => p.length),
    [50, 50, 30],
  )
  assert.deepEqual(older.pages.flat(), expected, 'newest first by time, every event once')
  const newer = await walk(browser, older.hrefs.at(-1) ?? '', 'prev')
  assert.deepEqual(newer.pages, [...older.pages].reverse())

  const query = new URLSearchParams({ from, to }).toString()
  assert.deepEqual(await csvVersions(browser, `/logs/export.csv?${query}`), expected)
  assert.deepEqual(await jsonVersions(browser, `/logs/export.json?${query}`), expected)
})

test('keyset pagination stays exact when new events arrive between pages, and keeps the filters', async (t) => {
  const ctx = await buildTestApp(t)
  const accountId = ctx.tenant.account.id
  const seeds = Array.from({ length: 120 }, (_, i) => ({
    service: i % 2 === 0 ? 'even' : 'odd',
    version: `k-${String(i).padStart(3, '0')}`,
  }))
  await insertEvents(ctx.database, accountId, seeds)
  const { browser } = await userSession(ctx, accountId, 'ada@example.com')

  const seen: string[] = []
  let url: string | undefined = '/logs/'
  let pages = 0
  while (url) {
    const res = await browser.get(url)
    seen.push(...shownVersions(res.payload))
    url = relHref(res.payload, 'next')
    // New deployments land while someone is reading: offsets would shift, keysets do not.
    if (pages++ === 0)
      await insertEvents(ctx.database, accountId, [{ version: 'late-1' }, { version: 'late-2' }])
  }
  assert.deepEqual(seen, seeds.map((s) => s.version).reverse())

  const filtered = await walk(browser, '/logs/?service=odd&limit=25', 'next')
  assert.deepEqual(
    filtered.pages.map((p) => p.length),
    [25, 25, 10],
  )
  assert.deepEqual(
    filtered.pages.flat(),
    seeds
      .filter((s) => s.service === 'odd')
      .map((s) => s.version)
      .reverse(),
  )
  for (const href of filtered.hrefs.slice(1)) {
    const params = new URL(href, 'http://x').searchParams
    assert.equal(params.get('service'), 'odd', href)
    assert.equal(params.get('limit'), '25', href)
  }
})

test('a new account with no events shows how to send the first one', async (t) => {
  const ctx = await buildTestApp(t)
  const fresh = await ctx.addTenant('Fresh Co')
  // Another account's events must not hide the empty state.
  await insertEvents(ctx.database, ctx.tenant.account.id, [{ version: 'elsewhere' }])
  const { browser } = await userSession(ctx, fresh.account.id, 'new@example.com')
  const res = await browser.get('/logs/')
  assert.equal(res.statusCode, 200)
  assert.deepEqual(shownVersions(res.payload), [])
  assert.match(res.payload, /No deployments recorded yet/)
  assert.match(res.payload, /curl -X POST http:\/\/localhost(:\d+)?\/deploy/)
  assert.match(res.payload, /x-api-key: \$SHIPLOG_API_KEY/)
  assert.match(res.payload, /<a href="\/settings\/">Settings<\/a>/)
  assert.doesNotMatch(res.payload, /elsewhere/)
  assert.equal(linkHref(res.payload, 'Download CSV'), '/logs/export.csv')

  await insertEvents(ctx.database, fresh.account.id, [{ version: 'first!' }])
  const after = await browser.get('/logs/')
  assert.doesNotMatch(after.payload, /No deployments recorded yet/)
  assert.deepEqual(shownVersions(after.payload), ['first!'])
})

test('the version filter ignores the case of non-ASCII letters too', {}, async (t) => {
  const ctx = await buildTestApp(t)
  await insertEvents(ctx.database, ctx.tenant.account.id, [
    { version: 'RELEASE-Ä' },
    { version: 'été-2' },
    { version: 'plain' },
  ])
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'ada@example.com')
  assert.deepEqual(shownVersions((await browser.get('/logs/?version=ä')).payload), ['RELEASE-Ä'])
  assert.deepEqual(shownVersions((await browser.get('/logs/?version=ÉTÉ')).payload), ['été-2'])
})
