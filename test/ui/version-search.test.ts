// The version text search finds exactly what a plain scan finds, however much of it the index holds.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { type Insertable, type Kysely, type Migration, Migrator, sql } from 'kysely'
import { openDatabase } from '../../src/db/connect.js'
import { migrateToLatest } from '../../src/db/migrate.js'
import { initialSchema } from '../../src/db/migrations/2026_11_21_0001_initial.js'
import { sessionsSchema } from '../../src/db/migrations/2026_11_22_0002_sessions.js'
import { versionSearchIndex } from '../../src/db/migrations/2026_11_22_0003_version_search.js'
import type { DB, EventRow, EventsTable } from '../../src/db/schema.js'
import { ensureAccount } from '../../src/domain/accounts.js'
import { listEventPage } from '../../src/domain/events/event-pages.js'
import { exportEvents } from '../../src/domain/events/export/index.js'
import type { EventFilter } from '../../src/domain/events/logs-query.js'
import { indexVersions, VersionIndexer } from '../../src/domain/events/version-index.js'
import { buildTestApp, freshDatabaseUrl, type TestApp, testConfig, testDialect } from '../helper.js'
import { deploy, insertEvents, parseCsv, SEED_EPOCH, shownVersions, userSession } from '../support/ui.js'

function isAscii(text: string): boolean {
  return [...text].every((c) => c.charCodeAt(0) < 0x80)
}

/**
 * The events a version search must find, newest first: the search as it was before the index, run
 * as a plain scan of the table by the database itself (so its own case rules apply).
 */
async function scanMatches(db: Kysely<DB>, accountId: number, needle: string): Promise<number[]> {
  const pattern = `%${needle.replace(/[\\%_]/g, (c) => `\\${c}`)}%`
  const match =
    testDialect === 'postgres'
      ? sql`version ilike ${pattern} escape '\\'`
      : isAscii(pattern)
        ? sql`version like ${pattern} escape '\\'`
        : sql`casefold(version) like casefold(${pattern}) escape '\\'`
  const { rows } = await sql<{
    id: number
  }>`select id from events where account_id = ${accountId} and ${match}
    order by id desc`.execute(db)
  return rows.map((r) => r.id)
}

const VERSIONS = [
  '1.0.0',
  '1.0.1-RC1',
  'v2.10.3-rc.2',
  'Release-2026.11',
  'RELEASE-Ä',
  'release-ä-2',
  'été-2',
  'ÉTÉ-3',
  'straße-1',
  'STRASSE-2',
  'İstanbul-1',
  'istanbul-2',
  'ΟΔΟΣ-7',
  'οδος-8',
  '日本語-1.0',
  'master:4d0r98wa',
  'MASTER:4D0R98WA-hotfix',
  '100%',
  '1.0%-beta',
  '1_0',
  '1x0',
  'back\\slash',
  "it's-quoted",
  'say "hi"',
  'a,b;c',
  'aaaa',
  'abab',
  'ab-ab',
  'x',
  'xy',
  ' spaced out ',
  '😀-emoji',
]

const NEEDLES = [
  'x',
  'X',
  'xy',
  '1',
  '1.',
  'rc',
  'RC1',
  '-rc',
  'release',
  'RELEASE-',
  'ä',
  'Ä',
  'räe',
  'release-ä',
  'ÄSE',
  'été',
  'ÉTÉ-',
  'straße',
  'STRASSE',
  'ss',
  'İst',
  'istanbul',
  'ISTANBUL',
  'οδος',
  'ΟΔΟΣ',
  'δος-',
  '日本',
  '日本語',
  'master:4d0r',
  '4D0R98WA',
  'hotfix',
  '%',
  '0%',
  '100%',
  '_',
  '1_0',
  '1_',
  '\\',
  'k\\s',
  "'",
  "it's",
  '"',
  '"hi"',
  ',',
  'a,b;',
  'aaa',
  'aaaa',
  'aaaaa',
  'aba',
  'bab',
  'abab',
  'abxab',
  ' spaced',
  'spaced out ',
  '😀',
  '😀-e',
  'no-such-version-anywhere',
  'a'.repeat(250),
]

/** How far the SQLite version index got (PostgreSQL has none to fill). */
async function indexedThrough(ctx: TestApp): Promise<number | null> {
  if (testDialect !== 'sqlite') return null
  const { rows } = await sql<{ through: number }>`select through from events_version_index`.execute(
    ctx.database.db,
  )
  return rows[0]?.through ?? null
}

/** The index state a test starts from: nothing indexed, or the first `count` events. */
async function indexFirst(ctx: TestApp, count: number): Promise<void> {
  if (testDialect !== 'sqlite') return
  await sql`delete from events_version_fts`.execute(ctx.database.db)
  await sql`update events_version_index set through = 0`.execute(ctx.database.db)
  if (count > 0) await indexVersions(ctx.database, count)
}

// These tests call the domain functions, not the routes: the app's background indexer starts with
// the first request, and the index must stay where each test puts it.

async function listIds(ctx: TestApp, filter: EventFilter, limit = 500): Promise<number[]> {
  const { database, tenant } = ctx
  const page = await listEventPage(database.db, database.dialect, tenant.account.id, filter, {}, limit)
  return page.rows.map((r) => r.id)
}

async function exportIds(ctx: TestApp, filter: EventFilter, chunkRows?: number): Promise<number[]> {
  const parts: Buffer[] = []
  for await (const chunk of exportEvents(ctx.database, ctx.tenant.account.id, filter, 'json', { chunkRows }))
    parts.push(chunk)
  return (JSON.parse(Buffer.concat(parts).toString('utf8')) as { id: number }[]).map((e) => e.id)
}

async function seeded(t: Parameters<typeof buildTestApp>[0]): Promise<{ ctx: TestApp; ids: number[] }> {
  const ctx = await buildTestApp(t)
  // Another account's events share the index; they must never show.
  const other = await ctx.addTenant('Other Co')
  await insertEvents(
    ctx.database,
    other.account.id,
    VERSIONS.map((version) => ({ version })),
  )
  const ids = await insertEvents(
    ctx.database,
    ctx.tenant.account.id,
    VERSIONS.map((version) => ({ version })),
  )
  return { ctx, ids }
}

test('every needle (short, special, non-ASCII, case-folded) finds what a scan finds, however much is indexed', async (t) => {
  const { ctx, ids } = await seeded(t)
  const accountId = ctx.tenant.account.id
  const total = 2 * VERSIONS.length
  // Nothing indexed, the other account's events and half of these, everything.
  for (const indexed of [0, VERSIONS.length + 10, total]) {
    await indexFirst(ctx, indexed)
    if (testDialect === 'sqlite')
      assert.equal(
        await indexedThrough(ctx),
        indexed === 0 ? 0 : (ids[0] ?? 0) + indexed - VERSIONS.length - 1,
      )
    for (const needle of NEEDLES) {
      const expected = await scanMatches(ctx.database.db, accountId, needle)
      const what = `${JSON.stringify(needle)} with ${indexed} indexed`
      assert.deepEqual(await listIds(ctx, { version: needle }), expected, `page for ${what}`)
      assert.deepEqual(await exportIds(ctx, { version: needle }), expected, `export for ${what}`)
      assert.deepEqual(
        await exportIds(ctx, { version: needle }, 3),
        expected,
        `export in chunks of 3 for ${what}`,
      )
    }
  }
  // A few the scan itself must agree with, whatever the database: the index cannot change them.
  const versionOf = new Map(ids.map((id, i) => [id, VERSIONS[i]]))
  const find = async (needle: string) =>
    (await scanMatches(ctx.database.db, accountId, needle)).map((id) => versionOf.get(id))
  assert.deepEqual(await find('%'), ['1.0%-beta', '100%'])
  assert.deepEqual(await find('_'), ['1_0'])
  assert.deepEqual(await find('\\'), ['back\\slash'])
  assert.deepEqual(await find('Release-ä'), ['release-ä-2', 'RELEASE-Ä'])
  assert.deepEqual(await find('abab'), ['abab'])
  assert.deepEqual(await find('MASTER:4d0r98wa'), ['MASTER:4D0R98WA-hotfix', 'master:4d0r98wa'])
})

/** Walks every page older, then back newer, by the page cursors; returns the pages. */
async function walk(ctx: TestApp, filter: EventFilter, limit: number): Promise<EventRow[][]> {
  const { database, tenant } = ctx
  const list = (cursor: { before?: number; after?: number }) =>
    listEventPage(database.db, database.dialect, tenant.account.id, filter, cursor, limit)
  const pages: EventRow[][] = []
  let page = await list({})
  pages.push(page.rows)
  while (page.olderCursor !== null) {
    page = await list({ before: page.olderCursor })
    pages.push(page.rows)
    assert.ok(pages.length < 100, 'pagination ends')
  }
  const back: EventRow[][] = [page.rows]
  while (page.newerCursor !== null) {
    page = await list({ after: page.newerCursor })
    back.push(page.rows)
    assert.ok(back.length < 100, 'pagination ends')
  }
  assert.deepEqual(back, [...pages].reverse(), 'the same pages going back')
  return pages
}

test('pages through many version matches stay exact both ways, across the indexed and unindexed events', async (t) => {
  const ctx = await buildTestApp(t)
  const accountId = ctx.tenant.account.id
  // 300 events, every third one matching; times zigzag against ids, so time order is not id order.
  const base = Date.UTC(2026, 0, 1)
  const seeds = Array.from({ length: 300 }, (_, i) => ({
    version: i % 3 === 0 ? `build-${i}-Match` : `build-${i}-other`,
    received_at: base + ((i * 37) % 300) * 60_000,
  }))
  const ids = await insertEvents(ctx.database, accountId, seeds)
  const matching = seeds.map((s, i) => ({ ...s, id: ids[i] ?? 0 })).filter((s) => s.version.endsWith('Match'))
  const from = base + 20 * 60_000
  const to = base + 250 * 60_000
  const inRange = matching
    .filter((s) => s.received_at >= from && s.received_at <= to)
    .sort((a, b) => b.received_at - a.received_at || b.id - a.id)
    .map((s) => s.id)
  for (const indexed of [0, 155, 300]) {
    await indexFirst(ctx, indexed)
    const pages = await walk(ctx, { version: 'MATCH' }, 30)
    assert.deepEqual(
      pages.map((p) => p.length),
      [30, 30, 30, 10],
    )
    assert.deepEqual(
      pages.flat().map((r) => r.id),
      matching.map((s) => s.id).reverse(),
    )
    const ranged = await walk(ctx, { version: 'match', from, to }, 25)
    assert.deepEqual(
      ranged.flat().map((r) => r.id),
      inRange,
    )
    assert.deepEqual(await exportIds(ctx, { version: 'match', from, to }, 7), inRange)
  }
})

test('a needle that matches thousands of events, with a time range, still pages exactly', async (t) => {
  const ctx = await buildTestApp(t)
  const accountId = ctx.tenant.account.id
  const base = Date.UTC(2026, 0, 1)
  // More events than the index is used for with a time range (2000): the range is scanned instead.
  const seeds = Array.from({ length: 2100 }, (_, i) => ({
    version: i % 700 === 0 ? `common-rare-${i}` : `common-${i}`,
    received_at: base + i * 1000,
  }))
  const ids = await insertEvents(ctx.database, accountId, seeds)
  const range = { from: base + 100_000, to: base + 1_999_000 }
  const inRange = seeds
    .map((s, i) => ({ ...s, id: ids[i] ?? 0 }))
    .filter((s) => s.received_at >= range.from && s.received_at <= range.to)
  for (const indexed of [0, 2100]) {
    await indexFirst(ctx, indexed)
    assert.deepEqual(
      await listIds(ctx, { version: 'COMMON', ...range }),
      inRange
        .map((s) => s.id)
        .reverse()
        .slice(0, 500),
    )
    assert.deepEqual(
      await listIds(ctx, { version: 'on-rare', ...range }),
      inRange
        .filter((s) => s.version.includes('rare'))
        .map((s) => s.id)
        .reverse(),
    )
  }
})

test('indexed events stay in step when they are changed or deleted, by hand or with their account', async (t) => {
  const { ctx } = await seeded(t)
  const db = ctx.database.db
  const accountId = ctx.tenant.account.id
  await indexFirst(ctx, 2 * VERSIONS.length)
  const versions = async (needle: string) => {
    const ids = await listIds(ctx, { version: needle })
    assert.deepEqual(ids, await scanMatches(db, accountId, needle), needle)
    return ids.length
  }
  await db
    .updateTable('events')
    .set({ version: 'renamed-ÆON' })
    .where('version', '=', 'Release-2026.11')
    .execute()
  assert.equal(await versions('2026.11'), 0)
  assert.equal(await versions('æon'), 1)
  await db
    .deleteFrom('events')
    .where('account_id', '=', accountId)
    .where('version', '=', 'master:4d0r98wa')
    .execute()
  assert.equal(await versions('master:'), 1)
  // Deleting the other account takes its events, and their index entries, with it.
  const other = await db
    .selectFrom('accounts')
    .select('id')
    .where('name', '=', 'Other Co')
    .executeTakeFirstOrThrow()
  await db.deleteFrom('accounts').where('id', '=', other.id).execute()
  if (testDialect === 'sqlite') {
    const { rows } = await sql<{ n: number }>`select count(*) as n from events_version_fts`.execute(db)
    assert.equal(rows[0]?.n, VERSIONS.length - 1)
  }
  for (const needle of ['aaa', 'release', 'ä', '1.0', 'renamed']) await versions(needle)
})

test('the app indexes in the background, and events sent through POST /deploy are found at once', async (t) => {
  const { ctx } = await seeded(t)
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'ada@example.com', 'member')
  const created = await deploy(ctx.app, ctx.tenant.key, {
    service: 'api',
    environment: 'prod',
    version: 'Fresh-Über-Build',
    status: 'Deployed',
  })
  assert.equal(created.status, 201)
  // Found whether or not the indexer has reached it yet.
  const page = await browser.get('/logs/?version=%C3%BCber-b')
  assert.deepEqual(shownVersions(page.payload), ['Fresh-Über-Build'])
  const csv = await browser.get('/logs/export.csv?version=FRESH')
  assert.deepEqual(
    parseCsv(csv.payload)
      .slice(1)
      .map((row) => row[4]),
    ['Fresh-Über-Build'],
  )
  if (testDialect === 'sqlite') {
    const last = Number(created.body.id)
    for (let waited = 0; ((await indexedThrough(ctx)) ?? 0) < last; waited += 20) {
      assert.ok(waited < 5000, 'the background indexer reaches the newest event')
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
  }
  assert.deepEqual(shownVersions((await browser.get('/logs/?version=%C3%BCber-b')).payload), [
    'Fresh-Über-Build',
  ])
})

test('the indexer works in batches, oldest first, and stops when told', async (t) => {
  const { ctx, ids } = await seeded(t)
  if (testDialect !== 'sqlite') {
    assert.equal(await indexVersions(ctx.database, 10), 0, 'PostgreSQL has nothing to index')
    return
  }
  await indexFirst(ctx, 0)
  assert.equal(await indexVersions(ctx.database, 10), 10)
  assert.equal(await indexVersions(ctx.database, 1000), 2 * VERSIONS.length - 10)
  assert.equal(await indexVersions(ctx.database, 1000), 0)
  assert.equal(await indexedThrough(ctx), ids.at(-1))

  await indexFirst(ctx, 0)
  const errors: unknown[] = []
  const indexer = new VersionIndexer(ctx.database, (err) => errors.push(err))
  indexer.start()
  for (let waited = 0; (await indexedThrough(ctx)) !== ids.at(-1); waited += 20) {
    assert.ok(waited < 5000, 'the background indexer catches up')
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  indexer.stop()
  assert.deepEqual(errors, [])
  await insertEvents(ctx.database, ctx.tenant.account.id, [{ version: 'after-stop' }])
  await new Promise((resolve) => setTimeout(resolve, 1200))
  assert.equal(await indexedThrough(ctx), ids.at(-1), 'nothing indexed once stopped')
})

test('the migration leaves earlier events to the indexer, and they are found before and after', async (t) => {
  const url = await freshDatabaseUrl(t)
  const database = openDatabase(testConfig(url).database)
  t.after(() => database.close())
  const steps: [string, Migration][] = [
    ['2026_11_21_0001_initial', initialSchema(database.dialect)],
    ['2026_11_22_0002_sessions', sessionsSchema()],
    ['2026_11_22_0003_version_search', versionSearchIndex(database.dialect)],
  ]
  const schema =
    testDialect === 'postgres'
      ? (await sql<{ schema: string }>`select current_schema() as schema`.execute(database.db)).rows[0]
          ?.schema
      : undefined
  const migrateTo = async (name: string) => {
    const migrator = new Migrator({
      db: database.db,
      provider: { getMigrations: async () => Object.fromEntries(steps) },
      ...(schema ? { migrationTableSchema: schema } : {}),
    })
    const { error } = await migrator.migrateTo(name)
    if (error) throw error
  }
  await migrateTo('2026_11_22_0002_sessions')
  // Only an account: an API key would need the columns of later migrations (scopes, 0005).
  const account = await ensureAccount(database.db, 'Acme')
  // In the shape of that schema: no occurred_at yet (migration 0013 adds it).
  await database.db
    .insertInto('events')
    .values(
      VERSIONS.map(
        (version, i) =>
          ({
            account_id: account.id,
            service: 'svc',
            environment: 'prod',
            version,
            status: 'Deployed',
            source: 'deploy',
            api_key_name: 'ci',
            received_at: SEED_EPOCH + i * 60_000,
          }) as Insertable<EventsTable>,
      ),
    )
    .execute()
  await migrateTo('2026_11_22_0003_version_search')
  // The rest of the migrations, so today's queries find the columns they read.
  await migrateToLatest(database)
  const search = async () =>
    (await listEventPage(database.db, database.dialect, account.id, { version: 'release' }, {}, 50)).rows
      .map((r) => r.version)
      .sort()
  const expected = ['RELEASE-Ä', 'Release-2026.11', 'release-ä-2']
  assert.deepEqual(await search(), expected)
  if (testDialect === 'sqlite') {
    assert.equal(await indexVersions(database, 1000), VERSIONS.length)
    const { rows } = await sql<{ n: number }>`select count(*) as n from events_version_fts
      where events_version_fts match ${'"release"'}`.execute(database.db)
    assert.equal(rows[0]?.n, 3)
  } else {
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from pg_indexes
      where schemaname = current_schema() and indexname = 'events_version_trgm_idx'`.execute(database.db)
    assert.equal(rows[0]?.n, 1)
  }
  assert.deepEqual(await search(), expected)
})
