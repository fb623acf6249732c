// Every page carries a strict CSP (no inline scripts, no framing), nosniff, and Cache-Control: no-store.
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { PUBLIC_DIR } from '../../src/paths.js'
import { assetUrl, loadStaticAssets } from '../../src/views/assets.js'
import { buildTestApp } from '../helper.js'
import { Browser, createUserIn, login, type Response } from '../support/ui.js'

function directives(csp: string): Map<string, string[]> {
  const out = new Map<string, string[]>()
  for (const part of csp.split(';')) {
    const [name, ...values] = part.trim().split(/\s+/)
    if (name) out.set(name.toLowerCase(), values)
  }
  return out
}

function assertPageHeaders(res: Response, where: string): void {
  assert.match(String(res.headers['content-type']), /^text\/html/, `${where} is a page`)
  const csp = String(res.headers['content-security-policy'] ?? '')
  assert.ok(csp, `${where} has a Content-Security-Policy`)
  const d = directives(csp)
  const scripts = d.get('script-src') ?? d.get('default-src')
  assert.ok(scripts, `${where}: scripts are restricted (${csp})`)
  assert.ok(!scripts.includes("'unsafe-inline'"), `${where}: no inline scripts (${csp})`)
  assert.ok(!scripts.includes("'unsafe-eval'"), `${where}: no eval (${csp})`)
  assert.ok(!scripts.includes('*'), `${where}: no wildcard script source`)
  assert.deepEqual(d.get('frame-ancestors'), ["'none'"], `${where}: frame-ancestors 'none' (${csp})`)
  assert.equal(res.headers['x-content-type-options'], 'nosniff', where)
  assert.equal(res.headers['cache-control'], 'no-store', `${where}: Cache-Control`)
}

test('pages before login: set-up and login', async (t) => {
  const ctx = await buildTestApp(t)
  const setup = await ctx.app.inject({ method: 'GET', url: '/setup' })
  assert.equal(setup.statusCode, 200)
  assertPageHeaders(setup, '/setup')

  await createUserIn(ctx.database, ctx.tenant.account.id, 'ada@example.com')
  const browser = new Browser(ctx.app)
  const page = await browser.get('/login')
  assert.equal(page.statusCode, 200)
  assertPageHeaders(page, '/login')
  const token = await browser.csrf('/login')
  const wrong = await browser.post('/login', {
    _csrf: token,
    email: 'ada@example.com',
    password: 'not the one!',
  })
  assert.equal(wrong.statusCode, 401)
  assertPageHeaders(wrong, 'the failed-login page')
  const forged = await browser.post('/login', { _csrf: 'forged', email: 'ada@example.com', password: 'x' })
  assert.equal(forged.statusCode, 403)
  assertPageHeaders(forged, 'the CSRF refusal page')
})

test('pages after login: logs, settings, password, a new key, error pages; downloads are no-store too', async (t) => {
  const ctx = await buildTestApp(t)
  await createUserIn(ctx.database, ctx.tenant.account.id, 'ada@example.com')
  await createUserIn(ctx.database, ctx.tenant.account.id, 'mel@example.com', { role: 'member' })
  const browser = await login(ctx.app, 'ada@example.com')
  for (const url of ['/logs/', '/logs/?service=x&status=failed', '/settings/', '/account/password']) {
    const res = await browser.get(url)
    assert.equal(res.statusCode, 200, url)
    assertPageHeaders(res, url)
  }
  const badFilter = await browser.get('/logs/?status=nope')
  assert.equal(badFilter.statusCode, 422)
  assertPageHeaders(badFilter, 'the bad-filter page')

  // Post/redirect/get: the new key is on the page the form redirects to.
  assert.equal(
    (await browser.submit('/settings/', '/settings/keys', { name: 'secret-holder' })).statusCode,
    303,
  )
  const created = await browser.get('/settings/')
  assert.match(created.payload, /id="new-key"/)
  assertPageHeaders(created, 'the page showing a new key')

  const notFound = await browser.submit('/settings/', '/settings/keys/424242/revoke', {})
  assert.equal(notFound.statusCode, 404)
  assertPageHeaders(notFound, 'the 404 page')

  const member = await login(ctx.app, 'mel@example.com')
  const forbidden = await member.submit('/settings/', '/settings/keys', { name: 'nope' })
  assert.equal(forbidden.statusCode, 403)
  assertPageHeaders(forbidden, 'the 403 page')

  for (const url of ['/logs/export.csv', '/logs/export.json']) {
    const res = await browser.get(url)
    assert.equal(res.statusCode, 200)
    assert.equal(res.headers['cache-control'], 'no-store', url)
    assert.equal(res.headers['x-content-type-options'], 'nosniff', url)
  }
})

/** Inline code the CSP would block (and so a page that relies on it would break): scripts, handlers, styles. */
function inlineCode(html: string): string[] {
  const found: string[] = []
  // Only real tags are looked at: text the page shows (escaped, as &lt;…) cannot be one.
  for (const [tag] of html.matchAll(/<[a-zA-Z][^>]*>/g)) {
    if (/^<script\b/i.test(tag) && !/\ssrc=/i.test(tag)) found.push(`inline script: ${tag}`)
    if (/^<style\b/i.test(tag)) found.push(`style element: ${tag}`)
    if (/\son[a-z]+\s*=/i.test(tag)) found.push(`event handler attribute: ${tag}`)
    if (/\sstyle\s*=/i.test(tag)) found.push(`style attribute: ${tag}`)
    if (/=\s*["']?\s*javascript:/i.test(tag)) found.push(`javascript: URL: ${tag}`)
  }
  return found
}

test('no page carries inline scripts, event handlers or inline styles, so the strict CSP breaks nothing', async (t) => {
  const ctx = await buildTestApp(t)
  const anonymous = new Browser(ctx.app)
  const pages: Array<[string, Response]> = [['/setup', await anonymous.get('/setup')]]
  await createUserIn(ctx.database, ctx.tenant.account.id, 'ada@example.com')
  pages.push(['/login', await anonymous.get('/login')])
  const admin = await login(ctx.app, 'ada@example.com')
  for (const url of ['/logs/', '/settings/', '/account/password', '/logout', '/logs/?status=nope']) {
    pages.push([url, await admin.get(url)])
  }
  await admin.submit('/settings/', '/settings/keys', { name: 'k' })
  pages.push(['a new key', await admin.get('/settings/')])
  await admin.submit('/settings/', '/settings/users', { email: 'x@example.com', role: 'member' })
  pages.push(['a new user', await admin.get('/settings/')])
  pages.push(['a 404 page', await admin.get('/nope', { accept: 'text/html' })])
  for (const [where, res] of pages) {
    assert.match(String(res.headers['content-type']), /^text\/html/, where)
    assert.deepEqual(inlineCode(res.payload), [], where)
  }
  // The one script the pages load is served from this origin, as script-src 'self' requires.
  const script = await admin.get('/static/app.js')
  assert.equal(script.statusCode, 200)
  assert.match(String(script.headers['content-type']), /javascript/)
})

test('behind a trusted proxy only http and https are taken from X-Forwarded-Proto: `javascript` never reaches the Settings snippets', async (t) => {
  const ctx = await buildTestApp(t, { env: { SHIPLOG_TRUST_PROXY: 'true' } })
  await createUserIn(ctx.database, ctx.tenant.account.id, 'ada@example.com')
  const cases: Array<[string, string]> = [
    ['javascript', 'http://shiplog.test'],
    ['https, javascript', 'http://shiplog.test'],
    ['data', 'http://shiplog.test'],
    ['HTTPS', 'https://shiplog.test'],
    ['http, https', 'https://shiplog.test'],
    ['http', 'http://shiplog.test'],
  ]
  for (const [proto, base] of cases) {
    const browser = await login(ctx.app, 'ada@example.com', undefined, {
      host: 'shiplog.test',
      'x-forwarded-proto': proto,
    })
    const res = await browser.get('/settings/')
    assert.equal(res.statusCode, 200, proto)
    assert.ok(res.payload.includes(`${base}/deploy`), `X-Forwarded-Proto: ${proto} gives ${base}`)
    assert.doesNotMatch(res.payload, /javascript:|data:\/\//i, `X-Forwarded-Proto: ${proto}`)
  }
})

test('static files: pages load them from content-hashed URLs cached for a year; the plain URL is revalidated', async (t) => {
  const ctx = await buildTestApp(t)
  await createUserIn(ctx.database, ctx.tenant.account.id, 'ada@example.com')
  const admin = await login(ctx.app, 'ada@example.com')
  const page = await admin.get('/logs/')
  for (const name of ['app.js', 'app.css', 'favicon.svg']) {
    const file = readFileSync(join(PUBLIC_DIR, name))
    const digest = createHash('sha256').update(file).digest('hex').slice(0, 12)
    const [stem, ext] = name.split('.')
    const url = `/static/${stem}.${digest}.${ext}`
    assert.ok(page.payload.includes(`"${url}"`), `the page loads ${name} from ${url}`)
    assert.ok(!page.payload.includes(`"/static/${name}"`), `the page does not load the plain ${name}`)
    const res = await admin.get(url)
    assert.equal(res.statusCode, 200, url)
    assert.equal(res.headers['cache-control'], 'public, max-age=31536000, immutable', url)
    assert.ok(Buffer.from(res.rawPayload).equals(file), `${url} is the file's content`)
    const again = await admin.get(url, { 'if-none-match': String(res.headers.etag) })
    assert.equal(again.statusCode, 304, `${url} revalidated with its ETag`)
    // Another digest is another file: not served as this one.
    assert.equal((await admin.get(`/static/${stem}.000000000000.${ext}`)).statusCode, 404)
    const plain = await admin.get(`/static/${name}`)
    assert.equal(plain.statusCode, 200, `/static/${name} still answers`)
    assert.match(String(plain.headers['cache-control']), /max-age=0\b/, `/static/${name} is not kept stale`)
  }
})

test('static files: a changed file gets another URL', () => {
  const dir = mkdtempSync(join(tmpdir(), 'shiplog-assets-'))
  try {
    for (const name of ['app.js', 'app.css', 'favicon.svg'])
      copyFileSync(join(PUBLIC_DIR, name), join(dir, name))
    const before = loadStaticAssets(dir)
    writeFileSync(join(dir, 'app.js'), `${readFileSync(join(dir, 'app.js'), 'utf8')}\n// next release\n`)
    const after = loadStaticAssets(dir)
    assert.notEqual(after.get('app.js')?.url, before.get('app.js')?.url)
    assert.equal(after.get('app.css')?.url, before.get('app.css')?.url, 'an unchanged file keeps its URL')
    assert.equal(
      before.get('app.js')?.url,
      assetUrl('app.js'),
      "the app's own URL comes from the same digest",
    )
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

test('framing and browser features: X-Frame-Options agrees with frame-ancestors, Permissions-Policy turns off what Shiplog does not use', async (t) => {
  const ctx = await buildTestApp(t)
  await createUserIn(ctx.database, ctx.tenant.account.id, 'ada@example.com')
  const admin = await login(ctx.app, 'ada@example.com')
  for (const url of ['/login', '/logs/', '/settings/', '/logs/export.csv', `${assetUrl('app.js')}`]) {
    const res = url === '/login' ? await new Browser(ctx.app).get(url) : await admin.get(url)
    assert.equal(res.statusCode, 200, url)
    assert.equal(res.headers['x-frame-options'], 'DENY', url)
    assert.match(String(res.headers['content-security-policy']), /frame-ancestors 'none'/, url)
    const policy = String(res.headers['permissions-policy'] ?? '')
    for (const feature of ['camera', 'microphone', 'geolocation', 'payment', 'usb']) {
      assert.ok(policy.split(/,\s*/).includes(`${feature}=()`), `${url}: ${feature} off (${policy})`)
    }
    assert.doesNotMatch(policy, /clipboard/, `${url}: the copy buttons keep the clipboard`)
  }
})
