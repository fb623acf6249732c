// A small installation with every kind of row (accounts, users, keys, sessions, events with hostile
// text, derived deployments, webhooks, settings, guardrails), and helpers the dump/load and copy
// tests share.
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import pg from 'pg'
import { parseDatabaseUrl } from '../../src/config.js'
import { openDatabase } from '../../src/db/connect.js'
import type { AuditSource } from '../../src/domain/audit/log.js'
import { rebuildDeployments } from '../../src/domain/deployments/store.js'
import { addFreezeWindow, lockEnvironment, markVersionBad } from '../../src/domain/guardrails/commands.js'
import { applicationTables } from '../../src/domain/operations/tables.js'
import { ensureSecret } from '../../src/domain/settings.js'
import { createWebhook } from '../../src/domain/webhooks/queries.js'
import { buildTestApp, type Cleanup, TEST_SECRET, type TestApp, testDialect } from '../helper.js'
import { createUserIn, deploy, login, PASSWORD } from './ui.js'

export const EMAIL = 'ada@example.com'

/** Text that breaks naive encoders: quotes, backslashes, unicode beyond the BMP, separators. */
export const HOSTILE = 'it\'s "quoted" \\ back\\slash \\N ünïcødé 🚀 \u2028 , ; = -'
/** Stored directly (the API refuses control characters, but a dump must carry whatever a row holds). */
const CONTROLS = 'tab\there\nnew line\r\nCRLF \\t not a tab'

export interface Filled {
  key: string
  email: string
  password: string
  maxEventId: number
}

/**
 * Fills the (migrated or new) database at `databaseUrl`; returns what a test logs in and records
 * with. The app it fills through is closed again before returning (flushing key usage), so the
 * database holds still while it is dumped or copied.
 */
export async function fillInstallation(_t: Cleanup, databaseUrl: string): Promise<Filled> {
  const closers: (() => Promise<void> | void)[] = []
  try {
    return await fill({ after: (fn) => closers.push(fn) }, databaseUrl)
  } finally {
    for (const close of closers.reverse()) await close()
  }
}

async function fill(t: Cleanup, databaseUrl: string): Promise<Filled> {
  const ctx = await buildTestApp(t, { databaseUrl })
  const { database, tenant, app } = ctx
  await createUserIn(database, tenant.account.id, EMAIL)
  const other = await ctx.addTenant('Beta "two"', 'deploys')
  await createUserIn(database, other.account.id, 'bob@example.com', { role: 'member' })
  let maxEventId = 0
  const record = async (key: string, fields: Record<string, string>) => {
    const res = await deploy(app, key, fields)
    assert.equal(res.status, 201, JSON.stringify(res.body))
    maxEventId = Math.max(maxEventId, res.body.id as number)
  }
  for (const [service, version] of [
    ['api', '1.0.0'],
    ['api', `2.0.0-${'ü'.repeat(3)}`],
    ['web', '3.1.4'],
  ] as const) {
    await record(tenant.key, { service, environment: 'prod', version, status: 'Deploying' })
    await record(tenant.key, {
      service,
      environment: 'prod',
      version,
      status: 'Deployed',
      description: HOSTILE,
      deployer: 'Zoë <zoe@example.com>',
    })
  }
  await record(other.key, {
    service: HOSTILE.slice(0, 40).replace(/\s/g, '_'),
    environment: 'staging',
    version: '9',
    status: 'Failed',
  })
  await database.db
    .updateTable('events')
    .set({ description: CONTROLS })
    .where('id', '=', maxEventId)
    .execute()
  await createWebhook(
    database.db,
    TEST_SECRET,
    {
      accountId: tenant.account.id,
      url: 'https://hooks.example.com/shiplog?a=1&b="2"',
      format: 'json',
      statuses: [],
      outcomes: ['failed'],
      environments: ['prod'],
      services: [],
      grafanaToken: null,
      createdBy: EMAIL,
    },
    { allowPrivate: true },
  )
  await ensureSecret(database.db)
  await rebuildDeployments(database)
  await addGuardrails(ctx, tenant.account.id, maxEventId)
  // A session row too.
  await login(app, EMAIL)
  return { key: tenant.key, email: EMAIL, password: PASSWORD, maxEventId }
}

/**
 * A lock, a recurring freeze window, a bad version (through their audited commands), a promotion
 * rule and a failure link (stored directly: the account has one environment and the marks' commands
 * are not here yet), and the last event flagged with the rules it broke and an override reason.
 */
async function addGuardrails(ctx: TestApp, accountId: number, lastEventId: number): Promise<void> {
  const db = ctx.database.db
  const who: AuditSource = { actor: { kind: 'cli', id: null, name: 'cli (ops@box)' }, address: null }
  const at = Date.UTC(2026, 5, 1, 12)
  const done = (v: { ok: boolean }) => assert.ok(v.ok, JSON.stringify(v))
  const reason = 'release "train" ünï 🚀 \\ back'
  done(
    await lockEnvironment(
      db,
      accountId,
      { environment: 'prod', service: 'web', reason, endsAt: Date.UTC(2036, 0, 1) },
      who,
      at,
    ),
  )
  const weekly = {
    kind: 'recurring' as const,
    cron: '0 16 * * 5',
    durationMinutes: 3840,
    timeZone: 'Europe/Berlin',
  }
  done(await addFreezeWindow(db, accountId, { environment: 'prod', reason, schedule: weekly }, who, at))
  done(await markVersionBad(db, accountId, { service: 'api', version: '1.0.0', reason }, who, at))
  await db
    .insertInto('promotion_rules')
    .values({
      account_id: accountId,
      environment: 'prod',
      after_environment: 'staging "two"',
      min_minutes: 30,
      require_good: 1,
      created_by: EMAIL,
      created_at: at,
    })
    .execute()
  const deployments = await db
    .selectFrom('deployments')
    .select('id')
    .where('account_id', '=', accountId)
    .orderBy('id')
    .execute()
  await db
    .insertInto('deployment_incidents')
    .values({
      account_id: accountId,
      deployment_id: Number(deployments[0]?.id),
      link: 'https://tracker.example.com/INC-1?a=1&b="2"',
      note: CONTROLS,
      fixed_by: Number(deployments[1]?.id),
      created_by: EMAIL,
      created_at: at,
    })
    .execute()
  await db
    .updateTable('events')
    .set({ guardrails: 'lock,freeze,promotion', override_reason: HOSTILE })
    .where('id', '=', lastEventId)
    .execute()
}

/** Counts every application table's rows, to prove a refused command changed nothing. */
export async function rowCounts(databaseUrl: string): Promise<Record<string, number>> {
  const database = openDatabase(parseDatabaseUrl(databaseUrl))
  try {
    const counts: Record<string, number> = {}
    for (const table of await applicationTables(database).catch(() => [])) {
      const row = await database.db
        .selectFrom(table.name as never)
        .select((eb) => eb.fn.countAll<number | string>().as('n'))
        .executeTakeFirstOrThrow()
      counts[table.name] = Number(row.n)
    }
    return counts
  } finally {
    await database.close()
  }
}

/** Events, keys and passwords of the source work on a database made from it; new events get new ids. */
export async function assertWorks(t: Cleanup, databaseUrl: string, filled: Filled): Promise<void> {
  const ctx = await buildTestApp(t, { databaseUrl })
  const res = await deploy(ctx.app, filled.key, {
    service: 'api',
    environment: 'prod',
    version: '4.0.0',
    status: 'Deployed',
  })
  assert.equal(res.status, 201, JSON.stringify(res.body))
  assert.ok((res.body.id as number) > filled.maxEventId, 'a new event got a new id')
  await login(ctx.app, filled.email, filled.password)
}

/** The per-table counts and checksums a dump's trailer records. */
export function trailerOf(file: string): Record<string, unknown> {
  const lines = readFileSync(file, 'utf8').trimEnd().split('\n')
  const trailer = JSON.parse(lines[lines.length - 1] ?? '{}') as { tables?: Record<string, unknown> }
  assert.ok(trailer.tables, `${file} ends with a trailer`)
  return trailer.tables
}

/**
 * Why a test that goes across to the other kind of database cannot run here, or false when it can:
 * the SQLite run without TEST_DATABASE_URL has no PostgreSQL to go to, and a SQLite file in its place
 * would make the test pass without crossing anything. Given as `skip`, it is counted (and fails CI).
 */
export const noOtherDialect: string | false =
  testDialect === 'sqlite' && !process.env.TEST_DATABASE_URL
    ? 'TEST_DATABASE_URL is not set: there is no PostgreSQL to go across to'
    : false

/**
 * A new database of the other kind than the suite's: SQLite in the PostgreSQL run; in the SQLite run,
 * PostgreSQL when the server is configured (a fresh schema in TEST_DATABASE_URL's database), else
 * another SQLite file.
 */
export async function otherDialectUrl(t: Cleanup, sqliteDir: string): Promise<string> {
  const server = process.env.TEST_DATABASE_URL
  if (testDialect === 'postgres' || !server)
    return `sqlite:${sqliteDir}/other-${randomBytes(4).toString('hex')}.db`
  const schema = `ops_${randomBytes(6).toString('hex')}`
  const admin = async (text: string) => {
    const client = new pg.Client({ connectionString: server })
    await client.connect()
    try {
      await client.query(text)
    } finally {
      await client.end()
    }
  }
  await admin(`create schema "${schema}"`)
  // A server or command of the test may still be finishing background work in the schema when the
  // hooks run (they run in the order registered, this one first): a drop that deadlocks with it is
  // tried again once that work has ended, rather than failing a test that passed.
  t.after(async () => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await admin(`drop schema if exists "${schema}" cascade`)
      } catch (err) {
        if ((err as { code?: string }).code !== '40P01' || attempt >= 5) throw err
        await new Promise((resolve) => setTimeout(resolve, 500 * attempt))
      }
    }
  })
  const url = new URL(server)
  url.searchParams.set('options', `-c search_path=${schema}`)
  return url.toString()
}
