// A service's page: per-environment timelines with paging, rollback marks, metadata shown and
// edited by admins only (http(s) links only), hostile service names as one encoded path segment.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { servicePath } from '../../src/views/board-page.js'
import { escapeHtml } from '../../src/views/html.js'
import { buildTestApp } from '../helper.js'
import { boardTable } from '../support/board.js'
import { insertEvents, linkHref, relHref, unescapeHtml, userSession } from '../support/ui.js'

const HOSTILE = [
  'a/b',
  '100%',
  '%2F',
  'with space',
  'ünïcødé ✓',
  '<script>alert(1)</script>',
  `"q'uote&`,
  '..',
]

/** The versions of one environment's table, top to bottom. */
function versionsIn(page: string, environment: string): string[] {
  const caption = `in ${escapeHtml(environment)}, newest first`
  const start = page.indexOf(caption)
  if (start === -1) return []
  const table = page.slice(start, page.indexOf('</table>', start))
  return [...table.matchAll(/<td class="mono">([^<]*)<\/td>/g)].map((m) => unescapeHtml(m[1] ?? ''))
}

test('the timeline per environment: outcome, rollback marks, duration, sender, paging', async (t) => {
  const ctx = await buildTestApp(t)
  const base = Date.UTC(2026, 0, 1)
  const acct = ctx.tenant.account.id
  const seeds = [
    { environment: 'staging', version: '1.0', status: 'Deploying' as const, received_at: base },
    {
      environment: 'staging',
      version: '1.0',
      status: 'Deployed' as const,
      received_at: base + 125_000,
      deployer: 'bob',
    },
    { environment: 'prod', version: '1.0', status: 'Deployed' as const, received_at: base + 200_000 },
    { environment: 'prod', version: '1.1', status: 'Deployed' as const, received_at: base + 300_000 },
    { environment: 'prod', version: '1.0', status: 'Deployed' as const, received_at: base + 400_000 },
    { environment: 'prod', version: '1.2', status: 'Failed' as const, received_at: base + 500_000 },
  ]
  // 30 more in dev, to page through.
  for (let i = 0; i < 30; i++) {
    seeds.push({ environment: 'dev', version: `0.${i}`, status: 'Deployed', received_at: base + i * 1000 })
  }
  await insertEvents(
    ctx.database,
    acct,
    seeds.map((s) => ({ service: 'api', ...s })),
  )
  const { browser } = await userSession(ctx, acct, 'm@example.com', 'member')
  const res = await browser.get('/services/api/')
  assert.equal(res.statusCode, 200)
  // Environments in the built-in order.
  const headings = [...res.payload.matchAll(/<h2 id="env-\d+"><a [^>]*>([^<]*)<\/a><\/h2>/g)].map((m) => m[1])
  assert.deepEqual(headings, ['dev', 'staging', 'prod'])
  assert.deepEqual(versionsIn(res.payload, 'prod'), ['1.2', '1.0', '1.1', '1.0'])
  assert.match(
    res.payload,
    /<span class="state succeeded">Succeeded<\/span> <span class="mark rollback">rollback<\/span>/,
  )
  assert.match(
    res.payload,
    /<span class="state succeeded">Succeeded<\/span> <span class="mark rolled-back">rolled back<\/span>/,
  )
  assert.match(res.payload, /<span class="state failed">Failed<\/span>/)
  // staging 1.0 took 2 min 5 s and was sent by bob (key ci).
  assert.match(
    res.payload,
    /<td class="num">2 min 5 s<\/td>\s*<td>bob <span class="hint">\(key ci\)<\/span><\/td>/,
  )
  // dev: the newest 20, then a link to the older ones of dev only.
  const dev = versionsIn(res.payload, 'dev')
  assert.equal(dev.length, 20)
  assert.equal(dev[0], '0.29')
  const older = relHref(res.payload, 'next')
  assert.ok(older)
  assert.ok(older?.startsWith('/services/api/?environment=dev&before='))
  const page2 = await browser.get(older)
  assert.equal(page2.statusCode, 200)
  assert.deepEqual(
    versionsIn(page2.payload, 'dev'),
    Array.from({ length: 10 }, (_, i) => `0.${9 - i}`),
  )
  assert.equal(versionsIn(page2.payload, 'prod').length, 0)
  assert.equal(linkHref(page2.payload, 'Newest'), '/services/api/?environment=dev')
  // Members see the details but no edit form.
  assert.doesNotMatch(res.payload, /action="\/services\/api\/meta"/)
  const refused = await browser.post('/services/api/meta', { team: 'x' })
  assert.equal(refused.statusCode, 403)
})

test('unknown service, unknown environment and bad paging are clear errors', async (t) => {
  const ctx = await buildTestApp(t)
  await insertEvents(ctx.database, ctx.tenant.account.id, [{ service: 'api', environment: 'prod' }])
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'a@example.com', 'admin')
  const missing = await browser.get('/services/nope/')
  assert.equal(missing.statusCode, 404)
  assert.match(missing.payload, /No such service/)
  assert.equal((await browser.get('/services/api/?environment=qa')).statusCode, 404)
  const bad = await browser.get('/services/api/?environment=prod&before=abc')
  assert.equal(bad.statusCode, 422)
  assert.match(bad.payload, /deployment id/)
  // Without the trailing slash: redirected to the page.
  const bare = await browser.get('/services/api')
  assert.equal(bare.statusCode, 301)
  assert.equal(bare.headers.location, '/services/api/')
  assert.equal((await browser.post('/services/nope/meta', {})).statusCode, 403)
  const posted = await browser.submit('/services/api/', '/services/nope/meta', { team: 'x' })
  assert.equal(posted.statusCode, 404)
})

test('admins edit team, description and links; only http(s) links are kept', async (t) => {
  const ctx = await buildTestApp(t)
  await insertEvents(ctx.database, ctx.tenant.account.id, [{ service: 'api', environment: 'prod' }])
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'a@example.com', 'admin')
  const bad = await browser.submit('/services/api/', '/services/api/meta', {
    team: 'Core',
    repository_url: 'javascript:alert(1)',
    runbook_url: 'data:text/html,hi',
    dashboard_url: 'https://grafana.example/d/1',
  })
  assert.equal(bad.statusCode, 422)
  assert.match(bad.payload, /Repository link must be an http:\/\/ or https:\/\/ address/)
  assert.match(bad.payload, /Runbook link must be/)
  // Nothing was stored.
  assert.equal((await ctx.database.db.selectFrom('services').selectAll().execute()).length, 0)
  // The form keeps what was typed.
  assert.match(bad.payload, /value="javascript:alert\(1\)"/)
  const good = await browser.submit('/services/api/', '/services/api/meta', {
    team: 'Core',
    description: 'The <b>public</b> API',
    repository_url: 'https://git.example/api',
    runbook_url: '',
    dashboard_url: 'http://grafana.example/d/1',
  })
  assert.equal(good.statusCode, 303)
  assert.equal(good.headers.location, '/services/api/')
  const page = await browser.get('/services/api/')
  assert.match(page.payload, /The service details are saved/)
  assert.match(page.payload, /The &lt;b&gt;public&lt;\/b&gt; API/)
  assert.match(
    page.payload,
    /<a href="https:\/\/git\.example\/api" rel="noopener noreferrer nofollow">Repository<\/a>/,
  )
  assert.doesNotMatch(page.payload, />Runbook<\/a>/)
  assert.match(page.payload, /<dt>Team<\/dt><dd>Core<\/dd>/)
})

test('hostile service names work as one encoded path segment in the board, page and forms', async (t) => {
  const ctx = await buildTestApp(t)
  await insertEvents(
    ctx.database,
    ctx.tenant.account.id,
    HOSTILE.map((service, i) => ({ service, environment: 'prod & <qa>', version: `v<${i}>` })),
  )
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'a@example.com', 'admin')
  const board = await browser.get('/services/')
  assert.equal(board.statusCode, 200)
  assert.doesNotMatch(board.payload, /<script>alert/)
  const shown = boardTable(board.payload)
  for (const [i, name] of HOSTILE.entries()) {
    assert.equal(shown.get(name)?.get('prod & <qa>')?.version, `v<${i}>`, name)
    const href = linkHref(board.payload, escapeHtml(name))
    assert.equal(
      href,
      name === '..' ? '/services/-/?name=..' : `/services/${encodeURIComponent(name)}/`,
      name,
    )
    const page = await browser.get(href ?? '')
    assert.equal(page.statusCode, 200, `${name}: ${page.payload.slice(0, 200)}`)
    const title = /<h1 class="service-name">([^<]*)<\/h1>/.exec(page.payload)?.[1]
    assert.equal(unescapeHtml(title ?? ''), name)
    assert.deepEqual(versionsIn(page.payload, 'prod & <qa>'), [`v<${i}>`])
    // The environment link filters to that environment.
    const envPage = await browser.get(servicePath(name, '', { environment: 'prod & <qa>' }))
    assert.equal(envPage.statusCode, 200)
    const saved = await browser.submit(href ?? '', servicePath(name, 'meta'), { team: `team ${name}` })
    assert.equal(saved.statusCode, 303, name)
    assert.equal(saved.headers.location, href)
  }
  const teams = await ctx.database.db.selectFrom('services').select(['name', 'team']).execute()
  assert.deepEqual(new Set(teams.map((r) => r.name)), new Set(HOSTILE))
  // A team filter with a hostile value is escaped and works.
  const filtered = await browser.get(
    `/services/?team=${encodeURIComponent('team <script>alert(1)</script>')}`,
  )
  assert.deepEqual([...boardTable(filtered.payload).keys()], ['<script>alert(1)</script>'])
  assert.doesNotMatch(filtered.payload, /<script>alert/)
})
