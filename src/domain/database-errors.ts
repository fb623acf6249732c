// Tells "the database is unreachable or cannot write right now" apart from every other failure.

const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  // The disk itself, as the event store's own fsync of the SQLite WAL reports it.
  'EIO',
  'ENOSPC',
  'EROFS',
  'EDQUOT',
])

// SQLite result codes (extended ones start with these) that mean storage trouble, not a bad query.
const SQLITE_UNAVAILABLE = [
  'SQLITE_BUSY',
  'SQLITE_LOCKED',
  'SQLITE_READONLY',
  'SQLITE_FULL',
  'SQLITE_IOERR',
  'SQLITE_CANTOPEN',
]

function codeOf(err: unknown): string | undefined {
  if (typeof err === 'object' && err !== null && 'code' in err) {
    const code = (err as { code: unknown }).code
    return typeof code === 'string' ? code : undefined
  }
  return undefined
}

// SQLite result codes that mean the statement itself is wrong (a syntax or FTS5 query error, a type or
// range mismatch, a constraint): the database answered, so these are never an outage.
const SQLITE_STATEMENT_ERRORS = [
  'SQLITE_ERROR',
  'SQLITE_MISMATCH',
  'SQLITE_RANGE',
  'SQLITE_CONSTRAINT',
  'SQLITE_TOOBIG',
]

/**
 * Errors the query itself caused, which no amount of retrying fixes: PostgreSQL SQLSTATE class 22
 * (data exception: a NUL byte, a bad number), 42 (syntax or access rule), 23 (integrity) and 08P01
 * (protocol violation: a NUL byte inside the statement text ends the message early, and the server
 * then drops the connection). Counting them as outages let anyone with a bad query string raise
 * false alarms, hide a real outage (outages are logged once) and get 503s that invite retries.
 */
export function isQueryError(err: unknown): boolean {
  const code = codeOf(err)
  if (code === undefined) return false
  if (/^(22|23|42)[0-9A-Z]{3}$/.test(code) || code === '08P01') return true
  return SQLITE_STATEMENT_ERRORS.some((c) => code === c || code.startsWith(`${c}_`))
}

export function isDatabaseUnavailable(err: unknown): boolean {
  const code = codeOf(err)
  if (isQueryError(err)) return false
  if (code) {
    if (UNAVAILABLE_CODES.has(code)) return true
    if (SQLITE_UNAVAILABLE.some((prefix) => code.startsWith(prefix))) return true
    // PostgreSQL SQLSTATE classes: 08 connection exception, 53 insufficient resources,
    // 57P0x operator intervention (shutdown, cannot connect now), 58 system error.
    if (/^(08|53|58)[0-9A-Z]{3}$/.test(code) || /^57P0[1-4]$/.test(code)) return true
  }
  const message = err instanceof Error ? err.message : ''
  // node-postgres reports lost and unobtainable connections in words, without a code.
  return /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Connection terminated unexpectedly|the database system is (starting up|shutting down)/i.test(
    message,
  )
}

/** The part of a pino (Fastify) logger that an OutageLog writes to. */
export interface OutageLogger {
  error(fields: Record<string, unknown>, message: string): void
  info(fields: Record<string, unknown>, message: string): void
}

/** What an error from an unavailable database means, in words an operator can act on. */
export function describeUnavailable(err: unknown): string {
  const code = codeOf(err) ?? ''
  const message = err instanceof Error ? err.message : String(err)
  const said = code === '' ? message : `${message} (${code})`
  if (code.startsWith('SQLITE_FULL')) return `the disk or the database file is full: ${said}`
  if (code.startsWith('SQLITE_READONLY')) return `the database file is read-only: ${said}`
  if (code.startsWith('SQLITE_IOERR')) {
    return `the disk refused a read or write (a disk fault, or a file system that went read-only): ${said}`
  }
  if (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')) {
    return `the database file is locked by another process: ${said}`
  }
  if (code === 'ENOSPC' || code === 'EDQUOT') return `the disk is full: ${said}`
  if (code === 'EIO' || code === 'EROFS') {
    return `the disk refused a write (a disk fault, or a file system that went read-only): ${said}`
  }
  if (UNAVAILABLE_CODES.has(code) && code !== 'ETIMEDOUT') return `cannot reach the database server: ${said}`
  return said
}

/**
 * Logs each database outage once instead of once per refused request: while the database is away
 * every request fails the same way, and a line with a stack trace for each would bury the one line
 * that says why. The first failure is logged with its cause; later ones are only counted, with a
 * reminder at most every `reminderMs` while they go on. Only some callers see a write succeed (and
 * call recovered()), so a quiet spell of `reminderMs` also ends an outage: the next failure is then
 * logged in full again.
 */
export class OutageLog {
  #startedAt: number | null = null
  #lastFailureAt = 0
  #lastLineAt = 0
  #failures = 0

  constructor(
    private readonly reminderMs = 60_000,
    private readonly now: () => number = Date.now,
  ) {}

  failed(log: OutageLogger, err: unknown): void {
    const now = this.now()
    if (this.#startedAt !== null && now - this.#lastFailureAt >= this.reminderMs) this.#startedAt = null
    this.#lastFailureAt = now
    const code = codeOf(err) ?? null
    if (this.#startedAt === null) {
      this.#startedAt = now
      this.#lastLineAt = now
      this.#failures = 1
      log.error(
        { code },
        `database unavailable: ${describeUnavailable(err)}; requests are answered 503 until it is back ` +
          '(further failures are counted, not logged one by one)',
      )
      return
    }
    this.#failures++
    if (now - this.#lastLineAt >= this.reminderMs) {
      this.#lastLineAt = now
      log.error(
        { code, failures: this.#failures, downForMs: now - this.#startedAt },
        `database still unavailable: ${describeUnavailable(err)}; ${this.#failures} failures so far`,
      )
    }
  }

  /** Called where a database round trip succeeded: ends the outage, if any, with one line. */
  recovered(log: OutageLogger): void {
    if (this.#startedAt === null) return
    log.info(
      { failures: this.#failures, downForMs: this.now() - this.#startedAt },
      'database available again',
    )
    this.#startedAt = null
  }
}

const outageLogs = new WeakMap<object, OutageLog>()

/** The one OutageLog of a database handle, shared by every route and hook that uses it. */
export function outageLogFor(database: object): OutageLog {
  let log = outageLogs.get(database)
  if (!log) {
    log = new OutageLog()
    outageLogs.set(database, log)
  }
  return log
}
