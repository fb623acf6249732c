// Names you can tidy (issue 28 point 5): admins rename and merge services and environments (events
// keep their original text; the board, metrics and the read API follow), and delete a service's
// history with a typed confirmation, audited, with `shiplog verify` still passing and naming it.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { chainCaughtUp } from '../../src/domain/chain/chainer.js'
import { verifyChains } from '../../src/domain/chain/verify.js'
import { buildTestApp } from '../helper.js'
import { boardColumns, boardTable } from '../support/board.js'
import { insertEvents, linkHref, parseCsv, userSession } from '../support/ui.js'

const base = Date.UTC(2026, 0, 1)

async function auditActions(ctx: Awaited<ReturnType<typeof buildTestApp>>): Promise<string[]> {
  const rows = await ctx.database.db
    .selectFrom('audit_entries')
    .select(['action', 'details'])
    .orderBy('id')
    .execute()
  return rows.map((r) => `${r.action} ${r.details}`)
}

test('merging environment Dev into dev: one board column, metrics counted together, events keep their text', async (t) => {
  const ctx = await buildTestApp(t)
  const acct = ctx.tenant.account.id
  await insertEvents(ctx.database, acct, [
    { service: 'api', environment: 'dev', version: '1.0', received_at: base },
    { service: 'api', environment: 'Dev', version: '1.1', received_at: base + 60_000 },
    { service: 'web', environment: 'Dev', version: '2.0', received_at: base + 120_000 },
    { service: 'api', environment: 'prod', version: '1.0', received_at: base + 180_000 },
  ])
  const { browser } = await userSession(ctx, acct, 'a@example.com', 'admin')
  const before = await browser.get('/services/')
  assert.deepEqual(boardColumns(before.payload), ['dev', 'Dev', 'prod'])

  // Bad input: 422 naming the field, nothing changed.
  const same = await browser.submit('/settings/environments/rename', '/settings/environments/rename', {
    from: 'Dev',
    to: 'Dev',
  })
  assert.equal(same.statusCode, 422)
  assert.match(same.payload, /<p class="field-error" id="env-to-problem">The new name is the same/)
  for (const [from, to, field] of [
    ['qa', 'dev', 'from'],
    ['Dev', '', 'to'],
    ['Dev', 'd\u0007ev', 'to'],
  ] as const) {
    const res = await browser.submit('/settings/environments/rename', '/settings/environments/rename', {
      from,
      to,
    })
    assert.equal(res.statusCode, 422, `${from} → ${JSON.stringify(to)}`)
    assert.match(res.payload, new RegExp(`id="env-${field}-problem"`))
  }
  assert.equal((await ctx.database.db.selectFrom('name_aliases').selectAll().execute()).length, 0)
  assert.deepEqual(boardColumns((await browser.get('/services/')).payload), ['dev', 'Dev', 'prod'])

  const merged = await browser.submit('/settings/environments/rename', '/settings/environments/rename', {
    from: 'Dev',
    to: 'dev',
  })
  assert.equal(merged.statusCode, 303)
  const board = await browser.get('/services/')
  assert.deepEqual(boardColumns(board.payload), ['dev', 'prod'])
  const cells = boardTable(board.payload)
  assert.equal(cells.get('api')?.get('dev')?.version, '1.1')
  assert.equal(cells.get('web')?.get('dev')?.version, '2.0')
  const metrics = await browser.get(
    `/api/v1/metrics?environment=dev&from=${new Date(base - 1000).toISOString()}&to=${new Date(base + 86_400_000).toISOString()}`,
  )
  assert.equal(metrics.statusCode, 200, metrics.payload)
  assert.equal(metrics.json().deployments_succeeded, 3)
  // The log and its export keep what was sent.
  const logs = await browser.get('/logs/')
  assert.match(logs.payload, />Dev</)
  const csvHref = linkHref(logs.payload, 'Download CSV')
  assert.ok(csvHref)
  const csv = parseCsv((await browser.get(csvHref)).payload)
  assert.deepEqual(
    csv.slice(1).map((r) => r[3]),
    ['prod', 'Dev', 'Dev', 'dev'],
  )
  // An event still sent as Dev goes to dev.
  await insertEvents(ctx.database, acct, [
    { service: 'api', environment: 'Dev', version: '1.2', received_at: base + 240_000 },
  ])
  const later = boardTable((await browser.get('/services/')).payload)
  assert.equal(later.get('api')?.get('dev')?.version, '1.2')
  assert.deepEqual(boardColumns((await browser.get('/services/')).payload), ['dev', 'prod'])
  const audit = await auditActions(ctx)
  assert.ok(
    audit.some(
      (a) =>
        a.startsWith('environment.renamed') &&
        a.includes('"from":"Dev"') &&
        a.includes('"to":"dev"') &&
        a.includes('merged'),
    ),
  )
})

test('renaming and merging services: the board, the service page and the read API follow', async (t) => {
  const ctx = await buildTestApp(t)
  const acct = ctx.tenant.account.id
  await insertEvents(ctx.database, acct, [
    { service: 'billing-old', environment: 'prod', version: '1.0', status: 'Deploying', received_at: base },
    {
      service: 'billing-old',
      environment: 'prod',
      version: '1.0',
      status: 'Deployed',
      received_at: base + 60_000,
    },
    { service: 'billing', environment: 'prod', version: '1.1', received_at: base + 120_000 },
    { service: 'tmp', environment: 'prod', version: '0.1', received_at: base + 180_000 },
  ])
  const { browser } = await userSession(ctx, acct, 'a@example.com', 'admin')
  const page = await browser.get('/services/tmp/')
  assert.equal(linkHref(page.payload, 'Rename or merge…'), '/services/tmp/rename')
  // A rename: the new name has no history.
  const renamed = await browser.submit('/services/tmp/rename', '/services/tmp/rename', { to: 'scratch' })
  assert.equal(renamed.statusCode, 303)
  assert.equal(renamed.headers.location, '/services/scratch/')
  // The old name's page (a bookmark, a link in a chat) leads to the new one, keeping its query.
  const old = await browser.get('/services/tmp/?environment=prod')
  assert.equal(old.statusCode, 301)
  assert.equal(old.headers.location, '/services/scratch/?environment=prod')
  assert.equal((await browser.get('/services/never-was/')).statusCode, 404)
  assert.equal((await browser.get('/services/scratch/')).statusCode, 200)
  // A merge: billing-old into billing.
  const merged = await browser.submit('/services/billing-old/rename', '/services/billing-old/rename', {
    to: 'billing',
  })
  assert.equal(merged.statusCode, 303)
  const rows = boardTable((await browser.get('/services/')).payload)
  assert.deepEqual([...rows.keys()].sort(), ['billing', 'scratch'])
  assert.equal((await browser.get('/services/billing-old/')).headers.location, '/services/billing/')
  const api = await browser.get('/api/v1/deployments?service=billing')
  const deployments = api.json().deployments as { version: string; duration_ms: number | null }[]
  assert.deepEqual(
    deployments.map((d) => d.version),
    ['1.1', '1.0'],
  )
  assert.equal(deployments[1]?.duration_ms, 60_000)
  // The events themselves are unchanged.
  const names = await ctx.database.db.selectFrom('events').select('service').orderBy('id').execute()
  assert.deepEqual(
    names.map((r) => r.service),
    ['billing-old', 'billing-old', 'billing', 'tmp'],
  )
  // A member can do none of it.
  const { browser: member } = await userSession(ctx, acct, 'm@example.com', 'member')
  assert.doesNotMatch((await member.get('/services/billing/')).payload, /Rename or merge…/)
  assert.equal((await member.get('/services/billing/rename')).statusCode, 403)
  const token = await member.csrf('/services/billing/')
  assert.equal((await member.post('/services/billing/rename', { _csrf: token, to: 'x' })).statusCode, 403)
  assert.equal(
    (await member.post('/services/billing/delete', { _csrf: token, confirm: 'billing' })).statusCode,
    403,
  )
  assert.equal((await ctx.database.db.selectFrom('events').selectAll().execute()).length, 4)
})

test('deleting a service history: typed confirmation, audited, and verify passes and names it', async (t) => {
  const ctx = await buildTestApp(t)
  const acct = ctx.tenant.account.id
  await insertEvents(ctx.database, acct, [
    { service: 'test-svc', environment: 'prod', version: '1', received_at: base },
    { service: 'api', environment: 'prod', version: '1', received_at: base + 1 },
    { service: 'test-svc', environment: 'dev', version: '2', received_at: base + 2 },
    { service: 'old-test', environment: 'dev', version: '3', received_at: base + 3 },
  ])
  const { browser } = await userSession(ctx, acct, 'a@example.com', 'admin')
  // old-test merged into test-svc first: its events go too.
  assert.equal(
    (await browser.submit('/services/old-test/rename', '/services/old-test/rename', { to: 'test-svc' }))
      .statusCode,
    303,
  )
  await chainCaughtUp(ctx.database, { graceMs: 0, settleMs: 0 })
  const wrong = await browser.submit('/services/test-svc/delete', '/services/test-svc/delete', {
    confirm: 'test',
  })
  assert.equal(wrong.statusCode, 422)
  assert.match(wrong.payload, /id="del-confirm-problem">That is not the service name/)
  assert.equal((await ctx.database.db.selectFrom('events').selectAll().execute()).length, 4)

  const done = await browser.submit('/services/test-svc/delete', '/services/test-svc/delete', {
    confirm: 'test-svc',
  })
  assert.equal(done.statusCode, 303)
  const left = await ctx.database.db.selectFrom('events').select('service').execute()
  assert.deepEqual(
    left.map((r) => r.service),
    ['api'],
  )
  assert.equal((await browser.get('/services/test-svc/')).statusCode, 404)
  assert.deepEqual([...boardTable((await browser.get('/services/')).payload).keys()], ['api'])
  const audit = await auditActions(ctx)
  assert.ok(audit.some((a) => a.startsWith('service.history_deleted') && a.includes('"events":3')))
  await chainCaughtUp(ctx.database, { graceMs: 0, settleMs: 0 })
  const verified = await verifyChains(ctx.database)
  assert.deepEqual(verified.problems, [])
  const events = verified.streams.find((s) => s.stream === 'events')
  assert.deepEqual(events?.erased, [{ reason: 'history of service "test-svc" deleted', rows: 3 }])

  // A deletion without its audit entry is still a missing row.
  await ctx.database.db.deleteFrom('events').where('service', '=', 'api').execute()
  await ctx.database.db
    .insertInto('chain_erasures')
    .values({ stream: 'events', row_id: 2, account_id: acct, audit_at: 1, reason: 'forged' })
    .execute()
  const forged = await verifyChains(ctx.database)
  assert.deepEqual(
    forged.problems.map((p) => p.message),
    ['event 2 missing'],
  )
})
