// Builds the app for tests over a private database: SQLite in memory, or a fresh PostgreSQL schema
// when the suite runs with SHIPLOG_TEST_DB=postgres (TEST_DATABASE_URL names the server).
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { TestContext } from 'node:test'
import pg from 'pg'
import { type App, buildApp } from '../src/app.js'
import { type Config, loadConfig } from '../src/config.js'
import { type Database, openDatabase } from '../src/db/connect.js'
import { migrateToLatest } from '../src/db/migrate.js'
import type { Account } from '../src/db/schema.js'
import { ensureAccount } from '../src/domain/accounts.js'
import { createApiKey } from '../src/domain/keys.js'

export type TestDialect = 'sqlite' | 'postgres'

export const testDialect: TestDialect = process.env.SHIPLOG_TEST_DB === 'postgres' ? 'postgres' : 'sqlite'

export const TEST_SECRET = 'test-secret-0123456789abcdef0123456789abcdef'

type Cleanup = { after(fn: () => Promise<void> | void): void }

function postgresServerUrl(): string {
  const url = process.env.TEST_DATABASE_URL
  if (!url) throw new Error('SHIPLOG_TEST_DB=postgres needs TEST_DATABASE_URL')
  return url
}

/** A PostgreSQL URL whose connections live in a new, empty schema, dropped after the test. */
async function freshPostgresUrl(t: Cleanup): Promise<string> {
  const server = postgresServerUrl()
  const schema = `t_${randomBytes(6).toString('hex')}`
  const admin = new pg.Client({ connectionString: server })
  await admin.connect()
  try {
    await admin.query(`CREATE SCHEMA "${schema}"`)
  } finally {
    await admin.end()
  }
  t.after(async () => {
    const c = new pg.Client({ connectionString: server })
    await c.connect()
    try {
      await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
    } finally {
      await c.end()
    }
  })
  const url = new URL(server)
  url.searchParams.set('options', `-c search_path=${schema}`)
  return url.toString()
}

/**
 * A DATABASE_URL for a private database that other processes can open too: a temporary SQLite
 * file, or a fresh PostgreSQL schema. Removed after the test.
 */
export async function freshDatabaseUrl(t: Cleanup): Promise<string> {
  if (testDialect === 'postgres') return freshPostgresUrl(t)
  const dir = mkdtempSync(join(tmpdir(), 'shiplog-test-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  return `sqlite:${join(dir, 'shiplog.db')}`
}

/** Configuration as the server would read it, for the given database URL. */
export function testConfig(databaseUrl: string, env: Record<string, string> = {}): Config {
  return loadConfig({ DATABASE_URL: databaseUrl, SHIPLOG_SECRET: TEST_SECRET, LOG_LEVEL: 'silent', ...env })
}

export interface Tenant {
  account: Account
  key: string
  keyId: number
}

export interface TestApp {
  app: App
  database: Database
  config: Config
  /** The account "Acme" with one API key named "ci". */
  tenant: Tenant
  /** Creates another account with its own key. */
  addTenant(name: string, keyName?: string): Promise<Tenant>
  eventCount(): Promise<number>
}

export async function addTenant(database: Database, name: string, keyName = 'ci'): Promise<Tenant> {
  const account = await ensureAccount(database.db, name)
  const { key, row } = await createApiKey(database.db, {
    accountId: account.id,
    name: keyName,
    createdBy: 'test',
  })
  return { account, key, keyId: row.id }
}

export interface BuildOptions {
  env?: Record<string, string>
  /** Use this database URL instead of a private one (it must already exist). */
  databaseUrl?: string
}

export async function buildTestApp(t: TestContext | Cleanup, options: BuildOptions = {}): Promise<TestApp> {
  const databaseUrl =
    options.databaseUrl ?? (testDialect === 'postgres' ? await freshPostgresUrl(t) : 'sqlite::memory:')
  const config = testConfig(databaseUrl, options.env)
  const database = openDatabase(config.database)
  await migrateToLatest(database)
  const app = await buildApp({ config, database, logger: false })
  t.after(async () => {
    await app.close()
    await database.close()
  })
  const tenant = await addTenant(database, 'Acme')
  return {
    app,
    database,
    config,
    tenant,
    addTenant: (name, keyName) => addTenant(database, name, keyName),
    eventCount: async () => {
      const row = await database.db
        .selectFrom('events')
        .select((eb) => eb.fn.countAll<number | string>().as('n'))
        .executeTakeFirstOrThrow()
      return Number(row.n)
    },
  }
}
