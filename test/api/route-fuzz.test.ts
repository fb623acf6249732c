// Every route the app has (read from Fastify, so a new one is fuzzed without being listed) gets
// hostile path parameters, query strings and form fields: NUL and other C0 controls, C1 controls,
// bidi overrides, lone surrogates, very long text, broken `%` sequences. Never a 5xx, on either
// database; and a write holding a control character changes nothing (issue 25 #4).
import assert from 'node:assert/strict'
import { type TestContext, test } from 'node:test'
import fc from 'fast-check'
import type { InjectOptions } from 'fastify'
import { sql } from 'kysely'
import { ensureBadgeToken } from '../../src/domain/board/settings.js'
import { buildTestApp, type TestApp } from '../helper.js'
import {
  type AppRoute,
  FIELD_NAMES,
  hostileValue,
  QUERY_NAMES,
  routesFromTree,
  type WireValue,
} from '../support/route-fuzz.js'
import { deploy, userSession } from '../support/ui.js'
import { addWebhook } from '../support/webhooks.js'

const RUNS = Math.ceil(Number(process.env.SHIPLOG_FUZZ_RUNS ?? 1)) || 1

interface World {
  ctx: TestApp
  routes: AppRoute[]
  /** A valid value for each path parameter, so a request can reach deep into a route. */
  valid: Record<string, string>
  cookie: string
  csrf: string
  apiKey: string
}

async function world(t: TestContext): Promise<World> {
  const ctx = await buildTestApp(t, {
    env: { SHIPLOG_RATE_LIMIT: '10000000', SHIPLOG_WEBHOOK_ALLOW_PRIVATE: '1' },
  })
  const made = await deploy(ctx.app, ctx.tenant.key, {
    service: 'billing',
    environment: 'prod',
    version: '1.0',
    status: 'Deployed',
  })
  assert.equal(made.status, 201)
  const { webhook } = await addWebhook(ctx, {
    url: 'https://hooks.example.com/x',
    statuses: ['Deployed'],
    createdBy: 'fuzz',
  })
  const token = await ensureBadgeToken(ctx.database.db, ctx.tenant.account.id)
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'ada@example.com', 'admin')
  const csrf = await browser.csrf('/settings/')
  const routes = routesFromTree(ctx.app.printRoutes({ commonPrefix: false }))
  assert.ok(routes.length > 40, `the route list is read (${routes.length} routes)`)
  return {
    ctx,
    routes,
    valid: {
      token,
      service: 'billing',
      file: 'prod.svg',
      id: String(webhook.id),
      delivery: '1',
      '*': 'index.html',
    },
    cookie: browser.cookieHeader(),
    csrf,
    apiKey: ctx.tenant.key,
  }
}

/** Rows an admin form or API call could change; equal before and after means nothing changed. */
async function snapshot(ctx: TestApp): Promise<string> {
  const parts: unknown[] = []
  for (const table of ['accounts', 'users', 'api_keys', 'webhooks', 'services', 'environment_settings']) {
    parts.push((await sql`select * from ${sql.table(table)} order by 1`.execute(ctx.database.db)).rows)
  }
  const { rows } = await sql<Record<string, number | string>>`
    select (select count(*) from events) as events, (select count(*) from audit_entries) as audit,
      (select count(*) from webhook_deliveries) as deliveries
  `.execute(ctx.database.db)
  parts.push(rows)
  return JSON.stringify(parts, (_k, v) => (typeof v === 'bigint' ? String(v) : v))
}

interface Draft {
  route: AppRoute
  method: 'GET' | 'POST'
  /** For each path parameter: a hostile value, or null for the valid one. */
  params: (WireValue | null)[]
  query: [string, WireValue][]
  fields: [string, WireValue][]
  json: boolean
  signedIn: boolean
}

function paramNames(path: string): string[] {
  return [...path.matchAll(/:([a-z]+)|\*/g)].map((m) => m[1] ?? '*')
}

function draftFor(route: AppRoute, method: 'GET' | 'POST'): fc.Arbitrary<Draft> {
  return fc.record({
    route: fc.constant(route),
    method: fc.constant(method),
    params: fc.tuple(...paramNames(route.path).map(() => fc.option(hostileValue, { freq: 3 }))),
    query: fc.array(fc.tuple(fc.constantFrom(...QUERY_NAMES), hostileValue), { maxLength: 4 }),
    fields: fc.array(fc.tuple(fc.constantFrom(...FIELD_NAMES), hostileValue), { maxLength: 5 }),
    json: fc.boolean(),
    // Mostly an admin's session, so requests reach the handlers behind the login.
    signedIn: fc.constantFrom(true, true, true, false),
  })
}

function request(w: World, d: Draft): InjectOptions {
  const names = paramNames(d.route.path)
  let i = 0
  const path = d.route.path.replace(/:([a-z]+)|\*/g, () => {
    const name = names[i] ?? ''
    const value = d.params[i++]
    return value ? value.encoded : encodeURIComponent(w.valid[name] ?? 'x')
  })
  const query = d.query.map(([k, v]) => `${k}=${v.encoded}`).join('&')
  const headers: Record<string, string> = { 'x-api-key': w.apiKey }
  if (d.signedIn) headers.cookie = w.cookie
  const options: InjectOptions = { method: d.method, url: query ? `${path}?${query}` : path, headers }
  if (d.method === 'POST') {
    if (d.json) {
      headers['content-type'] = 'application/json'
      options.payload = JSON.stringify(
        Object.fromEntries([['_csrf', w.csrf], ...d.fields.map(([k, v]) => [k, v.json])]),
      )
    } else {
      headers['content-type'] = 'application/x-www-form-urlencoded'
      options.payload = [
        `_csrf=${encodeURIComponent(w.csrf)}`,
        ...d.fields.map(([k, v]) => `${k}=${v.encoded}`),
      ].join('&')
    }
  }
  return options
}

function describe(d: Draft, options: InjectOptions): string {
  return `${d.method} ${String(options.url).slice(0, 300)} ${String(options.payload ?? '').slice(0, 300)}`
}

test('every route: hostile path parameters, queries and form fields never answer 5xx', async (t) => {
  const w = await world(t)
  let sent = 0
  // Each route and method on its own, so every one of them gets its share of hostile requests.
  for (const route of w.routes) {
    for (const method of ['GET', 'POST'] as const) {
      // The live stream stays open until its client leaves: the stream tests fuzz its parameters.
      if (route.path === '/api/v1/stream' && method === 'GET') continue
      await fc.assert(
        fc.asyncProperty(draftFor(route, method), async (d) => {
          const options = request(w, d)
          const res = await w.ctx.app.inject(options)
          sent++
          assert.ok(
            res.statusCode < 500,
            `${res.statusCode} for ${describe(d, options)}: ${res.payload.slice(0, 300)}`,
          )
        }),
        { numRuns: 20 * RUNS, seed: 20_261_127, endOnFailure: true },
      )
    }
  }
  assert.ok(sent > 1000)
})

test('every route: a write holding NUL, or a control character in its path, is refused and changes nothing', async (t) => {
  const w = await world(t)
  // The set-up's own requests used the key: its last-used time is written now, not by the
  // background task in the middle of the run (which would read as a change the fuzz made).
  await w.ctx.app.keyUsage.flush()
  const before = await snapshot(w.ctx)
  // Every hostile path parameter carries a control character, and every field U+0000 (which no
  // text column can hold): at least one of them is there. Fields a route does not read count too.
  const controlled = hostileValue.filter((v) => v.control)
  const withNul = hostileValue.filter((v) => v.json.includes('\u0000'))
  const writes = fc
    .constantFrom(...w.routes.filter((r) => r.methods.includes('POST') && r.path !== '/api/v1/stream'))
    .chain((route) =>
      fc
        .record({
          route: fc.constant(route),
          method: fc.constant<'GET' | 'POST'>('POST'),
          params: fc.tuple(...paramNames(route.path).map(() => fc.option(controlled, { freq: 2 }))),
          query: fc.constant<[string, WireValue][]>([]),
          fields: fc.array(fc.tuple(fc.constantFrom(...FIELD_NAMES), withNul), { maxLength: 5 }),
          json: fc.boolean(),
          signedIn: fc.constant(true),
        })
        .filter((d) => d.fields.length > 0 || d.params.some((p) => p !== null)),
    )
  await fc.assert(
    fc.asyncProperty(writes, async (d) => {
      const options = request(w, d)
      const res = await w.ctx.app.inject(options)
      assert.ok(
        [400, 401, 403, 404, 405, 413, 415, 422, 429].includes(res.statusCode),
        `${res.statusCode} for ${describe(d, options)}: ${res.payload.slice(0, 300)}`,
      )
    }),
    { numRuns: 600 * RUNS, seed: 20_261_128, endOnFailure: true },
  )
  assert.equal(await snapshot(w.ctx), before, 'nothing changed')
})
