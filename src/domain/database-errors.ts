// Tells "the database is unreachable or cannot write right now" apart from every other failure.

const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
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

export function isDatabaseUnavailable(err: unknown): boolean {
  const code = codeOf(err)
  if (code) {
    if (NETWORK_CODES.has(code)) return true
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
