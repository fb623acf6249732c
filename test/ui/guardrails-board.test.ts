// The board's guardrail marks (SPEC §11): a lock on a whole environment and an active freeze on its
// column head (and in a notice for phones), a lock on one service, a version marked bad and a
// deployment that broke a guardrail on their cells, each with who, why and until in words, escaped;
// the board of a past instant shows only what was known then; the live row draws the same marks.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { addFreezeWindow, lockEnvironment, markVersionBad } from '../../src/domain/guardrails/commands.js'
import { escapeHtml } from '../../src/views/html.js'
import { buildTestApp, type TestApp } from '../helper.js'
import { minutesAfter, OPERATOR, OPERATOR_SOURCE, record } from '../support/guardrails.js'
import { type Browser, sharedFixture, userSession } from '../support/ui.js'

const MIN = 60_000
const HOUR = 60 * MIN
const LOCK_REASON = 'release <script>alert("train")</script> & co'
const SERVICE_LOCK_REASON = 'schema <b>migration</b>'
const FREEZE_REASON = "end-of-<year> 'freeze'"
const BAD_REASON = 'leaks "memory" <fast>'
const OVERRIDE = 'hotfix <img src=x onerror=alert(1)>'

/** The opening tag and content of one cell of the board (or of a row the live board fetches). */
function cell(page: string, service: string, environment: string): string {
  const row = new RegExp(`<tr data-service="${escapeHtml(service)}">[\\s\\S]*?</tr>`).exec(page)?.[0] ?? ''
  const td = new RegExp(`<td class="([^"]*)" data-environment="${escapeHtml(environment)}">(.*?)</td>`).exec(
    row,
  )
  assert.ok(td, `a cell of ${service} in ${environment}`)
  return `${td[1]}|${td[2]}`
}

/** The column head of an environment. */
function head(page: string, environment: string): string {
  const thead = /<thead>[\s\S]*?<\/thead>/.exec(page)?.[0] ?? ''
  const th = new RegExp(`<th scope="col"[^>]*>${escapeHtml(environment)}(.*?)</th>`).exec(thead)
  assert.ok(th, `a column head for ${environment}`)
  return th[1] ?? ''
}

const count = (page: string, needle: string) => page.split(needle).length - 1

interface Fixture {
  ctx: TestApp
  member: Browser
  base: number
  now: number
}

/**
 * api, web and worker in dev, staging and prod; then prod locked for all services (until in two
 * hours), web locked alone in staging (no end), dev in a freeze, an expired lock on dev, a freeze
 * of staging that has not begun, api 0.9 (running in prod) marked bad; then worker 3.1 recorded
 * into locked prod with an override reason and web 2.1 into frozen dev.
 */
const fixture = sharedFixture(async (cleanup): Promise<Fixture> => {
  const ctx = await buildTestApp(cleanup)
  const acct = ctx.tenant.account.id
  const now = Date.now()
  const base = now - 2 * HOUR
  const clean: [string, string, string][] = [
    ['api', 'dev', '1.0'],
    ['api', 'staging', '1.0'],
    ['api', 'prod', '0.9'],
    ['web', 'dev', '2.0'],
    ['web', 'staging', '2.0'],
    ['web', 'prod', '2.0'],
    ['worker', 'prod', '3.0'],
  ]
  for (const [i, [service, environment, version]] of clean.entries()) {
    const { rules } = await record(ctx, { service, environment, version, occurred_at: minutesAfter(base, i) })
    assert.deepEqual(rules, [])
  }
  const db = ctx.database.db
  const ok = (r: { ok: boolean }) => assert.ok(r.ok, JSON.stringify(r))
  ok(
    await lockEnvironment(
      db,
      acct,
      { environment: 'prod', service: null, reason: LOCK_REASON, endsAt: now + 2 * HOUR },
      OPERATOR_SOURCE,
    ),
  )
  ok(
    await lockEnvironment(
      db,
      acct,
      { environment: 'staging', service: 'web', reason: SERVICE_LOCK_REASON, endsAt: null },
      OPERATOR_SOURCE,
    ),
  )
  ok(
    await lockEnvironment(
      db,
      acct,
      { environment: 'dev', service: null, reason: 'over already', endsAt: now - MIN },
      OPERATOR_SOURCE,
    ),
  )
  ok(
    await addFreezeWindow(
      db,
      acct,
      {
        environment: 'dev',
        reason: FREEZE_REASON,
        schedule: { kind: 'once', startsAt: now - 3 * HOUR, endsAt: now + 3 * HOUR },
      },
      OPERATOR_SOURCE,
    ),
  )
  ok(
    await addFreezeWindow(
      db,
      acct,
      {
        environment: 'staging',
        reason: 'not yet',
        schedule: { kind: 'once', startsAt: now + 24 * HOUR, endsAt: now + 48 * HOUR },
      },
      OPERATOR_SOURCE,
    ),
  )
  ok(
    await markVersionBad(
      db,
      acct,
      { service: 'api', version: '0.9', reason: BAD_REASON },
      OPERATOR_SOURCE,
      base + 30 * MIN,
    ),
  )
  const worker = await record(ctx, {
    service: 'worker',
    environment: 'prod',
    version: '3.1',
    occurred_at: minutesAfter(base, 40),
    override_reason: OVERRIDE,
  })
  assert.deepEqual(worker.rules, ['lock'])
  const web = await record(ctx, {
    service: 'web',
    environment: 'dev',
    version: '2.1',
    occurred_at: minutesAfter(base, 41),
  })
  assert.deepEqual(web.rules, ['freeze'])
  const { browser: member } = await userSession(ctx, acct, 'member@example.com', 'member')
  return { ctx, member, base, now }
})

test('the board of now: locks and freezes on the column heads, lock, bad and broken rules on their cells', async () => {
  const { member } = await fixture()
  const res = await member.get('/services/')
  assert.equal(res.statusCode, 200)
  const page = res.payload
  // prod is locked for all services: who, until when and why, in words and in the title.
  const prod = head(page, 'prod')
  assert.match(prod, /<div class="guard lock" title="prod is locked for all services by /)
  assert.ok(prod.includes(`by ${escapeHtml(OPERATOR)}, until <time datetime="`), prod)
  assert.ok(prod.includes(`data-local-short>`), prod)
  assert.ok(prod.includes(`: ${escapeHtml(LOCK_REASON)}</span>`), prod)
  // dev is in a freeze (the lock of dev has ended): until when and why.
  const dev = head(page, 'dev')
  assert.match(
    dev,
    /<div class="guard freeze" title="dev is in a freeze window until \d{4}-\d\d-\d\d \d\d:\d\d UTC: /,
  )
  assert.ok(dev.includes(`<span class="guard-label">Frozen</span> <span class="guard-text">until <time`), dev)
  assert.ok(dev.includes(escapeHtml(FREEZE_REASON)), dev)
  assert.doesNotMatch(dev, /Locked|over already/)
  // staging: a lock on web alone and a freeze not begun yet mark no column.
  assert.equal(head(page, 'staging'), '')
  // web is locked alone in staging, with no end; api in staging is not.
  const webStaging = cell(page, 'web', 'staging')
  assert.match(webStaging, /^cell guarded locked\|/)
  assert.ok(
    webStaging.includes(
      `<span class="guard-label">Locked</span> <span class="guard-text">by ${escapeHtml(OPERATOR)}, no end set: ${escapeHtml(SERVICE_LOCK_REASON)}</span>`,
    ),
    webStaging,
  )
  assert.equal(cell(page, 'api', 'staging').includes('guard'), false)
  // api runs 0.9 in prod, marked bad: the reason on the cell, who in the title.
  const apiProd = cell(page, 'api', 'prod')
  assert.ok(
    apiProd.includes(
      `<span class="guard-label">Bad</span> <span class="guard-text">${escapeHtml(BAD_REASON)}</span>`,
    ),
    apiProd,
  )
  assert.ok(apiProd.includes(`title="api 0.9 is marked bad by ${escapeHtml(OPERATOR)}`), apiProd)
  // worker 3.1 was recorded into locked prod with an override; web 2.1 into frozen dev.
  const workerProd = cell(page, 'worker', 'prod')
  assert.ok(
    workerProd.includes(
      `<span class="guard-label">Broke a guardrail</span> <span class="guard-text">Deployed while locked; override: <q>${escapeHtml(OVERRIDE)}</q></span>`,
    ),
    workerProd,
  )
  assert.ok(workerProd.includes(`title="Deployed while locked. Override: ${escapeHtml(OVERRIDE)}"`))
  assert.ok(cell(page, 'web', 'dev').includes('Deployed during a freeze</span>'))
  // Each mark where it belongs and nowhere else.
  assert.equal(count(page, 'class="guard lock"'), 2)
  assert.equal(count(page, 'class="guard freeze"'), 1)
  assert.equal(count(page, 'class="guard bad"'), 1)
  assert.equal(count(page, 'class="guard flagged"'), 2)
  for (const [service, environment] of [
    ['api', 'dev'],
    ['web', 'prod'],
  ] as const) {
    assert.equal(cell(page, service, environment).includes('guard'), false, `${service} in ${environment}`)
  }
  // On a phone the column heads are hidden: a notice says the same in full words.
  const notice = /<section class="notice guard-notice phone-only"[\s\S]*?<\/section>/.exec(page)?.[0] ?? ''
  assert.match(notice, /<h2 id="board-guards">Locked and frozen now<\/h2>/)
  assert.ok(notice.includes(`<strong>prod</strong>, all services, by ${escapeHtml(OPERATOR)}, until <time`))
  assert.ok(notice.includes(`<strong>dev</strong> until <time`))
  assert.doesNotMatch(notice, /staging|over already|not yet/)
  // Hostile text is only ever shown escaped.
  for (const raw of [LOCK_REASON, SERVICE_LOCK_REASON, BAD_REASON, OVERRIDE, OPERATOR, '<script>', '<img'])
    assert.equal(page.includes(raw), false, raw)
})

test('the board of a past instant: only the flags recorded by then and bad marks made by then', async () => {
  const { member, base } = await fixture()
  const after = await member.get(`/services/?at=${encodeURIComponent(minutesAfter(base, 50))}`)
  assert.equal(after.statusCode, 200)
  // Locks and freezes are what holds now: not on a board of the past.
  assert.equal(count(after.payload, 'class="guard lock"'), 0)
  assert.equal(count(after.payload, 'class="guard freeze"'), 0)
  assert.doesNotMatch(after.payload, /guard-notice/)
  assert.equal(head(after.payload, 'prod'), '')
  // What the deployments shown broke when recorded, and a bad mark made before the instant.
  assert.equal(count(after.payload, 'class="guard flagged"'), 2)
  assert.ok(cell(after.payload, 'worker', 'prod').includes('Deployed while locked'))
  assert.equal(count(after.payload, 'class="guard bad"'), 1)
  // Before the mark was made and before the flagged deployments: nothing to mark.
  const before = await member.get(`/services/?at=${encodeURIComponent(minutesAfter(base, 20))}`)
  assert.equal(before.statusCode, 200)
  assert.match(cell(before.payload, 'api', 'prod'), /0\.9/)
  assert.doesNotMatch(before.payload, /class="guard /)
})

test('the live row draws the same marks as the page', async () => {
  const { member } = await fixture()
  const page = (await member.get('/services/')).payload
  const words = (s: string | undefined) => s?.trim().replace(/data-relative>[^<]*</g, 'data-relative><')
  for (const service of ['web', 'worker', 'api']) {
    const row = await member.get(`/board/row?service=${service}`)
    assert.equal(row.statusCode, 200)
    const fromPage = new RegExp(`<tr data-service="${service}">[\\s\\S]*?</tr>`).exec(page)?.[0]
    assert.equal(words(row.payload), words(fromPage), service)
  }
  const web = (await member.get('/board/row?service=web')).payload
  assert.match(cell(web, 'web', 'staging'), /Locked/)
  assert.match(cell(web, 'web', 'dev'), /Deployed during a freeze/)
  assert.match(cell((await member.get('/board/row?service=api')).payload, 'api', 'prod'), /class="guard bad"/)
})

test('a recurring freeze on its column; a bad version under way beside the running one names its version; an override shows its reason', async (t) => {
  const ctx = await buildTestApp(t)
  const acct = ctx.tenant.account.id
  await record(ctx, { service: 'api', environment: 'prod', version: '1.0' })
  await record(ctx, { service: 'api', environment: 'prod', version: '1.1', status: 'Deploying' })
  const marked = await markVersionBad(
    ctx.database.db,
    acct,
    { service: 'api', version: '1.1', reason: 'corrupts <data>' },
    OPERATOR_SOURCE,
  )
  assert.ok(marked.ok)
  await record(ctx, {
    service: 'api',
    environment: 'staging',
    version: '1.1',
    override_reason: 'forced by <ci>',
  })
  // A recurring freeze of prod (daily, two hours, in UTC so no clock change shifts its end) that
  // opened 30 min ago.
  const opened = Math.floor((Date.now() - 30 * MIN) / MIN) * MIN
  const openedAt = new Date(opened)
  const freeze = await addFreezeWindow(
    ctx.database.db,
    acct,
    {
      environment: 'prod',
      reason: 'daily batch',
      schedule: {
        kind: 'recurring',
        cron: `${openedAt.getUTCMinutes()} ${openedAt.getUTCHours()} * * *`,
        durationMinutes: 120,
        timeZone: 'UTC',
      },
    },
    OPERATOR_SOURCE,
  )
  assert.ok(freeze.ok, JSON.stringify(freeze))
  const { browser } = await userSession(ctx, acct, 'a@example.com', 'admin')
  const page = (await browser.get('/services/')).payload
  const frozen = head(page, 'prod')
  assert.ok(frozen.includes(`until <time datetime="${new Date(opened + 120 * MIN).toISOString()}"`), frozen)
  assert.ok(frozen.includes(': daily batch</span>'), frozen)
  const prod = cell(page, 'api', 'prod')
  // 1.0 runs; the deployment of 1.1 under way is marked bad, by its version.
  assert.match(prod, /<span class="version mono">1\.0<\/span>/)
  assert.ok(
    prod.includes(
      '<span class="guard-label">Bad</span> <span class="guard-text"><span class="mono">1.1</span>: corrupts &lt;data&gt;</span>',
    ),
    prod,
  )
  // In staging 1.1 runs: marked bad (without repeating the version), and recorded with an override
  // after it was marked bad.
  const staging = cell(page, 'api', 'staging')
  assert.ok(staging.includes('<span class="guard-text">corrupts &lt;data&gt;</span>'), staging)
  assert.ok(
    staging.includes('Deployed while its version was marked bad; override: <q>forced by &lt;ci&gt;</q>'),
    staging,
  )
  // An account without guardrails or flags: no marks at all.
  const other = await ctx.addTenant('Other')
  await ctx.app.inject({
    method: 'POST',
    url: '/deploy',
    headers: { 'x-api-key': other.key, 'content-type': 'application/json' },
    payload: JSON.stringify({ service: 'api', environment: 'prod', version: '1.1', status: 'Deployed' }),
  })
  const { browser: theirs } = await userSession(ctx, other.account.id, 'o@example.com', 'member')
  const theirPage = (await theirs.get('/services/')).payload
  assert.match(theirPage, /<span class="version mono">1\.1<\/span>/)
  assert.doesNotMatch(theirPage, /class="guard /)
})
