// A service's page and guardrails (SPEC §11): a notice of the locks and active freezes over its
// environments (not others'), its timelines marking bad versions and deployments that broke a
// guardrail (with the override reason), escaped; admins mark versions bad and good through the
// audited commands (422 naming each field and nothing stored for bad input; members get 403; the
// CSRF token is required), and recording sees the change at once.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { addFreezeWindow, lockEnvironment, markVersionBad } from '../../src/domain/guardrails/commands.js'
import { escapeHtml } from '../../src/views/html.js'
import { buildTestApp, type TestApp } from '../helper.js'
import { minutesAfter, OPERATOR, OPERATOR_SOURCE, record } from '../support/guardrails.js'
import { userSession } from '../support/ui.js'

const MIN = 60_000
const HOUR = 60 * MIN
const DAY = 24 * HOUR
const BAD_REASON = 'drops <em>orders</em> & "retries"'
const OVERRIDE = 'outage <script>fix()</script>'

/** The timeline table of one environment on a service's page. */
function timelineOf(page: string, service: string, environment: string): string {
  const caption = `Deployments of ${escapeHtml(service)} in ${escapeHtml(environment)}, newest first`
  const start = page.indexOf(caption)
  assert.notEqual(start, -1, `a timeline of ${environment}`)
  return page.slice(start, page.indexOf('</table>', start))
}

/** The rows of a timeline whose version cell says `version`. */
function rowsOf(table: string, version: string): string[] {
  return [...table.matchAll(/<tr[^>]*>[\s\S]*?<\/tr>/g)]
    .map((m) => m[0])
    .filter((row) => row.includes(`<td class="mono">${escapeHtml(version)}</td>`))
}

/** The audit entries about versions, in order (logins and the like left out). */
async function auditActions(ctx: TestApp): Promise<string[]> {
  const rows = await ctx.database.db
    .selectFrom('audit_entries')
    .select('action')
    .where('action', 'like', 'version.%')
    .orderBy('id')
    .execute()
  return rows.map((r) => r.action)
}

async function badVersions(ctx: TestApp): Promise<string[]> {
  const rows = await ctx.database.db
    .selectFrom('bad_versions')
    .select(['service', 'version', 'reason', 'created_by'])
    .orderBy('version')
    .execute()
  return rows.map((r) => `${r.service} ${r.version}: ${r.reason} (${r.created_by})`)
}

/**
 * api in staging and prod, web in prod and qa; prod locked for all, api locked alone in staging,
 * web locked alone in prod, qa frozen; api 2.0 marked bad, then api 2.1 recorded into locked prod
 * with an override reason.
 */
async function populated(t: Parameters<typeof buildTestApp>[0]) {
  const ctx = await buildTestApp(t)
  const acct = ctx.tenant.account.id
  const now = Date.now()
  const base = now - HOUR
  const SOON = now + 2 * DAY
  const DAILY = Math.floor((now + 2 * HOUR) / MIN) * MIN
  const seeds: [string, string, string][] = [
    ['api', 'staging', '1.9'],
    ['api', 'prod', '1.9'],
    ['api', 'staging', '2.0'],
    ['api', 'prod', '2.0'],
    ['web', 'prod', '7'],
    ['web', 'qa', '7'],
  ]
  for (const [i, [service, environment, version]] of seeds.entries())
    await record(ctx, { service, environment, version, occurred_at: minutesAfter(base, i) })
  const db = ctx.database.db
  const results = [
    await lockEnvironment(
      db,
      acct,
      { environment: 'prod', service: null, reason: 'quarter <end>', endsAt: now + 5 * HOUR },
      OPERATOR_SOURCE,
    ),
    await lockEnvironment(
      db,
      acct,
      { environment: 'staging', service: 'api', reason: 'api staging <reset>', endsAt: null },
      OPERATOR_SOURCE,
    ),
    await lockEnvironment(
      db,
      acct,
      { environment: 'prod', service: 'web', reason: 'web only', endsAt: null },
      OPERATOR_SOURCE,
    ),
    await addFreezeWindow(
      db,
      acct,
      {
        environment: 'qa',
        reason: 'qa frozen',
        schedule: { kind: 'once', startsAt: now - 2 * HOUR, endsAt: now + 2 * HOUR },
      },
      OPERATOR_SOURCE,
    ),
    await markVersionBad(db, acct, { service: 'api', version: '2.0', reason: BAD_REASON }, OPERATOR_SOURCE),
    // Ahead: staging freezes in two days (and again in ten, too far to name); prod daily, two hours on.
    await addFreezeWindow(
      db,
      acct,
      {
        environment: 'staging',
        reason: 'release <prep>',
        schedule: { kind: 'once', startsAt: SOON, endsAt: SOON + HOUR },
      },
      OPERATOR_SOURCE,
    ),
    await addFreezeWindow(
      db,
      acct,
      {
        environment: 'staging',
        reason: 'far off',
        schedule: { kind: 'once', startsAt: now + 10 * DAY, endsAt: now + 10 * DAY + HOUR },
      },
      OPERATOR_SOURCE,
    ),
    await addFreezeWindow(
      db,
      acct,
      {
        environment: 'prod',
        reason: 'nightly batch',
        schedule: {
          kind: 'recurring',
          cron: `${new Date(DAILY).getUTCMinutes()} ${new Date(DAILY).getUTCHours()} * * *`,
          durationMinutes: 30,
          timeZone: 'UTC',
        },
      },
      OPERATOR_SOURCE,
    ),
  ]
  for (const r of results) assert.ok(r.ok, JSON.stringify(r))
  const flagged = await record(ctx, {
    service: 'api',
    environment: 'prod',
    version: '2.1',
    occurred_at: minutesAfter(base, 30),
    override_reason: OVERRIDE,
  })
  assert.deepEqual(flagged.rules, ['lock'])
  return { ctx, acct, soon: SOON, daily: DAILY }
}

test('the service page: locks and freezes over its environments, bad versions and broken rules in its timelines', async (t) => {
  const { ctx, acct, soon, daily } = await populated(t)
  const { browser } = await userSession(ctx, acct, 'm@example.com', 'member')
  const res = await browser.get('/services/api/')
  assert.equal(res.statusCode, 200)
  const page = res.payload
  const notice = /<section class="notice guard-notice"[\s\S]*?<\/section>/.exec(page)?.[0] ?? ''
  assert.match(notice, /<h2 id="guards-heading">Guardrails: locks and freezes<\/h2>/)
  assert.ok(
    notice.includes(
      `<strong>prod</strong>, all services, by ${escapeHtml(OPERATOR)}, until <time datetime="`,
    ),
    notice,
  )
  assert.ok(notice.includes(': quarter &lt;end&gt;</li>'))
  assert.ok(
    notice.includes(
      `<strong>api</strong> in <strong>staging</strong>, by ${escapeHtml(OPERATOR)}, no end set: api staging &lt;reset&gt;</li>`,
    ),
  )
  // Freezes about to open in its environments, soonest first; not one ten days away.
  const next = [
    ...notice.matchAll(
      /<span class="guard-label next">Next freeze<\/span> <strong>(\w+)<\/strong> from <time datetime="([^"]+)"/g,
    ),
  ]
  assert.deepEqual(
    next.map((m) => [m[1], m[2]]),
    [
      ['prod', new Date(daily).toISOString()],
      ['staging', new Date(soon).toISOString()],
    ],
  )
  assert.ok(notice.includes(': release &lt;prep&gt;</li>'))
  assert.doesNotMatch(notice, /far off/)
  // qa is frozen but api never deployed there; web's own lock is web's.
  assert.doesNotMatch(notice, /qa|web only/)
  // The versions marked bad, for everyone; no forms for a member.
  assert.match(page, /<h2 id="bad-heading">Versions marked bad<\/h2>/)
  assert.ok(
    page.includes(
      `<span class="guard-label bad">Bad</span> <span class="mono">2.0</span>: ${escapeHtml(BAD_REASON)} <span class="hint">(${escapeHtml(OPERATOR)}, <time`,
    ),
  )
  assert.doesNotMatch(page, /versions\/bad|versions\/good|Mark a version bad/)
  // Every row of 2.0 is marked bad with the reason, in both environments; 1.9's rows are not.
  for (const environment of ['staging', 'prod']) {
    const table = timelineOf(page, 'api', environment)
    const bad = rowsOf(table, '2.0')
    assert.equal(bad.length, 1, environment)
    assert.match(bad[0] ?? '', /^<tr class="guarded">/)
    assert.ok(bad[0]?.includes(`<span class="guard-text">${escapeHtml(BAD_REASON)}</span>`))
    for (const row of rowsOf(table, '1.9')) assert.doesNotMatch(row, /guard/)
  }
  // 2.1 was recorded into locked prod: which rule and the override reason.
  const flagged = rowsOf(timelineOf(page, 'api', 'prod'), '2.1')[0] ?? ''
  assert.ok(
    flagged.includes(
      `<span class="guard-label">Broke a guardrail</span> <span class="guard-text">Deployed while locked; override: <q>${escapeHtml(OVERRIDE)}</q></span>`,
    ),
    flagged,
  )
  assert.doesNotMatch(flagged, /class="guard bad"/)
  for (const raw of [BAD_REASON, OVERRIDE, OPERATOR, '<end>', '<reset>'])
    assert.equal(page.includes(raw), false, raw)
  // web's page: prod locked for all and web alone, qa frozen; not api's lock in staging.
  const web = (await browser.get('/services/web/')).payload
  const webNotice = /<section class="notice guard-notice"[\s\S]*?<\/section>/.exec(web)?.[0] ?? ''
  assert.match(webNotice, /<strong>prod<\/strong>, all services/)
  assert.match(webNotice, /<strong>web<\/strong> in <strong>prod<\/strong>, by .*: web only/)
  assert.match(webNotice, /<span class="guard-label freeze">Frozen<\/span> <strong>qa<\/strong> until <time/)
  assert.doesNotMatch(webNotice, /api staging/)
  // web has no bad versions: a member sees no such section.
  assert.doesNotMatch(web, /bad-heading/)
})

test('admins mark a version bad and good from the page; recording sees it at once; audited', async (t) => {
  const { ctx, acct } = await populated(t)
  const { browser } = await userSession(ctx, acct, 'admin@example.com', 'admin')
  const page = (await browser.get('/services/web/')).payload
  assert.match(page, /<form method="post" action="\/services\/web\/versions\/bad">/)
  assert.match(page, /<datalist id="vf-versions"><option value="7"><\/option><\/datalist>/)
  // Warm the cache recording consults: it must learn of the mark at once, not after its lifetime.
  assert.deepEqual(
    await ctx.app.guardrails.brokenBy(acct, { service: 'web', environment: 'qa', version: '7' }, Date.now()),
    ['freeze'],
  )
  const before = (await auditActions(ctx)).length
  const marked = await browser.submit('/services/web/', '/services/web/versions/bad', {
    version: ' 7 ',
    reason: 'breaks <login>',
  })
  assert.equal(marked.statusCode, 303)
  assert.equal(marked.headers.location, '/services/web/')
  assert.deepEqual(await badVersions(ctx), [
    `api 2.0: ${BAD_REASON} (${OPERATOR})`,
    'web 7: breaks <login> (admin@example.com)',
  ])
  assert.deepEqual((await auditActions(ctx)).slice(before), ['version.marked_bad'])
  assert.deepEqual(
    await ctx.app.guardrails.brokenBy(acct, { service: 'web', environment: 'qa', version: '7' }, Date.now()),
    ['freeze', 'bad_version'],
  )
  const after = (await browser.get('/services/web/')).payload
  assert.match(after, /web 7 is marked bad\./)
  assert.ok(
    after.includes(
      '<span class="mono">7</span>: breaks &lt;login&gt; <span class="hint">(admin@example.com, <time',
    ),
  )
  assert.match(
    after,
    /<input type="hidden" name="version" value="7"><button type="submit" class="secondary">Mark 7 good<\/button>/,
  )
  // Both rows of 7 (prod and qa) are marked.
  assert.equal(after.split('<span class="guard-text">breaks &lt;login&gt;</span>').length - 1, 2)
  // The board marks web's cells too.
  const board = (await browser.get('/services/')).payload
  assert.match(
    board,
    /<span class="guard-label">Bad<\/span> <span class="guard-text">breaks &lt;login&gt;<\/span>/,
  )
  // Marking again replaces the reason.
  const again = await browser.submit('/services/web/', '/services/web/versions/bad', {
    version: '7',
    reason: 'breaks logout too',
  })
  assert.equal(again.statusCode, 303)
  assert.match((await browser.get('/services/web/')).payload, /web 7 stays marked bad, with the new reason\./)
  // Good again: gone from the page, the board and the check.
  const good = await browser.submit('/services/web/', '/services/web/versions/good', { version: '7' })
  assert.equal(good.statusCode, 303)
  assert.deepEqual(await badVersions(ctx), [`api 2.0: ${BAD_REASON} (${OPERATOR})`])
  assert.deepEqual((await auditActions(ctx)).slice(before), [
    'version.marked_bad',
    'version.marked_bad',
    'version.marked_good',
  ])
  const cleared = (await browser.get('/services/web/')).payload
  assert.match(cleared, /web 7 is no longer marked bad\./)
  assert.match(cleared, /No version of web is marked bad\./)
  assert.doesNotMatch(cleared, /class="guard bad"/)
  assert.deepEqual(
    await ctx.app.guardrails.brokenBy(acct, { service: 'web', environment: 'qa', version: '7' }, Date.now()),
    ['freeze'],
  )
})

test('bad input is refused with each field named and nothing stored; members get 403; forms need their token', async (t) => {
  const { ctx, acct } = await populated(t)
  const { browser: admin } = await userSession(ctx, acct, 'admin@example.com', 'admin')
  const stored = await badVersions(ctx)
  const audited = (await auditActions(ctx)).length
  const empty = await admin.submit('/services/api/', '/services/api/versions/bad', {
    version: ' ',
    reason: '',
  })
  assert.equal(empty.statusCode, 422)
  assert.match(empty.payload, /<details class="mark-bad" id="mark-bad" open>/)
  assert.match(
    empty.payload,
    /<p class="field-error" id="vf-version-error"><span class="sr-only">Error:<\/span> version is required<\/p>/,
  )
  assert.match(
    empty.payload,
    /<p class="field-error" id="vf-reason-error"><span class="sr-only">Error:<\/span> reason is required<\/p>/,
  )
  assert.match(
    empty.payload,
    /id="vf-reason" name="reason"[^>]*aria-invalid="true" aria-describedby="vf-reason-error"/,
  )
  const long = await admin.submit('/services/api/', '/services/api/versions/bad', {
    version: '2.1"><script>x()</script>',
    reason: 'x'.repeat(501),
  })
  assert.equal(long.statusCode, 422)
  assert.match(long.payload, /reason must be at most 500 characters/)
  // What was typed is put back, escaped.
  assert.ok(long.payload.includes('value="2.1&quot;&gt;&lt;script&gt;x()&lt;/script&gt;"'))
  assert.equal(long.payload.includes('<script>x()'), false)
  const control = await admin.submit('/services/api/', '/services/api/versions/bad', {
    version: '2.1',
    reason: 'bell \u0007 here',
  })
  assert.equal(control.statusCode, 422)
  assert.match(control.payload, /reason must not contain control characters/)
  const notBad = await admin.submit('/services/api/', '/services/api/versions/good', { version: '1.9' })
  assert.equal(notBad.statusCode, 422)
  assert.match(notBad.payload, /api 1\.9 is not marked bad/)
  assert.equal(
    (await admin.submit('/services/api/', '/services/api/versions/good', { version: '' })).statusCode,
    422,
  )
  assert.equal(
    (await admin.submit('/services/api/', '/services/nope/versions/bad', { version: '1', reason: 'r' }))
      .statusCode,
    404,
  )
  // Without the page's token: refused before anything is read.
  const forged = await admin.post('/services/api/versions/bad', { version: '1.9', reason: 'forged' })
  assert.equal(forged.statusCode, 403)
  assert.match(forged.payload, /This form has expired/)
  const forgedGood = await admin.post('/services/api/versions/good', { version: '2.0' })
  assert.equal(forgedGood.statusCode, 403)
  // A member sees the marks, not the forms, and may not post them.
  const { browser: member } = await userSession(ctx, acct, 'member@example.com', 'member')
  const memberPage = (await member.get('/services/api/')).payload
  assert.match(memberPage, /class="guard bad"/)
  assert.doesNotMatch(memberPage, /Mark a version bad|Mark 2\.0 good/)
  const refused = await member.submit('/services/api/', '/services/api/versions/bad', {
    version: '1.9',
    reason: 'member says so',
  })
  assert.equal(refused.statusCode, 403)
  assert.equal(
    (await member.submit('/services/api/', '/services/api/versions/good', { version: '2.0' })).statusCode,
    403,
  )
  // Nothing of it was stored or audited.
  assert.deepEqual(await badVersions(ctx), stored)
  assert.equal((await auditActions(ctx)).length, audited)
})
