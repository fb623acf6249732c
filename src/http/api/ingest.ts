// The three ways to record an event: GET /put, POST /put (legacy) and POST /deploy (newer).
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify'
import { Type } from 'typebox'
import type { EventSource } from '../../db/schema.js'
import { isDatabaseUnavailable, type OutageLog } from '../../domain/database-errors.js'
import {
  ApiEventSchema,
  DEPLOY_NAMES,
  type FieldError,
  type FieldNames,
  LEGACY_NAMES,
  toApiEvent,
  validateEventFields,
} from '../../domain/events/event.js'
import { boundsOfDays, DEFAULT_MAX_EVENT_AGE_DAYS } from '../../domain/events/event-time.js'
import { IDEMPOTENCY_WINDOW_MS } from '../../domain/events/store.js'
import type { EventWriter } from '../../domain/events/writer.js'
import type { GuardrailCache } from '../../domain/guardrails/check.js'
import type { ApiKeyVerifier, KeyUsageRecorder, VerifiedKey } from '../../domain/keys.js'
import type { GuardrailRule } from '../../text-rules.js'
import { HttpProblem, methodNotAllowed, problems } from '../problem.js'
import { checkRateLimit, type RateLimitStore } from '../rate-limit.js'
import { insufficientScope } from './scopes.js'

export const INGEST_BODY_LIMIT = 16 * 1024
/** The ingest routes' paths: answers there are JSON for machines (see API_SECURITY_HEADERS). */
export const INGEST_PATHS: ReadonlySet<string> = new Set(['/put', '/deploy'])
const IDEMPOTENCY_KEY_MAX = 200
const IDEMPOTENCY_WINDOW_HOURS = IDEMPOTENCY_WINDOW_MS / 3_600_000

declare module 'fastify' {
  interface FastifyRequest {
    apiKey: VerifiedKey | null
    /** The Content-Type the client sent (Fastify is shown a neutral one; see readBodyOfAnyType). */
    declaredContentType: string | undefined
  }
}

export interface IngestOptions {
  writer: EventWriter
  /** Which guardrails an arriving event breaks (SPEC §11): it is stored all the same, with that list. */
  guardrails: GuardrailCache
  /** Told when a write succeeds, so the end of a database outage is logged as soon as it ends. */
  outages: OutageLog
  verifier: ApiKeyVerifier
  usage: KeyUsageRecorder
  rateLimitPerMinute: number
  rateLimitStore: RateLimitStore
  /** How far into the past occurred_at and commit_time may lie (SHIPLOG_MAX_EVENT_AGE_DAYS). */
  maxEventAgeDays?: number
}

/** The stored event, as every form answers it. */
const EventResponse = ApiEventSchema

const ProblemResponse = Type.Object(
  {
    type: Type.String(),
    title: Type.String(),
    status: Type.Integer(),
    detail: Type.String(),
    errors: Type.Optional(Type.Array(Type.Object({ field: Type.String(), message: Type.String() }))),
  },
  { additionalProperties: true },
)

const responses = {
  200: EventResponse,
  201: EventResponse,
  '4xx': ProblemResponse,
  '5xx': ProblemResponse,
}

/** Reads the key from X-API-Key (any case) or Authorization: Bearer. */
export function presentedKey(request: FastifyRequest): string | undefined {
  const header = request.headers['x-api-key']
  if (typeof header === 'string' && header.trim() !== '') return header.trim()
  const authorization = request.headers.authorization
  if (typeof authorization === 'string') {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization)
    if (match?.[1]) return match[1]
  }
  return undefined
}

/**
 * SPEC §1.1: the body is read whatever its Content-Type says, even a label Fastify cannot parse
 * (which it would answer with 415 before any parser ran). The label is kept for parseEventBody and
 * Fastify is shown one it always hands to the catch-all parser. For the routes of `scope` only.
 */
export function readBodyOfAnyType(scope: FastifyInstance): void {
  scope.decorateRequest('declaredContentType', undefined)
  scope.removeAllContentTypeParsers()
  scope.addContentTypeParser(
    '*',
    { parseAs: 'buffer', bodyLimit: INGEST_BODY_LIMIT },
    (request, body, done) => {
      try {
        done(null, parseEventBody(body as Buffer, request.declaredContentType))
      } catch (err) {
        done(err as Error, undefined)
      }
    },
  )
  scope.addHook('onRequest', (request, _reply, done) => {
    request.declaredContentType = request.headers['content-type']
    if (request.method !== 'GET') request.headers['content-type'] = 'application/octet-stream'
    done()
  })
}

/**
 * Counts a request against its key's budget per minute (`bucket` names which budget), sets the
 * rate-limit headers, and refuses with 429 once it is spent. `allowance` completes "This API key
 * may …" for the refusal.
 */
export async function spendKeyBudget(
  request: FastifyRequest,
  reply: FastifyReply,
  store: RateLimitStore,
  bucket: string,
  perMinute: number,
  allowance: string,
): Promise<void> {
  const decision = await checkRateLimit(store, bucket, perMinute, 60_000, (err) =>
    request.log.warn({ err }, 'rate limit store unavailable; request allowed'),
  )
  reply.headers(decision.headers)
  if (!decision.allowed) {
    throw new HttpProblem(
      429,
      'rate-limited',
      'Too many requests',
      `This API key may ${allowance}; retry in ${decision.headers['retry-after']} s.`,
    )
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true })

/**
 * Parses `a=1&b=2` (a query string or a form-encoded body) strictly: `+` is a space, and a broken
 * percent-escape or one that is not UTF-8 is an error rather than text stored as `%FF`. A name
 * given twice maps to an array, which validation then refuses.
 */
export function parseFormEncoded(text: string, where: string): Record<string, string | string[]> {
  const fields: Record<string, string | string[]> = Object.create(null)
  for (const pair of text.split('&')) {
    if (pair === '') continue
    const eq = pair.indexOf('=')
    let name: string
    let value: string
    try {
      name = decodeURIComponent((eq === -1 ? pair : pair.slice(0, eq)).replaceAll('+', ' '))
      value = eq === -1 ? '' : decodeURIComponent(pair.slice(eq + 1).replaceAll('+', ' '))
    } catch {
      throw problems.badBody(
        `The ${where} has a malformed %-escape or one that is not UTF-8 (near "${pair.slice(0, 40)}").`,
      )
    }
    const previous = fields[name]
    if (previous === undefined) fields[name] = value
    else fields[name] = Array.isArray(previous) ? [...previous, value] : [previous, value]
  }
  return fields
}

/**
 * Decodes a request body into fields. Pipelines send JSON under any content type (curl -d labels
 * it form-encoded), so a body that looks like JSON is parsed as JSON whatever the label says; a
 * form-encoded body that is not JSON is read as form fields.
 */
export function parseEventBody(raw: Buffer, contentType: string | undefined): Record<string, unknown> {
  let text: string
  try {
    text = utf8.decode(raw)
  } catch {
    throw problems.badBody('The request body is not valid UTF-8.')
  }
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1)
  const trimmed = text.trim()
  if (trimmed === '') return {}
  const mediaType = (contentType ?? '').split(';')[0]?.trim().toLowerCase() ?? ''
  if (
    mediaType === 'application/x-www-form-urlencoded' &&
    !trimmed.startsWith('{') &&
    !trimmed.startsWith('[')
  ) {
    return parseFormEncoded(trimmed, 'form-encoded body')
  }
  let value: unknown
  try {
    value = JSON.parse(trimmed)
  } catch (err) {
    throw problems.badBody(`The request body is not valid JSON: ${(err as Error).message}`)
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw problems.badBody('The request body must be a JSON object, e.g. {"service": "…", …}.')
  }
  return value as Record<string, unknown>
}

/** The Idempotency-Key header: its value (null when absent), or what is wrong with it. */
function idempotencyKey(request: FastifyRequest): { value: string | null } | { errors: FieldError[] } {
  const raw = request.headers['idempotency-key']
  if (raw === undefined) return { value: null }
  const value = (Array.isArray(raw) ? raw.join(',') : raw).trim()
  const errors: FieldError[] = []
  if (value === '') errors.push({ field: 'Idempotency-Key', message: 'Idempotency-Key must not be empty' })
  else if (value.length > IDEMPOTENCY_KEY_MAX) {
    errors.push({
      field: 'Idempotency-Key',
      message: `Idempotency-Key must be at most ${IDEMPOTENCY_KEY_MAX} characters`,
    })
  }
  return errors.length > 0 ? { errors } : { value }
}

/**
 * The guardrails an event broke, when they had to be read or evaluated. Recording never refuses the
 * truth (SPEC §11): if that fails for any reason but the database being down (when the write would
 * fail too, and 503 says so), the event is stored without the list, and the failure is logged.
 */
async function judged(
  asked: Promise<readonly GuardrailRule[]>,
  request: FastifyRequest,
): Promise<readonly GuardrailRule[]> {
  try {
    return await asked
  } catch (err) {
    if (isDatabaseUnavailable(err)) throw err
    request.log.error({ err }, 'guardrails could not be evaluated; the event is stored without them')
    return []
  }
}

export const ingestRoutes: FastifyPluginAsync<IngestOptions> = async (app, options) => {
  const { writer, verifier, usage, guardrails } = options
  const timeBounds = boundsOfDays(options.maxEventAgeDays ?? DEFAULT_MAX_EVENT_AGE_DAYS)

  // Wrong methods are answered before any key is checked.
  methodNotAllowed(app, '/put', ['GET', 'POST'])
  methodNotAllowed(app, '/deploy', ['POST'])

  await app.register(async (scope: FastifyInstance) => {
    scope.decorateRequest('apiKey', null)
    readBodyOfAnyType(scope)

    scope.addHook('onRequest', async (request, reply) => {
      const presented = presentedKey(request)
      if (presented === undefined) throw problems.missingKey()
      const key = await verifier.verify(presented)
      if (!key) throw problems.invalidKey()
      // The scopes came with the cached key: no query. Refused before the body is read or stored.
      if (!key.canIngest) throw insufficientScope('ingest')
      request.apiKey = key
      // One budget per key across all three forms, counted before the body is read.
      await spendKeyBudget(
        request,
        reply,
        options.rateLimitStore,
        `key:${key.digest}`,
        options.rateLimitPerMinute,
        `send ${options.rateLimitPerMinute} requests a minute`,
      )
    })

    const record = (
      source: EventSource,
      names: FieldNames,
      pick: (r: FastifyRequest) => Record<string, unknown>,
    ) =>
      async function recordEvent(request: FastifyRequest, reply: FastifyReply) {
        const key = request.apiKey
        if (!key) throw problems.invalidKey()
        // Every problem in one answer: the fields' and the Idempotency-Key header's.
        const idem = idempotencyKey(request)
        const receivedAt = Date.now()
        const result = validateEventFields(pick(request), names, receivedAt, timeBounds)
        const errors = [...(result.ok ? [] : result.errors), ...('errors' in idem ? idem.errors : [])]
        if (!result.ok || 'errors' in idem) throw problems.invalidFields(errors)
        const idemKey = idem.value
        const input = result.value
        // Synchronous for an account without guardrails (cached): no await, nothing allocated.
        const asked = guardrails.brokenBy(key.accountId, input, receivedAt)
        const broken = asked instanceof Promise ? await judged(asked, request) : asked
        const outcome = await writer.record({
          accountId: key.accountId,
          apiKeyId: key.id,
          apiKeyName: key.name,
          source,
          input,
          idempotencyKey: idemKey,
          receivedAt,
          guardrails: broken,
          clientAddress: input.overrideReason ? request.ip : null,
        })
        usage.touch(key.id, receivedAt)
        options.outages.recovered(request.log)
        if (outcome.kind === 'key-reused') {
          // The earlier event is not shown: this request is refused, and answering with another
          // event's values would read as success to a careless client.
          throw new HttpProblem(
            422,
            'idempotency-key-reused',
            'Idempotency-Key reused',
            `This Idempotency-Key was used in the last ${IDEMPOTENCY_WINDOW_HOURS} hours for an event with different values; nothing was stored. Send a new key for a new event.`,
          )
        }
        if (outcome.kind === 'replayed') reply.header('idempotent-replayed', 'true')
        return reply.code(outcome.kind === 'replayed' ? 200 : 201).send(toApiEvent(outcome.event))
      }

    const queryFields = (request: FastifyRequest) => {
      // GET is answered as soon as its head arrives; a body would be read (and could turn out
      // broken) only after the event was stored. The legacy form never has one, so refuse it.
      const { headers } = request
      if (
        request.method === 'GET' &&
        (headers['transfer-encoding'] !== undefined || Number(headers['content-length'] ?? 0) > 0)
      ) {
        throw problems.badBody(
          'GET /put takes its fields from the query string and no body; use POST /put to send a body.',
        )
      }
      const q = request.url.indexOf('?')
      return q === -1 ? {} : parseFormEncoded(request.url.slice(q + 1), 'query string')
    }
    const bodyFields = (request: FastifyRequest) => {
      const body = (request.body ?? {}) as Record<string, unknown>
      // A bodiless POST /put with the fields in the query string is read like GET /put.
      return Object.keys(body).length === 0 ? queryFields(request) : body
    }

    scope.get('/put', {
      exposeHeadRoute: false,
      schema: { response: responses },
      handler: record('put-get', LEGACY_NAMES, queryFields),
    })
    scope.post('/put', {
      schema: { response: responses },
      handler: record('put-post', LEGACY_NAMES, bodyFields),
    })
    scope.post('/deploy', {
      schema: { response: responses },
      handler: record('deploy', DEPLOY_NAMES, (request) => (request.body ?? {}) as Record<string, unknown>),
    })
  })
}
