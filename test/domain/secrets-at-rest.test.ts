// What someone who reads the database gets: digests and scrypt hashes, never a usable key, password
// or session token; and the password check compares in constant time without tripping on lengths.
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { sql } from 'kysely'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { openDatabase } from '../../src/db/connect.js'
import { migrateToLatest } from '../../src/db/migrate.js'
import { hashPassword, verifyPassword } from '../../src/domain/passwords.js'
import { createWebhook } from '../../src/domain/webhooks/queries.js'
import { openSecret } from '../../src/domain/webhooks/secrets.js'
import { addTenant, buildTestApp, TEST_SECRET } from '../helper.js'
import { createUserIn, login, PASSWORD, textOfId } from '../support/ui.js'

test('no table holds an API key, a password, a session token or a CSRF token in plain text', async (t) => {
  const ctx = await buildTestApp(t)
  await createUserIn(ctx.database, ctx.tenant.account.id, 'ada@example.com')
  const admin = await login(ctx.app, 'ada@example.com')
  // Post/redirect/get: each secret is shown on the page the form redirects to.
  await admin.submit('/settings/', '/settings/keys', { name: 'ui-key' })
  const uiKey = textOfId((await admin.get('/settings/')).payload, 'new-key')
  await admin.submit('/settings/', '/settings/users', {
    email: 'mel@example.com',
    role: 'member',
  })
  const oneTime = textOfId((await admin.get('/settings/')).payload, 'new-password')
  assert.ok(uiKey && oneTime)
  const token = decodeURIComponent(admin.jar.get('shiplog_session') ?? '').split('.')[0] ?? ''
  const csrfSecret = decodeURIComponent(admin.jar.get('shiplog_csrf') ?? '').split('.')[0] ?? ''
  const recorded = await ctx.app.inject({
    method: 'POST',
    url: '/deploy',
    headers: { 'x-api-key': ctx.tenant.key, 'idempotency-key': 'idem-1' },
    payload: { service: 'App1', environment: 'Prod', version: '1', status: 'Deployed' },
  })
  assert.equal(recorded.statusCode, 201)
  // --- webhooks: signing secrets and Grafana tokens are sealed with a key from the app secret ---
  const grafanaToken = 'glsa_ServiceAccountToken0123456789'
  const { secret: webhookSecret, webhook } = await createWebhook(
    ctx.database.db,
    TEST_SECRET,
    {
      accountId: ctx.tenant.account.id,
      url: 'https://grafana.example.com/',
      format: 'grafana',
      statuses: [],
      outcomes: [],
      environments: [],
      services: [],
      grafanaToken,
      createdBy: 'test',
    },
    { allowPrivate: false },
  )
  assert.equal(openSecret(TEST_SECRET, webhook.secret), webhookSecret, 'usable with the app secret')
  assert.throws(() => openSecret(`${TEST_SECRET}x`, webhook.secret), 'useless without it')
  // --- end webhooks ---

  const secrets: Record<string, string> = {
    'a webhook signing secret': webhookSecret,
    'its body (webhook)': webhookSecret.slice(6),
    'a Grafana token': grafanaToken,
    'an API key': ctx.tenant.key,
    'its body': ctx.tenant.key.slice(4),
    'a key created in Settings': uiKey,
    'a password': PASSWORD,
    'a one-time password': oneTime,
    'a session token': token,
    'a CSRF secret': csrfSecret,
    'the CSRF token of a page': await admin.csrf('/settings/'),
  }
  const tables = await ctx.database.db.introspection.getTables()
  assert.ok(tables.length >= 5, `tables read: ${tables.map((x) => x.name).join(', ')}`)
  const found: string[] = []
  for (const table of tables) {
    const rows = await sql<Record<string, unknown>>`select * from ${sql.table(table.name)}`.execute(
      ctx.database.db,
    )
    const text = JSON.stringify(rows.rows)
    for (const [label, value] of Object.entries(secrets)) {
      assert.ok(value.length >= 8, label)
      if (text.includes(value)) found.push(`${label} in ${table.name}`)
    }
  }
  assert.deepEqual(found, [])

  // The session row is found by the token's digest, which is what the table keeps.
  const sessions = await ctx.database.db.selectFrom('sessions').select('id').execute()
  const digest = createHash('sha256').update(token, 'utf8').digest('hex')
  assert.ok(sessions.some((s) => s.id === digest))
})

test('the password check is a constant-time comparison that answers false, never throws, when the stored key has another length', async () => {
  const stored = await hashPassword(PASSWORD)
  assert.equal(await verifyPassword(PASSWORD, stored), true)
  assert.equal(await verifyPassword(`${PASSWORD} `, stored), false)
  const parts = stored.split('$')
  const key = Buffer.from(parts[5] ?? '', 'base64')
  for (const other of [key.subarray(0, 32), Buffer.concat([key, Buffer.alloc(1)]), Buffer.alloc(0)]) {
    const altered = [...parts.slice(0, 5), other.toString('base64')].join('$')
    assert.equal(await verifyPassword(PASSWORD, altered), false, `a stored key of ${other.length} bytes`)
  }
  assert.equal(await verifyPassword(PASSWORD, 'md5$abc'), false, 'an unknown hash format')
})

test('the SQLite files (database, -wal, -shm) and the secret are created 0600, the data directory 0700, whatever the umask allows', async (t) => {
  const parent = mkdtempSync(join(tmpdir(), 'shiplog-modes-'))
  t.after(() => rmSync(parent, { recursive: true, force: true }))
  // The usual umask, which lets new files be read by everyone (0644) unless asked otherwise.
  const umask = process.umask(0o022)
  t.after(() => process.umask(umask))
  const dir = join(parent, 'data')
  const config = loadConfig({ DATABASE_URL: `sqlite:${join(dir, 'shiplog.db')}`, LOG_LEVEL: 'silent' })
  assert.equal(config.secret, null, 'reading the configuration makes no secret: starting the app does')
  const database = openDatabase(config.database)
  t.after(() => database.close())
  await migrateToLatest(database)
  const app = await buildApp({ config, database, logger: false })
  t.after(() => app.close())
  const { key } = await addTenant(database, 'Acme')
  const res = await app.inject({
    method: 'POST',
    url: '/deploy',
    headers: { 'x-api-key': key },
    payload: { service: 'App1', environment: 'Prod', version: '1', status: 'Deployed' },
  })
  assert.equal(res.statusCode, 201, res.body)
  // While connections are open the -wal and -shm files exist (the last close removes them).
  const mode = (path: string) => (statSync(path).mode & 0o777).toString(8)
  assert.equal(mode(dir), '700', 'the data directory')
  assert.equal(mode(join(dir, 'secret')), '600', 'the secret')
  for (const name of ['shiplog.db', 'shiplog.db-wal', 'shiplog.db-shm']) {
    assert.equal(mode(join(dir, name)), '600', name)
  }
})
