// The server's log configuration: JSON lines from pino with API keys, cookies and passwords kept out.
import { type FastifyReply, type FastifyRequest, LogController } from 'fastify'
import type { LogLevel } from '../config.js'

const CENSOR = '[redacted]'

/**
 * Paths pino blanks before a line is written. Fastify's request serializer logs no headers, but a
 * route or plugin that logs them must still not leak credentials. `err.rawPacket` is the raw bytes
 * Node's HTTP parser attaches to a malformed request, headers and all; Fastify logs that error (at
 * trace), so without this an X-API-Key would reach the log as a byte array.
 */
export const REDACTED_PATHS = [
  'req.headers["x-api-key"]',
  'req.headers.authorization',
  'req.headers.cookie',
  'res.headers["set-cookie"]',
  'err.rawPacket',
]

// The key format (src/domain/keys.ts) with any length, so a truncated or mistyped key is hidden too.
// Case-insensitive: the part after the prefix is the secret, however the prefix is spelled.
const KEY_LIKE = /shl_[0-9A-Za-z]+/gi
const KEY_START = /shl_[0-9A-Za-z]/i
// Query parameters whose value is likely a credential. No form accepts a key in the URL, but a
// pipeline that puts one there anyway (`?key=…`, `?token=…`) must not have it written to the log.
// `code` and `state` are a sign-in callback's single-use OpenID Connect values.
const SENSITIVE_PARAMETER = /key|token|secret|passw|auth|session|csrf|cookie|^code$|^state$/i

/**
 * Percent-escapes turned into the bytes they stand for, one by one (as Latin-1 characters). Unlike
 * decodeURIComponent this never throws, so a broken escape elsewhere cannot hide a key written
 * `shl%5F…` or `%73hl_…`; the key alphabet is ASCII, so nothing is lost for finding keys.
 */
function percentDecoded(text: string): string {
  let decoded = text
  // A few rounds, so a key escaped twice (`shl%255F…`) is found too.
  for (let round = 0; round < 3 && decoded.includes('%'); round++) {
    decoded = decoded.replace(/%([0-9A-Fa-f]{2})/g, (_, hex: string) =>
      String.fromCharCode(Number.parseInt(hex, 16)),
    )
  }
  return decoded
}

/** A piece of the URL (path segment, parameter name or value) with any key in it blanked. */
function redactPiece(piece: string): string {
  if (!piece.includes('%')) return piece.replace(KEY_LIKE, `shl_${CENSOR}`)
  // Written with escapes, the key only shows once decoded: then the whole piece goes.
  return KEY_START.test(percentDecoded(piece)) ? `shl_${CENSOR}` : piece
}

/** The request URL as it may be logged: key-shaped strings and credential-like parameters blanked. */
export function redactRequestUrl(url: string): string {
  const q = url.indexOf('?')
  const path = (q === -1 ? url : url.slice(0, q)).split('/').map(redactPiece).join('/')
  if (q === -1) return path
  const pairs = url
    .slice(q + 1)
    .split('&')
    .map((pair) => {
      const eq = pair.indexOf('=')
      const rawName = eq === -1 ? pair : pair.slice(0, eq)
      const name = percentDecoded(rawName.replaceAll('+', ' '))
      if (eq !== -1 && SENSITIVE_PARAMETER.test(name)) return `${redactPiece(rawName)}=${CENSOR}`
      return eq === -1 ? redactPiece(pair) : `${redactPiece(rawName)}=${redactPiece(pair.slice(eq + 1))}`
    })
  return `${path}?${pairs.join('&')}`
}

/**
 * What is logged about each request: Fastify's default fields, with the URL redacted and without
 * the Host header, which the client writes as it likes (a key sent there would be logged as is).
 */
function serializeRequest(request: FastifyRequest): Record<string, unknown> {
  return {
    method: request.method,
    url: redactRequestUrl(request.url),
    remoteAddress: request.ip,
    remotePort: request.socket?.remotePort,
  }
}

/** Options for Fastify's pino logger, as the server runs it. */
export function loggerOptions(level: LogLevel): Record<string, unknown> {
  return {
    level,
    redact: { paths: REDACTED_PATHS, censor: CENSOR },
    serializers: { req: serializeRequest },
  }
}

/** What a load balancer or orchestrator polls every few seconds: not worth a line each at info. */
const PROBES = new Set(['/healthz', '/readyz'])

function isProbe(url: string): boolean {
  const q = url.indexOf('?')
  return PROBES.has(q === -1 ? url : url.slice(0, q))
}

/**
 * One line per request where Fastify writes two ("incoming request", then "request completed"): the
 * completed line carries the request (method, redacted URL, client), the status and the time. The
 * health probes are logged at debug only, and a 404 is not announced again before its line.
 */
export class RequestLog extends LogController {
  override incomingRequest(): void {}

  override routeNotFound(): void {}

  override requestCompleted(
    error: Error | null | undefined,
    request: FastifyRequest,
    reply: FastifyReply,
  ): void {
    if (this.isLogDisabled(request)) return
    const fields = { req: request, res: reply, responseTime: reply.elapsedTime }
    if (error) reply.log.error({ ...fields, err: error }, 'request errored')
    else if (isProbe(request.url)) reply.log.debug(fields, 'request completed')
    else reply.log.info(fields, 'request completed')
  }
}
