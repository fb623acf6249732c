// RFC 9457 problem details: the one error shape every route answers with.
import { STATUS_CODES } from 'node:http'
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { isDatabaseUnavailable, outageLogFor } from '../domain/database-errors.js'
import type { FieldError } from '../domain/events/event.js'
import { WriterClosedError } from '../domain/events/writer.js'
import { errorPage } from '../views/auth-pages.js'
import { SECURITY_HEADERS } from './security-headers.js'

export const PROBLEM_CONTENT_TYPE = 'application/problem+json; charset=utf-8'

export interface ProblemBody {
  type: string
  title: string
  status: number
  detail: string
  errors?: FieldError[]
  [extension: string]: unknown
}

/** An error that carries the problem to answer with; thrown by routes and hooks. */
export class HttpProblem extends Error {
  override readonly name = 'HttpProblem'
  constructor(
    readonly status: number,
    readonly slug: string,
    readonly title: string,
    readonly detail: string,
    readonly extra: { errors?: FieldError[]; headers?: Record<string, string> } = {},
  ) {
    super(detail)
  }

  toBody(): ProblemBody {
    const body: ProblemBody = {
      type: problemType(this.slug),
      title: this.title,
      status: this.status,
      detail: this.detail,
    }
    if (this.extra.errors) body.errors = this.extra.errors
    return body
  }
}

export function problemType(slug: string): string {
  return `urn:shiplog:problem:${slug}`
}

export const problems = {
  missingHost: () =>
    new HttpProblem(400, 'missing-host', 'Bad Request', 'An HTTP/1.1 request must carry a Host header.'),
  missingKey: () =>
    new HttpProblem(
      401,
      'missing-api-key',
      'API key required',
      'Send your API key in the X-API-Key header (or Authorization: Bearer <key>).',
      { headers: { 'www-authenticate': 'Bearer realm="shiplog"' } },
    ),
  // One answer for malformed, unknown and revoked keys, so a caller learns nothing about which.
  invalidKey: () =>
    new HttpProblem(401, 'invalid-api-key', 'Invalid API key', 'The API key is not valid.', {
      headers: { 'www-authenticate': 'Bearer realm="shiplog", error="invalid_token"' },
    }),
  badBody: (detail: string) => new HttpProblem(400, 'malformed-request', 'Malformed request', detail),
  invalidFields: (errors: FieldError[]) =>
    new HttpProblem(
      422,
      'invalid-fields',
      'Invalid event',
      errors.length === 1
        ? (errors[0]?.message ?? 'One field is invalid.')
        : `${errors.length} fields are invalid.`,
      { errors },
    ),
  unavailable: () =>
    new HttpProblem(
      503,
      'database-unavailable',
      'Service unavailable',
      'The database is unavailable; nothing was recorded. Retry shortly.',
      { headers: { 'retry-after': '5' } },
    ),
}

export function sendProblem(reply: FastifyReply, problem: HttpProblem): FastifyReply {
  for (const [name, value] of Object.entries(problem.extra.headers ?? {})) reply.header(name, value)
  return reply.code(problem.status).type(PROBLEM_CONTENT_TYPE).send(problem.toBody())
}

function generic(status: number, slug: string, detail: string): HttpProblem {
  return new HttpProblem(status, slug, STATUS_CODES[status] ?? 'Error', detail)
}

/** Maps anything thrown during a request to a problem; 5xx never reveal internals. */
export function toProblem(err: FastifyError | Error, request: FastifyRequest): HttpProblem {
  if (err instanceof HttpProblem) return err
  if (err instanceof WriterClosedError) {
    return new HttpProblem(
      503,
      'shutting-down',
      'Service unavailable',
      'The server is restarting; retry shortly.',
      {
        headers: { 'retry-after': '1' },
      },
    )
  }
  if (isDatabaseUnavailable(err)) {
    // Once per outage, not once per refused request (see OutageLog).
    outageLogFor(request.server.hasDecorator('database') ? request.server.database : request.server).failed(
      request.log,
      err,
    )
    return problems.unavailable()
  }
  const fastifyError = err as FastifyError
  const status = fastifyError.statusCode
  if (fastifyError.validation) {
    const errors = fastifyError.validation.map((v) => ({
      field: v.instancePath.replace(/^\//, '') || String(v.params?.missingProperty ?? v.schemaPath),
      message: v.message ?? 'is invalid',
    }))
    return new HttpProblem(400, 'invalid-request', 'Invalid request', err.message, { errors })
  }
  switch (fastifyError.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return generic(413, 'body-too-large', 'The request body is larger than the limit of 16 KiB.')
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return generic(415, 'unsupported-media-type', 'This content type is not accepted here.')
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return problems.badBody(err.message)
  }
  if (status !== undefined && status >= 400 && status < 500) {
    return generic(status, 'client-error', err.message)
  }
  request.log.error({ err }, 'request failed')
  return generic(500, 'internal-error', 'Something went wrong on our side; it has been logged.')
}

export function registerProblemHandlers(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError, request, reply) => {
    const problem = toProblem(err, request)
    if (err instanceof HttpProblem === false && problem.status < 500) {
      request.log.info({ code: (err as FastifyError).code, status: problem.status }, err.message)
    }
    return sendProblem(reply, problem)
  })
  app.setNotFoundHandler((request, reply) => {
    // A person who mistyped an address gets a page; programs get problem+json.
    if (request.method === 'GET' && /\btext\/html\b/.test(request.headers.accept ?? '')) {
      return reply
        .code(404)
        .type('text/html; charset=utf-8')
        .send(
          errorPage({
            status: 404,
            title: 'Page not found',
            detail: 'There is nothing at this address.',
          }).toString(),
        )
    }
    return sendProblem(
      reply,
      generic(404, 'not-found', `Nothing is served at ${request.method} ${request.url.split('?')[0]}.`),
    )
  })
}

/**
 * Answers the errors Fastify raises before routing (a URL that does not decode, `GET /%ff`; a path
 * parameter over the length limit): problem+json with the security headers, like every other
 * answer. Fastify's default echoed the URL back in plain JSON; the URL is not repeated here, since
 * it may carry anything, a key included.
 */
export function answerFrameworkError(err: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  reply.headers(SECURITY_HEADERS)
  let problem: HttpProblem
  if (err.code === 'FST_ERR_BAD_URL') {
    problem = generic(400, 'malformed-url', 'The request URL is not valid percent-encoded UTF-8.')
  } else if (err.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    problem = generic(414, 'uri-too-long', 'A part of the request URL is longer than allowed.')
  } else {
    request.log.error({ err }, 'request failed before routing')
    problem = generic(500, 'internal-error', 'Something went wrong on our side; it has been logged.')
  }
  request.log.info({ code: err.code, status: problem.status }, 'request refused before routing')
  sendProblem(reply, problem)
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Set on the routes that only answer 405, so hooks such as CSRF checks can skip them. */
    methodNotAllowed?: boolean
  }
}

const ALL_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const
type Method = (typeof ALL_METHODS)[number]

/**
 * Answers the methods a path does not support: 405 with Allow, and OPTIONS with 204 and Allow.
 * Registered outside any authentication so the answer does not depend on a key.
 */
export function methodNotAllowed(app: FastifyInstance, url: string, allowed: readonly Method[]): void {
  const allow = [...allowed, 'OPTIONS'].join(', ')
  const others = ALL_METHODS.filter((m) => !allowed.includes(m))
  const answer = async (request: FastifyRequest, reply: FastifyReply) => {
    reply.header('allow', allow)
    if (request.method === 'OPTIONS') return reply.code(204).send()
    return sendProblem(
      reply,
      generic(
        405,
        'method-not-allowed',
        `${request.method} is not allowed on ${url}; use ${allowed.join(' or ')}.`,
      ),
    )
  }
  app.route({
    method: others,
    url,
    config: { methodNotAllowed: true },
    exposeHeadRoute: false,
    // Answered before Fastify reads the body: otherwise a PUT or DELETE with a broken, oversized or
    // oddly labelled body got 400, 413 or 415 from the body parsers instead of 405 with Allow.
    onRequest: answer,
    handler: answer,
  })
}

/**
 * Answers a request Node's HTTP parser refused (broken framing, bad header bytes, headers too
 * large, a client too slow) in the same problem+json shape as every other error, then closes the
 * connection: after a framing error nothing more on it can be trusted. Replaces Fastify's default,
 * which answered these with its own JSON shape.
 */
export function answerClientError(
  this: FastifyInstance,
  err: Error & { code?: string },
  socket: import('node:net').Socket,
): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return
  let problem: HttpProblem
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    problem = generic(
      408,
      'request-timeout',
      'The request was not received in time; the connection is closed.',
    )
  } else if (err.code === 'HPE_HEADER_OVERFLOW') {
    problem = generic(431, 'headers-too-large', 'The request headers are larger than the 16 KiB allowed.')
  } else {
    problem = generic(400, 'malformed-request', 'The request is not well-formed HTTP/1.1 and cannot be read.')
  }
  this.log.debug({ code: err.code }, `client error answered ${problem.status}`)
  if (!socket.writable) {
    socket.destroy()
    return
  }
  const body = JSON.stringify(problem.toBody())
  socket.end(
    `HTTP/1.1 ${problem.status} ${STATUS_CODES[problem.status]}\r\n` +
      `Content-Type: ${PROBLEM_CONTENT_TYPE}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
      `Connection: close\r\n\r\n${body}`,
  )
  // end() lets the answer reach the client; a client that then keeps its side open is cut off.
  setTimeout(() => socket.destroy(), 1000).unref()
}
