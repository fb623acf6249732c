// Settings → Guardrails: admins lock environments, add freeze windows, set promotion rules and mark
// versions bad with plain forms (post/redirect/get, a notice, an audit entry naming them); a bad
// field comes back 422 beside its field with nothing stored; members and forged forms change nothing.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { buildTestApp, type TestApp } from '../helper.js'
import { type Browser, insertEvents, type Response, unescapeHtml, userSession } from '../support/ui.js'

const PAGE = '/settings/guardrails/'
const HOUR = 3_600_000

type GuardrailTable = 'environment_locks' | 'freeze_windows' | 'promotion_rules' | 'bad_versions'

async function rows(ctx: TestApp, table: GuardrailTable): Promise<number> {
  const row = await ctx.database.db
    .selectFrom(table)
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .executeTakeFirstOrThrow()
  return Number(row.n)
}

async function counts(ctx: TestApp) {
  return {
    locks: await rows(ctx, 'environment_locks'),
    freezes: await rows(ctx, 'freeze_windows'),
    rules: await rows(ctx, 'promotion_rules'),
    bad: await rows(ctx, 'bad_versions'),
    audit: await auditCount(ctx),
  }
}

async function auditCount(ctx: TestApp): Promise<number> {
  const row = await ctx.database.db
    .selectFrom('audit_entries')
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .where('action', 'not in', ['user.login', 'login.succeeded', 'session.created'])
    .where('account_id', '=', ctx.tenant.account.id)
    .executeTakeFirstOrThrow()
  return Number(row.n)
}

/** The newest audit entry of an action. */
async function lastAudit(ctx: TestApp, action: string) {
  return ctx.database.db
    .selectFrom('audit_entries')
    .select(['actor', 'actor_kind', 'action', 'target', 'details', 'address'])
    .where('action', '=', action)
    .orderBy('id', 'desc')
    .executeTakeFirst()
}

async function setUp(t: Parameters<typeof buildTestApp>[0]) {
  const ctx = await buildTestApp(t)
  const account = ctx.tenant.account.id
  await insertEvents(ctx.database, account, [
    { service: 'shop', environment: 'dev', version: '1.0.0' },
    { service: 'shop', environment: 'staging', version: '1.0.0' },
    { service: 'shop', environment: 'prod', version: '1.0.0' },
    { service: 'api', environment: 'prod', version: '2.0.0' },
  ])
  const { browser: admin } = await userSession(ctx, account, 'ada@example.com', 'admin')
  const { browser: member } = await userSession(ctx, account, 'max@example.com', 'member')
  return { ctx, account, admin, member }
}

/** Posts a form of the guardrails page with the page's CSRF token. */
function submit(browser: Browser, action: string, form: Record<string, string>): Promise<Response> {
  return browser.submit(PAGE, `/settings/guardrails/${action}`, form)
}

/** The notice shown at the top of the page the redirect leads to (once). */
async function noticeAfter(browser: Browser, res: Response): Promise<string> {
  assert.equal(res.statusCode, 303, res.payload.slice(0, 300))
  assert.match(String(res.headers.location), /^\/settings\/guardrails\/#/)
  const page = await browser.get(PAGE)
  const notice = /<div class="notice" role="status"><p>([^<]*)<\/p>/.exec(page.payload)?.[1]
  assert.ok(notice, 'the page shows a notice')
  const again = await browser.get(PAGE)
  assert.doesNotMatch(again.payload, /class="notice"/, 'the notice shows once')
  return unescapeHtml(notice)
}

/** The field errors shown beside fields, and the error summary's items. */
function fieldErrors(page: string): string[] {
  return [
    ...page.matchAll(
      /<p class="field-error" id="([^"]+)-error"><span class="sr-only">Error:<\/span> ([^<]*)<\/p>/g,
    ),
  ].map((m) => `${m[1]}: ${unescapeHtml(m[2] ?? '')}`)
}

test('a lock: the form stores it with the viewer-zone time, the notice says what was stored, the audit names the admin; Unlock lifts it', async (t) => {
  const { ctx, account, admin } = await setUp(t)
  const page = await admin.get(PAGE)
  assert.equal(page.statusCode, 200)
  assert.match(page.payload, /No locks\./)
  // The environments and services of the account are the choices.
  assert.match(
    page.payload,
    /<select id="gl-environment" name="environment" required >.*<option value="dev" >dev<\/option><option value="staging" >staging<\/option><option value="prod" >prod<\/option>/s,
  )
  assert.match(
    page.payload,
    /<option value="" selected>All services<\/option><option value="api" >api<\/option><option value="shop" >shop<\/option>/,
  )

  // Recording consults a cache: after the change it must see the lock at once.
  const asked = Date.now()
  const deployment = { service: 'shop', environment: 'prod', version: '9' }
  assert.deepEqual(await ctx.app.guardrails.brokenBy(account, deployment, asked), [])

  // A datetime-local value is read in the viewer's zone (sent by the page's script as tz).
  const res = await submit(admin, 'locks', {
    environment: 'prod',
    service: '',
    reason: 'migrating the database',
    until: '2099-12-24T18:00',
    tz: 'Europe/Berlin',
  })
  assert.equal(await noticeAfter(admin, res), 'prod is locked for all services until 2099-12-24 17:00 UTC.')
  const lock = await ctx.database.db.selectFrom('environment_locks').selectAll().executeTakeFirstOrThrow()
  assert.equal(Number(lock.ends_at), Date.UTC(2099, 11, 24, 17, 0))
  assert.equal(lock.service, null)
  assert.equal(lock.created_by, 'ada@example.com')
  const audit = await lastAudit(ctx, 'environment.locked')
  assert.equal(audit?.actor, 'ada@example.com')
  assert.equal(audit?.actor_kind, 'user')
  assert.equal(audit?.target, 'environment prod')
  assert.deepEqual(JSON.parse(audit?.details ?? '{}'), {
    reason: 'migrating the database',
    until: '2099-12-24T17:00:00.000Z',
  })
  assert.ok(audit?.address)
  assert.deepEqual(await ctx.app.guardrails.brokenBy(account, deployment, asked + 1), ['lock'])

  // One service, for a span from now; the table lists both, active, with Unlock buttons.
  const before = Date.now()
  const span = await submit(admin, 'locks', {
    environment: 'staging',
    service: 'shop',
    reason: 'flaky',
    until: '2h',
  })
  assert.match(
    await noticeAfter(admin, span),
    /^staging is locked for shop until \d{4}-\d\d-\d\d \d\d:\d\d UTC\.$/,
  )
  const shopLock = await ctx.database.db
    .selectFrom('environment_locks')
    .selectAll()
    .where('service', '=', 'shop')
    .executeTakeFirstOrThrow()
  assert.ok(Math.abs(Number(shopLock.ends_at) - (before + 2 * HOUR)) < 60_000)
  const listed = await admin.get(PAGE)
  assert.equal([...listed.payload.matchAll(/<span class="guard-state active">active<\/span>/g)].length, 2)
  assert.match(listed.payload, /<td data-label="Until">until unlocked<\/td>|<td data-label="Until"><time/)
  assert.match(listed.payload, /<span class="hint">all services<\/span>/)

  const unlock = await submit(admin, `locks/${lock.id}/unlock`, {})
  assert.equal(await noticeAfter(admin, unlock), 'The lock on prod (all services) is lifted.')
  assert.equal(await rows(ctx, 'environment_locks'), 1)
  const lifted = await lastAudit(ctx, 'environment.unlocked')
  assert.equal(lifted?.actor, 'ada@example.com')
  assert.deepEqual(JSON.parse(lifted?.details ?? '{}'), { locks: ['migrating the database'] })
  // Unlocking it again: there is no such lock any more.
  assert.equal((await submit(admin, `locks/${lock.id}/unlock`, {})).statusCode, 404)
})

test('Settings links to the page; a lock past its end shows as ended, with a Remove button instead of Unlock', async (t) => {
  const { ctx, account, admin } = await setUp(t)
  assert.match((await admin.get('/settings/')).payload, /<a href="\/settings\/guardrails\/">Guardrails<\/a>/)
  const now = Date.now()
  await ctx.database.db
    .insertInto('environment_locks')
    .values({
      account_id: account,
      environment: 'prod',
      service: 'shop',
      reason: 'short one',
      ends_at: now - 60_000,
      created_by: 'ada@example.com',
      created_at: now - HOUR,
    })
    .execute()
  const page = (await admin.get(PAGE)).payload
  assert.match(page, /<span class="guard-state ended">ended<\/span>/)
  assert.match(page, /<button type="submit" class="secondary">Remove<\/button>/)
  assert.doesNotMatch(page, />Unlock</)
})

test('a refused lock comes back 422 with each bad field named beside it, what was typed kept, and nothing stored', async (t) => {
  const { ctx, admin } = await setUp(t)
  const start = await counts(ctx)
  const cases: [Record<string, string>, RegExp][] = [
    [
      { environment: 'nope', reason: 'x' },
      /gl-environment: environment: this account has no environment "nope" \(known: dev, staging, prod\)/,
    ],
    [{ environment: 'prod', reason: '  ' }, /gl-reason: reason is required/],
    [
      { environment: 'prod', reason: 'x', until: '2020-01-01T00:00' },
      /gl-until: until must lie in the future/,
    ],
    [
      { environment: 'prod', reason: 'x', until: 'tomorrow' },
      /gl-until: until must be an ISO 8601 date-time/,
    ],
    [
      { environment: 'prod', service: 'ghost', reason: 'x' },
      /gl-service: service: this account has no service "ghost"/,
    ],
    [{ environment: 'prod', reason: 'x', tz: 'Mars/Olympus' }, /gl-until: tz must be a time zone name/],
  ]
  for (const [form, expected] of cases) {
    const res = await submit(admin, 'locks', form)
    assert.equal(res.statusCode, 422, JSON.stringify(form))
    assert.match(fieldErrors(res.payload).join('\n'), expected)
    assert.match(res.payload, /Nothing was changed/)
  }
  // Two bad fields: both named; the reason typed is kept in its field.
  const both = await submit(admin, 'locks', {
    environment: '',
    reason: 'keep <me>',
    until: '1999-01-01T00:00Z',
  })
  assert.deepEqual(fieldErrors(both.payload), [
    'gl-environment: environment is required',
    'gl-until: until must lie in the future',
  ])
  assert.match(
    both.payload,
    /name="reason" type="text" class="wide" required maxlength="500" value="keep &lt;me&gt;"/,
  )
  assert.match(both.payload, /<a href="#gl-environment">environment is required<\/a>/)
  assert.deepEqual(await counts(ctx), start)
})

test('freeze windows: one-off in the viewer zone, weekly and by cron in a named zone; listed in words with the next occurrence on both clocks; Remove', async (t) => {
  const { ctx, admin } = await setUp(t)
  const once = await submit(admin, 'freezes', {
    environment: 'prod',
    kind: 'once',
    from: '2099-12-24T00:00',
    to: '2099-12-27T00:00',
    tz: 'America/New_York',
    // Left in another fieldset: only the chosen kind counts.
    cron: '0 18 * * 5',
    reason: 'holidays',
  })
  assert.equal(
    await noticeAfter(admin, once),
    'A freeze window is added to prod: from 2099-12-24 05:00 UTC to 2099-12-27 05:00 UTC.',
  )
  const weekly = await submit(admin, 'freezes', {
    environment: 'staging',
    kind: 'weekly',
    weekly: 'Fri 16:00-Mon 08:00',
    time_zone: 'Europe/Berlin',
    reason: 'weekend',
  })
  assert.equal(
    await noticeAfter(admin, weekly),
    'A freeze window is added to staging: every Fri 16:00 to Mon 08:00 (Europe/Berlin).',
  )
  // By cron; no zone chosen: the viewer's (sent by the page's script as tz).
  const cron = await submit(admin, 'freezes', {
    environment: 'dev',
    kind: 'cron',
    cron: '0 22 * * 1-5',
    duration_minutes: '600',
    time_zone: '',
    tz: 'Asia/Tokyo',
    reason: 'nightly batch',
  })
  assert.equal(
    await noticeAfter(admin, cron),
    'A freeze window is added to dev: every Mon–Fri 22:00 to 08:00 (Asia/Tokyo).',
  )
  const stored = await ctx.database.db.selectFrom('freeze_windows').selectAll().orderBy('id').execute()
  assert.deepEqual(
    stored.map((w) => [
      w.environment,
      w.cron,
      w.duration_minutes === null ? null : Number(w.duration_minutes),
      w.time_zone,
      w.starts_at === null ? null : Number(w.starts_at),
      w.created_by,
    ]),
    [
      ['prod', null, null, null, Date.UTC(2099, 11, 24, 5), 'ada@example.com'],
      ['staging', '0 16 * * 5', 3840, 'Europe/Berlin', null, 'ada@example.com'],
      ['dev', '0 22 * * 1-5', 600, 'Asia/Tokyo', null, 'ada@example.com'],
    ],
  )
  const audit = await lastAudit(ctx, 'freeze.added')
  assert.equal(audit?.actor, 'ada@example.com')
  assert.equal(audit?.target, 'environment dev')

  const page = (await admin.get(PAGE)).payload
  assert.match(page, /<td data-label="Schedule"><span>every Fri 16:00 to Mon 08:00<\/span><\/td>/)
  assert.match(page, /<td data-label="Time zone">Europe\/Berlin<\/td>/)
  // The one-off window's next occurrence is its start, in the viewer's time (UTC until the script runs).
  assert.match(page, /<td data-label="Next"><span><time datetime="2099-12-24T05:00:00.000Z"/)
  // The weekly one's next start (or, at the weekend, the end of the one holding now) on Berlin's clock.
  assert.match(page, /<span class="hint">Fri, \d{1,2} \w{3} \d{4}, 16:00 Europe\/Berlin<\/span>/)
  // A window holding now says so, and until when.
  const now = Date.now()
  await ctx.database.db
    .insertInto('freeze_windows')
    .values({
      account_id: ctx.tenant.account.id,
      environment: 'prod',
      reason: 'incident',
      cron: null,
      duration_minutes: null,
      time_zone: null,
      starts_at: now - HOUR,
      ends_at: Date.UTC(2098, 0, 1),
      created_by: 'ada@example.com',
      created_at: now,
    })
    .execute()
  assert.match(
    (await admin.get(PAGE)).payload,
    /<span class="guard-state active">active now<\/span> until <time datetime="2098-01-01T00:00:00.000Z"/,
  )

  const id = stored[0]?.id
  const removed = await submit(admin, `freezes/${id}/remove`, {})
  assert.equal(await noticeAfter(admin, removed), 'The freeze window is removed.')
  assert.equal(await rows(ctx, 'freeze_windows'), 3)
  assert.equal((await lastAudit(ctx, 'freeze.removed'))?.actor, 'ada@example.com')
  assert.equal((await submit(admin, `freezes/${id}/remove`, {})).statusCode, 404)
})

test('a refused freeze window comes back 422 beside its field: to ≤ from, overlapping windows, cron out of range, unknown zone, bad weekly text, no kind', async (t) => {
  const { ctx, admin } = await setUp(t)
  // Windows are compared over the next 400 days (commands.ts): these lie within them.
  const day = (n: number) => new Date(Math.floor(Date.now() / 86_400_000 + n) * 86_400_000).toISOString()
  await submit(admin, 'freezes', {
    environment: 'prod',
    kind: 'once',
    from: day(10),
    to: day(13),
    reason: 'holidays',
  })
  await submit(admin, 'freezes', {
    environment: 'staging',
    kind: 'weekly',
    weekly: 'Fri 16:00-Mon 08:00',
    time_zone: 'Europe/Berlin',
    reason: 'weekend',
  })
  const start = await counts(ctx)
  const refused: [Record<string, string>, RegExp][] = [
    [
      { kind: 'once', from: '2099-01-02T00:00', to: '2099-01-01T00:00' },
      /^gf-to: to must be later than from/,
    ],
    [
      { kind: 'once', from: '2099-01-02T00:00', to: '2099-01-02T00:00' },
      /^gf-to: to must be later than from/,
    ],
    [
      { kind: 'once', from: day(12), to: day(14) },
      new RegExp(
        `^gf-from: the window overlaps freeze window \\d+ of prod \\(${day(10)} to ${day(13)}\\) at ${day(12)}`.replaceAll(
          '.',
          '\\.',
        ),
      ),
    ],
    [
      { environment: 'staging', kind: 'weekly', weekly: 'Sun 20:00-Mon 06:00', time_zone: 'Europe/Berlin' },
      /^gf-weekly: the window overlaps freeze window \d+ of staging/,
    ],
    [
      { kind: 'cron', cron: '61 25 * * 8', duration_minutes: '60', time_zone: 'UTC' },
      /^gf-cron: cron: minute: 61 is out of range 0–59; cron: hour: 25 is out of range 0–23; cron: day-of-week: 8 is out of range 0–7$/,
    ],
    [
      { kind: 'cron', cron: '0 1 * * *', duration_minutes: '60', time_zone: 'Nowhere/City' },
      /^gf-time-zone: time_zone: "Nowhere\/City" is not a known time zone/,
    ],
    [
      { kind: 'cron', cron: '0 1 * * *', duration_minutes: '0', time_zone: 'UTC' },
      /gf-duration: duration_minutes must be a whole number from 1 to 10080/,
    ],
    [
      { kind: 'weekly', weekly: 'Fri 16:00 until Monday', time_zone: 'UTC' },
      /^gf-weekly: weekly: .* is not a weekly range/,
    ],
    [{ kind: 'sometimes' }, /^gf-kind-once: kind must be weekly, cron or once/],
    [{}, /^gf-from: a window needs from and to \(one-off\), or weekly or cron with time_zone \(recurring\)/],
    [
      { environment: 'qa', kind: 'once', from: '2099-01-01T00:00', to: '2099-01-02T00:00' },
      /^gf-environment: environment: this account has no environment "qa"/,
    ],
    [
      { kind: 'once', from: '2099-01-01T00:00', to: '2099-01-02T00:00', reason: '' },
      /^gf-reason: reason is required/,
    ],
  ]
  for (const [form, expected] of refused) {
    const res = await submit(admin, 'freezes', { environment: 'prod', reason: 'x', ...form })
    assert.equal(res.statusCode, 422, JSON.stringify(form))
    assert.match(fieldErrors(res.payload).join('\n'), expected, JSON.stringify(form))
  }
  assert.deepEqual(await counts(ctx), start)
})

test('promotion rules: a chain is set and shown in words; a rule naming itself or closing a cycle is refused; Remove', async (t) => {
  const { ctx, admin } = await setUp(t)
  const first = await submit(admin, 'promotions', {
    environment: 'prod',
    after_environment: 'staging',
    min_minutes: '30',
    require_good: 'on',
  })
  assert.equal(
    await noticeAfter(admin, first),
    'Rule set: prod needs success in staging at least 30 minutes before; not bad.',
  )
  const second = await submit(admin, 'promotions', { environment: 'staging', after_environment: 'dev' })
  assert.equal(await noticeAfter(admin, second), 'Rule set: staging needs success in dev before.')
  const audit = await lastAudit(ctx, 'promotion_rule.set')
  assert.equal(audit?.actor, 'ada@example.com')
  assert.deepEqual(JSON.parse(audit?.details ?? '{}'), { after: 'dev', min_minutes: 0, require_good: false })
  const page = (await admin.get(PAGE)).payload
  assert.match(
    page,
    /<td data-label="Rule">prod needs success in staging at least 30 minutes before; not bad<\/td>/,
  )

  const start = await counts(ctx)
  const itself = await submit(admin, 'promotions', { environment: 'prod', after_environment: 'prod' })
  assert.equal(itself.statusCode, 422)
  assert.deepEqual(fieldErrors(itself.payload), [
    'gp-after: after_environment must name another environment than prod itself',
  ])
  const cycle = await submit(admin, 'promotions', { environment: 'dev', after_environment: 'prod' })
  assert.equal(cycle.statusCode, 422)
  assert.deepEqual(fieldErrors(cycle.payload), [
    'gp-after: the rule would make a cycle: dev → prod → staging → dev (each needs the next first)',
  ])
  const minutes = await submit(admin, 'promotions', {
    environment: 'prod',
    after_environment: 'dev',
    min_minutes: '-5',
  })
  assert.match(
    fieldErrors(minutes.payload).join('\n'),
    /gp-min: min_minutes must be a whole number from 0 to 525600/,
  )
  // The unchecked box stays unchecked in the form that comes back.
  assert.match(minutes.payload, /id="gp-require-good" name="require_good" value="on" >/)
  assert.deepEqual(await counts(ctx), start)

  const removed = await submit(admin, 'promotions/remove', {
    environment: 'prod',
    after_environment: 'staging',
  })
  assert.equal(await noticeAfter(admin, removed), 'prod no longer needs success in staging first.')
  assert.equal(await rows(ctx, 'promotion_rules'), 1)
  assert.equal((await lastAudit(ctx, 'promotion_rule.removed'))?.actor, 'ada@example.com')
  const again = await submit(admin, 'promotions/remove', {
    environment: 'prod',
    after_environment: 'staging',
  })
  assert.equal(again.statusCode, 404)
})

test('bad versions: marked bad and listed, marked good again; an unknown service or no reason is refused', async (t) => {
  const { ctx, account, admin } = await setUp(t)
  const res = await submit(admin, 'bad-versions', {
    service: 'shop',
    version: '1.0.0',
    reason: 'corrupts invoices',
  })
  assert.equal(await noticeAfter(admin, res), 'shop 1.0.0 is marked bad.')
  const audit = await lastAudit(ctx, 'version.marked_bad')
  assert.equal(audit?.actor, 'ada@example.com')
  assert.equal(audit?.target, 'shop 1.0.0')
  const page = (await admin.get(PAGE)).payload
  assert.match(
    page,
    /<td data-label="Version" class="mono">1\.0\.0<\/td>\s*<td data-label="Reason" class="guard-reason">corrupts invoices<\/td>/,
  )
  assert.deepEqual(
    await ctx.app.guardrails.brokenBy(
      account,
      { service: 'shop', environment: 'dev', version: '1.0.0' },
      Date.now(),
    ),
    ['bad_version'],
  )

  const start = await counts(ctx)
  const ghost = await submit(admin, 'bad-versions', { service: 'ghost', version: '1', reason: 'x' })
  assert.equal(ghost.statusCode, 422)
  assert.deepEqual(fieldErrors(ghost.payload), ['gb-service: service: this account has no service "ghost"'])
  const empty = await submit(admin, 'bad-versions', { service: 'shop', version: '', reason: '' })
  assert.deepEqual(fieldErrors(empty.payload), [
    'gb-version: version is required',
    'gb-reason: reason is required',
  ])
  assert.deepEqual(await counts(ctx), start)

  const good = await submit(admin, 'bad-versions/good', { service: 'shop', version: '1.0.0' })
  assert.equal(await noticeAfter(admin, good), 'shop 1.0.0 is no longer marked bad.')
  assert.equal(await rows(ctx, 'bad_versions'), 0)
  assert.deepEqual(JSON.parse((await lastAudit(ctx, 'version.marked_good'))?.details ?? '{}'), {
    was: 'corrupts invoices',
  })
  assert.equal(
    (await submit(admin, 'bad-versions/good', { service: 'shop', version: '1.0.0' })).statusCode,
    404,
  )
})

test('a member reads the guardrails but has no forms, and every change is refused 403 with nothing stored', async (t) => {
  const { ctx, admin, member } = await setUp(t)
  await submit(admin, 'locks', { environment: 'prod', reason: 'frozen' })
  await submit(admin, 'promotions', { environment: 'prod', after_environment: 'staging' })
  await submit(admin, 'bad-versions', { service: 'shop', version: '1.0.0', reason: 'bad' })
  const lockId = (
    await ctx.database.db.selectFrom('environment_locks').select('id').executeTakeFirstOrThrow()
  ).id
  const page = await member.get(PAGE)
  assert.equal(page.statusCode, 200)
  assert.match(page.payload, /Only admins can change guardrails\./)
  assert.match(page.payload, /<td data-label="Reason" class="guard-reason">frozen<\/td>/)
  assert.doesNotMatch(page.payload, /action="\/settings\/guardrails/)
  const start = await counts(ctx)
  for (const [action, form] of [
    ['locks', { environment: 'prod', reason: 'x' }],
    [`locks/${lockId}/unlock`, {}],
    [
      'freezes',
      { environment: 'prod', kind: 'once', from: '2099-01-01T00:00', to: '2099-01-02T00:00', reason: 'x' },
    ],
    ['freezes/1/remove', {}],
    ['promotions', { environment: 'staging', after_environment: 'dev' }],
    ['promotions/remove', { environment: 'prod', after_environment: 'staging' }],
    ['bad-versions', { service: 'api', version: '2.0.0', reason: 'x' }],
    ['bad-versions/good', { service: 'shop', version: '1.0.0' }],
  ] as const) {
    const res = await submit(member, action, form)
    assert.equal(res.statusCode, 403, action)
    assert.match(res.payload, /Admins only/)
  }
  assert.deepEqual(await counts(ctx), start)
  // Signed out: to the login page.
  const { Browser } = await import('../support/ui.js')
  const anonymous = new Browser(ctx.app)
  const res = await anonymous.get(PAGE)
  assert.equal(res.statusCode, 303)
  assert.equal(res.headers.location, `/login?next=${encodeURIComponent(PAGE)}`)
})

test('a form without its CSRF token, or with one from another session, changes nothing', async (t) => {
  const { ctx, admin, member } = await setUp(t)
  const start = await counts(ctx)
  const forms: [string, Record<string, string>][] = [
    ['locks', { environment: 'prod', reason: 'x' }],
    [
      'freezes',
      { environment: 'prod', kind: 'once', from: '2099-01-01T00:00', to: '2099-01-02T00:00', reason: 'x' },
    ],
    ['promotions', { environment: 'prod', after_environment: 'staging' }],
    ['bad-versions', { service: 'shop', version: '1', reason: 'x' }],
  ]
  const foreign = await member.csrf(PAGE)
  for (const [action, form] of forms) {
    const none = await admin.post(`/settings/guardrails/${action}`, form)
    assert.equal(none.statusCode, 403, action)
    assert.match(none.payload, /This form has expired/)
    const other = await admin.post(`/settings/guardrails/${action}`, { ...form, _csrf: foreign })
    assert.equal(other.statusCode, 403, action)
  }
  assert.deepEqual(await counts(ctx), start)
})

test('hostile text: markup is stored as typed and shown escaped; control characters, direction overrides and over-long text are refused', async (t) => {
  const ctx0 = await setUp(t)
  const { ctx, admin } = ctx0
  await insertEvents(ctx.database, ctx.tenant.account.id, [
    { service: '<img src=x onerror=alert(1)>', environment: '"><script>alert(2)</script>', version: '1' },
  ])
  const markup = '<script>alert("x")</script> & "quotes"'
  const res = await submit(admin, 'locks', {
    environment: '"><script>alert(2)</script>',
    service: '<img src=x onerror=alert(1)>',
    reason: markup,
  })
  assert.equal(res.statusCode, 303)
  await submit(admin, 'bad-versions', { service: 'shop', version: '<b>1</b>', reason: markup })
  await submit(admin, 'promotions', { environment: '"><script>alert(2)</script>', after_environment: 'dev' })
  const page = (await admin.get(PAGE)).payload
  assert.doesNotMatch(page, /<script>alert|<img src=x|<b>1<\/b>/)
  assert.match(page, /&lt;script&gt;alert\(&quot;x&quot;\)&lt;\/script&gt; &amp; &quot;quotes&quot;/)
  assert.match(page, /&lt;img src=x onerror=alert\(1\)&gt;/)
  assert.match(page, /&lt;b&gt;1&lt;\/b&gt;/)

  const start = await counts(ctx)
  for (const reason of ['bell\u0007', 'flip\u202egpj.exe', 'nul\u0000', 'x'.repeat(501)]) {
    for (const [action, form] of [
      ['locks', { environment: 'prod', reason }],
      [
        'freezes',
        { environment: 'prod', kind: 'once', from: '2099-01-01T00:00', to: '2099-01-02T00:00', reason },
      ],
      ['bad-versions', { service: 'shop', version: '9', reason }],
    ] as const) {
      const refused = await submit(admin, action, form)
      assert.equal(refused.statusCode, 422, `${action} ${JSON.stringify(reason.slice(0, 20))}`)
      // U+0000 is refused at the door for every form (src/http/text-guard.ts), the others beside the field.
      assert.match(
        reason.includes('\u0000') ? refused.payload : fieldErrors(refused.payload).join('\n'),
        reason.includes('\u0000')
          ? /reason must not contain control characters; nothing was changed/
          : /reason: reason (must not contain control characters|must be at most 500 characters)/,
        `${action} ${JSON.stringify(reason.slice(0, 20))}`,
      )
      for (const c of ['\u0007', '\u202e', '\u0000']) assert.ok(!refused.payload.includes(c), 'not echoed')
    }
  }
  // A value far over any field's length is refused before it reaches a form (400), storing nothing.
  const huge = await submit(admin, 'locks', { environment: 'prod', reason: 'y'.repeat(20_000) })
  assert.equal(huge.statusCode, 400)
  assert.deepEqual(await counts(ctx), start)
})
