// Where the data lives: DATABASE_URL read into a connection target, and the secret file that a
// SQLite installation without SHIPLOG_SECRET keeps beside its database.
import { readFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { ConfigError } from './error.js'

export type DialectName = 'sqlite' | 'postgres'

export interface SqliteTarget {
  readonly dialect: 'sqlite'
  /** File path, or ':memory:' for a private in-memory database (tests). */
  readonly path: string
}

export interface PostgresTarget {
  readonly dialect: 'postgres'
  readonly connectionString: string
}

export type DatabaseTarget = SqliteTarget | PostgresTarget

export const DEFAULT_DATABASE_URL = 'sqlite:./data/shiplog.db'

/** Turns a DATABASE_URL into a connection target; throws ConfigError with a readable reason. */
export function parseDatabaseUrl(url: string): DatabaseTarget {
  if (url.startsWith('postgres://') || url.startsWith('postgresql://')) {
    try {
      new URL(url)
    } catch {
      throw new ConfigError(`DATABASE_URL is not a valid PostgreSQL URL: ${redactUrl(url)}`)
    }
    return { dialect: 'postgres', connectionString: url }
  }
  if (url.startsWith('sqlite:')) {
    // Accept sqlite:./relative, sqlite:/absolute, sqlite:///absolute and sqlite::memory:.
    let path = url.slice('sqlite:'.length)
    if (path.startsWith('//')) path = path.slice(2)
    if (path === '')
      throw new ConfigError('DATABASE_URL "sqlite:" needs a file path, e.g. sqlite:./data/shiplog.db')
    if (path === ':memory:') return { dialect: 'sqlite', path }
    return { dialect: 'sqlite', path: resolve(path) }
  }
  throw new ConfigError(
    `DATABASE_URL must start with sqlite: or postgres:// (got "${redactUrl(url)}"); e.g. ${DEFAULT_DATABASE_URL}`,
  )
}

/** Hides a password in a connection URL so it can be printed. */
export function redactUrl(url: string): string {
  return url.replace(/(\/\/[^:/@]*:)[^@]*@/, '$1***@')
}

/** Where a SQLite installation without SHIPLOG_SECRET keeps its secret: `secret` beside the database. */
export function secretFileBeside(dbPath: string): string {
  return join(dirname(dbPath), 'secret')
}

/**
 * The secret kept in `file`, or null when there is none yet. Never creates it: only the commands
 * that seal or sign may (domain/app-secret.ts), so a read-only command on a backup file leaves no
 * new secret beside it.
 */
export function readSecretFile(file: string): string | null {
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null
    throw new ConfigError(`cannot read the secret ${file}: ${(err as Error).message}`)
  }
  const secret = text.trim()
  if (secret.length < 32) {
    throw new ConfigError(
      `the secret ${file} holds ${secret.length} characters, fewer than 32: put back the file the data was sealed with, or remove it if nothing was`,
    )
  }
  return secret
}
