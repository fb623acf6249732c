// /insights/ over a known history posted through POST /deploy at chosen times (the clock is
// mocked while each event is sent): every §6.2 figure with its numerator and denominator, the lists
// behind the links exactly, days in the viewer's zone across a DST change, and bad queries refused
// with a clear 422 or 404 page that changes nothing. Both databases.
import assert from 'node:assert/strict'
import { mock, test } from 'node:test'
import { buildTestApp, type TestApp } from '../helper.js'
import { type Browser, deploy, sharedFixture, unescapeHtml, userSession } from '../support/ui.js'

const at = (iso: string) => Date.parse(iso)

/** Sends one event through the real ingest route with the server's clock at `when`. */
async function send(
  ctx: TestApp,
  when: string,
  service: string,
  environment: string,
  version: string,
  status: 'Deploying' | 'Deployed' | 'Failed',
  key: string = ctx.tenant.key,
): Promise<number> {
  mock.timers.enable({ apis: ['Date'], now: at(when) })
  try {
    const res = await deploy(ctx.app, key, { service, environment, version, status })
    assert.equal(res.status, 201, JSON.stringify(res.body))
    return res.body.id as number
  } finally {
    mock.timers.reset()
  }
}

const WEB = 'web/ü <b>&% x'

/**
 * The history (UTC). Staging first deploys 1.0 and 1.1 (where lead time starts); in prod:
 * D1 1.0 with a retried Deploying (4 min); D2 1.1 failed (10 min); D3 1.1 succeeded next day
 * (20 min, restores D2); D4 1.0 sent only as Deployed (instant) — a rollback, so D3 is rolled back;
 * D5 1.0 again (a redeploy, 2 min); D6 1.2 stalled for over an hour, then a late Deployed (2 h 30);
 * D7 1.3 never finished (stalled, not counted); D8 the web service failed at once, restored only
 * after the window (D9). Another account's deployments must never count.
 */
const history = sharedFixture(async (cleanup) => {
  const ctx = await buildTestApp(cleanup)
  const other = await ctx.addTenant('Other')
  const ids: Record<string, number> = {}
  await send(ctx, '2026-09-30T10:00:00Z', 'api', 'staging', '1.0', 'Deploying')
  await send(ctx, '2026-09-30T10:05:00Z', 'api', 'staging', '1.0', 'Deployed')
  ids.stage11 = await send(ctx, '2026-10-01T08:00:00Z', 'api', 'staging', '1.1', 'Deploying')
  await send(ctx, '2026-10-01T08:10:00Z', 'api', 'staging', '1.1', 'Deployed')
  ids.d1 = await send(ctx, '2026-10-01T09:00:00Z', 'api', 'prod', '1.0', 'Deploying')
  await send(ctx, '2026-10-01T09:01:00Z', 'api', 'prod', '1.0', 'Deploying')
  await send(ctx, '2026-10-01T09:04:00Z', 'api', 'prod', '1.0', 'Deployed')
  await send(ctx, '2026-10-01T09:30:00Z', 'api', 'prod', '9.9', 'Deployed', other.key)
  ids.d2 = await send(ctx, '2026-10-01T12:00:00Z', 'api', 'prod', '1.1', 'Deploying')
  await send(ctx, '2026-10-01T12:10:00Z', 'api', 'prod', '1.1', 'Failed')
  ids.d3 = await send(ctx, '2026-10-02T09:00:00Z', 'api', 'prod', '1.1', 'Deploying')
  await send(ctx, '2026-10-02T09:20:00Z', 'api', 'prod', '1.1', 'Deployed')
  ids.d4 = await send(ctx, '2026-10-03T10:00:00Z', 'api', 'prod', '1.0', 'Deployed')
  ids.d5 = await send(ctx, '2026-10-04T09:00:00Z', 'api', 'prod', '1.0', 'Deploying')
  await send(ctx, '2026-10-04T09:02:00Z', 'api', 'prod', '1.0', 'Deployed')
  ids.d6 = await send(ctx, '2026-10-05T09:00:00Z', 'api', 'prod', '1.2', 'Deploying')
  await send(ctx, '2026-10-05T11:30:00Z', 'api', 'prod', '1.2', 'Deployed')
  ids.d7 = await send(ctx, '2026-10-06T09:00:00Z', 'api', 'prod', '1.3', 'Deploying')
  ids.d8 = await send(ctx, '2026-10-06T12:00:00Z', WEB, 'prod', '1', 'Failed')
  ids.d9 = await send(ctx, '2026-10-09T00:00:00Z', WEB, 'prod', '2', 'Deployed')
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'ada@example.com', 'member')
  return { ctx, browser, ids }
})

const WINDOW = 'environment=prod&range=custom&from=2026-10-01&to=2026-10-08&tz=UTC'

/** The text of an element by id, tags removed and white space folded. */
function textOf(page: string, id: string): string {
  const start = page.indexOf(`id="${id}"`)
  assert.ok(start !== -1, `the page has #${id}`)
  const open = page.lastIndexOf('<', start)
  const tag = /^<(\w+)/.exec(page.slice(open))?.[1] ?? 'section'
  const end = page.indexOf(`</${tag}>`, start)
  return unescapeHtml(
    page
      .slice(start, end)
      .replace(/^[^>]*>/, '')
      .replace(/<[^>]+>/g, ' '),
  )
    .replace(/\s+/g, ' ')
    .trim()
}

/** The hrefs of the links inside an element. */
function linksIn(page: string, id: string): string[] {
  const start = page.indexOf(`id="${id}"`)
  const end = page.indexOf('</section>', start)
  return [...page.slice(start, end).matchAll(/href="([^"]*)"/g)].map((m) => unescapeHtml(m[1] ?? ''))
}

/** The text of a day-table heading cell: its long date (the short one is for phones). */
function dayCell(cell: string): string {
  return unescapeHtml(cell.replace(/<span class="day-short"[^>]*>[^<]*<\/span>/g, '').replace(/<[^>]+>/g, ''))
    .replace(/\s+/g, ' ')
    .trim()
}

/** The deployment ids a list page shows, in order. */
function listedIds(page: string): number[] {
  return [...page.matchAll(/data-deployment-id="(\d+)"/g)].map((m) => Number(m[1]))
}

async function get(browser: Browser, url: string): Promise<string> {
  const res = await browser.get(url)
  assert.equal(res.statusCode, 200, `${url}: ${res.statusCode} ${res.payload.slice(0, 300)}`)
  return res.payload
}

test('every figure shows its numerator, denominator, median and p90', async () => {
  const { browser } = await history()
  const page = await get(browser, `/insights/?${WINDOW}`)
  assert.equal(
    textOf(page, 'figure-frequency'),
    'Deployment frequency 0.71 / day 5 succeeded ÷ 7 days = 0.71 / day',
  )
  assert.equal(
    textOf(page, 'figure-failure-rate'),
    'Change failure rate 43 % ( 2 failed + 1 rolled back ) ÷ ( 5 succeeded + 2 failed) = 43 %',
  )
  // Restores: D2 after 21 h 10 min (by D3), D3 after 24 h 40 min (by the rollback D4), D8 after
  // 2 d 12 h (by D9, after the window).
  assert.equal(
    textOf(page, 'figure-restore'),
    'Time to restore median 1 d 1 h p90 2 d 12 h over 3 restored deployments',
  )
  // Durations 2, 4, 10, 20 and 150 min; the instant D4 and D8 have none.
  assert.equal(
    textOf(page, 'figure-duration'),
    'Deployment duration median 10 min p90 2 h 30 min over 5 deployments',
  )
  // Lead times 2 h 30 (1.2), 23 h 4 min (1.0), 25 h 20 min (1.1), 3 d (1.0 again), 3 d 23 h 2 min (its redeploy).
  assert.match(
    textOf(page, 'figure-lead-time'),
    /^Lead time median 1 d 1 h p90 3 d 23 h over 5 succeeded deployments/,
  )
  // How the spreads are taken, said beside them (the rule is tested in deployment-rules.test.ts).
  assert.match(
    textOf(page, 'spread-rule'),
    /^Median : the middle value .*for an even count, the mean of the two middle values\. p90 : the nearest rank, the value at position ⌈0\.9 × n⌉ in ascending order/,
  )
  assert.match(page, /Sun 4 Oct 2026/, 'the window is written out')
  assert.match(page, /Thu 1 Oct 2026 – Wed 7 Oct 2026 \(7 days\)/)
})

test('each link lists exactly the deployments the figure counted', async () => {
  const { browser, ids } = await history()
  const page = await get(browser, `/insights/?${WINDOW}`)
  const [succeededHref] = linksIn(page, 'figure-frequency')
  assert.ok(succeededHref)
  assert.deepEqual(listedIds(await get(browser, succeededHref)), [ids.d6, ids.d5, ids.d4, ids.d3, ids.d1])
  const [failedHref, rolledBackHref, succeededAgain] = linksIn(page, 'figure-failure-rate')
  assert.ok(failedHref && rolledBackHref && succeededAgain)
  assert.equal(succeededAgain, succeededHref)
  assert.deepEqual(listedIds(await get(browser, failedHref)), [ids.d8, ids.d2])
  assert.deepEqual(listedIds(await get(browser, rolledBackHref)), [ids.d3])

  const [restoreHref] = linksIn(page, 'figure-restore')
  assert.ok(restoreHref)
  const restore = await get(browser, restoreHref)
  assert.deepEqual(listedIds(restore), [ids.d8, ids.d3, ids.d2])
  const restoreText = unescapeHtml(restore.replace(/<[^>]+>/g, ' ')).replace(/\s+/g, ' ')
  assert.match(restoreText, /2 d 12 h until 2 finished/)
  assert.match(restoreText, /1 d 1 h until 1\.0 finished/)
  assert.match(restoreText, /21 h 10 min until 1\.1 finished/)

  const [durationHref] = linksIn(page, 'figure-duration')
  assert.ok(durationHref)
  assert.deepEqual(listedIds(await get(browser, durationHref)), [ids.d6, ids.d5, ids.d3, ids.d2, ids.d1])

  const [leadHref] = linksIn(page, 'figure-lead-time')
  assert.ok(leadHref)
  const lead = await get(browser, leadHref)
  assert.deepEqual(listedIds(lead), [ids.d6, ids.d5, ids.d4, ids.d3, ids.d1])
  const leadText = unescapeHtml(lead.replace(/<[^>]+>/g, ' ')).replace(/\s+/g, ' ')
  assert.match(leadText, /1 d 1 h since 1\.1 first started in staging/)
  assert.match(leadText, /2 h 30 min since 1\.2 first started in prod/)
  // The stalled D7 and the other account's deployment are in no list.
  for (const list of [restore, lead]) assert.doesNotMatch(list, /9\.9|>1\.3</)
})

test('the charts have a bar per day with links, and a table of the same numbers', async () => {
  const { browser, ids } = await history()
  const page = await get(browser, `/insights/?${WINDOW}`)
  assert.match(page, /<svg class="chart"[^>]*data-chart="outcomes-wide"/)
  assert.match(page, /<svg class="chart"[^>]*data-chart="duration-wide"/)
  assert.match(page, /<title id="outcomes-wide-title">Deployments per day, by outcome<\/title>/)
  const table = page.slice(
    page.indexOf('<table class="days">'),
    page.indexOf('</table>', page.indexOf('<table class="days">')),
  )
  const rows = [...table.matchAll(/<tr>\s*<th scope="row">([\s\S]*?)<\/th>([\s\S]*?)<\/tr>/g)].map((m) => ({
    day: dayCell(m[1] ?? ''),
    cells: [...(m[2] ?? '').matchAll(/<td class="num[^"]*">([\s\S]*?)<\/td>/g)].map((c) =>
      unescapeHtml((c[1] ?? '').replace(/<[^>]+>/g, ''))
        .replace(/\s+/g, ' ')
        .trim(),
    ),
  }))
  assert.deepEqual(rows, [
    { day: 'Thu 1 Oct 2026', cells: ['1', '1', '0', '2', '7 min (2)'] },
    { day: 'Fri 2 Oct 2026', cells: ['0', '0', '1', '1', '20 min (1)'] },
    { day: 'Sat 3 Oct 2026', cells: ['1', '0', '0', '1', '—'] },
    { day: 'Sun 4 Oct 2026', cells: ['1', '0', '0', '1', '2 min (1)'] },
    { day: 'Mon 5 Oct 2026', cells: ['1', '0', '0', '1', '2 h 30 min (1)'] },
    { day: 'Tue 6 Oct 2026', cells: ['0', '1', '0', '1', '—'] },
    { day: 'Wed 7 Oct 2026', cells: ['0', '0', '0', '0', '—'] },
  ])
  // A bar leads to that day's deployments.
  const bar = /<a href="([^"]*from=2026-10-01&amp;to=2026-10-02[^"]*kind=finished)"/.exec(page)?.[1]
  assert.ok(bar, 'the first day has a linked bar')
  assert.deepEqual(listedIds(await get(browser, unescapeHtml(bar))), [ids.d2, ids.d1])
})

test('a service filter counts only that service, and its odd name is encoded in every link', async () => {
  const { browser, ids } = await history()
  const page = await get(browser, `/insights/?${WINDOW}&service=${encodeURIComponent(WEB)}`)
  assert.match(textOf(page, 'figure-frequency'), /^Deployment frequency 0\.00 \/ day 0 succeeded ÷ 7 days/)
  assert.match(textOf(page, 'figure-failure-rate'), /100 %/)
  assert.doesNotMatch(page, /<b>&%/, 'the name is escaped in the page')
  const [failedHref] = linksIn(page, 'figure-failure-rate')
  assert.ok(failedHref)
  assert.ok(failedHref.includes(`service=${new URLSearchParams({ s: WEB }).toString().slice(2)}`), failedHref)
  assert.deepEqual(listedIds(await get(browser, failedHref)), [ids.d8])
  const api = await get(browser, `/insights/?${WINDOW}&service=api`)
  assert.match(
    textOf(api, 'figure-failure-rate'),
    /\( 1 failed \+ 1 rolled back \) ÷ \( 5 succeeded \+ 1 failed\) = 33 %/,
  )
})

test('nothing finished: the rate and spreads say so instead of a number', async () => {
  const { browser } = await history()
  const page = await get(
    browser,
    '/insights/?environment=prod&range=custom&from=2026-08-01&to=2026-08-02&tz=UTC',
  )
  assert.match(textOf(page, 'figure-failure-rate'), /No value Nothing finished in this window/)
  assert.match(textOf(page, 'figure-duration'), /No value/)
  assert.match(textOf(page, 'figure-frequency'), /0 succeeded ÷ 0 days with data = 0\.00 \/ day/)
})

test('defaults: the last environment in order, the last 30 days, UTC (and the page says so)', async () => {
  const { browser } = await history()
  const page = await get(browser, '/insights/')
  assert.match(page, /<option value="prod" selected>/)
  assert.match(page, /<option value="30" selected>/)
  // The services offered are those of the environment, names escaped.
  assert.match(page, /<option value="api" >api<\/option>/)
  assert.ok(page.includes('<option value="web/ü &lt;b&gt;&amp;% x" >web/ü &lt;b&gt;&amp;% x</option>'))
  assert.equal((page.match(/<option value="api"/g) ?? []).length, 1)
  assert.match(page, /Days are counted in <strong>UTC<\/strong>/)
  assert.match(page, /data-zone-redirect/)
  const berlin = await get(browser, '/insights/?tz=Europe/Berlin')
  assert.match(berlin, /Days are counted in <strong>Europe\/Berlin<\/strong>/)
  assert.doesNotMatch(berlin, /data-zone-redirect/)
})

test('days in Europe/Berlin across the spring DST change: right day, none missing or twice', async (t) => {
  const ctx = await buildTestApp(t)
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'bo@example.com', 'member')
  // 2026-03-29: clocks go from 02:00 CET to 03:00 CEST, so the day has 23 hours.
  const times = [
    '2026-03-28T22:59:00Z', // 23:59 on the 28th (CET)
    '2026-03-28T23:01:00Z', // 00:01 on the 29th (CET)
    '2026-03-29T21:59:00Z', // 23:59 on the 29th (CEST)
    '2026-03-29T22:01:00Z', // 00:01 on the 30th (CEST)
  ]
  for (const [i, time] of times.entries()) await send(ctx, time, 'api', 'prod', `v${i}`, 'Deployed')
  const page = await get(
    browser,
    '/insights/?environment=prod&range=custom&from=2026-03-27&to=2026-04-01&tz=Europe/Berlin',
  )
  const days = [...page.matchAll(/<th scope="row">([\s\S]*?)<\/th>\s*<td class="num">(\d+)<\/td>/g)].map(
    (m) => `${dayCell(m[1] ?? '')}=${m[2]}`,
  )
  assert.deepEqual(days, [
    'Fri 27 Mar 2026=0',
    'Sat 28 Mar 2026=1',
    'Sun 29 Mar 2026 (23 h)=2',
    'Mon 30 Mar 2026=1',
    'Tue 31 Mar 2026=0',
  ])
  assert.match(textOf(page, 'figure-frequency'), /4 succeeded ÷ 4 days with data/)
  // The 27th is before the first event: the data covers the other four days (issue 28, point 11).
  assert.match(textOf(page, 'coverage'), /^Data covers 4 of 5 days/)
  // In UTC the same deployments fall on other days.
  const utc = await get(
    browser,
    '/insights/?environment=prod&range=custom&from=2026-03-27&to=2026-04-01&tz=UTC',
  )
  assert.match(
    utc,
    /Sat 28 Mar 2026<\/span><span class="day-short"[^>]*>28 Mar<\/span><\/a><\/th>\s*<td class="num">2<\/td>/,
  )
})

test('bad queries get a clear 422 or 404 page, never a 500, and change nothing', async () => {
  const { ctx, browser } = await history()
  const before = await ctx.eventCount()
  const cases: [string, number, string][] = [
    ['range=365', 422, 'range must be 7, 30, 90 or custom'],
    ['range=custom&from=2026-10-01', 422, 'to is needed'],
    ['range=custom&from=yesterday&to=2026-10-08', 422, 'from must be a date'],
    ['from=2026-02-30&to=2026-03-08', 422, 'from must be a date'],
    ['from=2026-10-08&to=2026-10-08', 422, 'to must be a later date than from'],
    ['from=2026-10-09&to=2026-10-08', 422, 'to must be a later date than from'],
    ['from=2020-01-01&to=2026-01-02', 422, 'longer than 5 years'],
    ['tz=Mars/Olympus', 422, 'tz must be a time zone name'],
    ['tz=%3Cscript%3E', 422, 'tz must be a time zone name'],
    ['range=7&range=30', 422, 'range was given more than once'],
    ['environment=nowhere', 404, 'no environment named “nowhere”'],
    ['service=%3Cb%3Enope', 404, 'no service named “&lt;b&gt;nope”'],
    ['environment=nowhere&range=1', 422, 'range must be'],
    [`from=${'9'.repeat(300)}`, 422, 'longer than 200 characters'],
  ]
  for (const [query, status, message] of cases) {
    const res = await browser.get(`/insights/?${query}`)
    assert.equal(res.statusCode, status, `${query}: ${res.statusCode}`)
    assert.match(res.payload, /role="alert"/, query)
    assert.ok(res.payload.includes(message), `${query}: says "${message}"`)
    assert.doesNotMatch(res.payload, /id="figure-frequency"/, `${query}: no figures`)
    assert.doesNotMatch(res.payload, /<script>/, query)
    const list = await browser.get(`/insights/deployments?${query}&kind=failed`)
    assert.equal(list.statusCode, status, `list ${query}: ${list.statusCode}`)
    assert.ok(list.payload.includes(message), `list ${query}: says "${message}"`)
  }
  for (const kind of ['', 'everything', 'restore&kind=failed']) {
    const res = await browser.get(`/insights/deployments?${WINDOW}&kind=${kind}`)
    assert.equal(res.statusCode, 422, `kind=${kind}`)
    assert.match(res.payload, /kind must be one of/)
  }
  const post = await browser.post('/insights/', {})
  assert.equal(post.statusCode, 405)
  assert.equal(await ctx.eventCount(), before, 'nothing was stored')
})

test('an event just acknowledged counts on the next page (read-your-writes)', async (t) => {
  const ctx = await buildTestApp(t)
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'cy@example.com', 'member')
  const now = new Date().toISOString().slice(0, 10)
  const res = await deploy(ctx.app, ctx.tenant.key, {
    service: 's',
    environment: 'e',
    version: '1',
    status: 'Deployed',
  })
  assert.equal(res.status, 201)
  const page = await get(browser, `/insights/?tz=UTC&range=7`)
  assert.match(textOf(page, 'figure-frequency'), /1 succeeded ÷ 1 day with data/, now)
})

test('a page read again after new deployments shows them (nothing stale is remembered), in any zone', async (t) => {
  const ctx = await buildTestApp(t)
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'di@example.com', 'member')
  const service = 'a/b %2F <i>ü</i>'
  const send = async (version: string) =>
    assert.equal(
      (await deploy(ctx.app, ctx.tenant.key, { service, environment: 'prod', version, status: 'Deployed' }))
        .status,
      201,
    )
  await send('1')
  const path = (tz: string) => `/insights/?tz=${tz}&range=7&service=${encodeURIComponent(service)}`
  for (const tz of ['UTC', 'Africa/Abidjan', 'UTC']) {
    assert.match(
      textOf(await get(browser, path(tz)), 'figure-frequency'),
      /1 succeeded ÷ 1 day with data/,
      tz,
    )
  }
  await send('2')
  for (const tz of ['UTC', 'Africa/Abidjan']) {
    assert.match(
      textOf(await get(browser, path(tz)), 'figure-frequency'),
      /2 succeeded ÷ 1 day with data/,
      tz,
    )
  }
  const table = await get(browser, path('UTC'))
  const today = /<th scope="row">[\s\S]*?<\/th>\s*<td class="num">(\d+)<\/td>/g
  const counts = [...table.matchAll(today)].map((m) => Number(m[1]))
  assert.equal(
    counts.reduce((a, b) => a + b, 0),
    2,
    'the day table counts both',
  )
})

test('an account without deployments gets an explanation, not an error', async (t) => {
  const ctx = await buildTestApp(t)
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'dee@example.com', 'member')
  const page = await get(browser, '/insights/')
  assert.match(page, /No deployments yet/)
  const list = await browser.get('/insights/deployments?kind=succeeded')
  assert.equal(list.statusCode, 404)
  assert.match(list.payload, /This account has no deployments yet/)
  const anon = await ctx.app.inject({ url: '/insights/' })
  assert.equal(anon.statusCode, 303)
  assert.match(String(anon.headers.location), /^\/login\?next=/)
})

test('the default environment is the last in the account’s order, hidden ones left out', async (t) => {
  const ctx = await buildTestApp(t)
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'eve@example.com', 'member')
  for (const environment of ['prod', 'qa', 'staging', 'sandbox']) {
    const res = await deploy(ctx.app, ctx.tenant.key, {
      service: 's',
      environment,
      version: '1',
      status: 'Deployed',
    })
    assert.equal(res.status, 201)
  }
  // Built-in order puts prod last (sandbox, unknown, goes after the known names).
  assert.match(await get(browser, '/insights/?tz=UTC'), /<option value="sandbox" selected>/)
  const account = ctx.tenant.account.id
  await ctx.database.db
    .insertInto('environment_settings')
    .values([
      { account_id: account, name: 'qa', position: 1, hidden: 0 },
      { account_id: account, name: 'prod', position: 2, hidden: 0 },
      { account_id: account, name: 'staging', position: 3, hidden: 1 },
      { account_id: account, name: 'sandbox', position: 4, hidden: 1 },
    ])
    .execute()
  const page = await get(browser, '/insights/?tz=UTC')
  assert.match(page, /<option value="prod" selected>/)
  assert.doesNotMatch(page, /<option value="staging"/, 'a hidden environment is not offered')
  // Asked for by name, a hidden environment is still shown (its link may be bookmarked).
  assert.match(
    await get(browser, '/insights/?tz=UTC&environment=staging'),
    /<option value="staging" selected>/,
  )
})
