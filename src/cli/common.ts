// What every `shiplog` command module shares: the one-line failure, how a failure becomes stderr
// and an exit code, and opening the configured database migrated to the latest schema.
import { ConfigError, loadConfig, redactUrl } from '../config.js'
import { type Database, openDatabase } from '../db/connect.js'
import { type MigrationOutcome, migrateToLatest } from '../db/migrate.js'
import { isDatabaseUnavailable } from '../domain/database-errors.js'

/** A failure to report in one line on stderr; exit code 1 unless said otherwise (2: usage). */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message)
  }
}

/** Writes a command's failure to stderr in one line and gives the exit code. */
export function reportFailure(err: unknown): number {
  if (err instanceof CliError) {
    process.stderr.write(`shiplog: ${err.message}\n`)
    return err.exitCode
  }
  if (err instanceof ConfigError) {
    process.stderr.write(`shiplog: invalid configuration: ${err.message}\n`)
    return 1
  }
  if (err instanceof TypeError && (err as NodeJS.ErrnoException).code?.startsWith('ERR_PARSE_ARGS')) {
    process.stderr.write(`shiplog: ${err.message} (see shiplog --help)\n`)
    return 2
  }
  process.stderr.write(`shiplog: ${err instanceof Error ? err.message : String(err)}\n`)
  return 1
}

/** Runs `fn` with the configured database, migrated first; an unreachable database is one line. */
export async function withDatabase<T>(
  fn: (database: Database, migrated: MigrationOutcome) => Promise<T>,
): Promise<T> {
  const config = loadConfig()
  const database = openDatabase(config.database)
  try {
    const migrated = await migrateToLatest(database)
    return await fn(database, migrated)
  } catch (err) {
    if (isDatabaseUnavailable(err)) {
      const where =
        config.database.dialect === 'sqlite'
          ? config.database.path
          : redactUrl(config.database.connectionString)
      throw new CliError(`database unavailable (${where}): ${(err as Error).message}`)
    }
    throw err
  } finally {
    await database.close()
  }
}
