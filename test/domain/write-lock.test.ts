// A transaction that reads, waits on something else, and then writes, while another connection
// writes meanwhile: on SQLite the transaction took the write lock at its BEGIN (IMMEDIATE, in the
// write connection's queue, db/sqlite/owner.ts), so its read cannot go stale; the other connection
// waits its turn, asynchronously, and commits after it. This is what a `shiplog` command beside a busy
// server, or a Settings form while pipelines send events, meet; forms that set a password hash it
// before their transaction begins (passwords.ts). Both databases.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { parseDatabaseUrl } from '../../src/config.js'
import { type Database, openDatabase } from '../../src/db/connect.js'
import { migrateToLatest } from '../../src/db/migrate.js'
import { buildTestApp, freshDatabaseUrl } from '../helper.js'
import { processEnv, runCli, sleep } from '../support/processes.js'
import { deploy, userSession } from '../support/ui.js'

async function twoHandles(t: Parameters<typeof freshDatabaseUrl>[0]): Promise<[Database, Database, string]> {
  const url = await freshDatabaseUrl(t)
  const one = openDatabase(parseDatabaseUrl(url))
  t.after(() => one.close())
  await migrateToLatest(one)
  const other = openDatabase(parseDatabaseUrl(url))
  t.after(() => other.close())
  return [one, other, url]
}

async function setting(database: Database, name: string): Promise<string | undefined> {
  const row = await database.db
    .selectFrom('settings')
    .select('value')
    .where('name', '=', name)
    .executeTakeFirst()
  return row?.value
}

async function put(database: Database, name: string, value: string): Promise<void> {
  await database.db
    .insertInto('settings')
    .values({ name, value })
    .onConflict((oc) => oc.column('name').doUpdateSet({ value }))
    .execute()
}

test('a transaction that waits between its read and its write commits at once; a write elsewhere meanwhile waits its turn', async (t) => {
  const [one, other] = await twoHandles(t)
  await put(one, 'counter', '0')
  let attempts = 0
  let elsewhere: Promise<void> | null = null
  const result = await one.db.transaction().execute(async (trx) => {
    attempts++
    const read = await trx
      .selectFrom('settings')
      .select('value')
      .where('name', '=', 'counter')
      .executeTakeFirst()
    // Real waiting (a password hash, say), while another connection writes.
    elsewhere = put(other, 'elsewhere', 'written meanwhile')
    await sleep(50)
    const next = String(Number(read?.value) + 1)
    await trx.updateTable('settings').set({ value: next }).where('name', '=', 'counter').execute()
    return next
  })
  await elsewhere
  assert.equal(result, '1')
  assert.equal(attempts, 1, 'nothing made the transaction run again')
  assert.equal(await setting(one, 'counter'), '1')
  assert.equal(await setting(other, 'counter'), '1')
  assert.equal(await setting(one, 'elsewhere'), 'written meanwhile')
})

test('other failures are not tried again, and leave nothing', async (t) => {
  const [one] = await twoHandles(t)
  let attempts = 0
  await assert.rejects(
    one.db.transaction().execute(async (trx) => {
      attempts++
      await trx.insertInto('settings').values({ name: 'half', value: 'x' }).execute()
      await trx.insertInto('settings').values({ name: 'half', value: 'twice' }).execute()
    }),
    /unique|UNIQUE|duplicate/,
  )
  assert.equal(attempts, 1)
  assert.equal(await setting(one, 'half'), undefined)
})

test('shiplog webhooks create succeeds while another connection keeps committing', async (t) => {
  const [one, , url] = await twoHandles(t)
  const env = processEnv(url)
  const made = await runCli(
    t,
    ['users', 'create', '--account', 'Acme', '--email', 'a@example.com', '--password-stdin'],
    {
      env,
      stdin: 'correct horse battery staple\n',
    },
  )
  assert.equal(made.code, 0, made.stderr)
  // A busy server's writes: a commit every few milliseconds until the commands are done.
  let writing = true
  let commits = 0
  const writer = (async () => {
    while (writing) {
      await put(one, 'busy', String(commits++))
      await sleep(1)
    }
  })()
  try {
    for (const n of [1, 2, 3]) {
      const created = await runCli(
        t,
        [
          'webhooks',
          'create',
          '--account',
          'Acme',
          '--url',
          `https://example.com/hook/${n}`,
          '--format',
          'json',
          '--status',
          'Deployed',
        ],
        { env },
      )
      assert.equal(created.code, 0, created.stderr)
    }
  } finally {
    writing = false
    await writer
  }
  assert.ok(commits > 50, `the other connection committed only ${commits} times`)
  const rows = await one.db.selectFrom('webhooks').select('url').orderBy('id').execute()
  assert.deepEqual(
    rows.map((r) => r.url),
    [1, 2, 3].map((n) => `https://example.com/hook/${n}`),
  )
})

test('Settings adds a user and resets a password while events keep arriving', async (t) => {
  const ctx = await buildTestApp(t, {
    databaseUrl: await freshDatabaseUrl(t),
    env: { SHIPLOG_RATE_LIMIT: '100000' },
  })
  const { browser: admin } = await userSession(ctx, ctx.tenant.account.id, 'ada@example.com')
  // Events arrive all along, each through the key look-up and the event store's own connection.
  let sending = true
  let sent = 0
  const pipeline = (async () => {
    while (sending) {
      const batch = await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          deploy(ctx.app, ctx.tenant.key, {
            service: `svc-${i}`,
            environment: 'prod',
            version: `1.${sent}`,
            status: 'Deployed',
          }),
        ),
      )
      for (const r of batch) assert.equal(r.status, 201)
      sent += batch.length
    }
  })()
  try {
    for (const n of [1, 2, 3]) {
      const added = await admin.submit('/settings/', '/settings/users', {
        email: `person${n}@example.com`,
        role: 'member',
      })
      assert.equal(
        added.statusCode,
        303,
        `adding person${n}: ${added.statusCode} ${added.payload.slice(0, 300)}`,
      )
      const row = await ctx.database.db
        .selectFrom('users')
        .select('id')
        .where('email', '=', `person${n}@example.com`)
        .executeTakeFirstOrThrow()
      const reset = await admin.submit('/settings/', `/settings/users/${row.id}/password`, {})
      assert.equal(
        reset.statusCode,
        303,
        `resetting person${n}: ${reset.statusCode} ${reset.payload.slice(0, 300)}`,
      )
    }
  } finally {
    sending = false
    await pipeline
  }
  assert.ok(sent > 0)
  assert.equal(await ctx.eventCount(), sent)
})
