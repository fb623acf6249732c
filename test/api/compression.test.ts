// gzip and Brotli as the client's Accept-Encoding asks (q-values, Vary), on pages, the API, /docs, static files and streamed exports; never on ingest or the live stream.
import assert from 'node:assert/strict'
import { subscribe, unsubscribe } from 'node:diagnostics_channel'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { test } from 'node:test'
import { brotliDecompressSync, gunzipSync } from 'node:zlib'
import type { FastifyInstance, RouteOptions } from 'fastify'
import { createApiKey } from '../../src/domain/keys.js'
import { assetUrl } from '../../src/views/assets.js'
import { buildTestApp, type TestApp } from '../helper.js'
import { type Browser, deploy, insertEvents, type Response, userSession } from '../support/ui.js'

function decoded(res: Response): Buffer {
  const raw = Buffer.from(res.rawPayload)
  const encoding = res.headers['content-encoding']
  if (encoding === 'gzip') return gunzipSync(raw)
  if (encoding === 'br') return brotliDecompressSync(raw)
  assert.equal(encoding, undefined, `unexpected Content-Encoding ${String(encoding)}`)
  return raw
}

/** A page's text with what changes at every request (CSRF tokens) blanked. */
function stable(body: Buffer): string {
  return body.toString('utf8').replace(/name="_csrf" value="[^"]*"/g, 'name="_csrf" value=""')
}

function varies(res: Response): boolean {
  return String(res.headers.vary ?? '')
    .toLowerCase()
    .split(/\s*,\s*/)
    .includes('accept-encoding')
}

async function seeded(
  t: Parameters<typeof buildTestApp>[0],
): Promise<{ ctx: TestApp; browser: Browser; reader: string }> {
  const ctx = await buildTestApp(t)
  await insertEvents(
    ctx.database,
    ctx.tenant.account.id,
    Array.from({ length: 300 }, (_, i) => ({
      service: `service-${i % 7}`,
      environment: i % 2 ? 'prod' : 'staging',
      version: `1.${i}.0 é`,
      description: `release ${i}, "with" quotes`,
    })),
  )
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'ada@example.com', 'admin')
  const { key: reader } = await createApiKey(ctx.database.db, {
    accountId: ctx.tenant.account.id,
    name: 'reader',
    createdBy: 'test',
    scopes: ['read'],
  })
  return { ctx, browser, reader }
}

test('pages, the API, /docs, static files and both exports come gzip or Brotli compressed, and decompress to the plain body', async (t) => {
  const { ctx, browser, reader } = await seeded(t)
  const targets: Array<{ url: string; via: 'session' | 'key' | 'anonymous'; page?: boolean }> = [
    { url: '/logs/', via: 'session', page: true },
    { url: '/services/', via: 'session', page: true },
    { url: '/logs/export.csv', via: 'session' },
    { url: '/logs/export.json', via: 'session' },
    { url: '/logs/export.csv?bom=1&service=service-3', via: 'session' },
    { url: '/settings/audit/export.csv', via: 'session' },
    { url: '/api/v1/events?limit=200', via: 'key' },
    { url: '/openapi.json', via: 'anonymous' },
    { url: '/docs/static/swagger-ui-bundle.js', via: 'anonymous' },
    { url: '/docs/static/swagger-ui.css', via: 'anonymous' },
    { url: assetUrl('app.js'), via: 'anonymous' },
    { url: assetUrl('app.css'), via: 'anonymous' },
  ]
  const get = (url: string, via: string, acceptEncoding?: string) => {
    const headers: Record<string, string> =
      acceptEncoding === undefined ? {} : { 'accept-encoding': acceptEncoding }
    if (via === 'session') return browser.get(url, headers)
    if (via === 'key') headers['x-api-key'] = reader
    return ctx.app.inject({ method: 'GET', url, headers })
  }
  for (const { url, via, page } of targets) {
    const plain = await get(url, via)
    assert.equal(plain.statusCode, 200, url)
    assert.equal(plain.headers['content-encoding'], undefined, `${url}: nothing asked, nothing compressed`)
    const plainBody = Buffer.from(plain.rawPayload)
    assert.ok(plainBody.length > 1024, `${url} is big enough to compress (${plainBody.length} bytes)`)
    for (const [accept, want] of [
      ['gzip', 'gzip'],
      ['br', 'br'],
      ['gzip, deflate, br', 'br'],
      ['br;q=0.5, gzip;q=0.9', 'gzip'],
      ['gzip;q=0, br', 'br'],
      // The plugin reads a bare * as gzip, the encoding every client knows.
      ['*', 'gzip'],
      ['identity', undefined],
      ['br;q=0, gzip;q=0', undefined],
      ['compress, deflate', undefined],
    ] as const) {
      const res = await get(url, via, accept)
      assert.equal(res.statusCode, 200, `${url} (${accept})`)
      assert.equal(res.headers['content-encoding'], want, `${url} with Accept-Encoding: ${accept}`)
      if (want === undefined) continue
      assert.ok(varies(res), `${url}: Vary: Accept-Encoding (${String(res.headers.vary)})`)
      assert.ok(
        res.rawPayload.length < plainBody.length / 2,
        `${url} ${want}: ${res.rawPayload.length} of ${plainBody.length} bytes`,
      )
      const body = decoded(res)
      if (page) assert.equal(stable(body), stable(plainBody), `${url} ${want}: the same page`)
      else if (url.startsWith('/settings/audit/')) {
        // Each download of the audit log adds its own entry first: the rows before it are the same.
        assert.ok(body.toString().endsWith(plainBody.toString().split('\r\n').slice(2).join('\r\n')), url)
      } else assert.ok(body.equals(plainBody), `${url} ${want}: the same bytes`)
    }
  }
  // The mark survives compression: the decompressed CSV starts with it.
  const marked = decoded(await browser.get('/logs/export.csv?bom=1', { 'accept-encoding': 'br' }))
  assert.deepEqual([...marked.subarray(0, 3)], [0xef, 0xbb, 0xbf])
})

/** The final options of every route, as Fastify builds it (after every onRoute hook). */
function watchRoutes(): { routes: RouteOptions[]; stop(): void } {
  const routes: RouteOptions[] = []
  const onInit = (message: unknown) => {
    const { fastify } = message as { fastify: FastifyInstance }
    // The options object itself: later onRoute hooks (the compression plugin's) add to it.
    fastify.addHook('onRoute', (options) => void routes.push(options as RouteOptions))
  }
  subscribe('fastify.initialization', onInit)
  return { routes, stop: () => unsubscribe('fastify.initialization', onInit) }
}

/** Whether the compression plugin hooked the route (its onSend negotiates and compresses). */
function compressionHooks(route: RouteOptions): number {
  const hooks = [route.onSend, route.onRequest].flat().filter((h) => typeof h === 'function')
  return hooks.filter((h) => /compressPayloadSync|reply\.compress = /.test(String(h))).length
}

test('ingest and the stream carry no compression hook at all (no work added per request); small answers go as they are', async (t) => {
  const watch = watchRoutes()
  let ctx: TestApp
  try {
    ctx = await buildTestApp(t)
  } finally {
    watch.stop()
  }
  const hooked = (method: string, url: string) => {
    const matching = watch.routes.filter(
      (r) => r.url === url && [r.method].flat().includes(method as RouteOptions['method'] & string),
    )
    assert.ok(matching.length > 0, `${method} ${url} is registered`)
    return matching.reduce((n, r) => n + compressionHooks(r), 0)
  }
  for (const [method, url] of [
    ['POST', '/deploy'],
    ['GET', '/put'],
    ['POST', '/put'],
    ['GET', '/api/v1/stream'],
  ] as const) {
    assert.equal(hooked(method, url), 0, `${method} ${url}: no compression hook`)
  }
  // The same inspection sees the hooks where they are: it would see them on ingest too.
  for (const [method, url] of [
    ['GET', '/logs/'],
    ['GET', '/logs/export.csv'],
    ['GET', '/api/v1/events'],
  ] as const) {
    assert.ok(hooked(method, url) > 0, `${method} ${url}: compressed`)
  }

  // Ingest answers as it did, whatever the client accepts.
  const stored = await deploy(ctx.app, ctx.tenant.key, {
    service: 'a',
    environment: 'b',
    version: '1',
    status: 'Deployed',
  })
  assert.equal(stored.status, 201)
  for (const url of ['/put?app=a&env=b&version=2&status=Deployed', '/put?app=%01&env=b&version=2&status=x']) {
    const res = await ctx.app.inject({
      method: 'GET',
      url,
      headers: { 'x-api-key': ctx.tenant.key, 'accept-encoding': 'gzip, br' },
    })
    assert.equal(res.headers['content-encoding'], undefined, `GET ${url}: not compressed`)
    assert.ok(
      !String(res.headers.vary ?? '')
        .toLowerCase()
        .includes('accept-encoding'),
    )
    JSON.parse(res.payload)
  }
  // Below the threshold nothing is compressed, wherever it is.
  const health = await ctx.app.inject({
    method: 'GET',
    url: '/healthz',
    headers: { 'accept-encoding': 'gzip, br' },
  })
  assert.equal(health.statusCode, 200)
  assert.ok(health.rawPayload.length < 1024)
  assert.equal(health.headers['content-encoding'], undefined)
})

test('the live stream is never compressed and its events still arrive at once', async (t) => {
  const ctx = await buildTestApp(t)
  const { key: reader } = await createApiKey(ctx.database.db, {
    accountId: ctx.tenant.account.id,
    name: 'reader',
    createdBy: 'test',
    scopes: ['read'],
  })
  await ctx.app.listen({ port: 0, host: '127.0.0.1' })
  const port = (ctx.app.server.address() as AddressInfo).port
  const received: string[] = []
  let wake: (() => void) | undefined
  const response = await new Promise<http.IncomingMessage>((resolve, reject) => {
    const request = http.get(
      `http://127.0.0.1:${port}/api/v1/stream`,
      { headers: { 'x-api-key': reader, 'accept-encoding': 'gzip, deflate, br' } },
      resolve,
    )
    request.on('error', reject)
    t.after(() => request.destroy())
  })
  assert.equal(response.statusCode, 200)
  assert.match(String(response.headers['content-type']), /^text\/event-stream/)
  assert.equal(response.headers['content-encoding'], undefined, 'the stream is not compressed')
  response.setEncoding('utf8')
  response.on('data', (chunk: string) => {
    received.push(chunk)
    wake?.()
  })
  const sent = Date.now()
  const stored = await deploy(ctx.app, ctx.tenant.key, {
    service: 'api',
    environment: 'prod',
    version: '9.9',
    status: 'Deployed',
  })
  assert.equal(stored.status, 201)
  const deadline = sent + 4000
  while (!received.join('').includes('event: deployment')) {
    assert.ok(
      Date.now() < deadline,
      `the event arrived within 4 s (got ${JSON.stringify(received.join(''))})`,
    )
    await new Promise<void>((resolve) => {
      wake = resolve
      setTimeout(resolve, 100)
    })
  }
  t.diagnostic(`arrived after ${Date.now() - sent} ms`)
  assert.match(received.join(''), /"version":"9\.9"/)
})
