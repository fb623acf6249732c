// The last pass over the generated OpenAPI document: what @fastify/swagger cannot say from the route
// schemas alone — problem answers as application/problem+json, the response headers the routes
// send (rate limits, Retry-After, Allow, Link, Idempotent-Replayed, WWW-Authenticate), optional
// request bodies — in one place, so each rule holds for every operation it applies to.

type Json = Record<string, unknown>
interface HeaderObject {
  description: string
  required?: boolean
  schema: Json
}
interface ResponseObject {
  description: string
  headers?: Record<string, HeaderObject>
  content?: Record<string, { schema?: Json }>
}
interface Operation {
  operationId?: string
  security?: Record<string, string[]>[]
  requestBody?: { required?: boolean }
  responses: Record<string, ResponseObject>
  [custom: `x-${string}`]: unknown
}

const PROBLEM_REF = '#/components/schemas/Problem'
export const PROBLEM_MEDIA_TYPE = 'application/problem+json'

/**
 * Set on a route schema whose body may be left out (the fields can come from the query string):
 * @fastify/swagger marks every declared body required.
 */
export const BODY_OPTIONAL = 'x-body-optional'

const seconds = (description: string, minimum: number): HeaderObject => ({
  description,
  schema: { type: 'integer', minimum },
})

/** The IETF RateLimit header fields, sent with every answer to a request counted against a key. */
const rateLimitHeaders = (required: boolean): Record<string, HeaderObject> => ({
  'RateLimit-Limit': {
    description: 'Requests the key may make per window (one minute).',
    required,
    schema: { type: 'integer', minimum: 1, examples: [120] },
  },
  'RateLimit-Remaining': {
    description: 'Requests left in the current window.',
    required,
    schema: { type: 'integer', minimum: 0, examples: [119] },
  },
  'RateLimit-Reset': { ...seconds('Seconds until the current window ends.', 1), required },
  'RateLimit-Policy': {
    description: 'The limit and its window in seconds, `<limit>;w=<seconds>`.',
    required,
    schema: { type: 'string', pattern: '^\\d+;w=\\d+$', examples: ['120;w=60'] },
  },
})
const RETRY_AFTER: HeaderObject = { ...seconds('Seconds to wait before retrying.', 0), required: true }
const ALLOW: HeaderObject = {
  description: 'The methods the path answers, OPTIONS included.',
  required: true,
  schema: { type: 'string', examples: ['POST, OPTIONS'] },
}
const WWW_AUTHENTICATE: HeaderObject = {
  description:
    'The authentication scheme (RFC 6750): `Bearer realm="shiplog"`, with `error="invalid_token"` for a bad key.',
  required: true,
  schema: { type: 'string', pattern: '^Bearer realm="shiplog"', examples: ['Bearer realm="shiplog"'] },
}
const LINK_NEXT: HeaderObject = {
  description: 'While more remain: `<URL of the next page>; rel="next"`, with the same filters (RFC 8288).',
  schema: {
    type: 'string',
    pattern: '^<[^>]+>; rel="next"$',
    examples: ['</api/v1/events?limit=50&cursor=ZTE6MTIz>; rel="next"'],
  },
}
const REPLAYED: HeaderObject = {
  description: 'This answer repeats the event stored by an earlier request with the same Idempotency-Key.',
  required: true,
  schema: { type: 'string', enum: ['true'] },
}

/** Operations that are paged: their 200 carries Link while more remain. */
const PAGED = new Set(['listEvents', 'listDeployments'])
/** Operations whose 200 is only ever a replay (a new event is 201). */
const INGEST = new Set(['recordEventLegacyQuery', 'recordEventLegacy', 'recordEvent'])
/**
 * Operations whose 429 can come from something other than the key's budget (the stream's cap on
 * open streams, which a session meets too): RateLimit-* are not always there.
 */
const OTHER_429 = new Set(['streamEvents'])

/**
 * The answer to a method a documented path does not offer (src/http/problem.ts methodNotAllowed),
 * whichever path: shared under components, since it belongs to no operation of the path.
 */
export const METHOD_NOT_ALLOWED = 'MethodNotAllowed'
const methodNotAllowedResponse = (): ResponseObject => ({
  description: 'Wrong method on a known path; the Allow header lists the right ones.',
  headers: { Allow: ALLOW },
  content: { [PROBLEM_MEDIA_TYPE]: { schema: { $ref: PROBLEM_REF } } },
})

const isProblem = (response: ResponseObject): boolean =>
  (response.content?.['application/json']?.schema as Json | undefined)?.$ref === PROBLEM_REF

/** Applies the rules above to every operation of the document, in place, and returns it. */
export function finishDocument<T extends { paths?: object; components?: object }>(doc: T): T {
  const components = (doc.components ?? {}) as { responses?: Record<string, ResponseObject> }
  components.responses = { ...components.responses, [METHOD_NOT_ALLOWED]: methodNotAllowedResponse() }
  doc.components = components
  for (const item of Object.values(doc.paths ?? {}) as (object | undefined)[]) {
    for (const value of Object.values(item ?? {}) as unknown[]) {
      const operation = value as Operation
      if (typeof operation !== 'object' || operation === null || !operation.responses) continue
      const id = operation.operationId ?? ''
      if (operation[BODY_OPTIONAL] === true && operation.requestBody) operation.requestBody.required = false
      delete operation[BODY_OPTIONAL]
      const keyed = (operation.security ?? []).some((s) => 'apiKey' in s)
      for (const [status, response] of Object.entries(operation.responses)) {
        if (status === '405') {
          ;(operation.responses as Record<string, unknown>)[status] = {
            $ref: `#/components/responses/${METHOD_NOT_ALLOWED}`,
          }
          continue
        }
        if (isProblem(response)) {
          // The one problem shape, under the media type it is served with (RFC 9457).
          response.content = { [PROBLEM_MEDIA_TYPE]: { schema: { $ref: PROBLEM_REF } } }
        }
        const headers: Record<string, HeaderObject> = { ...response.headers }
        // A request counted against a key carries its budget, unless the shared counter (Redis) is
        // down: then requests are let through uncounted, without the headers.
        if (keyed && !['401', '403', '405'].includes(status)) Object.assign(headers, rateLimitHeaders(false))
        if (status === '429') {
          Object.assign(headers, rateLimitHeaders(keyed && !OTHER_429.has(id)), {
            'Retry-After': RETRY_AFTER,
          })
        }
        if (status === '503') headers['Retry-After'] = RETRY_AFTER
        if (status === '401' && keyed) headers['WWW-Authenticate'] = WWW_AUTHENTICATE
        if (status === '200' && PAGED.has(id)) headers.Link = LINK_NEXT
        if (status === '200' && INGEST.has(id)) headers['Idempotent-Replayed'] = REPLAYED
        if (Object.keys(headers).length > 0) response.headers = headers
      }
    }
  }
  return doc
}
