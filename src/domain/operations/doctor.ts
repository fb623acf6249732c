// `shiplog doctor`: checks an installation from the outside (configuration, database, schema,
// disk, PostgreSQL, Redis, clock), one line per check, never printing a secret.
import { existsSync, statfsSync, statSync } from 'node:fs'
import { dirname } from 'node:path'
import { sql } from 'kysely'
import { type Config, configurationWarnings, loadConfig, redactUrl } from '../../config.js'
import { type Database, openDatabase } from '../../db/connect.js'
import { schemaStatus } from '../../db/migrate.js'
import { secretStatus } from '../app-secret.js'

export type CheckStatus = 'ok' | 'warn' | 'FAIL'

export interface CheckLine {
  status: CheckStatus
  name: string
  detail: string
}

/** No check may hang: a dead database or Redis gives a FAIL within this. */
export const CHECK_TIMEOUT_MS = 4000
const GIB = 1024 ** 3
const LOW_DISK_BYTES = GIB
const LOW_DISK_FRACTION = 0.05
const LARGE_WAL_BYTES = 512 * 1024 ** 2
const SKEW_WARN_MS = 1000
const SKEW_FAIL_MS = 30_000
const MIN_POSTGRES = 130000

export function formatCheck(line: CheckLine): string {
  return `${line.status.padEnd(4)} ${line.name.padEnd(13)} ${line.detail}`
}

function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not answer within ${ms / 1000} s`)), ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

function bytes(n: number): string {
  if (n >= GIB) return `${(n / GIB).toFixed(1)} GiB`
  if (n >= 1024 ** 2) return `${(n / 1024 ** 2).toFixed(1)} MiB`
  return `${Math.round(n / 1024)} KiB`
}

/** The message of an error with any connection URL in it redacted. */
function reason(err: unknown): string {
  const message = err instanceof Error ? err.message || err.name : String(err)
  return message.replace(/\b(postgres(?:ql)?|rediss?):\/\/\S+/g, (url) => redactUrl(url)).split('\n')[0] ?? ''
}

/** Runs every check; `emit` gets each line as soon as it is known. */
export async function runDoctor(
  env: NodeJS.ProcessEnv,
  emit: (line: CheckLine) => void,
): Promise<CheckLine[]> {
  const lines: CheckLine[] = []
  const add = (status: CheckStatus, name: string, detail: string) => {
    const line = { status, name, detail }
    lines.push(line)
    emit(line)
  }

  let config: Config
  try {
    config = loadConfig(env)
  } catch (err) {
    add('FAIL', 'configuration', reason(err))
    return lines
  }
  const where =
    config.database.dialect === 'sqlite'
      ? `sqlite:${config.database.path}`
      : redactUrl(config.database.connectionString)
  add('ok', 'configuration', `loads (database ${where})`)
  for (const warning of configurationWarnings(config)) add('warn', 'configuration', warning)

  await checkDatabase(config, where, add)
  if (config.redisUrl) await checkRedis(config.redisUrl, add)
  return lines
}

type Add = (status: CheckStatus, name: string, detail: string) => void

async function checkDatabase(config: Config, where: string, add: Add): Promise<void> {
  const target = config.database
  if (target.dialect === 'sqlite' && target.path !== ':memory:' && !existsSync(target.path)) {
    add('FAIL', 'database', `no database file at ${target.path} → run shiplog migrate (or start the server)`)
    return
  }
  let database: Database | null = null
  try {
    database = openDatabase(target, { poolSize: 1 })
    const opened = database
    const started = performance.now()
    try {
      await within(sql`select 1`.execute(opened.db), CHECK_TIMEOUT_MS, 'the database')
    } catch (err) {
      add('FAIL', 'database', `${where} unreachable: ${reason(err)}`)
      return
    }
    add('ok', 'database', `${where} reachable (${Math.round(performance.now() - started)} ms)`)

    let migrated = false
    try {
      const status = await within(schemaStatus(opened), CHECK_TIMEOUT_MS, 'the database')
      migrated = status.pending.length === 0 && status.unknown.length === 0
      if (status.unknown.length > 0) {
        add(
          'FAIL',
          'schema',
          `newer than this release (${status.unknown.join(', ')} unknown here) → run the newer release, or restore the backup taken before upgrading`,
        )
      } else if (status.pending.length > 0) {
        const n = status.pending.length
        add(
          'FAIL',
          'schema',
          `${n} migration${n === 1 ? '' : 's'} pending: ${status.pending.join(', ')} → run shiplog migrate`,
        )
      } else {
        add('ok', 'schema', `current (${status.applied} migrations applied)`)
      }
    } catch (err) {
      add('FAIL', 'schema', `cannot read the migrations: ${reason(err)}`)
    }

    if (migrated) await checkSecret(config, opened, add)
    if (opened.dialect === 'sqlite') checkSqliteFiles(opened.sqlitePath, add)
    else await checkPostgres(opened, add)
    await checkClock(opened, add)
  } finally {
    // A pool still trying to connect must not hold the process open.
    if (database) await within(database.close(), 1000, 'closing').catch(() => {})
  }
}

/** Where the secret is kept and whether it opens what the database holds; never creates it. */
async function checkSecret(config: Config, database: Database, add: Add): Promise<void> {
  try {
    const status = await within(secretStatus(config, database.db), CHECK_TIMEOUT_MS, 'the database')
    if (status.problem !== null) {
      add('FAIL', 'secret', `${status.problem} (the server refuses to start)`)
      return
    }
    const fits = status.sealed ? '; it opens what the database holds' : ''
    const file = config.secretFile
    if (file !== null) {
      if (status.secret === null) {
        add('ok', 'secret', `none yet: the server creates ${file} (mode 0600) on first start`)
        return
      }
      const mode = statSync(file).mode & 0o777
      if ((mode & 0o077) !== 0) {
        add('warn', 'secret', `${file} can be read by others (mode ${mode.toString(8)}) → chmod 600 ${file}`)
        return
      }
      add('ok', 'secret', `kept in ${file} (mode 600)${fits}; keep a copy of it with your backups`)
    } else if (config.database.dialect === 'postgres' && config.secret === null) {
      add(
        'ok',
        'secret',
        status.secret === null
          ? 'none yet: the server creates one in the database (settings row session_secret) on first start'
          : `kept in the database (settings row session_secret)${fits}; dumps leave it out, keep a copy apart`,
      )
    } else add('ok', 'secret', `SHIPLOG_SECRET is set${fits}`)
  } catch (err) {
    add('FAIL', 'secret', `cannot check the secret: ${reason(err)}`)
  }
}

function checkSqliteFiles(path: string, add: Add): void {
  if (path === ':memory:') return
  try {
    const fs = statfsSync(dirname(path))
    const free = fs.bavail * fs.bsize
    const total = fs.blocks * fs.bsize
    const share = total > 0 ? free / total : 0
    const detail = `${bytes(free)} free of ${bytes(total)} (${(share * 100).toFixed(0)} %) where ${path} lives`
    if (free < LOW_DISK_BYTES || share < LOW_DISK_FRACTION)
      add('warn', 'disk', `${detail}; under ${bytes(LOW_DISK_BYTES)} or ${LOW_DISK_FRACTION * 100} % free`)
    else add('ok', 'disk', detail)
  } catch (err) {
    add('FAIL', 'disk', `cannot read free space: ${reason(err)}`)
  }
  const wal = `${path}-wal`
  const size = existsSync(wal) ? statSync(wal).size : 0
  if (size > LARGE_WAL_BYTES)
    add(
      'warn',
      'wal',
      `${bytes(size)}: a long-running reader may be holding checkpoints back (it shrinks once readers finish)`,
    )
  else add('ok', 'wal', `${bytes(size)}`)
}

async function checkPostgres(database: Extract<Database, { dialect: 'postgres' }>, add: Add): Promise<void> {
  try {
    const { rows } = await within(
      sql<{
        num: string
        version: string
        trgm: string | null
      }>`select current_setting('server_version_num') as num,
        current_setting('server_version') as version,
        (select extversion from pg_extension where extname = 'pg_trgm') as trgm`.execute(database.db),
      CHECK_TIMEOUT_MS,
      'the database',
    )
    const row = rows[0]
    const num = Number(row?.num ?? 0)
    if (num < MIN_POSTGRES)
      add('FAIL', 'postgresql', `server ${row?.version} is older than 13, the oldest supported`)
    else add('ok', 'postgresql', `server ${row?.version}`)
    if (row?.trgm) add('ok', 'pg_trgm', `installed (${row.trgm}): version search uses its index`)
    else
      add(
        'warn',
        'pg_trgm',
        'not installed: version search scans the events; CREATE EXTENSION pg_trgm and the index in README "Operations" add it',
      )
  } catch (err) {
    add('FAIL', 'postgresql', `cannot read the server version: ${reason(err)}`)
  }
}

async function checkClock(database: Database, add: Add): Promise<void> {
  if (database.dialect === 'sqlite') {
    add('ok', 'clock', `${new Date().toISOString()} (SQLite uses this machine's clock)`)
    return
  }
  try {
    const before = Date.now()
    const { rows } = await within(
      sql<{ ms: string }>`select floor(extract(epoch from clock_timestamp()) * 1000)::bigint as ms`.execute(
        database.db,
      ),
      CHECK_TIMEOUT_MS,
      'the database',
    )
    const after = Date.now()
    const skew = Number(rows[0]?.ms) - (before + after) / 2
    const detail = `database clock ${skew >= 0 ? 'ahead' : 'behind'} by ${Math.abs(Math.round(skew))} ms (±${Math.ceil((after - before) / 2)} ms)`
    if (Math.abs(skew) > SKEW_FAIL_MS)
      add('FAIL', 'clock', `${detail}: over 30 s; fix NTP on one of the machines`)
    else if (Math.abs(skew) > SKEW_WARN_MS) add('warn', 'clock', `${detail}: over 1 s`)
    else add('ok', 'clock', detail)
  } catch (err) {
    add('FAIL', 'clock', `cannot read the database clock: ${reason(err)}`)
  }
}

async function checkRedis(url: string, add: Add): Promise<void> {
  const { Redis } = await import('ioredis')
  const client = new Redis(url, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    connectTimeout: CHECK_TIMEOUT_MS,
    retryStrategy: () => null,
  })
  // Connection errors come back from connect(); without a listener ioredis would print them too.
  let lastError: Error | null = null
  client.on('error', (err: Error) => {
    lastError = err
  })
  const started = performance.now()
  try {
    await within(client.connect(), CHECK_TIMEOUT_MS, 'Redis').catch((err: unknown) => {
      throw lastError ?? err
    })
    const pong = await within(client.ping(), CHECK_TIMEOUT_MS, 'Redis')
    add('ok', 'redis', `${redactUrl(url)} reachable (${pong}, ${Math.round(performance.now() - started)} ms)`)
  } catch (err) {
    add('FAIL', 'redis', `${redactUrl(url)} unreachable: ${reason(err)}`)
  } finally {
    client.disconnect()
  }
}
