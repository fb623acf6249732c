// Public badges: "service · environment", the running version in its own colour as SVG and as a
// shields.io endpoint document with a failed or unfinished latest deployment beside it, one refusal
// for every wrong token, rotation, cache and security headers, and hostile names in the path.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { ensureBadgeToken } from '../../src/domain/board/settings.js'
import { buildTestApp, type TestApp } from '../helper.js'
import { assertWellFormedXml } from '../support/board.js'
import { insertEvents, userSession } from '../support/ui.js'

async function withHistory(t: Parameters<typeof buildTestApp>[0]): Promise<{ ctx: TestApp; token: string }> {
  const ctx = await buildTestApp(t)
  const now = Date.now()
  await insertEvents(ctx.database, ctx.tenant.account.id, [
    { service: 'api', environment: 'prod', version: '1.0', status: 'Deployed', received_at: now - 60_000 },
    { service: 'api', environment: 'staging', version: '1.1', status: 'Deployed', received_at: now - 50_000 },
    { service: 'api', environment: 'staging', version: '1.2', status: 'Failed', received_at: now - 40_000 },
    { service: 'api', environment: 'dev', version: '1.3', status: 'Deploying', received_at: now - 30_000 },
    {
      service: 'web',
      environment: 'prod',
      version: '2.0',
      status: 'Deployed',
      received_at: now - 3 * 3600_000,
    },
    // Open for two hours, beyond the default stall time of 60 minutes: stalled.
    {
      service: 'web',
      environment: 'prod',
      version: '2.1',
      status: 'Deploying',
      received_at: now - 2 * 3600_000,
    },
    { service: 'pay', environment: 'prod', version: '3.0', status: 'Deployed', received_at: now - 20_000 },
    { service: 'pay', environment: 'prod', version: '3.1', status: 'Failed', received_at: now - 15_000 },
    { service: 'pay', environment: 'prod', version: '3.2', status: 'Deployed', received_at: now - 10_000 },
    {
      service: 'a/b <"x">',
      environment: 'pr%d ü',
      version: '<v&1>',
      status: 'Deployed',
      received_at: now - 5_000,
    },
    { service: 'a/b <"x">', environment: 'pr%d ü', version: '<v&2>', status: 'Failed', received_at: now },
  ])
  return { ctx, token: await ensureBadgeToken(ctx.database.db, ctx.tenant.account.id) }
}

const get = (ctx: TestApp, url: string, headers: Record<string, string> = {}) =>
  ctx.app.inject({ method: 'GET', url, headers })

/** The fills of the badge's segments, left to right (the label's grey first). */
const segmentFills = (svg: string) =>
  [...svg.matchAll(/<rect (?:x="[\d.]+" )?width="[\d.]+" height="20" fill="(#[0-9a-f]{3,6})"\/>/g)].map(
    (m) => m[1],
  )

test('the SVG badge names service and environment and shows the running version in green', async (t) => {
  const { ctx, token } = await withHistory(t)
  const prod = await get(ctx, `/badge/${token}/api/prod.svg`)
  assert.equal(prod.statusCode, 200)
  assert.equal(prod.headers['content-type'], 'image/svg+xml; charset=utf-8')
  assertWellFormedXml(prod.payload)
  assert.match(prod.payload, /<title>api · prod: 1\.0<\/title>/)
  assert.deepEqual(segmentFills(prod.payload), ['#555', '#1a7f37'])
  // Cache headers for a README image, a CSP that allows no script, readable from other sites.
  assert.equal(prod.headers['cache-control'], 'max-age=60, s-maxage=60')
  assert.match(String(prod.headers['content-security-policy']), /^default-src 'none';/)
  assert.doesNotMatch(String(prod.headers['content-security-policy']), /script-src/)
  assert.equal(prod.headers['cross-origin-resource-policy'], 'cross-origin')
  assert.equal(prod.headers['x-content-type-options'], 'nosniff')
  const etag = String(prod.headers.etag)
  assert.match(etag, /^"[\w-]+"$/)
  const again = await get(ctx, `/badge/${token}/api/prod.svg`, { 'if-none-match': etag })
  assert.equal(again.statusCode, 304)
  assert.equal(again.payload, '')
  // staging runs 1.1 (green); its latest (1.2) failed: a red segment beside it. dev: in progress,
  // nothing running: grey, and an amber segment.
  const staging = await get(ctx, `/badge/${token}/api/staging.svg`)
  assertWellFormedXml(staging.payload)
  assert.match(staging.payload, /<title>api · staging: 1\.1 · 1\.2 failed<\/title>/)
  assert.deepEqual(segmentFills(staging.payload), ['#555', '#1a7f37', '#cf222e'])
  assert.match(staging.payload, /<text x="[\d.]+" y="14">1\.1<\/text>/)
  assert.match(staging.payload, /<text x="[\d.]+" y="14">1\.2 failed<\/text>/)
  const dev = await get(ctx, `/badge/${token}/api/dev.svg`)
  assert.match(dev.payload, /<title>api · dev: no deployment · 1\.3 deploying<\/title>/)
  assert.deepEqual(segmentFills(dev.payload), ['#555', '#6e7781', '#9a6700'])
})

test('a failed, stalled or recovered latest deployment leaves the running version green', async (t) => {
  const { ctx, token } = await withHistory(t)
  const web = await get(ctx, `/badge/${token}/web/prod.svg`)
  assert.match(web.payload, /<title>web · prod: 2\.0 · 2\.1 stalled<\/title>/)
  assert.deepEqual(segmentFills(web.payload), ['#555', '#1a7f37', '#9a6700'])
  // 3.1 failed, then 3.2 succeeded: nothing beside the running version.
  const pay = await get(ctx, `/badge/${token}/pay/prod.svg`)
  assert.match(pay.payload, /<title>pay · prod: 3\.2<\/title>/)
  assert.deepEqual(segmentFills(pay.payload), ['#555', '#1a7f37'])
  const json = async (path: string) => (await get(ctx, `/badge/${token}/${path}.json`)).json()
  assert.deepEqual(await json('web/prod'), {
    schemaVersion: 1,
    label: 'web · prod',
    message: '2.0 · 2.1 stalled',
    color: 'green',
  })
  assert.deepEqual(await json('pay/prod'), {
    schemaVersion: 1,
    label: 'pay · prod',
    message: '3.2',
    color: 'green',
  })
  assert.deepEqual(await json('api/dev'), {
    schemaVersion: 1,
    label: 'api · dev',
    message: 'no deployment · 1.3 deploying',
    color: 'lightgrey',
  })
})

test('a long service name is cut short in the label, whole in the title', async (t) => {
  const { ctx, token } = await withHistory(t)
  const long = `${'s'.repeat(70)}`
  await insertEvents(ctx.database, ctx.tenant.account.id, [
    { service: long, environment: 'prod', version: '9.9', status: 'Deployed', received_at: Date.now() },
  ])
  const res = await get(ctx, `/badge/${token}/${long}/prod.json`)
  assert.deepEqual(res.json(), {
    schemaVersion: 1,
    label: `${'s'.repeat(59)}…`,
    message: '9.9',
    color: 'green',
  })
  const svg = (await get(ctx, `/badge/${token}/${long}/prod.svg`)).payload
  assert.match(svg, new RegExp(`<title>${long} · prod: 9\\.9</title>`))
  assert.match(svg, new RegExp(`<text x="[\\d.]+" y="14">${'s'.repeat(59)}…</text>`))
})

test('the .json badge is a shields.io endpoint document', async (t) => {
  const { ctx, token } = await withHistory(t)
  const res = await get(ctx, `/badge/${token}/api/staging.json`)
  assert.equal(res.statusCode, 200)
  assert.match(String(res.headers['content-type']), /^application\/json/)
  // The running version's colour, the failure beside it in the message.
  assert.deepEqual(res.json(), {
    schemaVersion: 1,
    label: 'api · staging',
    message: '1.1 · 1.2 failed',
    color: 'green',
  })
  assert.equal(res.headers['cache-control'], 'max-age=60, s-maxage=60')
})

test('a right token and an unknown service or environment: a grey "no deployment" badge', async (t) => {
  const { ctx, token } = await withHistory(t)
  for (const path of ['nope/prod', 'api/nowhere']) {
    const res = await get(ctx, `/badge/${token}/${path}.svg`)
    assert.equal(res.statusCode, 200)
    assertWellFormedXml(res.payload)
    assert.match(res.payload, /no deployment/)
    assert.match(res.payload, /fill="#6e7781"/)
  }
})

test('a wrong token gets the same answer whether or not the service exists', async (t) => {
  const { ctx, token } = await withHistory(t)
  const other = await ctx.addTenant('Other')
  const otherToken = await ensureBadgeToken(ctx.database.db, other.account.id)
  const comparable = (res: Awaited<ReturnType<typeof get>>) => {
    const { date: _date, ...headers } = res.headers
    return { status: res.statusCode, headers, body: res.payload }
  }
  for (const ext of ['svg', 'json']) {
    const wrong = `A${token.slice(1)}` === token ? `B${token.slice(1)}` : `A${token.slice(1)}`
    const answers = [
      `/badge/${wrong}/api/prod.${ext}`,
      `/badge/${wrong}/nope/nowhere.${ext}`,
      `/badge/short/api/prod.${ext}`,
      `/badge/${'x'.repeat(90)}/api/prod.${ext}`,
      // Another account's token does not open this account's services.
      `/badge/${otherToken}/api/prod.${ext}`,
    ].map((u) => get(ctx, u))
    const results = await Promise.all(answers)
    const first = comparable(results[0] as Awaited<ReturnType<typeof get>>)
    assert.equal(first.status, 404)
    for (const r of results.slice(0, 4)) assert.deepEqual(comparable(r), first)
    if (ext === 'svg') assertWellFormedXml(first.body)
    // The other account has no "api": its answer is a grey badge, never this account's version.
    const foreign = results[4]
    assert.doesNotMatch(foreign?.payload ?? '', /1\.0/)
  }
})

test('rotating the token stops the old one at once', async (t) => {
  const { ctx, token } = await withHistory(t)
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'a@example.com', 'admin')
  const settings = await browser.get('/settings/')
  assert.match(settings.payload, new RegExp(`/badge/${token}/&lt;service&gt;/&lt;environment&gt;\\.svg`))
  assert.match(
    settings.payload,
    new RegExp(`!\\[prod\\]\\(http://localhost(:\\d+)?/badge/${token}/App1/prod\\.svg\\)`),
  )
  const rotated = await browser.submit('/settings/', '/settings/badge-token', {})
  assert.equal(rotated.statusCode, 303)
  const row = await ctx.database.db
    .selectFrom('accounts')
    .select('badge_token')
    .where('id', '=', ctx.tenant.account.id)
    .executeTakeFirstOrThrow()
  assert.ok(row.badge_token && row.badge_token !== token)
  assert.equal((await get(ctx, `/badge/${token}/api/prod.svg`)).statusCode, 404)
  const fresh = await get(ctx, `/badge/${row.badge_token}/api/prod.svg`)
  assert.equal(fresh.statusCode, 200)
  assert.match(fresh.payload, /1\.0/)
  assert.match((await browser.get('/settings/')).payload, /The badge token is rotated/)
  // Members neither see the token nor rotate it.
  const { browser: member } = await userSession(ctx, ctx.tenant.account.id, 'm@example.com', 'member')
  assert.doesNotMatch((await member.get('/settings/')).payload, new RegExp(String(row.badge_token)))
  assert.equal((await member.submit('/settings/', '/settings/badge-token', {})).statusCode, 403)
})

test('hostile names in the badge path are decoded once and escaped in the SVG', async (t) => {
  const { ctx, token } = await withHistory(t)
  const url = `/badge/${token}/${encodeURIComponent('a/b <"x">')}/${encodeURIComponent('pr%d ü')}.svg`
  const res = await get(ctx, url)
  assert.equal(res.statusCode, 200)
  assertWellFormedXml(res.payload)
  assert.match(
    res.payload,
    /<title>a\/b &lt;&quot;x&quot;&gt; · pr%d ü: &lt;v&amp;1&gt; · &lt;v&amp;2&gt; failed<\/title>/,
  )
  assert.match(res.payload, /<text x="[\d.]+" y="14">a\/b &lt;&quot;x&quot;&gt; · pr%d ü<\/text>/)
  assert.match(res.payload, /<text x="[\d.]+" y="14">&lt;v&amp;2&gt; failed<\/text>/)
  assert.doesNotMatch(res.payload, /<v&|<"x">/)
  const json = await get(ctx, url.replace(/\.svg$/, '.json'))
  assert.deepEqual(json.json(), {
    schemaVersion: 1,
    label: 'a/b <"x"> · pr%d ü',
    message: '<v&1> · <v&2> failed',
    color: 'green',
  })
  for (const odd of [
    '%3Cscript%3E/x.svg',
    '%2525/%25.svg',
    "'%22/%3C.json",
    'x/%C3%28.svg',
    'x/.svg',
    'x/y.png',
  ]) {
    const r = await get(ctx, `/badge/${token}/${odd}`)
    assert.ok(r.statusCode === 200 || r.statusCode === 404 || r.statusCode === 400, `${odd}: ${r.statusCode}`)
    if (r.headers['content-type']?.toString().startsWith('image/svg+xml')) assertWellFormedXml(r.payload)
  }
})
