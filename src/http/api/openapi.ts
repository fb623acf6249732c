// The OpenAPI 3.1 document of every public route (/openapi.json), generated from the route schemas
// by @fastify/swagger, and /docs, which renders it with the locally served Swagger UI.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import type { FastifyInstance, RouteOptions } from 'fastify'
import { Type } from 'typebox'
import { ApiEventSchema } from '../../domain/events/event.js'
import { PUBLIC_DIR } from '../../paths.js'
import { methodNotAllowed } from '../problem.js'
import { BODY_OPTIONAL, finishDocument } from './openapi-document.js'
import { KEY_SECURITY, ProblemSchema, PUBLIC, problemResponses } from './openapi-schemas.js'

/** Paths that form the public API; every other route (pages, assets, /docs) is left out. */
const PUBLIC_PATHS = new Set(['/put', '/deploy', '/get', '/get/logs', '/healthz', '/readyz', '/openapi.json'])
const PUBLIC_PREFIXES = ['/api/v1/', '/badge/']

export function isPublicPath(url: string): boolean {
  return PUBLIC_PATHS.has(url) || PUBLIC_PREFIXES.some((p) => url.startsWith(p))
}

const text = (description: string, example: string, maxLength: number) =>
  Type.String({ description, examples: [example], minLength: 1, maxLength })
const extras = {
  url: Type.Optional(Type.String({ format: 'uri', description: 'Link to the build or log (http/https).' })),
  commit: Type.Optional(Type.String({ maxLength: 200, examples: ['4d0r98wa'] })),
  description: Type.Optional(Type.String({ maxLength: 500 })),
  deployer: Type.Optional(Type.String({ maxLength: 200, examples: ['alice'] })),
  occurred_at: Type.Optional(
    Type.String({
      description:
        'When it happened: ISO 8601 with a zone, or a date-time without one read as UTC. At most 5 minutes in the future and SHIPLOG_MAX_EVENT_AGE_DAYS (default 3650) in the past. Default: when it arrives.',
      examples: ['2026-11-21T22:40:00Z'],
    }),
  ),
  commit_time: Type.Optional(
    Type.String({
      description: 'When the change was committed (same grammar and bounds): lead time runs from it (DORA).',
      examples: ['2026-11-21T18:02:11+01:00'],
    }),
  ),
}
const status = Type.String({
  enum: ['Deploying', 'Deployed', 'Failed'],
  description: 'Deploying, Deployed or Failed (letter case ignored; stored canonically).',
  examples: ['Deployed'],
})
const legacyFields = {
  app: text('The service.', 'App1', 100),
  env: text('The environment.', 'Prod', 100),
  version: text('The version.', '1.0.3', 200),
  status,
}
const LegacyQuery = Type.Object({ ...legacyFields, ...extras })
const LegacyBody = Type.Object(
  { ...legacyFields, ...extras },
  { examples: [{ app: 'App1', env: 'Prod', version: '1.0.3', status: 'Deployed' }] },
)
const DeployBody = Type.Object(
  {
    service: text('The service.', 'App1', 100),
    environment: text('The environment.', 'Prod', 100),
    version: text('The version.', '1.0.3', 200),
    status,
    ...extras,
  },
  { examples: [{ service: 'App1', environment: 'Prod', version: '1.0.3', status: 'Deployed' }] },
)
const IdempotencyHeaders = Type.Object({
  'idempotency-key': Type.Optional(
    Type.String({
      maxLength: 200,
      description:
        'Repeat it on a retry: the first event is answered (200, Idempotent-Replayed: true), nothing new is stored.',
    }),
  ),
})
const INGEST_PROBLEMS = problemResponses(400, 401, 403, 405, 413, 422, 429, 503)
const ingestResponses = {
  201: { ...ApiEventSchema, description: 'The stored event.' },
  200: {
    ...ApiEventSchema,
    description: 'A retry with the same Idempotency-Key: the event stored the first time.',
  },
  ...INGEST_PROBLEMS,
}

/**
 * What the document says about the ingest routes. Their runtime schemas hold only the answers: the
 * fields are checked by the ingest code itself (every bad field in one 422, whatever the content
 * type), so the request side is described here and not enforced twice.
 */
const INGEST_DOCS: Record<string, Record<string, unknown>> = {
  'GET /put': {
    operationId: 'recordEventLegacyQuery',
    tags: ['ingest'],
    summary: 'Record an event (legacy query form)',
    description:
      'Fields in the query string; `+` and `%20` both mean a space. Needs a key with the ingest scope.',
    querystring: LegacyQuery,
    headers: IdempotencyHeaders,
    security: KEY_SECURITY,
    response: ingestResponses,
  },
  'POST /put': {
    operationId: 'recordEventLegacy',
    tags: ['ingest'],
    summary: 'Record an event (legacy body form)',
    description:
      'A JSON object under any content type (curl -d sends it form-encoded), or real form fields; without a body, the fields are read from the query string as in GET /put. Needs a key with the ingest scope.',
    [BODY_OPTIONAL]: true,
    body: LegacyBody,
    headers: IdempotencyHeaders,
    security: KEY_SECURITY,
    response: ingestResponses,
  },
  'POST /deploy': {
    operationId: 'recordEvent',
    tags: ['ingest'],
    summary: 'Record an event',
    description:
      'A JSON object (application/json, or JSON sent form-encoded by curl). Needs a key with the ingest scope.',
    body: DeployBody,
    headers: IdempotencyHeaders,
    security: KEY_SECURITY,
    response: ingestResponses,
  },
}

const methodsOf = (route: RouteOptions | undefined): string[] =>
  route === undefined ? [] : Array.isArray(route.method) ? route.method : [route.method]

/** The inline style Swagger UI sets (its bundle's, so a new version may change it: the browser test says). */
const SWAGGER_UI_STYLE_HASH = "'sha256-RL3ie0nH+Lzz2YNqQN83mnU0J1ot4QL7b99vMdIX99w='"

/** Registers the generator; call before any route is added, so it sees them all. */
export async function registerOpenApi(
  app: FastifyInstance,
  options: { version: string; publicUrl: string | null },
): Promise<void> {
  app.addSchema(ProblemSchema)
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Shiplog API',
        version: options.version,
        license: { name: 'MIT', identifier: 'MIT' },
        description:
          'Record deployment events (ingest) and read them back (read API). Keys are made in Settings or with `shiplog keys create --scope ingest|read|ingest,read`. Errors are RFC 9457 problem details (`application/problem+json`). See docs/API.md.',
      },
      // Where the API is: SHIPLOG_PUBLIC_URL when set, else the server that served the document.
      servers: [
        options.publicUrl === null
          ? { url: '/', description: 'The server that served this document.' }
          : { url: options.publicUrl, description: 'This installation (SHIPLOG_PUBLIC_URL).' },
      ],
      tags: [
        { name: 'ingest', description: 'Recording events (key scope: ingest).' },
        { name: 'read', description: 'The read API (key scope: read, or a logged-in browser session).' },
        { name: 'legacy read', description: "The original interface's read endpoints (key scope: read)." },
        { name: 'badges', description: 'README badges, opened by the badge token alone.' },
        { name: 'operations', description: 'Health checks and this document.' },
      ],
      components: {
        securitySchemes: {
          apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
          bearer: { type: 'http', scheme: 'bearer', description: 'The same API key as a bearer token.' },
          session: {
            type: 'apiKey',
            in: 'cookie',
            name: 'shiplog_session',
            description:
              'A logged-in browser session: it reads; an admin’s session may also mark versions bad and deployments as incidents (JSON bodies only).',
          },
        },
      },
    },
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => String(json.$id ?? `def-${i}`) },
    transform: ({ schema, url, route }) => {
      const methods = methodsOf(route as RouteOptions | undefined)
      if (!isPublicPath(url) || (route as RouteOptions | undefined)?.config?.methodNotAllowed) {
        return { schema: { ...schema, hide: true }, url }
      }
      const doc = methods.map((m) => INGEST_DOCS[`${m} ${url}`]).find((d) => d !== undefined)
      if (doc) return { schema: { ...schema, ...doc }, url }
      return { schema, url }
    },
    transformObject: (documentObject) => {
      if (!('openapiObject' in documentObject)) return documentObject.swaggerObject
      return finishDocument(documentObject.openapiObject)
    },
  })

  // Swagger UI's own files, served from the package: /docs needs no outside network (no CDN).
  await app.register(swaggerUi, {
    routePrefix: '/docs',
    uiConfig: { deepLinking: true, tryItOutEnabled: false },
    theme: { title: 'Shiplog API' },
    logo: { type: 'image/svg+xml', content: readFileSync(join(PUBLIC_DIR, 'favicon.svg')) },
    // The app's own Content-Security-Policy applies (script and style from 'self' only), plus the
    // one inline style Swagger UI applies, allowed by its hash (test/browser/docs.test.ts).
    staticCSP: false,
    transformStaticCSP: (header) =>
      header.replace("style-src 'self'", `style-src 'self' ${SWAGGER_UI_STYLE_HASH}`),
  })
}

/** GET /openapi.json: the document itself. */
export async function openApiRoute(app: FastifyInstance): Promise<void> {
  app.get('/openapi.json', {
    schema: {
      operationId: 'getOpenApiDocument',
      tags: ['operations'],
      summary: 'This document (OpenAPI 3.1)',
      security: PUBLIC,
      response: {
        200: { type: 'object', additionalProperties: true, description: 'The OpenAPI document.' },
        ...problemResponses(400),
      },
    },
    handler: async (_request, reply) => reply.header('cache-control', 'no-cache').send(app.swagger()),
  })
  methodNotAllowed(app, '/openapi.json', ['GET', 'HEAD'])
}
