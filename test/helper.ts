// Builds the app for tests over a private database: a temporary SQLite file (the topology production
// runs), or a fresh PostgreSQL schema when the suite runs with SHIPLOG_TEST_DB=postgres
// (TEST_DATABASE_URL names the server).
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, type TestContext } from 'node:test'
import type { InjectOptions } from 'fastify'
import pg from 'pg'
import { type App, buildApp } from '../src/app.js'
import { type Config, loadConfig, parseDatabaseUrl } from '../src/config.js'
import { type Database, openDatabase } from '../src/db/connect.js'
import { migrateToLatest } from '../src/db/migrate.js'
import type { Account } from '../src/db/schema.js'
import { ensureAccount } from '../src/domain/accounts.js'
import { createApiKey } from '../src/domain/keys.js'
import { openResources, type ResourceLogger } from '../src/resources.js'
import { contractFor, type OpenApiDocument } from './support/openapi-contract.js'

export type TestDialect = 'sqlite' | 'postgres'

const SILENT: ResourceLogger = { error: () => {}, warn: () => {}, info: () => {} }

export const testDialect: TestDialect = process.env.SHIPLOG_TEST_DB === 'postgres' ? 'postgres' : 'sqlite'

export const TEST_SECRET = 'test-secret-0123456789abcdef0123456789abcdef'

/** What tests and fixtures register clean-up with: a TestContext, or a file-wide scope. */
export type Cleanup = { after(fn: () => Promise<void> | void): void }

function postgresServerUrl(): string {
  const url = process.env.TEST_DATABASE_URL
  if (!url) throw new Error('SHIPLOG_TEST_DB=postgres needs TEST_DATABASE_URL')
  return url
}

async function adminQuery(connectionString: string, text: string): Promise<void> {
  const client = new pg.Client({ connectionString })
  await client.connect()
  try {
    await client.query(text)
  } finally {
    await client.end()
  }
}

/**
 * Each test file (one process) gets its own PostgreSQL database, dropped when the file ends, and
 * each test a new schema in it. Kysely's migrator looks at every schema of the database, and a
 * schema dropped by a test running in another process at that moment made it fail; with one
 * database per file, schemas only come and go one test at a time.
 */
let fileDatabase: Promise<string> | null = null

function fileDatabaseUrl(): Promise<string> {
  fileDatabase ??= (async () => {
    const server = postgresServerUrl()
    const name = `shiplog_test_${process.pid}_${randomBytes(4).toString('hex')}`
    for (let attempt = 1; ; attempt++) {
      try {
        await adminQuery(server, `CREATE DATABASE "${name}"`)
        break
      } catch (err) {
        // Concurrent CREATE DATABASE can find the template busy; it clears in a moment.
        if (attempt >= 5 || !/being accessed by other users/.test((err as Error).message)) throw err
        await new Promise((resolve) => setTimeout(resolve, 200 * attempt))
      }
    }
    const url = new URL(server)
    url.pathname = `/${name}`
    return url.toString()
  })()
  return fileDatabase
}

after(async () => {
  if (!fileDatabase) return
  const url = new URL(await fileDatabase)
  const name = url.pathname.slice(1)
  // FORCE ends connections a test may have left open (a killed server's, say).
  await adminQuery(postgresServerUrl(), `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)
})

/** A PostgreSQL URL whose connections live in a new, empty schema of this file's database. */
async function freshPostgresUrl(): Promise<string> {
  const database = await fileDatabaseUrl()
  const schema = `t_${randomBytes(6).toString('hex')}`
  await adminQuery(database, `CREATE SCHEMA "${schema}"`)
  const url = new URL(database)
  url.searchParams.set('options', `-c search_path=${schema}`)
  return url.toString()
}

/**
 * A DATABASE_URL for a private database that other processes can open too: a temporary SQLite
 * file, or a fresh PostgreSQL schema. Removed after the test.
 */
export async function freshDatabaseUrl(t: Cleanup): Promise<string> {
  if (testDialect === 'postgres') return freshPostgresUrl()
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
  /**
   * Check every answer `app.inject` returns against /openapi.json (default on). Off only for a test
   * that makes the server misbehave on purpose (a fault injected below the HTTP layer).
   */
  contract?: boolean
}

/**
 * Makes `app.inject(options)` check each answer to a documented operation against the served
 * OpenAPI document (test/support/openapi-contract.ts): an answer the document does not describe
 * (status, content type, body, headers) fails the test that received it.
 */
function checkAnswersAgainstDocument(app: App): void {
  const injectOnce = (options: InjectOptions) => app.inject(options)
  const inject = app.inject.bind(app) as (...args: unknown[]) => unknown
  const checked = async (options: unknown) => {
    const res = (await inject(options)) as Awaited<ReturnType<typeof injectOnce>>
    const contract = contractFor(app.swagger() as unknown as OpenApiDocument)
    const req = res.raw.req
    const problems = contract.check({
      method: req.method ?? 'GET',
      url: req.url ?? '/',
      status: res.statusCode,
      headers: res.headers,
      body: res.rawPayload,
    })
    if (problems.length > 0) {
      throw new Error(`the answer disagrees with /openapi.json:\n  ${problems.join('\n  ')}`)
    }
    return res
  }
  // Only the promise form (one argument) is checked; the callback and chain forms pass through.
  const wrapped = (...args: unknown[]) => (args.length === 1 ? checked(args[0]) : inject(...args))
  Object.defineProperty(app, 'inject', { value: wrapped, configurable: true, writable: true })
}

export async function buildTestApp(t: TestContext | Cleanup, options: BuildOptions = {}): Promise<TestApp> {
  const databaseUrl = options.databaseUrl ?? (await freshDatabaseUrl(t))
  const config = testConfig(databaseUrl, options.env)
  const database = openDatabase(config.database)
  await migrateToLatest(database)
  // Opened and closed as the server does (src/server.ts): the app only uses them.
  const resources = await openResources(config, database, SILENT)
  const app = await buildApp({ config, database, resources, logger: false })
  if (options.contract !== false) checkAnswersAgainstDocument(app)
  t.after(async () => {
    await app.close()
    await resources.close()
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

/**
 * A private database (see freshDatabaseUrl) migrated, with the account "Acme" and its key "ci",
 * ready for server processes; the connection used to set it up is closed again.
 */
export async function databaseForServers(t: Cleanup): Promise<{ databaseUrl: string; key: string }> {
  const databaseUrl = await freshDatabaseUrl(t)
  const database = openDatabase(parseDatabaseUrl(databaseUrl))
  try {
    await migrateToLatest(database)
    const { key } = await addTenant(database, 'Acme', 'ci')
    return { databaseUrl, key }
  } finally {
    await database.close()
  }
}
