// What the read API's resources share: the filter and page parameters, the answer pieces, the
// problems they may answer and the `Link` to the next page.
import type { FastifyReply, FastifyRequest } from 'fastify'
import { Type } from 'typebox'
import type { Database } from '../../db/connect.js'
import type { DeploymentOutcome } from '../../domain/deployments/rules.js'
import { EVENT_STATUSES } from '../../text-rules.js'
import { problemResponses } from './openapi-schemas.js'
import { type CursorCodec, MAX_LIMIT, queryAsSent } from './read-params.js'

/** What each resource's routes are given: the database and the codec of the page cursors. */
export interface ReadResource {
  database: Database
  cursors: CursorCodec
}

export const OUTCOMES: readonly DeploymentOutcome[] = ['in_progress', 'succeeded', 'failed', 'stalled']
export const OutcomeSchema = Type.Union([
  Type.Literal('in_progress'),
  Type.Literal('succeeded'),
  Type.Literal('failed'),
  Type.Literal('stalled'),
])

export const NullableString = Type.Union([Type.String(), Type.Null()])
export const Instant = (description: string, example: string) =>
  Type.String({ format: 'date-time', description, examples: [example] })
export const NextCursor = Type.Union([Type.String(), Type.Null()], {
  description: 'Pass as `cursor` for the next page; null on the last page.',
  examples: ['ZTE6MTIz'],
})

export const filterText = (description: string, example?: string) =>
  Type.Optional(Type.String({ description, ...(example ? { examples: [example] } : {}) }))
export const windowParams = {
  from: filterText(
    'Start of the window, inclusive: ISO 8601 (a date means 00:00 UTC; a time without zone is UTC).',
    '2026-11-01T00:00:00Z',
  ),
  to: filterText(
    'End of the window, exclusive: ISO 8601. Must be after `from`, at most 5 years later.',
    '2026-12-01',
  ),
}
export const pageParams = {
  limit: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: MAX_LIMIT,
      description: 'Page length, 1–1000; default 100.',
      examples: [100],
    }),
  ),
  cursor: filterText('The `next_cursor` of the previous page (opaque).'),
}

/** The event filter's names, status and version text (readEventNames), shared with /api/v1/stream. */
export const eventNameParams = {
  service: filterText('Service name (letter case ignored).', 'App1'),
  environment: filterText('Environment name (letter case ignored).', 'Prod'),
  status: Type.Optional(
    Type.String({ enum: [...EVENT_STATUSES], description: 'Deploying, Deployed or Failed (any case).' }),
  ),
  version: filterText('Text the version contains (letter case ignored).', '1.0'),
}

export const READ_PROBLEMS = problemResponses(401, 403, 422, 429, 503)

/**
 * The address of the next page: this request's path and parameters with the new cursor. Root-relative,
 * so it holds behind any proxy.
 */
export function nextLink(request: FastifyRequest, cursor: string): string {
  const path = request.url.split('?')[0] ?? '/'
  const params = new URLSearchParams()
  for (const [name, value] of Object.entries(queryAsSent(request))) {
    if (name === 'cursor' || value === undefined || value === null) continue
    if (Array.isArray(value)) for (const v of value) params.append(name, String(v))
    else params.append(name, String(value))
  }
  params.set('cursor', cursor)
  return `${path}?${params.toString()}`
}

export function linkNext(reply: FastifyReply, request: FastifyRequest, cursor: string | null): void {
  if (cursor !== null) reply.header('link', `<${nextLink(request, cursor)}>; rel="next"`)
}
