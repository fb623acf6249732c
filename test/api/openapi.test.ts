// /openapi.json is a valid OpenAPI 3.1 document that lists every public route the server has
// (and no page), each with its problem answers; /docs serves Swagger UI from the package itself.
import assert from 'node:assert/strict'
import { mkdirSync, writeFileSync } from 'node:fs'
import { test } from 'node:test'
import { Validator } from '@seriousme/openapi-schema-validator'
import { isPublicPath } from '../../src/http/api/openapi.js'
import { buildTestApp } from '../helper.js'

type Operation = { responses: Record<string, unknown>; security?: unknown[]; tags?: string[] }
type Doc = {
  openapi: string
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
