// `shiplog migrate`: brings the schema up to date and says what it did — created it on a new
// database, applied the migrations a newer release brought, or found nothing to do.
import { parseArgs } from 'node:util'
import { schemaStatus } from '../db/migrate.js'
import { counted } from '../domain/plural.js'
import { withDatabase } from './common.js'

/** The line `migrate` prints: what it did, from the migrations it applied and how many there are now. */
export function migrationSummary(applied: readonly string[], total: number): string {
  if (applied.length === 0) {
    return `database schema is already up to date (${counted(total, 'migration')}); nothing to do`
  }
  if (applied.length === total) {
    return `created the database schema: applied ${counted(total, 'migration')}`
  }
  return `applied ${counted(applied.length, 'migration')} (${applied.join(', ')}): the database schema is up to date`
}

export async function migrate(args: string[]): Promise<void> {
  parseArgs({ args, options: {}, strict: true })
  const line = await withDatabase(async (database, migrated) =>
    migrationSummary(migrated.applied, (await schemaStatus(database)).applied),
  )
  process.stderr.write(`${line}\n`)
}
