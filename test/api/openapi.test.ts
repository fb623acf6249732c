// /openapi.json is a valid OpenAPI 3.1 document that lists every public route the server has
// (and no page), each with its problem answers; /docs serves Swagger UI from the package itself.
import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { Validator } from '@seriousme/openapi-schema-validator'
import { lintFile } from '../../scripts/lint-openapi.js'
import { isPublicPath } from '../../src/http/api/openapi.js'
import { buildTestApp } from '../helper.js'
import { OpenApiContract, type OpenApiDocument } from '../support/openapi-contract.js'

type Operation = {
  responses: Record<string, unknown>
  security?: unknown[]
  tags?: string[]
  operationId?: string
  requestBody?: { required?: boolean }
}
type Doc = {
  openapi: string
  servers?: { url: string }[]
  paths: Record<string, Record<string, Operation>>
  components: Record<string, unknown>
}

/**
 * Every path and method the server answers, from Fastify's own route table (printRoutes draws a
 * tree: each node's text continues its parent's path).
 */
function serverRoutes(printed: string): Map<string, Set<string>> {
  const routes = new Map<string, Set<string>>()
  const stack: string[] = []
  for (const line of printed.split('\n')) {
    const match = /^(.*?)[├└]── (.+) \(([A-Z, ]+)\)$/.exec(line)
    if (!match) continue
    const depth = [...(match[1] as string)].length / 4
    stack.length = depth
    stack.push(match[2] as string)
    const path = stack.join('').replace(/:([A-Za-z_]+)/g, '{$1}')
    const methods = routes.get(path) ?? new Set<string>()
    for (const m of (match[3] as string).split(',')) methods.add(m.trim())
    routes.set(path, methods)
  }
  return routes
}

test('/openapi.json is valid OpenAPI 3.1 and covers every public route', async (t) => {
  const { app } = await buildTestApp(t)
  const res = await app.inject({ url: '/openapi.json' })
  assert.equal(res.statusCode, 200)
  assert.match(String(res.headers['content-type']), /^application\/json/)
  const doc = res.json() as Doc
  mkdirSync('/tmp/shiplog-api', { recursive: true })
  writeFileSync('/tmp/shiplog-api/openapi.json', JSON.stringify(doc, null, 2))
  assert.equal(doc.openapi, '3.1.0')

  const validator = new Validator()
  const result = await validator.validate(structuredClone(doc))
  assert.equal(result.valid, true, JSON.stringify(result.errors, null, 2))
  assert.equal(validator.version, '3.1')

  const printed = app.printRoutes({ commonPrefix: false })
  const routes = serverRoutes(printed)
  assert.ok(
    routes.has('/put') && routes.has('/logs/'),
    `parsed the route table: ${[...routes.keys()].join(' ')}`,
  )
  const missing: string[] = []
  for (const [path, methods] of routes) {
    if (!isPublicPath(path)) continue
    for (const method of ['GET', 'POST']) {
      if (!methods.has(method)) continue
      // The 405 answers for other methods are routes too, but not operations of the API.
      const probe = await app.inject({
        method: method as 'GET' | 'POST',
        url: path.replace(/\{[^}]+\}/g, 'x'),
      })
      if (probe.statusCode === 405) continue
      if (!doc.paths[path]?.[method.toLowerCase()]) missing.push(`${method} ${path}`)
    }
  }
  assert.deepEqual(missing, [])
  for (const required of [
    'get /put',
    'post /put',
    'post /deploy',
    'get /api/v1/events',
    'get /api/v1/deployments',
    'get /api/v1/services',
    'get /api/v1/metrics',
    'get /get',
    'post /get',
    'get /get/logs',
    'post /get/logs',
    'get /healthz',
  ]) {
    const [method, path] = required.split(' ') as [string, string]
    assert.ok(doc.paths[path]?.[method], `${required} is documented`)
  }

  // Pages, assets and /docs itself are not the public API.
  for (const path of Object.keys(doc.paths)) assert.ok(isPublicPath(path), `${path} is public`)
  for (const page of ['/logs/', '/settings/', '/login', '/setup', '/docs', '/']) {
    assert.equal(doc.paths[page], undefined, `${page} is hidden`)
  }

  // Problem answers: one shared schema, referenced by each route's error statuses.
  const schemas = doc.components.schemas as Record<string, unknown>
  assert.ok(schemas.Problem, 'a shared Problem schema')
  const statuses = (path: string, method: string) => Object.keys(doc.paths[path]?.[method]?.responses ?? {})
  for (const s of ['201', '200', '401', '403', '413', '422', '429', '503']) {
    assert.ok(statuses('/deploy', 'post').includes(s), `POST /deploy documents ${s}`)
  }
  for (const s of ['200', '401', '403', '422', '429', '503']) {
    assert.ok(statuses('/api/v1/events', 'get').includes(s), `GET /api/v1/events documents ${s}`)
  }
  assert.ok(statuses('/api/v1/metrics', 'get').includes('404'))
  const problem = (doc.paths['/api/v1/events']?.get?.responses['403'] ?? {}) as Record<string, unknown>
  assert.match(JSON.stringify(problem), /#\/components\/schemas\/Problem/)
  // Examples: the ingest body and the event shape carry them.
  assert.match(JSON.stringify(doc.paths['/deploy']?.post), /"examples?"/)
  assert.match(JSON.stringify(doc.paths['/get/logs']?.get), /limit/)
  assert.ok(doc.paths['/api/v1/events']?.get?.security?.length, 'read routes name their security')
})

test("/docs serves Swagger UI from the package, under the app's own security headers", async (t) => {
  const { app } = await buildTestApp(t)
  const page = await app.inject({ url: '/docs' })
  assert.equal(page.statusCode, 200)
  assert.match(page.payload, /swagger-ui/)
  assert.doesNotMatch(page.payload, /https?:\/\//, 'no outside address in the page')
  assert.match(String(page.headers['content-security-policy']), /script-src 'self'/)
  const init = await app.inject({ url: '/docs/static/swagger-initializer.js' })
  assert.equal(init.statusCode, 200)
  assert.match(init.payload, /validatorUrl: null/)
  const bundle = await app.inject({ url: '/docs/static/swagger-ui-bundle.js' })
  assert.equal(bundle.statusCode, 200)
})

test('the served document passes Redocly lint (recommended ruleset, redocly.yaml) with no error or warning', async (t) => {
  const { app } = await buildTestApp(t)
  const dir = mkdtempSync(join(tmpdir(), 'shiplog-openapi-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const file = join(dir, 'openapi.json')
  writeFileSync(file, (await app.inject({ url: '/openapi.json' })).payload)
  const result = lintFile(file)
  assert.deepEqual(
    { errors: result.errors, warnings: result.warnings },
    { errors: 0, warnings: 0 },
    result.report,
  )
})

test('every operation has a unique operationId and its security; problems are problem+json with their headers', async (t) => {
  const { app } = await buildTestApp(t)
  const doc = (await app.inject({ url: '/openapi.json' })).json() as Doc
  assert.deepEqual(doc.servers, [{ url: '/', description: 'The server that served this document.' }])
  const ids: string[] = []
  const op = (path: string, method: string) => doc.paths[path]?.[method] as Operation
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, operation] of Object.entries(item)) {
      assert.ok(operation.operationId, `${method} ${path} has an operationId`)
      ids.push(operation.operationId)
      assert.ok(Array.isArray(operation.security), `${method} ${path} states its security`)
      for (const [status, response] of Object.entries(operation.responses)) {
        const text = JSON.stringify(response)
        if (text.includes('#/components/schemas/Problem')) {
          assert.match(text, /"application\/problem\+json"/, `${method} ${path} ${status} is problem+json`)
          assert.doesNotMatch(text, /"application\/json"/, `${method} ${path} ${status}`)
        }
      }
    }
  }
  assert.equal(new Set(ids).size, ids.length, 'operationIds are unique')
  for (const [path, method] of [
    ['/healthz', 'get'],
    ['/readyz', 'get'],
    ['/openapi.json', 'get'],
    ['/badge/{token}/{service}/{file}', 'get'],
  ] as const) {
    assert.deepEqual(op(path, method).security, [], `${method} ${path} is public`)
  }
  const headersOf = (path: string, method: string, status: string) =>
    Object.keys((op(path, method).responses[status] as { headers?: object }).headers ?? {})
  assert.deepEqual(headersOf('/deploy', 'post', '429').sort(), [
    'RateLimit-Limit',
    'RateLimit-Policy',
    'RateLimit-Remaining',
    'RateLimit-Reset',
    'Retry-After',
  ])
  assert.ok(headersOf('/deploy', 'post', '200').includes('Idempotent-Replayed'))
  assert.ok(headersOf('/deploy', 'post', '201').includes('RateLimit-Remaining'))
  assert.ok(headersOf('/api/v1/events', 'get', '200').includes('Link'))
  assert.ok(headersOf('/readyz', 'get', '503').includes('Retry-After'))
  assert.match(
    JSON.stringify(op('/deploy', 'post').responses['405']),
    /components\/responses\/MethodNotAllowed/,
  )
  assert.match(JSON.stringify(doc.components.responses), /"Allow"/)
  assert.match(JSON.stringify(op('/readyz', 'get').responses['200']), /"database"/)
  assert.match(
    JSON.stringify(op('/badge/{token}/{service}/{file}', 'get').responses['404']),
    /image\/svg\+xml/,
  )
  // Both work without a body (fields in the query string), so neither body is required.
  assert.equal(op('/get/logs', 'post').requestBody?.required, false)
  assert.equal(op('/put', 'post').requestBody?.required, false)
  assert.equal(op('/deploy', 'post').requestBody?.required, true)
  const withUrl = await buildTestApp(t, { env: { SHIPLOG_PUBLIC_URL: 'https://shiplog.example/' } })
  const servers = ((await withUrl.app.inject({ url: '/openapi.json' })).json() as Doc).servers
  assert.equal(servers?.[0]?.url, 'https://shiplog.example')
})

test('the contract check that every API test runs refuses answers the document does not describe', async (t) => {
  const { app } = await buildTestApp(t)
  const contract = new OpenApiContract((await app.inject({ url: '/openapi.json' })).json() as OpenApiDocument)
  const problem = Buffer.from(
    JSON.stringify({ type: 'urn:shiplog:problem:x', title: 'X', status: 401, detail: 'x' }),
  )
  const answer = {
    method: 'POST',
    url: '/deploy?x=1',
    status: 401,
    headers: {
      'content-type': 'application/problem+json; charset=utf-8',
      'www-authenticate': 'Bearer realm="shiplog"',
    },
    body: problem,
  }
  assert.deepEqual(contract.check(answer), [])
  // What the document said before: problems as application/json.
  assert.match(
    contract.check({ ...answer, headers: { ...answer.headers, 'content-type': 'application/json' } }).join(),
    /content type application\/json not declared/,
  )
  assert.match(contract.check({ ...answer, status: 418 }).join(), /status not declared/)
  assert.match(
    contract.check({ ...answer, headers: { 'content-type': 'application/problem+json' } }).join(),
    /WWW-Authenticate missing/,
  )
  assert.match(
    contract.check({ ...answer, body: Buffer.from(JSON.stringify({ title: 'no type' })) }).join(),
    /must have required property 'type'/,
  )
  assert.match(
    contract.check({ ...answer, status: 429, headers: { ...answer.headers, 'retry-after': 'soon' } }).join(),
    /Retry-After.*must be integer/s,
  )
  assert.match(contract.check({ ...answer, method: 'DELETE', status: 404 }).join(), /not an operation/)
  // Pages are not the API: not checked.
  assert.deepEqual(contract.check({ ...answer, url: '/logs/', status: 200 }), [])
})

test('every documented path answers a method it does not offer with 405 and Allow (SPEC §1.2)', async (t) => {
  const { app } = await buildTestApp(t)
  const doc = (await app.inject({ url: '/openapi.json' })).json() as Doc
  for (const [path, item] of Object.entries(doc.paths)) {
    const offered = Object.keys(item).map((m) => m.toUpperCase())
    const wrong = ['POST', 'PUT', 'DELETE', 'PATCH'].find((m) => !offered.includes(m))
    if (!wrong) continue
    // Path templates get a plain value: the 405 must not depend on what the parameters hold.
    const url = path.replace(/\{[^}]+\}/g, (name) => (name === '{file}' ? 'prod.svg' : 'x'))
    const res = await app.inject({ method: wrong as 'POST', url })
    assert.equal(res.statusCode, 405, `${wrong} ${url}: ${res.statusCode}`)
    assert.ok(res.headers.allow, `${wrong} ${url} says which methods it takes`)
  }
})
