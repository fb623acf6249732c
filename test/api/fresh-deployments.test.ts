// Read-your-writes is a route option (`...FRESH`, src/http/plugins/fresh-deployments.ts), not a call
// each route must remember: this walks every route the app has (read from Fastify, so a new one is
// covered without being listed), requests it signed in with valid path parameters, and notes which
// tables each request's queries name. A route whose request read derived deployments must carry the
// flag. A query builder plugin sees the tables, so a route that reads deployments only through a
// helper three calls down is caught as well as one that queries them itself.
import assert from 'node:assert/strict'
import { AsyncLocalStorage } from 'node:async_hooks'
import { test } from 'node:test'
import type { InjectOptions } from 'fastify'
import type {
  KyselyPlugin,
  PluginTransformQueryArgs,
  PluginTransformResultArgs,
  QueryResult,
  RootOperationNode,
  UnknownRow,
} from 'kysely'
import { buildApp } from '../../src/app.js'
import { type Database, openDatabase } from '../../src/db/connect.js'
import { migrateToLatest } from '../../src/db/migrate.js'
import { ensureBadgeToken } from '../../src/domain/board/settings.js'
import { openResources } from '../../src/resources.js'
import { addTenant, buildTestApp, freshDatabaseUrl, type TestApp, testConfig } from '../helper.js'
import { routesFromTree } from '../support/route-fuzz.js'
import { deploy, userSession } from '../support/ui.js'
import { addWebhook } from '../support/webhooks.js'

/** The tables derivation writes (src/domain/deployments/store.ts): reading them needs a catch-up first. */
const DERIVED = new Set(['deployments', 'deployment_heads', 'version_firsts', 'deployment_gaps'])

/**
 * Routes that read derived deployments on purpose without waiting, and why: the live stream follows
 * derivation (each committed run wakes it, src/features/live.ts), and the Prometheus counters
 * report what the background task derived so far (a scrape must not derive).
 */
const FOLLOWS_DERIVATION = new Set(['GET /api/v1/stream', 'GET /metrics'])

interface Seen {
  route: string
  fresh: boolean
  tables: Set<string>
}

/** Every table a query names, wherever in its tree (joins, subqueries, aliases). */
function tablesOf(node: unknown, into: Set<string>): void {
  if (node === null || typeof node !== 'object') return
  if (Array.isArray(node)) {
    for (const item of node) tablesOf(item, into)
    return
  }
  const record = node as Record<string, unknown>
  if (record.kind === 'TableNode') {
    const table = record.table as { identifier?: { name?: unknown } } | undefined
    if (typeof table?.identifier?.name === 'string') into.add(table.identifier.name)
  }
  if (record.kind === 'RawNode') {
    for (const fragment of (record.sqlFragments as string[] | undefined) ?? []) {
      for (const name of DERIVED) if (new RegExp(`\\b${name}\\b`).test(fragment)) into.add(name)
    }
  }
  for (const value of Object.values(record)) tablesOf(value, into)
}

class TableRecorder implements KyselyPlugin {
  constructor(private readonly current: AsyncLocalStorage<Seen>) {}
  transformQuery(args: PluginTransformQueryArgs): RootOperationNode {
    const seen = this.current.getStore()
    if (seen) tablesOf(args.node, seen.tables)
    return args.node
  }
  async transformResult(args: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    return args.result
  }
}

test('every route that reads derived deployments is registered with the read-your-writes flag', async (t) => {
  const current = new AsyncLocalStorage<Seen>()
  const config = testConfig(await freshDatabaseUrl(t), { SHIPLOG_RATE_LIMIT: '10000000' })
  const opened = openDatabase(config.database)
  await migrateToLatest(opened)
  const database: Database = { ...opened, db: opened.db.withPlugin(new TableRecorder(current)) }
  const resources = await openResources(config, database, { error: () => {}, warn: () => {}, info: () => {} })
  const app = await buildApp({ config, database, resources, logger: false })
  t.after(async () => {
    await app.close()
    await resources.close()
    await opened.close()
  })
  // Each request's queries are noted in its own record, entered as the request begins (light-my-request
  // dispatches outside the caller's async context); the route and its flag are Fastify's own view.
  let last: Seen | null = null
  app.addHook('onRequest', (request, _reply, done) => {
    last = {
      route: `${request.method} ${request.routeOptions.url ?? '(no route)'}`,
      fresh: request.routeOptions.config.freshDeployments === true,
      tables: new Set(),
    }
    current.enterWith(last)
    done()
  })
  const tenant = await addTenant(database, 'Acme', 'reader')
  await database.db
    .updateTable('api_keys')
    .set({ scopes: 'ingest,read' })
    .where('id', '=', tenant.keyId)
    .execute()
  const ctx: TestApp = {
    app,
    database,
    config,
    tenant,
    addTenant: (name, keyName) => addTenant(database, name, keyName),
    eventCount: async () => 0,
  }
  const made = await deploy(app, tenant.key, {
    service: 'billing',
    environment: 'prod',
    version: '1.0',
    status: 'Deployed',
  })
  assert.equal(made.status, 201)
  const { webhook } = await addWebhook(ctx, {
    url: 'https://hooks.example.com/x',
    statuses: ['Deployed'],
    createdBy: 'test',
  })
  const token = await ensureBadgeToken(database.db, tenant.account.id)
  const { browser } = await userSession(ctx, tenant.account.id, 'ada@example.com', 'admin')
  const csrf = await browser.csrf('/settings/')
  // The background tasks run outside any request: started now, their queries are nobody's.
  await app.ready()

  const valid: Record<string, string> = {
    token,
    service: 'billing',
    file: 'prod.svg',
    id: String(webhook.id),
    delivery: '1',
    '*': 'index.html',
  }
  const routes = routesFromTree(app.printRoutes({ commonPrefix: false }))
  assert.ok(routes.length > 40, `the route list is read (${routes.length} routes)`)
  const requests: InjectOptions[] = []
  for (const route of routes) {
    const url = route.path.replace(/:([a-z]+)|\*/g, (_m, name: string | undefined) =>
      encodeURIComponent(valid[name ?? '*'] ?? 'x'),
    )
    const headers = { cookie: browser.cookieHeader(), 'x-api-key': tenant.key }
    if (route.methods.includes('GET')) {
      requests.push({ method: 'GET', url, headers })
      // And naming a service, for the routes that need one in the query (/board/row, /get/logs).
      requests.push({ method: 'GET', url: `${url}?service=billing&app=billing&env=prod`, headers })
    }
    // A form with its token and no fields: the refusal pages (Settings' among them) render.
    if (
      route.methods.includes('POST') &&
      route.path !== '/logout' &&
      route.path !== '/put' &&
      route.path !== '/deploy'
    ) {
      requests.push({
        method: 'POST',
        url,
        headers: { ...headers, 'content-type': 'application/x-www-form-urlencoded' },
        payload: `_csrf=${encodeURIComponent(csrf)}`,
      })
    }
  }
  // The live stream never ends by itself: it is covered by the allow-list above, not requested.
  const asked = requests.filter((r) => !String(r.url).startsWith('/api/v1/stream'))

  const unflagged = new Set<string>()
  const flagged = new Set<string>()
  let readers = 0
  for (const options of asked) {
    last = null
    await app.inject(options)
    // Set by the hook during inject (TypeScript cannot see the callback assign it).
    const seen = last as Seen | null
    if (seen === null) continue
    const derived = [...seen.tables].filter((table) => DERIVED.has(table))
    if (seen.fresh) flagged.add(seen.route)
    if (derived.length === 0) continue
    readers++
    if (!seen.fresh && !FOLLOWS_DERIVATION.has(seen.route))
      unflagged.add(`${seen.route} read ${derived.join(', ')}`)
  }
  assert.deepEqual([...unflagged], [], 'these routes read deployments without `...FRESH` in their options')
  // The walk reached the pages and the API behind the login (else it proves nothing).
  assert.ok(readers >= 15, `${readers} requests read deployments`)
  assert.ok(flagged.size >= 20, `${flagged.size} flagged routes answered`)
  for (const route of ['GET /services/', 'GET /api/v1/deployments', 'GET /get', 'GET /settings/'])
    assert.ok(flagged.has(route), `${route} is flagged`)
})

test('the flag derives before the handler: an event just acknowledged shows on the board', async (t) => {
  const ctx = await buildTestApp(t)
  // Before the key is first used: the verifier keeps what it read for a while.
  await ctx.database.db
    .updateTable('api_keys')
    .set({ scopes: 'ingest,read' })
    .where('id', '=', ctx.tenant.keyId)
    .execute()
  await ctx.app.ready()
  // The background task may not run in between: the answer must not depend on it.
  await ctx.app.tasks.stop()
  const made = await deploy(ctx.app, ctx.tenant.key, {
    service: 'billing',
    environment: 'prod',
    version: '2.0',
    status: 'Deployed',
  })
  assert.equal(made.status, 201)
  const res = await ctx.app.inject({ method: 'GET', url: '/get', headers: { 'x-api-key': ctx.tenant.key } })
  assert.equal(res.statusCode, 200)
  assert.deepEqual(res.json().apps, [
    {
      app: 'billing',
      environments: {
        prod: { version: '2.0', deployed_at: res.json().apps[0].environments.prod.deployed_at },
      },
    },
  ])
})
