// Settings → Retention: admins set "keep events for N days" or forever with a plain form (PRG and a
// notice); members see the value without the form; bad values are one clear error that changes nothing.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { getRetention } from '../../src/domain/operations/retention.js'
import { buildTestApp } from '../helper.js'
import { userSession } from '../support/ui.js'

test('an admin sets the retention in days, then back to forever; the page says so', async (t) => {
  const ctx = await buildTestApp(t)
  const account = ctx.tenant.account.id
  const { browser: admin } = await userSession(ctx, account, 'a@example.com', 'admin')
  const page = await admin.get('/settings/')
  assert.match(page.payload, /<h2 id="retention-heading">Retention<\/h2>/)
  assert.match(page.payload, /keeps its events <strong id="retention-value">forever<\/strong>/)
  assert.match(
    page.payload,
    /<form method="post" action="\/settings\/retention" class="panel">\s*<input type="hidden" name="_csrf" value="[^"]+">/,
  )

  const saved = await admin.submit('/settings/', '/settings/retention', { days: '90', action: 'days' })
  assert.equal(saved.statusCode, 303)
  assert.equal(saved.headers.location, '/settings/#retention-heading')
  assert.equal(await getRetention(ctx.database.db, account), 90)
  const after = await admin.get('/settings/')
  assert.match(
    after.payload,
    /Events are now kept for 90 days; older ones are deleted within about ten minutes\./,
  )
  assert.match(after.payload, /<strong id="retention-value">for 90 days<\/strong>/)
  assert.match(
    after.payload,
    /id="retention-days" name="days" type="number" min="1" max="36500" step="1" inputmode="numeric" value="90"/,
  )

  // "Keep events forever" ignores whatever is in the number field.
  const forever = await admin.submit('/settings/', '/settings/retention', { days: '5', action: 'forever' })
  assert.equal(forever.statusCode, 303)
  assert.equal(await getRetention(ctx.database.db, account), null)
  assert.match((await admin.get('/settings/')).payload, /Events are now kept forever\./)

  // Each change is in the audit log, from the admin's address, with before and after.
  const entries = await ctx.database.db
    .selectFrom('audit_entries')
    .select(['actor', 'action', 'target', 'details', 'address'])
    .where('target', '=', 'retention')
    .orderBy('id')
    .execute()
  assert.deepEqual(
    entries.map((e) => [e.actor, e.action, JSON.parse(e.details)]),
    [
      ['a@example.com', 'settings.changed', { from_days: null, to_days: 90 }],
      ['a@example.com', 'settings.changed', { from_days: 90, to_days: null }],
    ],
  )
  assert.ok(entries.every((e) => e.address !== null))
})

test('bad values are refused with one clear page and change nothing; members cannot set it; no CSRF no change', async (t) => {
  const ctx = await buildTestApp(t)
  const account = ctx.tenant.account.id
  const { browser: admin } = await userSession(ctx, account, 'a@example.com', 'admin')
  await admin.submit('/settings/', '/settings/retention', { days: '30', action: 'days' })
  for (const [form, message] of [
    [{ days: '0', action: 'days' }, /must be between 1 and 36500 days/],
    [{ days: '2.5', action: 'days' }, /must be a whole number of days or &quot;forever&quot;/],
    [{ days: '', action: 'days' }, /Give a number of days, or choose &quot;Keep events forever&quot;\./],
    [{ days: '99999', action: 'days' }, /must be between 1 and 36500 days/],
    [{ days: '10', action: 'delete-all' }, /is not a known action/],
  ] as const) {
    const res = await admin.submit('/settings/', '/settings/retention', form)
    assert.equal(res.statusCode, 422, JSON.stringify(form))
    assert.match(res.payload, message)
    assert.match(res.payload, /Nothing was changed/)
    assert.equal(await getRetention(ctx.database.db, account), 30)
  }

  const { browser: member } = await userSession(ctx, account, 'm@example.com', 'member')
  const memberPage = await member.get('/settings/')
  assert.match(memberPage.payload, /<strong id="retention-value">for 30 days<\/strong>/)
  assert.doesNotMatch(memberPage.payload, /action="\/settings\/retention"/)
  const refused = await member.submit('/settings/', '/settings/retention', { days: '1', action: 'days' })
  assert.equal(refused.statusCode, 403)

  const forged = await admin.post('/settings/retention', { days: '1', action: 'days' })
  assert.equal(forged.statusCode, 403)
  assert.equal(await getRetention(ctx.database.db, account), 30)
  // Another account is untouched.
  const other = await ctx.addTenant('Other')
  assert.equal(await getRetention(ctx.database.db, other.account.id), null)
})
