// Settings → Environments, Stall time and Badges: admins change them with plain forms (PRG and a
// notice), members cannot, bad values are clear errors that change nothing.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { buildTestApp, type TestApp } from '../helper.js'
import { insertEvents, userSession } from '../support/ui.js'

async function state(ctx: TestApp) {
  const [envs, account] = await Promise.all([
    ctx.database.db.selectFrom('environment_settings').selectAll().orderBy('position').execute(),
    ctx.database.db
      .selectFrom('accounts')
      .select(['stall_minutes', 'badge_token'])
      .where('id', '=', ctx.tenant.account.id)
      .executeTakeFirstOrThrow(),
  ])
  return { envs: envs.map((e) => [e.name, Number(e.position), Number(e.hidden)]), account }
}

async function setUp(t: Parameters<typeof buildTestApp>[0]) {
  const ctx = await buildTestApp(t)
  await insertEvents(ctx.database, ctx.tenant.account.id, [
    { environment: 'Production' },
    { environment: 'qa' },
    { environment: 'zeta <x>' },
    { environment: 'dev' },
  ])
  const { browser: admin } = await userSession(ctx, ctx.tenant.account.id, 'a@example.com', 'admin')
  const { browser: member } = await userSession(ctx, ctx.tenant.account.id, 'm@example.com', 'member')
  return { ctx, admin, member }
}

/** The environment names in the Settings list, in order. */
function listed(page: string): string[] {
  return [...page.matchAll(/<span class="env-name">([^<]*)<\/span>/g)].map((m) => m[1] ?? '')
}

test('the built-in order by default; Up, Down, Hide and Show reorder with a notice', async (t) => {
  const { admin } = await setUp(t)
  const page = await admin.get('/settings/')
  // dev, qa, Production (built-in, any case), then the rest in first-seen order.
  assert.deepEqual(listed(page.payload), ['dev', 'qa', 'Production', 'zeta &lt;x&gt;'])
  assert.match(
    page.payload,
    /<button type="submit" name="action" value="up" class="secondary" disabled aria-label="Move dev up">Up<\/button>/,
  )
  const moved = await admin.submit('/settings/', '/settings/environments', {
    environment: 'zeta <x>',
    action: 'up',
  })
  assert.equal(moved.statusCode, 303)
  assert.equal(moved.headers.location, '/settings/#environments-heading')
  const after = await admin.get('/settings/')
  assert.match(after.payload, /zeta &lt;x&gt; is moved up\./)
  assert.deepEqual(listed(after.payload), ['dev', 'qa', 'zeta &lt;x&gt;', 'Production'])
  await admin.submit('/settings/', '/settings/environments', { environment: 'qa', action: 'hide' })
  const hidden = await admin.get('/settings/')
  assert.match(hidden.payload, /<span class="env-name">qa<\/span> <span class="badge revoked">hidden<\/span>/)
  assert.match(hidden.payload, /aria-label="Show qa">Show<\/button>/)
})

test('bad environment forms and stall times are refused and change nothing', async (t) => {
  const { ctx, admin } = await setUp(t)
  // An admin's first view of Settings makes the badge token (first use).
  await admin.get('/settings/')
  const before = await state(ctx)
  assert.ok(before.account.badge_token)
  const cases: [string, Record<string, string>, RegExp][] = [
    ['/settings/environments', { environment: 'qa', action: 'delete' }, /Up, Down, Hide or Show/],
    ['/settings/environments', { environment: 'nowhere', action: 'up' }, /no such environment/],
    ['/settings/stall-time', { minutes: '0' }, /between 1 and 10080/],
    ['/settings/stall-time', { minutes: '10081' }, /between 1 and 10080/],
    ['/settings/stall-time', { minutes: '1.5' }, /whole number/],
    ['/settings/stall-time', { minutes: '' }, /whole number/],
    ['/settings/stall-time', { minutes: '-5' }, /whole number/],
  ]
  for (const [url, form, message] of cases) {
    const res = await admin.submit('/settings/', url, form)
    assert.equal(res.statusCode, 422, `${url} ${JSON.stringify(form)}`)
    assert.match(res.payload, message)
    assert.match(res.payload, /Nothing was changed/)
  }
  assert.deepEqual(await state(ctx), before)
  const ok = await admin.submit('/settings/', '/settings/stall-time', { minutes: ' 90 ' })
  assert.equal(ok.statusCode, 303)
  assert.equal((await state(ctx)).account.stall_minutes, 90)
  assert.match((await admin.get('/settings/')).payload, /Stall time is now 90 minutes\./)
})

test('a stall time of one minute is said in the singular, to the admin and to members', async (t) => {
  const { admin, member } = await setUp(t)
  const ok = await admin.submit('/settings/', '/settings/stall-time', { minutes: '1' })
  assert.equal(ok.statusCode, 303)
  const notice = (await admin.get('/settings/')).payload
  assert.match(notice, /Stall time is now 1 minute\./)
  assert.doesNotMatch(notice, /1 minutes/)
  assert.match((await member.get('/settings/')).payload, /<p>1 minute\.<\/p>/)
})

test('members see the order and stall time but cannot change them; forms need CSRF', async (t) => {
  const { ctx, admin, member } = await setUp(t)
  const page = await member.get('/settings/')
  assert.deepEqual(listed(page.payload), ['dev', 'qa', 'Production', 'zeta &lt;x&gt;'])
  assert.doesNotMatch(page.payload, /action="\/settings\/environments"/)
  assert.match(page.payload, /<p>60 minutes\.<\/p>/)
  const before = await state(ctx)
  for (const [url, form] of [
    ['/settings/environments', { environment: 'qa', action: 'up' }],
    ['/settings/stall-time', { minutes: '5' }],
    ['/settings/badge-token', {}],
  ] as const) {
    assert.equal((await member.submit('/settings/', url, form)).statusCode, 403, url)
    // No CSRF token: refused too.
    assert.equal((await admin.post(url, form)).statusCode, 403, url)
  }
  assert.deepEqual(await state(ctx), before)
  // Wrong methods: 405 with Allow.
  const get = await admin.get('/settings/stall-time')
  assert.equal(get.statusCode, 405)
  assert.match(String(get.headers.allow), /POST/)
})
