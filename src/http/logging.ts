// The server's log configuration: JSON lines from pino with API keys, cookies and passwords kept out.
import type { FastifyRequest } from 'fastify'
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
const KEY_LIKE = /shl_[0-9A-Za-z]+/g
// Query parameters whose value is likely a credential. No form accepts a key in the URL, but a
// pipeline that puts one there anyway (`?key=…`, `?token=…`) must not have it written to the log.
const SENSITIVE_PARAMETER = /key|token|secret|passw|auth|session|csrf|cookie/i

/** The request URL as it may be logged: key-shaped strings and credential-like parameters blanked. */
export function redactRequestUrl(url: string): string {
  const masked = url.replace(KEY_LIKE, `shl_${CENSOR}`)
  const q = masked.indexOf('?')
  if (q === -1) return masked
  const pairs = masked
    .slice(q + 1)
    .split('&')
    .map((pair) => {
      const eq = pair.indexOf('=')
      const rawName = eq === -1 ? pair : pair.slice(0, eq)
      let name = rawName
      try {
        name = decodeURIComponent(rawName.replaceAll('+', ' '))
      } catch {
        // A broken escape: judge the name as written.
      }
      return eq !== -1 && SENSITIVE_PARAMETER.test(name) ? `${rawName}=${CENSOR}` : pair
    })
  return `${masked.slice(0, q)}?${pairs.join('&')}`
}

/** What is logged about each request: Fastify's default fields, with the URL redacted. */
function serializeRequest(request: FastifyRequest): Record<string, unknown> {
  return {
    method: request.method,
    url: redactRequestUrl(request.url),
    host: request.host,
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
