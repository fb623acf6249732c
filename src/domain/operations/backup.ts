// Online backup of a SQLite database: a consistent snapshot (VACUUM INTO) written beside the
// target under a temporary name, checked, flushed to disk and renamed into place.
import { randomBytes } from 'node:crypto'
import {
  chmodSync,
  closeSync,
  constants,
  existsSync,
  fsyncSync,
  openSync,
  renameSync,
  rmSync,
  statSync,
} from 'node:fs'
import { access } from 'node:fs/promises'
import { basename, dirname, join, resolve } from 'node:path'
import { redactUrl } from '../../config.js'
import { settleCopy, vacuumInto } from '../../db/sqlite/backup.js'

/** A backup refused or failed: the message is one line for the operator. */
export class BackupError extends Error {
  override readonly name = 'BackupError'
}

export interface BackupResult {
  path: string
  bytes: number
  events: number
  ms: number
}

function explain(err: unknown, what: string): BackupError {
  const e = err as NodeJS.ErrnoException & { code?: string }
  if (e.code === 'SQLITE_FULL' || e.code === 'ENOSPC' || /disk is full|ENOSPC/.test(e.message ?? ''))
    return new BackupError(`${what}: the disk is full (no space left); nothing was written`)
  if (e.code === 'SQLITE_CANTOPEN' || e.code === 'EACCES' || e.code === 'EPERM' || e.code === 'EROFS')
    return new BackupError(`${what}: cannot write there (${e.code}); nothing was written`)
  return new BackupError(`${what}: ${e.message ?? String(err)}`)
}

/**
 * Copies the SQLite database at `source` to `target` while other processes keep reading and
 * writing it. VACUUM INTO reads one snapshot in one read transaction (WAL lets writers go on), so
 * the copy holds every transaction committed before it began and none half-written; it never
 * restarts under load the way the page-by-page backup API does when the source changes.
 */
export async function backupSqlite(
  source: string,
  target: string,
  options: { force?: boolean } = {},
): Promise<BackupResult> {
  const started = performance.now()
  const out = resolve(target)
  const dir = dirname(out)
  if (!existsSync(source)) throw new BackupError(`no database at ${source} (check DATABASE_URL)`)
  if (resolve(source) === out) throw new BackupError('--out must not be the database itself')
  if (existsSync(out) && !options.force)
    throw new BackupError(`${out} already exists (choose another name, or --force to replace it)`)
  if (existsSync(out) && statSync(out).isDirectory()) throw new BackupError(`${out} is a directory`)
  let dirStat: ReturnType<typeof statSync>
  try {
    dirStat = statSync(dir)
  } catch {
    throw new BackupError(`directory ${dir} does not exist`)
  }
  if (!dirStat.isDirectory()) throw new BackupError(`${dir} is not a directory`)
  try {
    await access(dir, constants.W_OK)
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    throw new BackupError(
      `cannot write to directory ${dir} (${code === 'EROFS' ? 'read-only file system' : 'permission denied'})`,
    )
  }

  // Same directory, so the rename is atomic and never crosses file systems.
  const temporary = join(dir, `.${basename(out)}.partial-${process.pid}-${randomBytes(4).toString('hex')}`)
  const removeTemporary = () => {
    for (const suffix of ['', '-journal', '-wal', '-shm']) rmSync(`${temporary}${suffix}`, { force: true })
  }
  let events = 0
  try {
    try {
      await vacuumInto(source, temporary)
    } catch (err) {
      throw explain(err, 'backup failed')
    }
    const check = settleCopy(temporary)
    if (check.quickCheck.length !== 1 || check.quickCheck[0] !== 'ok') {
      throw new BackupError(`backup failed its integrity check: ${check.quickCheck.join('; ')}`)
    }
    events = check.events
    try {
      // Owner-only from its creation (vacuumInto); 0600 exactly here, whatever the umask took away.
      chmodSync(temporary, 0o600)
      const fd = openSync(temporary, 'r+')
      try {
        fsyncSync(fd)
      } finally {
        closeSync(fd)
      }
      renameSync(temporary, out)
      // The rename itself is durable once the directory is flushed.
      const dirFd = openSync(dir, 'r')
      try {
        fsyncSync(dirFd)
      } finally {
        closeSync(dirFd)
      }
    } catch (err) {
      throw explain(err, 'backup failed')
    }
  } catch (err) {
    removeTemporary()
    throw err instanceof BackupError ? err : explain(err, 'backup failed')
  }
  return { path: out, bytes: statSync(out).size, events, ms: Math.round(performance.now() - started) }
}

/** What to run instead on PostgreSQL: pg_dump with the connection's own parameters, password hidden. */
export function pgDumpAdvice(connectionString: string, out: string): string {
  const url = new URL(connectionString)
  const args = ['pg_dump', '--format=custom', `--file=${shellQuote(out)}`]
  if (url.hostname) args.push(`--host=${shellQuote(decodeURIComponent(url.hostname))}`)
  if (url.port) args.push(`--port=${url.port}`)
  if (url.username) args.push(`--username=${shellQuote(decodeURIComponent(url.username))}`)
  // A search_path in the URL (options=-c search_path=x) names the schema Shiplog lives in.
  const schema = /search_path=([^\s&]+)/.exec(url.searchParams.get('options') ?? '')?.[1]
  if (schema) args.push(`--schema=${shellQuote(schema)}`)
  const database = decodeURIComponent(url.pathname.replace(/^\//, ''))
  if (database) args.push(shellQuote(database))
  const password = url.password ? ' (with PGPASSWORD=*** set, or a ~/.pgpass entry)' : ''
  return [
    `the database is PostgreSQL (${redactUrl(connectionString)}): back it up with PostgreSQL's own tool${password}:`,
    `  ${args.join(' ')}`,
    `restore with: pg_restore --clean --if-exists --dbname=… ${shellQuote(out)}`,
    'or take a database-independent dump with: shiplog dump --out FILE.ndjson.gz',
  ].join('\n')
}

function shellQuote(value: string): string {
  return /^[\w@%+=:,./-]+$/.test(value) ? value : `'${value.replace(/'/g, `'\\''`)}'`
}
