// The board /services/: exact cells for a known history (retries, instant, stalled, late end,
// failure, rollback, redeploy), as it was at a past instant, drift marks, filters, environment
// order and hiding, stall time and the empty state. The time picker (`at`, bad values): board-at.test.ts.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { buildTestApp, type TestApp } from '../helper.js'
import { boardColumns, boardTable } from '../support/board.js'
import { type Browser, deploy, insertEvents, linkHref, userSession } from '../support/ui.js'

const MIN = 60_000

interface Fixture {
  ctx: TestApp
  admin: Browser
  t0: number
  now: number
}

/** A history with every kind of deployment, ending (through the real ingest route) now. */
async function history(t: Parameters<typeof buildTestApp>[0]): Promise<Fixture> {
  const ctx = await buildTestApp(t)
  const now = Date.now()
  const t0 = now - 600 * MIN
  const at = (m: number) => t0 + m * MIN
  const acct = ctx.tenant.account.id
  await insertEvents(ctx.database, acct, [
    // api dev 1.0: a retried start, then done.
    { service: 'api', environment: 'dev', version: '1.0', status: 'Deploying', received_at: at(0) },
    { service: 'api', environment: 'dev', version: '1.0', status: 'Deploying', received_at: at(1) },
    { service: 'api', environment: 'dev', version: '1.0', status: 'Deployed', received_at: at(5) },
    // api staging 1.0: instant.
    { service: 'api', environment: 'staging', version: '1.0', status: 'Deployed', received_at: at(10) },
    { service: 'api', environment: 'prod', version: '1.0', status: 'Deploying', received_at: at(20) },
    { service: 'api', environment: 'prod', version: '1.0', status: 'Deployed', received_at: at(30) },
    { service: 'api', environment: 'dev', version: '1.1', status: 'Deployed', received_at: at(60) },
    // api staging 1.1: started and never finished (stalled after the default 60 minutes).
    { service: 'api', environment: 'staging', version: '1.1', status: 'Deploying', received_at: at(70) },
    // api prod 1.1 failed: 1.0 keeps running.
    { service: 'api', environment: 'prod', version: '1.1', status: 'Deploying', received_at: at(80) },
    { service: 'api', environment: 'prod', version: '1.1', status: 'Failed', received_at: at(90) },
    // web prod: 2.0, 2.1, back to 2.0 (a rollback), 2.0 again (a redeploy).
    { service: 'web', environment: 'prod', version: '2.0', status: 'Deployed', received_at: at(100) },
    { service: 'web', environment: 'prod', version: '2.1', status: 'Deployed', received_at: at(110) },
    { service: 'web', environment: 'prod', version: '2.0', status: 'Deployed', received_at: at(120) },
    { service: 'web', environment: 'prod', version: '2.0', status: 'Deployed', received_at: at(130) },
    // worker prod 3.0: opened long ago; its end event arrives late (below).
    { service: 'worker', environment: 'prod', version: '3.0', status: 'Deploying', received_at: at(200) },
  ])
  // Now, through the ingest route: a late end event, and a deployment that has just begun.
  const late = await deploy(ctx.app, ctx.tenant.key, {
    service: 'worker',
    environment: 'prod',
    version: '3.0',
    status: 'Deployed',
  })
  assert.equal(late.status, 201)
  const started = await deploy(ctx.app, ctx.tenant.key, {
    service: 'web',
    environment: 'staging',
    version: '2.2',
    status: 'Deploying',
    deployer: 'alice',
  })
  assert.equal(started.status, 201)
  const { browser } = await userSession(ctx, acct, 'admin@example.com', 'admin')
  return { ctx, admin: browser, t0, now }
}

test('the board shows what runs where now, with attention states and drift', async (t) => {
  const { admin } = await history(t)
  const res = await admin.get('/services/')
  assert.equal(res.statusCode, 200)
  assert.deepEqual(boardColumns(res.payload), ['dev', 'staging', 'prod'])
  const board = boardTable(res.payload)
  assert.deepEqual([...board.keys()], ['api', 'web', 'worker'])
  const api = board.get('api')
  const web = board.get('web')
  assert.ok(api && web)
  assert.deepEqual(
    { ...api.get('dev'), text: undefined },
    { version: '1.1', state: null, drift: null, text: undefined },
  )
  assert.match(api.get('dev')?.text ?? '', /h ago · ci/)
  // staging runs 1.0 while dev runs 1.1, which dev got later: waiting to be promoted. 1.1 is stalled.
  assert.equal(api.get('staging')?.version, '1.0')
  assert.equal(api.get('staging')?.state, 'Stalled')
  assert.equal(api.get('staging')?.drift, 'Differs from dev, which runs 1.1: waiting to be promoted')
  // prod runs 1.0 like staging (no drift); its latest, 1.1, failed.
  assert.equal(api.get('prod')?.version, '1.0')
  assert.equal(api.get('prod')?.state, 'Failed')
  assert.equal(api.get('prod')?.drift, null)
  assert.match(api.get('prod')?.text ?? '', /Failed 1\.1/)
  // web: nothing runs in staging yet (2.2 in progress, sent by alice); prod runs 2.0 after the rollback.
  assert.equal(web.has('dev'), false)
  assert.equal(web.get('staging')?.version, null)
  assert.equal(web.get('staging')?.state, 'In progress')
  assert.match(web.get('staging')?.text ?? '', /nothing running yet/)
  assert.equal(web.get('prod')?.version, '2.0')
  assert.equal(web.get('prod')?.state, null)
  assert.equal(web.get('prod')?.drift, null)
  // The late end event closed worker's deployment: it runs, nothing is open.
  assert.equal(board.get('worker')?.get('prod')?.version, '3.0')
  assert.equal(board.get('worker')?.get('prod')?.state, null)
  // Each service name links to its page.
  assert.equal(linkHref(res.payload, 'api'), '/services/api/')
  // The state is in words and in colour (a class the stylesheet colours).
  assert.match(res.payload, /<td class="cell attention failed" data-environment="prod">/)
})

test('?at= shows the board as it was then, with a notice and a way back', async (t) => {
  const { admin, t0 } = await history(t)
  const at = new Date(t0 + 85 * MIN).toISOString()
  const res = await admin.get(`/services/?at=${encodeURIComponent(at)}`)
  assert.equal(res.statusCode, 200)
  assert.match(res.payload, /Showing the board as it was at/)
  assert.equal(linkHref(res.payload, 'Back to now'), '/services/')
  const board = boardTable(res.payload)
  // web and worker had no deployment by then.
  assert.deepEqual([...board.keys()], ['api'])
  const api = board.get('api')
  assert.equal(api?.get('dev')?.version, '1.1')
  // 15 minutes in: in progress then, not stalled; prod's 1.1 had started and not yet failed.
  assert.equal(api?.get('staging')?.state, 'In progress')
  assert.equal(api?.get('staging')?.version, '1.0')
  assert.equal(api?.get('prod')?.version, '1.0')
  assert.equal(api?.get('prod')?.state, 'In progress')
  // A zone offset names the same instant.
  const offset = new Date(t0 + 85 * MIN + 3600_000).toISOString().slice(0, 19)
  const same = await admin.get(`/services/?at=${encodeURIComponent(`${offset}+01:00`)}`)
  assert.equal(same.statusCode, 200)
  assert.equal(boardTable(same.payload).get('api')?.get('prod')?.state, 'In progress')
  // The picker keeps the instant: UTC wall time, and the instant itself for the script to show in
  // the viewer's zone.
  assert.match(
    res.payload,
    new RegExp(
      `<input id="f-at" name="at" type="datetime-local" step="1" value="${at.slice(0, 19)}" data-utc="${at}"`,
    ),
  )
})

test('filters by team and by name (case-insensitive), through a GET form', async (t) => {
  const { admin } = await history(t)
  const saved = await admin.submit('/services/api/', '/services/api/meta', { team: 'Core' })
  assert.equal(saved.statusCode, 303)
  const byTeam = await admin.get('/services/?team=Core')
  assert.deepEqual([...boardTable(byTeam.payload).keys()], ['api'])
  assert.match(
    byTeam.payload,
    /<summary class="filter-summary">Filters: <span class="active"><span>team: Core<\/span>/,
  )
  assert.match(byTeam.payload, /<option value="Core" selected>Core<\/option>/)
  const byName = await admin.get('/services/?name=WE')
  assert.deepEqual([...boardTable(byName.payload).keys()], ['web'])
  const none = await admin.get('/services/?name=nothing-like-this')
  assert.equal(none.statusCode, 200)
  assert.match(none.payload, /No service matches these filters/)
  assert.match(none.payload, /<form method="get" action="\/services\/"/)
})

test('environment order and hidden environments from Settings shape the columns', async (t) => {
  const { admin } = await history(t)
  const move = (environment: string, action: string) =>
    admin.submit('/settings/', '/settings/environments', { environment, action })
  assert.equal((await move('prod', 'up')).statusCode, 303)
  assert.deepEqual(boardColumns((await admin.get('/services/')).payload), ['dev', 'prod', 'staging'])
  assert.equal((await move('dev', 'hide')).statusCode, 303)
  const res = await admin.get('/services/')
  assert.deepEqual(boardColumns(res.payload), ['prod', 'staging'])
  // With dev hidden, staging's 1.0 equals prod's (now before it): no drift.
  assert.equal(boardTable(res.payload).get('api')?.get('staging')?.drift, null)
  assert.equal((await move('dev', 'show')).statusCode, 303)
  assert.deepEqual(boardColumns((await admin.get('/services/')).payload), ['dev', 'prod', 'staging'])
})

test('the stall time decides whether an open deployment is stalled or in progress', async (t) => {
  const { admin } = await history(t)
  const set = await admin.submit('/settings/', '/settings/stall-time', { minutes: '10080' })
  assert.equal(set.statusCode, 303)
  const board = boardTable((await admin.get('/services/')).payload)
  assert.equal(board.get('api')?.get('staging')?.state, 'In progress')
  await admin.submit('/settings/', '/settings/stall-time', { minutes: '1' })
  // Stall time 1 minute: alice's deployment began a moment ago, so it is still in progress.
  const again = boardTable((await admin.get('/services/')).payload)
  assert.equal(again.get('api')?.get('staging')?.state, 'Stalled')
  assert.equal(again.get('web')?.get('staging')?.state, 'In progress')
})

test('a new account sees how to send its first event; / leads to the board', async (t) => {
  const ctx = await buildTestApp(t)
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'new@example.com', 'member')
  const home = await browser.get('/')
  assert.equal(home.statusCode, 303)
  assert.equal(home.headers.location, '/services/')
  const res = await browser.get('/services/')
  assert.equal(res.statusCode, 200)
  assert.match(res.payload, /Nothing deployed yet/)
  assert.equal(linkHref(res.payload, 'Settings → API keys'), '/settings/#keys-heading')
  assert.match(res.payload, /<a href="\/services\/" aria-current="page">Board<\/a>/)
  assert.match(res.payload, /<a href="\/insights\/" >Insights<\/a>/)
  // Not signed in: to the login page.
  const anonymous = await ctx.app.inject({ method: 'GET', url: '/services/' })
  assert.equal(anonymous.statusCode, 303)
  assert.match(String(anonymous.headers.location), /^\/login/)
})

test('another account never sees these services', async (t) => {
  const { ctx } = await history(t)
  const other = await ctx.addTenant('Other')
  const { browser } = await userSession(ctx, other.account.id, 'o@example.com', 'admin')
  const res = await browser.get('/services/')
  assert.match(res.payload, /Nothing deployed yet/)
  assert.equal((await browser.get('/services/api/')).statusCode, 404)
})
