// Hostile and non-Latin values are HTML-escaped on every page and neutralised in the CSV, never executed.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { assetUrl } from '../../src/views/assets.js'
import { buildTestApp } from '../helper.js'
import { deploy, linkHref, parseCsv, sharedFixture, shownVersions, userSession } from '../support/ui.js'

const SCRIPT = '<script>alert(1)</script>'
const IMG = '"><img src=x onerror=alert(1)>'
const FORMULA = '=HYPERLINK("http://x","y")'
const UNICODE = 'Déploiement ✓ 部署'
const SVG_EMAIL = '"><svg/onload=alert(1)>@x.example'
const HOSTILE_URL = 'https://x.example/"><script>alert(2)</script>'

/** Every <script> element in the page; only the app's own script file may be there. */
function scriptTags(html: string): string[] {
  return [...html.matchAll(/<script\b[^>]*>/gi)].map((m) => m[0])
}

function assertInert(html: string, where: string): void {
  assert.ok(!html.includes(SCRIPT), `raw ${SCRIPT} in ${where}`)
  assert.ok(!html.includes('<script>alert(2)</script>'), `raw script from the url in ${where}`)
  assert.ok(!/<img\b/i.test(html), `an <img> element in ${where}`)
  assert.ok(!/<svg\b/i.test(html), `an <svg> element in ${where}`)
  assert.deepEqual(
    scriptTags(html),
    [`<script src="${assetUrl('app.js')}" defer>`],
    `script tags in ${where}`,
  )
}

// Built once for the file's read-only tests.
const hostileApp = sharedFixture(async (cleanup) => {
  const ctx = await buildTestApp(cleanup)
  const first = await deploy(ctx.app, ctx.tenant.key, {
    service: SCRIPT,
    environment: IMG,
    version: FORMULA,
    status: 'deployed',
    url: HOSTILE_URL,
    commit: "'onmouseover='alert(1)",
    description: UNICODE,
    deployer: 'Zoë 🚀',
  })
  assert.equal(first.status, 201, JSON.stringify(first.body))
  const second = await deploy(ctx.app, ctx.tenant.key, {
    service: UNICODE,
    environment: '生产',
    version: 'v1.0-ü',
    status: 'Failed',
  })
  assert.equal(second.status, 201)
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'ada@example.com')
  return { ctx, browser }
})

test('/logs/ escapes hostile event values and shows non-Latin text as it is', async () => {
  const { browser } = await hostileApp()
  const res = await browser.get('/logs/')
  assert.equal(res.statusCode, 200)
  assert.match(String(res.headers['content-type']), /charset=utf-8/i)
  const html = res.payload
  assertInert(html, '/logs/')
  assert.ok(html.includes('&lt;script&gt;alert(1)&lt;/script&gt;'), 'service shown, escaped')
  assert.ok(html.includes('&quot;&gt;&lt;img src=x onerror=alert(1)&gt;'), 'environment shown, escaped')
  assert.ok(html.includes('=HYPERLINK(&quot;http://x&quot;,&quot;y&quot;)'), 'version shown, escaped')
  assert.ok(html.includes('<span class="mono" title="commit">&#39;onmouseover</span>'), 'commit escaped')
  assert.ok(html.includes(UNICODE), 'non-Latin text verbatim')
  assert.ok(html.includes('Zoë 🚀'))
  assert.ok(html.includes('生产'))
  assert.deepEqual(shownVersions(html), ['v1.0-ü', FORMULA])
  // The hostile url stays inside its href.
  assert.ok(html.includes('href="https://x.example/&quot;&gt;&lt;script&gt;alert(2)&lt;/script&gt;"'))
})

test('filtering by a hostile value refills the form and the download links escaped', async () => {
  const { browser } = await hostileApp()
  const res = await browser.get(`/logs/?${new URLSearchParams({ service: SCRIPT, environment: IMG })}`)
  assert.equal(res.statusCode, 200)
  assertInert(res.payload, 'the filtered /logs/')
  assert.deepEqual(shownVersions(res.payload), [FORMULA])
  assert.ok(res.payload.includes('value="&lt;script&gt;alert(1)&lt;/script&gt;"'))
  const csvHref = linkHref(res.payload, 'Download CSV')
  assert.ok(csvHref)
  const params = new URL(csvHref, 'http://x').searchParams
  assert.equal(params.get('service'), SCRIPT)
  assert.equal(params.get('environment'), IMG)
})

test('the CSV neutralises the formula and keeps non-Latin text; the JSON keeps values verbatim', async () => {
  const { browser } = await hostileApp()
  const csv = await browser.get('/logs/export.csv')
  assert.equal(csv.statusCode, 200)
  const rows = parseCsv(csv.payload)
  const hostile = rows.find((r) => r[2] === SCRIPT)
  assert.ok(hostile, 'the hostile event is exported')
  assert.equal(hostile[4], `'${FORMULA}`)
  assert.equal(hostile[3], IMG)
  assert.equal(hostile[8], UNICODE)
  assert.equal(hostile[9], 'Zoë 🚀')
  assert.ok(csv.payload.includes(`"'=HYPERLINK(""http://x"",""y"")"`))
  assert.ok(!/(^|,)=HYPERLINK/m.test(csv.payload), 'no cell starts with =')
  const other = rows.find((r) => r[2] === UNICODE)
  assert.deepEqual(other?.slice(2, 6), [UNICODE, '生产', 'v1.0-ü', 'Failed'])

  const json = await browser.get('/logs/export.json')
  const events = json.json() as Record<string, unknown>[]
  const record = events.find((e) => e.service === SCRIPT)
  assert.equal(record?.version, FORMULA)
  assert.equal(record?.description, UNICODE)
  assert.equal(record?.url, HOSTILE_URL)
})

test('settings, login and account names escape hostile key names, emails and account names', async (t) => {
  const ctx = await buildTestApp(t)
  const evil = await ctx.addTenant(`${SCRIPT} Ltd`, IMG)
  const { browser } = await userSession(ctx, evil.account.id, 'admin@example.com')

  // Post/redirect/get: the results show on the page each form redirects to.
  assert.equal((await browser.submit('/settings/', '/settings/keys', { name: SCRIPT })).statusCode, 303)
  const created = await browser.get('/settings/')
  assert.match(created.payload, /id="new-key"/)
  assertInert(created.payload, 'the new-key page')
  const adding = await browser.submit('/settings/', '/settings/users', { email: SVG_EMAIL, role: 'member' })
  assert.equal(adding.statusCode, 303, adding.payload.slice(0, 400))
  const added = await browser.get('/settings/')
  assert.match(added.payload, /id="new-password"/)
  assertInert(added.payload, 'the new-user page')

  const settings = await browser.get('/settings/')
  assertInert(settings.payload, '/settings/')
  assert.ok(settings.payload.includes('&lt;script&gt;alert(1)&lt;/script&gt; Ltd'), 'account name escaped')
  assert.ok(settings.payload.includes('Revoke &lt;script&gt;alert(1)&lt;/script&gt;'), 'key name escaped')
  assert.ok(settings.payload.includes('&quot;&gt;&lt;svg/onload=alert(1)&gt;@x.example'), 'email escaped')
  assert.ok(settings.payload.includes('&quot;&gt;&lt;img src=x onerror=alert(1)&gt;'), 'key name escaped')
  assertInert((await browser.get('/logs/')).payload, '/logs/ of the hostile account')

  const anonymous = await ctx.app.inject({
    method: 'GET',
    url: `/login?next=${encodeURIComponent(`/"${SCRIPT}`)}`,
  })
  assert.equal(anonymous.statusCode, 200)
  assertInert(anonymous.payload, '/login with a hostile next')
})
