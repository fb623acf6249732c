// Public README badges (SPEC §6.3): /badge/<token>/<service>/<environment>.svg and .json. No
// session; the token alone opens one account's running versions, nothing else.

import { createHash } from 'node:crypto'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { Type } from 'typebox'
import { accountByBadgeToken, type BadgeState, badgeState } from '../../domain/board/badges.js'
import { namesNothing } from '../../text-rules.js'
import { BADGE_SEPARATOR, type BadgePart, badgeSvg, shieldsEndpoint } from '../../views/badge.js'
import { PUBLIC, problemResponses } from '../api/openapi-schemas.js'
import { FRESH } from '../plugins/fresh-deployments.js'
import type { UiContext } from './context.js'

const BadgeParams = Type.Object({
  token: Type.String({
    maxLength: 200,
    description: "The account's badge token (Settings → Badges; rotating it retires the old one at once).",
    examples: ['b_3kTqZ9pX1v7Lw0aQeYcR2m'],
  }),
  service: Type.String({ maxLength: 1000, description: 'The service, URL-encoded.', examples: ['billing'] }),
  file: Type.String({
    maxLength: 1000,
    description:
      'The environment (URL-encoded) followed by `.svg` (an image) or `.json` (a shields.io endpoint document).',
    examples: ['prod.svg', 'prod.json'],
  }),
})

const BadgeSvg = Type.String({
  description: 'An SVG image (image/svg+xml).',
  examples: ['<svg xmlns="http://www.w3.org/2000/svg" …>'],
})
/** The shields.io "endpoint" document (https://shields.io/badges/endpoint-badge). */
const ShieldsEndpoint = Type.Object({
  schemaVersion: Type.Literal(1),
  label: Type.String({ description: 'The service and the environment.', examples: ['billing · prod'] }),
  message: Type.String({
    description:
      'The running version; when the latest deployment there failed or has not finished, it follows: "1.4.2 · 1.5.0 failed".',
    examples: ['1.4.2', '1.4.2 · 1.5.0 failed'],
  }),
  color: Type.String({
    description:
      "The running version's colour (green; lightgrey when nothing runs), whatever the latest deployment did.",
    examples: ['green'],
  }),
})
const badgeContent = {
  'image/svg+xml': { schema: BadgeSvg },
  'application/json': { schema: ShieldsEndpoint },
}

/** What /openapi.json says of the route (the UI plugin's error pages never answer it). */
const BADGE_DOC = {
  operationId: 'getBadge',
  tags: ['badges'],
  summary: 'The running version of a service in an environment, as a README badge',
  description:
    'An SVG badge drawn by Shiplog (`.svg`) or a shields.io "endpoint" document (`.json`), labelled ' +
    '"<service> · <environment>": the running version in green, and beside it (a red or amber segment) ' +
    'the latest deployment there when it failed, stalled or is in progress. ' +
    'A wrong, rotated or malformed token gets the same 404 badge whatever the service; a service or ' +
    'environment without deployments gets a grey "no deployment" badge. Cached for 60 seconds; ETag.',
  security: PUBLIC,
  response: {
    200: {
      description: 'The badge (image/svg+xml) or the shields.io document (application/json).',
      headers: {
        ETag: { type: 'string', description: 'Send it back in If-None-Match to get a 304.' },
      },
      content: badgeContent,
    },
    304: { description: 'Not modified (If-None-Match matched the ETag).', type: 'null' },
    404: {
      description:
        'Unknown badge (a wrong token or a path that names no badge): an "unknown badge" badge in the requested format, so a README shows it instead of a broken image.',
      content: badgeContent,
    },
    // A path that is not percent-encoded UTF-8 (`%C3%28`) is refused before routing, as everywhere.
    ...problemResponses(400, 414),
  },
}

/**
 * An SVG is a document a browser may open on its own: no script, no outside resources, no
 * framing. Any site may show it as an image (READMEs, wikis), hence cross-origin.
 */
const BADGE_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; sandbox",
  'cross-origin-resource-policy': 'cross-origin',
  'x-content-type-options': 'nosniff',
  // Short, so a new deployment shows within a minute; s-maxage for proxies such as GitHub's camo.
  'cache-control': 'max-age=60, s-maxage=60',
})

/** What the latest deployment is called beside the running version when it is not a success. */
const UNFINISHED: Record<'failed' | 'in_progress' | 'stalled', string> = {
  failed: 'failed',
  in_progress: 'deploying',
  stalled: 'stalled',
}

/**
 * The running version in its colour (green; grey when nothing runs), and beside it the latest
 * deployment when it failed or has not finished: a failure does not repaint what runs.
 */
export function badgeParts(state: BadgeState): BadgePart[] {
  const running: BadgePart =
    state.version === null ? { text: 'no deployment', tone: 'none' } : { text: state.version, tone: 'ok' }
  if (state.latest === null || state.latest === 'succeeded' || state.latestVersion === null) return [running]
  return [
    running,
    {
      text: `${state.latestVersion} ${UNFINISHED[state.latest]}`,
      tone: state.latest === 'failed' ? 'failed' : 'progress',
    },
  ]
}

function send(
  request: FastifyRequest,
  reply: FastifyReply,
  status: number,
  format: 'svg' | 'json',
  label: string,
  parts: readonly BadgePart[],
): FastifyReply {
  const body = format === 'svg' ? badgeSvg(label, parts) : JSON.stringify(shieldsEndpoint(label, parts))
  const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`
  reply.headers(BADGE_HEADERS).header('etag', etag)
  if (format === 'json') reply.header('access-control-allow-origin', '*')
  reply.type(format === 'svg' ? 'image/svg+xml; charset=utf-8' : 'application/json; charset=utf-8')
  if (status === 200 && request.headers['if-none-match'] === etag) return reply.code(304).send()
  return reply.code(status).send(body)
}

/** The one answer to every refusal, whatever the service. */
const UNKNOWN: readonly BadgePart[] = [{ text: 'unknown badge', tone: 'none' }]

/** The badge route's path, which answers text no name can hold itself (see text-guard.ts). */
export const BADGE_PATH = '/badge/:token/:service/:file'

export const badgeRoutes: FastifyPluginAsyncTypebox<UiContext> = async (app, ctx) => {
  const { db } = ctx.database

  app.get(
    BADGE_PATH,
    // A malformed path (too long) gets the same refusal as a wrong token, never an HTML page.
    { schema: { params: BadgeParams, ...BADGE_DOC }, attachValidation: true, ...FRESH },
    async (request, reply) => {
      const { token, service, file } = request.params
      const match = /^(.+)\.(svg|json)$/s.exec(file ?? '')
      const format = match?.[2] === 'json' ? 'json' : 'svg'
      // One answer for every refusal (wrong or old token, bad path), whatever the service: the
      // token is checked first, by one indexed lookup that does not depend on the service.
      // A control character or a lone surrogate names nothing (and PostgreSQL cannot hold U+0000).
      const named = !request.validationError && match && ![token, service, file].some(namesNothing)
      const account = named ? await accountByBadgeToken(db, token) : undefined
      if (!account || !match?.[1]) return send(request, reply, 404, format, 'shiplog', UNKNOWN)
      const environment = match[1]
      const state = await badgeState(db, account.id, service, environment, {
        now: Date.now(),
        stallMs: account.stallMinutes * 60_000,
      })
      // A service or environment without deployments is a badge too (grey), so a README shows it
      // before the first deployment instead of a broken image.
      // The label names the service as well as the environment: a README often shows several.
      const label = `${service}${BADGE_SEPARATOR}${environment}`
      return send(request, reply, 200, format, label, badgeParts(state))
    },
  )
}
