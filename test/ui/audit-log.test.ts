// The audit log end to end (SPEC §10): every action done through the UI leaves one entry naming
// who, from where, what and how it changed; no entry holds a secret; admins read, filter and
// download the log, members cannot, and another account's entries never show. Both databases.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { AuditEntryRow } from '../../src/db/schema.js'
import { recordAudit } from '../../src/domain/audit/log.js'
import { buildTestApp, type TestApp } from '../helper.js'
import {
  Browser,
  createUserIn,
  deploy,
  login,
  PASSWORD,
  parseCsv,
  textOfId,
  userSession,
} from '../support/ui.js'

async function entries(ctx: TestApp): Promise<AuditEntryRow[]> {
  return ctx.database.db.selectFrom('audit_entries').selectAll().orderBy('id').execute()
}

/** The one entry with this action (and target, when given); fails when there is none or several. */
function only(rows: AuditEntryRow[], action: string, target?: string): AuditEntryRow {
  const found = rows.filter((r) => r.action === action && (target === undefined || r.target === target))
  assert.equal(found.length, 1, `one ${action} ${target ?? ''} entry, got ${JSON.stringify(found)}`)
  return found[0] as AuditEntryRow
}

const details = (row: AuditEntryRow): unknown => JSON.parse(row.details)

test('every UI action writes one entry with actor, address, target and what changed, and none holds a secret', async (t) => {
  const ctx = await buildTestApp(t, { env: { SHIPLOG_WEBHOOK_ALLOW_PRIVATE: '1' } })
  const accountId = ctx.tenant.account.id
  const secrets: string[] = [ctx.tenant.key, PASSWORD]
  const ada = await createUserIn(ctx.database, accountId, 'ada@example.com')
  const admin = await login(ctx.app, 'ada@example.com')
  for (const value of admin.jar.values()) secrets.push(value)

  // Failed logins: a known address with a wrong password, and an unknown one.
  // A second browser of ada's: a second login entry.
  await login(ctx.app, 'ada@example.com')
  const visitor = new Browser(ctx.app)
  const token = await visitor.csrf('/login')
  assert.equal(
    (await visitor.post('/login', { _csrf: token, email: 'ada@example.com', password: 'not it at all' }))
      .statusCode,
    401,
  )
  assert.equal(
    (await visitor.post('/login', { _csrf: token, email: 'ghost@example.com', password: 'not it at all' }))
      .statusCode,
    401,
  )

  // Keys: created with two scopes, then revoked.
  assert.equal(
    (
      await admin.submit('/settings/', '/settings/keys', {
        name: 'deploy',
        scopes_offered: '1',
        scope: 'read',
      })
    ).statusCode,
    303,
  )
  const key = textOfId((await admin.get('/settings/')).payload, 'new-key')
  assert.match(String(key), /^shl_/)
  secrets.push(String(key))
  const keyRow = await ctx.database.db
    .selectFrom('api_keys')
    .selectAll()
    .where('name', '=', 'deploy')
    .executeTakeFirstOrThrow()
  assert.equal((await admin.submit('/settings/', `/settings/keys/${keyRow.id}/revoke`, {})).statusCode, 303)

  // Users: added, promoted, password reset, logs in with the one-time password and replaces it, removed.
  assert.equal(
    (await admin.submit('/settings/', '/settings/users', { email: 'bob@example.com', role: 'member' }))
      .statusCode,
    303,
  )
  secrets.push(String(textOfId((await admin.get('/settings/')).payload, 'new-password')))
  const bob = await ctx.database.db
    .selectFrom('users')
    .selectAll()
    .where('email', '=', 'bob@example.com')
    .executeTakeFirstOrThrow()
  assert.equal(
    (await admin.submit('/settings/', `/settings/users/${bob.id}/role`, { role: 'admin' })).statusCode,
    303,
  )
  assert.equal((await admin.submit('/settings/', `/settings/users/${bob.id}/password`, {})).statusCode, 303)
  const oneTime = String(textOfId((await admin.get('/settings/')).payload, 'new-password'))
  secrets.push(oneTime)
  const bobBrowser = await login(ctx.app, 'bob@example.com', oneTime)
  for (const value of bobBrowser.jar.values()) secrets.push(value)
  const bobsOwn = 'bobs own new password 42'
  secrets.push(bobsOwn)
  assert.equal(
    (
      await bobBrowser.submit('/account/password', '/account/password', {
        current: oneTime,
        password: bobsOwn,
        confirm: bobsOwn,
      })
    ).statusCode,
    303,
  )
  assert.equal((await admin.submit('/settings/', `/settings/users/${bob.id}/remove`, {})).statusCode, 303)

  // Settings: stall time, environment visibility, service details, badge link.
  for (const environment of ['prod', 'staging']) {
    await deploy(ctx.app, ctx.tenant.key, { service: 'api', environment, version: '1', status: 'Deployed' })
  }
  await ctx.app.deployments.current()
  assert.equal((await admin.submit('/settings/', '/settings/stall-time', { minutes: '30' })).statusCode, 303)
  assert.equal(
    (await admin.submit('/settings/', '/settings/environments', { environment: 'staging', action: 'hide' }))
      .statusCode,
    303,
  )
  assert.equal(
    (
      await admin.submit('/services/api/', '/services/api/meta', {
        team: 'payments',
        runbook_url: 'https://runbooks.example.com/api',
      })
    ).statusCode,
    303,
  )
  const badgeBefore = await ctx.database.db
    .selectFrom('accounts')
    .select('badge_token')
    .where('id', '=', accountId)
    .executeTakeFirstOrThrow()
  assert.equal((await admin.submit('/settings/', '/settings/badge-token', {})).statusCode, 303)
  const badgeAfter = await ctx.database.db
    .selectFrom('accounts')
    .select('badge_token')
    .where('id', '=', accountId)
    .executeTakeFirstOrThrow()
  for (const b of [badgeBefore.badge_token, badgeAfter.badge_token]) if (b) secrets.push(b)

  // Webhooks: a Slack one (its URL path is a secret), a Grafana one with a token; re-enabled,
  // redelivered, deleted.
  const slackPath = '/services/T000/B000/XXXXsecretpath'
  secrets.push('XXXXsecretpath')
  assert.equal(
    (
      await admin.submit('/settings/webhooks/', '/settings/webhooks', {
        url: `https://hooks.example.com${slackPath}`,
        format: 'slack',
        status: 'Deployed',
      })
    ).statusCode,
    303,
  )
  secrets.push(String(textOfId((await admin.get('/settings/webhooks/')).payload, 'new-webhook-secret')))
  const grafanaToken = 'glsa_TopSecretGrafanaToken_123'
  secrets.push(grafanaToken)
  assert.equal(
    (
      await admin.submit('/settings/webhooks/', '/settings/webhooks', {
        url: 'https://grafana.example.com/',
        format: 'grafana',
        grafana_token: grafanaToken,
      })
    ).statusCode,
    303,
  )
  secrets.push(String(textOfId((await admin.get('/settings/webhooks/')).payload, 'new-webhook-secret')))
  const hooks = await ctx.database.db.selectFrom('webhooks').selectAll().orderBy('id').execute()
  const slack = hooks[0]
  const grafana = hooks[1]
  assert.ok(slack && grafana)
  await ctx.database.db
    .updateTable('webhooks')
    .set({ enabled: 0, disabled_at: Date.now() })
    .where('id', '=', slack.id)
    .execute()
  assert.equal(
    (await admin.submit('/settings/webhooks/', `/settings/webhooks/${slack.id}/enable`, {})).statusCode,
    303,
  )
  const event = await ctx.database.db.selectFrom('events').select('id').limit(1).executeTakeFirstOrThrow()
  const delivery = await ctx.database.db
    .insertInto('webhook_deliveries')
    .values({
      webhook_id: slack.id,
      account_id: accountId,
      event_id: event.id,
      deployment_id: null,
      kind: 'status',
      delivery_id: 'd-1',
      state: 'failed',
      next_attempt_at: Date.now(),
      lease_until: null,
      last_status: 500,
      last_error: null,
      response_head: null,
      latency_ms: null,
      remote_id: null,
      created_at: Date.now(),
      first_attempt_at: null,
      last_attempt_at: null,
      finished_at: Date.now(),
    })
    .returning('id')
    .executeTakeFirstOrThrow()
  assert.equal(
    (
      await admin.submit(
        `/settings/webhooks/${slack.id}/`,
        `/settings/webhooks/${slack.id}/deliveries/${delivery.id}/redeliver`,
        {},
      )
    ).statusCode,
    303,
  )
  assert.equal(
    (await admin.submit('/settings/webhooks/', `/settings/webhooks/${grafana.id}/delete`, {})).statusCode,
    303,
  )

  // A download of the events, then ada changes her own password and logs out.
  assert.equal((await admin.get('/logs/export.csv?service=api')).statusCode, 200)
  const adaOwn = 'adas brand new password 7'
  secrets.push(adaOwn)
  assert.equal(
    (
      await admin.submit('/account/password', '/account/password', {
        current: PASSWORD,
        password: adaOwn,
        confirm: adaOwn,
      })
    ).statusCode,
    303,
  )
  assert.equal((await admin.submit('/settings/', '/logout', {})).statusCode, 303)

  const rows = await entries(ctx)
  const asAda = { actor_kind: 'user', actor_id: ada.id, actor: 'ada@example.com', address: '127.0.0.1' }
  const check = (row: AuditEntryRow, who: Record<string, unknown>, expected: unknown) => {
    for (const [name, value] of Object.entries(who)) {
      assert.equal(
        row[name as keyof AuditEntryRow] === null ? null : String(row[name as keyof AuditEntryRow]),
        value === null ? null : String(value),
        `${row.action}: ${name}`,
      )
    }
    assert.deepEqual(details(row), expected, `${row.action} ${row.target}: details`)
    assert.ok(Math.abs(Number(row.at) - Date.now()) < 120_000, 'the time is now')
  }
  const adaLogins = rows.filter((r) => r.action === 'login.succeeded' && r.actor === 'ada@example.com')
  assert.equal(adaLogins.length, 2, 'two password logins of ada')
  check(
    adaLogins[0] as AuditEntryRow,
    { ...asAda, account_id: accountId, target: 'ada@example.com' },
    { method: 'password', account: 'Acme' },
  )
  const failed = rows.filter((r) => r.action === 'login.failed')
  assert.equal(failed.length, 2)
  check(
    failed[0] as AuditEntryRow,
    {
      actor_kind: 'anonymous',
      actor: 'ada@example.com',
      address: '127.0.0.1',
      account_id: accountId,
      target: 'ada@example.com',
    },
    { account: 'Acme', reason: 'wrong password' },
  )
  check(
    failed[1] as AuditEntryRow,
    { actor_kind: 'anonymous', actor: 'ghost@example.com', account_id: null, target: 'ghost@example.com' },
    { reason: 'no user with this email' },
  )
  const label = `deploy (${keyRow.prefix}…)`
  check(only(rows, 'key.created', label), { ...asAda, account_id: accountId }, { scopes: ['read'] })
  check(only(rows, 'key.revoked', label), asAda, { scopes: ['read'] })
  check(only(rows, 'user.added', 'bob@example.com'), asAda, {
    role: 'member',
    via: 'settings (one-time password)',
  })
  check(only(rows, 'user.role_changed', 'bob@example.com'), asAda, { from: 'member', to: 'admin' })
  const passwords = rows.filter((r) => r.action === 'password.changed')
  assert.equal(passwords.length, 3)
  check(
    passwords[0] as AuditEntryRow,
    { ...asAda, target: 'bob@example.com' },
    { how: 'admin reset (one-time password)' },
  )
  check(
    passwords[1] as AuditEntryRow,
    { actor_kind: 'user', actor: 'bob@example.com', target: 'bob@example.com', address: '127.0.0.1' },
    { how: 'one-time password replaced' },
  )
  check(passwords[2] as AuditEntryRow, { ...asAda, target: 'ada@example.com' }, { how: 'own change' })
  check(only(rows, 'user.removed', 'bob@example.com'), asAda, { role: 'admin' })
  check(only(rows, 'settings.changed', 'stall minutes'), asAda, { from: 60, to: 30 })
  check(only(rows, 'settings.changed', 'environments'), asAda, {
    environment: 'staging',
    change: 'hide',
    from: ['staging', 'prod'],
    to: ['staging (hidden)', 'prod'],
  })
  check(only(rows, 'settings.changed', 'service api'), asAda, {
    team: '(none) → payments',
    runbookUrl: '(none) → https://runbooks.example.com/api',
  })
  check(only(rows, 'settings.changed', 'badge link'), asAda, {
    change: 'rotated: old badge links stop working',
  })
  const lists = { environments: [], services: [] }
  check(only(rows, 'webhook.created', 'https://hooks.example.com'), asAda, {
    format: 'slack',
    statuses: ['Deployed'],
    outcomes: [],
    ...lists,
  })
  check(only(rows, 'webhook.created', 'https://grafana.example.com'), asAda, {
    format: 'grafana',
    statuses: ['Deploying'],
    outcomes: ['succeeded', 'failed'],
    ...lists,
  })
  check(
    only(rows, 'webhook.enabled'),
    { ...asAda, target: 'https://hooks.example.com' },
    { id: Number(slack.id), wasEnabled: false },
  )
  check(
    only(rows, 'webhook.redelivered'),
    { ...asAda, target: 'https://hooks.example.com' },
    { id: Number(slack.id), delivery: Number(delivery.id) },
  )
  check(
    only(rows, 'webhook.deleted'),
    { ...asAda, target: 'https://grafana.example.com' },
    {
      id: Number(grafana.id),
      format: 'grafana',
      statuses: ['Deploying'],
      outcomes: ['succeeded', 'failed'],
      ...lists,
    },
  )
  check(only(rows, 'export.downloaded', 'events (CSV)'), asAda, { service: 'api' })
  check(only(rows, 'logout'), { ...asAda, target: 'ada@example.com' }, {})

  // No secret anywhere in any entry: keys, passwords, cookies, webhook secrets, tokens, URL paths.
  const text = JSON.stringify(rows)
  for (const secret of secrets) {
    assert.ok(secret.length >= 8, `a real secret to look for (${secret.length})`)
    assert.ok(!text.includes(secret), `no entry holds ${secret.slice(0, 6)}…`)
  }
  assert.doesNotMatch(text, /whsec_|shl_[0-9A-Za-z]{20}|\$argon|scrypt/)
})

test('a refused change writes no entry, and an entry never outlives a change that failed', async (t) => {
  const ctx = await buildTestApp(t)
  const admin = (await userSession(ctx, ctx.tenant.account.id, 'ada@example.com')).browser
  const before = (await entries(ctx)).length
  assert.equal(
    (await admin.submit('/settings/', '/settings/stall-time', { minutes: 'soon' })).statusCode,
    422,
  )
  assert.equal((await admin.submit('/settings/', '/settings/keys', { name: '' })).statusCode, 422)
  const self = await ctx.database.db
    .selectFrom('users')
    .select('id')
    .where('email', '=', 'ada@example.com')
    .executeTakeFirstOrThrow()
  // The last admin cannot become a member: the role change rolls back, and its entry with it.
  assert.equal(
    (await admin.submit('/settings/', `/settings/users/${self.id}/role`, { role: 'member' })).statusCode,
    409,
  )
  assert.equal((await entries(ctx)).length, before)
})

test('admins read, filter, page and download the log; members get 403; another account never shows', async (t) => {
  const ctx = await buildTestApp(t)
  const accountId = ctx.tenant.account.id
  const { browser: admin, user: ada } = await userSession(ctx, accountId, 'ada@example.com')
  const { browser: member } = await userSession(ctx, accountId, 'mel@example.com', 'member')
  const other = await ctx.addTenant('Globex')
  const base = Date.UTC(2026, 10, 1, 12)
  const actor = { kind: 'user', id: ada.id, name: 'ada@example.com' } as const
  for (let i = 0; i < 60; i++) {
    await recordAudit(ctx.database.db, {
      accountId,
      actor,
      address: '198.51.100.7',
      action: 'settings.changed',
      target: `setting ${i}`,
      details: { to: i },
      at: base + i * 60_000,
    })
  }
  // Values a spreadsheet would run, and markup a page must not.
  await recordAudit(ctx.database.db, {
    accountId,
    actor: { kind: 'cli', id: null, name: '=cmd|calc' },
    address: null,
    action: 'key.created',
    target: '<script>alert(1)</script>',
    details: { scopes: ['+SUM(1)'] },
    at: base + 90 * 60_000,
  })
  await recordAudit(ctx.database.db, {
    accountId: other.account.id,
    actor,
    address: '203.0.113.1',
    action: 'key.created',
    target: 'globex-secret-target',
    at: base,
  })

  for (const path of ['/settings/audit/', '/settings/audit/export.csv', '/settings/audit/export.json']) {
    assert.equal((await member.get(path)).statusCode, 403, `member ${path}`)
  }
  assert.doesNotMatch((await member.get('/settings/')).payload, /href="\/settings\/audit\/"/)
  assert.match((await admin.get('/settings/')).payload, /href="\/settings\/audit\/"/)

  const page = await admin.get('/settings/audit/')
  assert.equal(page.statusCode, 200)
  assert.ok(!page.payload.includes('globex-secret-target'), "another account's entries never show")
  assert.ok(!page.payload.includes('<script>alert(1)</script>'), 'escaped')
  assert.ok(page.payload.includes('&lt;script&gt;alert(1)&lt;/script&gt;'))
  const shown = [...page.payload.matchAll(/<td data-label="Target">setting (\d+)<\/td>/g)].map((m) =>
    Number(m[1]),
  )
  assert.equal(shown[0], 59, 'newest first')
  assert.equal(shown.length, 49, 'one page of 50 with the key entry on top')
  const older = /href="([^"]+)" rel="next"/.exec(page.payload)?.[1]?.replaceAll('&amp;', '&')
  assert.ok(older)
  const second = await admin.get(older)
  const shown2 = [...second.payload.matchAll(/<td data-label="Target">setting (\d+)<\/td>/g)].map((m) =>
    Number(m[1]),
  )
  assert.deepEqual(shown2, [...Array(11).keys()].reverse())

  // Filters: action, actor (any case, part of the name), dates typed in a zone.
  const byAction = await admin.get('/settings/audit/?action=key.created')
  assert.equal([...byAction.payload.matchAll(/<td data-label="Action">/g)].length, 1)
  const byActor = await admin.get('/settings/audit/?actor=CMD%7C')
  assert.equal([...byActor.payload.matchAll(/<td data-label="Action">/g)].length, 1)
  // LIKE's wildcards are matched as themselves: no actor holds % or _.
  for (const wildcard of ['%25', '_']) {
    const none = await admin.get(`/settings/audit/?actor=${wildcard}`)
    assert.equal(none.statusCode, 200)
    assert.equal([...none.payload.matchAll(/<td data-label="Action">/g)].length, 0, `actor=${wildcard}`)
  }
  const byTime = await admin.get(
    '/settings/audit/?from=2026-11-01T13:10&to=2026-11-01T13:12&tz=Europe/Berlin',
  )
  assert.deepEqual(
    [...byTime.payload.matchAll(/<td data-label="Target">setting (\d+)<\/td>/g)].map((m) => Number(m[1])),
    [12, 11, 10],
  )

  // Bad filters: a clear 422 page naming each, never a 500, nothing listed.
  for (const [query, message] of [
    ['from=yesterday', 'from must be a date and time'],
    ['from=2026-11-02&to=2026-11-01', 'to must not be before from'],
    ['action=key.deleted', 'action must be one of the actions in the list'],
    ['tz=Mars/Olympus&from=2026-11-01', 'tz must be a time zone name'],
    ['before=abc', 'before must be an entry number'],
    ['action=logout&action=key.created', 'action may be given once'],
  ] as const) {
    const res = await admin.get(`/settings/audit/?${query}`)
    assert.equal(res.statusCode, 422, query)
    assert.ok(res.payload.includes(message), `${query}: ${message}`)
    assert.ok(res.payload.includes('role="alert"'))
    assert.doesNotMatch(res.payload, /<td data-label="Action">/)
    assert.equal((await admin.get(`/settings/audit/export.csv?${query}`)).statusCode, 422)
  }

  // Downloads: the filter applies, the download is itself recorded, formula starts are guarded.
  const csv = await admin.get('/settings/audit/export.csv?action=key.created')
  assert.equal(csv.statusCode, 200)
  assert.match(
    String(csv.headers['content-disposition']),
    /attachment; filename="shiplog-audit-\d{8}T\d{6}Z\.csv"/,
  )
  const table = parseCsv(csv.payload)
  assert.deepEqual(table[0], ['id', 'time', 'actor_kind', 'actor', 'address', 'action', 'target', 'details'])
  assert.equal(table.length, 2)
  assert.equal(table[1]?.[3], "'=cmd|calc", 'a formula start is guarded')
  assert.equal(table[1]?.[4], '')
  assert.ok(!csv.payload.includes('globex'))
  const json = await admin.get('/settings/audit/export.json')
  assert.equal(json.statusCode, 200)
  const list = json.json() as {
    action: string
    target: string
    details: Record<string, unknown>
    time: string
  }[]
  // 60 + 1 recorded here, 2 logins, and both downloads (each written before its file is read).
  assert.equal(list.length, 65, 'every entry of the account')
  assert.equal(list[0]?.target, 'audit log (JSON)')
  assert.deepEqual(list[0]?.details, {})
  assert.equal(list[1]?.action, 'export.downloaded')
  assert.equal(list[1]?.target, 'audit log (CSV)')
  assert.deepEqual(list[1]?.details, { action: 'key.created' })
  assert.equal(list[2]?.time, new Date(base + 90 * 60_000).toISOString())
  assert.deepEqual(list[2]?.details, { scopes: ['+SUM(1)'] })
  assert.ok(list.every((e) => e.target !== 'globex-secret-target'))
  const downloads = await admin.get('/settings/audit/?action=export.downloaded')
  assert.equal(
    [...downloads.payload.matchAll(/<td data-label="Action">/g)].length,
    2,
    'both downloads are in the log',
  )

  // No route edits or deletes entries: any other method is refused.
  for (const method of ['POST', 'PUT', 'DELETE'] as const) {
    const res = await ctx.app.inject({ method, url: '/settings/audit/' })
    assert.equal(res.statusCode, 405, `${method} /settings/audit/`)
  }
})
