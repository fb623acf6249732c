// Brings the schema up to date; safe when several instances start at the same moment.
import { type Migration, type MigrationProvider, Migrator, sql } from 'kysely'
import type { Database } from './connect.js'
import { initialSchema } from './migrations/2026_11_21_0001_initial.js'
import { sessionsSchema } from './migrations/2026_11_22_0002_sessions.js'
import { versionSearchIndex } from './migrations/2026_11_22_0003_version_search.js'
import { accountEmailsAndFlash } from './migrations/2026_11_23_0004_account_emails.js'
import { deploymentsSchema } from './migrations/2026_11_23_0005_deployments.js'
import { leanDeployments } from './migrations/2026_11_24_0006_lean_deployments.js'
import { webhooksSchema } from './migrations/2026_11_25_0007_webhooks.js'
import { auditSchema } from './migrations/2026_11_26_0008_audit.js'
import { retentionSchema } from './migrations/2026_11_26_0009_retention.js'
import { chainSchema } from './migrations/2026_11_26_0010_chain.js'
import { oidcSchema } from './migrations/2026_11_26_0011_oidc.js'
import { webhookCursors } from './migrations/2026_11_27_0012_webhook_cursors.js'
import { eventTimeSchema } from './migrations/2026_11_27_0013_event_time.js'
import { namesSchema } from './migrations/2026_11_27_0014_names.js'
import { guardrailsSchema } from './migrations/2026_11_28_0015_guardrails.js'

function provider(database: Database): MigrationProvider {
  return {
    async getMigrations(): Promise<Record<string, Migration>> {
      // Names sort in the order they must run; files are frozen once they land.
      return {
        '2026_11_21_0001_initial': initialSchema(database.dialect),
        '2026_11_22_0002_sessions': sessionsSchema(),
        '2026_11_22_0003_version_search': versionSearchIndex(database.dialect),
        '2026_11_23_0004_account_emails': accountEmailsAndFlash(database.dialect),
        '2026_11_23_0005_deployments': deploymentsSchema(),
        '2026_11_24_0006_lean_deployments': leanDeployments(),
        '2026_11_25_0007_webhooks': webhooksSchema(database.dialect),
        '2026_11_26_0008_audit': auditSchema(database.dialect),
        '2026_11_26_0010_chain': chainSchema(),
        '2026_11_26_0011_oidc': oidcSchema(database.dialect),
        '2026_11_27_0012_webhook_cursors': webhookCursors(database.dialect),
        '2026_11_26_0009_retention': retentionSchema(),
        '2026_11_27_0013_event_time': eventTimeSchema(database.dialect),
        '2026_11_27_0014_names': namesSchema(),
        '2026_11_28_0015_guardrails': guardrailsSchema(database.dialect),
      }
    },
  }
}

export interface MigrationOutcome {
  applied: string[]
}

/**
 * On PostgreSQL Kysely's migrator holds an advisory lock for the whole run and runs each migration
 * in a transaction, so concurrent starts serialise and the later ones find nothing left to do. On
 * SQLite it takes no lock and runs a migration statement by statement (each statement a unit of the
 * write connection's queue, db/sqlite/owner.ts): one process migrates a file, and two processes
 * starting on a new file at the same instant can make one of them fail (starting it again works).
 */
export async function migrateToLatest(database: Database): Promise<MigrationOutcome> {
  await refuseNewerSchema(database)
  const migrator = new Migrator({
    db: database.db,
    provider: provider(database),
    // Kysely looks for its bookkeeping tables in every schema unless told which one: a second
    // installation in another schema of the same database would find the first one's and skip
    // creating its own. Pin them to the schema this connection writes to.
    ...(database.dialect === 'postgres' ? { migrationTableSchema: await currentSchema(database) } : {}),
  })
  const { error, results } = await migrator.migrateToLatest()
  if (error) {
    const failed = results?.find((r) => r.status === 'Error')
    const reason = error instanceof Error ? error.message : String(error)
    throw new Error(
      failed ? `migration ${failed.migrationName} failed: ${reason}` : `migration failed: ${reason}`,
    )
  }
  return { applied: (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName) }
}

async function currentSchema(database: Database): Promise<string> {
  const { rows } = await sql<{ schema: string | null }>`select current_schema() as schema`.execute(
    database.db,
  )
  const schema = rows[0]?.schema
  if (!schema) throw new Error('PostgreSQL has no current schema: check search_path for this user')
  return schema
}

function migratorFor(database: Database, schema: string | undefined): Migrator {
  return new Migrator({
    db: database.db,
    provider: provider(database),
    ...(schema === undefined ? {} : { migrationTableSchema: schema }),
  })
}

/**
 * Brings the schema up to (and including) the named migration, and no further: the upgrade test
 * builds a database as an old release left it.
 */
export async function migrateTo(database: Database, name: string): Promise<MigrationOutcome> {
  const schema = database.dialect === 'postgres' ? await currentSchema(database) : undefined
  const migrator = migratorFor(database, schema)
  const known = (await migrator.getMigrations()).map((m) => m.name)
  if (!known.includes(name)) throw new Error(`no migration named ${name}`)
  const { error, results } = await migrator.migrateTo(name)
  if (error)
    throw new Error(`migration to ${name} failed: ${error instanceof Error ? error.message : String(error)}`)
  return { applied: (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName) }
}

export interface SchemaStatus {
  /** Migrations this code knows that the database has not run. */
  pending: string[]
  /** Migrations the database has run that this code does not know (a newer release ran). */
  unknown: string[]
  applied: number
}

/** Where the schema stands against this code, without changing anything. */
export async function schemaStatus(database: Database): Promise<SchemaStatus> {
  const schema = database.dialect === 'postgres' ? await currentSchema(database) : undefined
  const known = Object.keys(await provider(database).getMigrations())
  const applied = await appliedMigrations(database, schema)
  const appliedSet = new Set(applied)
  const knownSet = new Set(known)
  return {
    pending: known.filter((name) => !appliedSet.has(name)),
    unknown: applied.filter((name) => !knownSet.has(name)),
    applied: applied.length,
  }
}

async function appliedMigrations(database: Database, schema: string | undefined): Promise<string[]> {
  const table = schema === undefined ? sql.table('kysely_migration') : sql.table(`${schema}.kysely_migration`)
  try {
    const { rows } = await sql<{ name: string }>`select name from ${table} order by name`.execute(database.db)
    return rows.map((r) => r.name)
  } catch (err) {
    // A database no release has migrated yet has no bookkeeping table.
    if (/no such table|does not exist/.test((err as Error).message)) return []
    throw err
  }
}

/** Thrown when the database was migrated by a newer release than this code. */
export class SchemaNewerError extends Error {
  override readonly name = 'SchemaNewerError'
}

/**
 * Refuses a database a newer release migrated: Kysely itself would stop with "corrupted
 * migrations" and a list; this says what happened and what to do.
 */
export async function refuseNewerSchema(database: Database): Promise<void> {
  const { unknown } = await schemaStatus(database)
  if (unknown.length > 0) {
    throw new SchemaNewerError(
      `the database schema is newer than this release (it has run ${unknown.join(', ')}, which this version does not know): run the newer release, or restore the backup taken before upgrading`,
    )
  }
}
