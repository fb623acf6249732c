// A service's page /services/<service>/ as its routes answer it (GET, and the forms that land on it
// again with what was refused): metadata, the guardrails over its environments, and per
// environment a page of its timeline with details, flags and bad marks.
import type { FastifyReply, FastifyRequest } from 'fastify'
import { serviceEnvironments } from '../../domain/board/environments.js'
import { boardSettings } from '../../domain/board/settings.js'
import { deploymentDetails } from '../../domain/deployments/details.js'
import { serviceTimeline } from '../../domain/deployments/queries.js'
import { durationMs, outcomeAt } from '../../domain/deployments/rules.js'
import { badMark, environmentGuards, serviceLocks, upcomingFreezes } from '../../domain/guardrails/marks.js'
import { loadGuardrails } from '../../domain/guardrails/store.js'
import { renamedTo } from '../../domain/names/rename.js'
import { serviceExists, serviceMeta } from '../../domain/services.js'
import type { SessionUser } from '../../domain/sessions.js'
import { MAX_ID, parseWholeNumber } from '../../domain/whole-numbers.js'
import { DOT_NAME_SEGMENT, servicePath } from '../../views/board-page.js'
import { type ServicePageData, servicePage, type TimelineSection } from '../../views/service-page.js'
import { HttpProblem } from '../problem.js'
import type { UiContext } from './context.js'

/** Deployments per environment and page on a service's page. */
export const TIMELINE_PAGE = 20
/** How far ahead the page names freeze windows about to open: a week of planning. */
const UPCOMING_MS = 7 * 86_400_000

export const invalidQuery = (detail: string) =>
  new HttpProblem(422, 'invalid-query', 'Invalid address', detail)

/** One query value as text: undefined when absent, a 422 when it was given more than once. */
export function single(query: Record<string, unknown>, name: string): string | undefined {
  const value = query[name]
  if (value === undefined) return undefined
  if (typeof value !== 'string') throw invalidQuery(`Give "${name}" once.`)
  return value
}

/** The service a path names: its one segment, or the `name` query under the dot-name segment. */
export function serviceName(segment: string, query: unknown): string {
  if (segment !== DOT_NAME_SEGMENT) return segment
  const name = (query as Record<string, unknown> | undefined)?.name
  return name === '.' || name === '..' ? name : segment
}

export const noSuchService = () =>
  new HttpProblem(
    404,
    'not-found',
    'No such service',
    'This account has recorded no deployment of that service.',
  )

/** What a form that lands on the page again adds: a notice, refused fields, values to put back. */
export type ServicePageExtra = Pick<ServicePageData, 'errors'> &
  Partial<Pick<ServicePageData, 'notice' | 'form' | 'versionForm'>>

export async function renderService(
  ctx: UiContext,
  request: FastifyRequest,
  reply: FastifyReply,
  user: SessionUser,
  service: string,
  query: Record<string, unknown>,
  extra: ServicePageExtra,
  status = 200,
): Promise<FastifyReply> {
  const { db } = ctx.database
  const environmentParam = single(query, 'environment')
  const beforeParam = single(query, 'before')
  let before: number | undefined
  if (beforeParam !== undefined && beforeParam !== '') {
    before = parseWholeNumber(beforeParam, 0, MAX_ID)
    if (before === undefined) throw invalidQuery('"before" must be a deployment id (a whole number).')
  }
  if (!(await serviceExists(db, user.accountId, service))) {
    // A renamed or merged service: its old page's links and bookmarks lead to the new name.
    const renamed = request.method === 'GET' ? await renamedTo(db, user.accountId, 'service', service) : null
    if (renamed === null) throw noSuchService()
    const q = request.url.indexOf('?')
    const kept = new URLSearchParams(q === -1 ? '' : request.url.slice(q + 1))
    kept.delete('name')
    return reply.redirect(servicePath(renamed, '', Object.fromEntries(kept)), 301)
  }
  const [meta, environments, settings, guardrails] = await Promise.all([
    serviceMeta(db, user.accountId, service),
    serviceEnvironments(db, user.accountId, service),
    boardSettings(db, user.accountId),
    loadGuardrails(db, user.accountId),
  ])
  const environment = environmentParam === undefined || environmentParam === '' ? null : environmentParam
  if (environment !== null && !environments.includes(environment)) {
    throw new HttpProblem(
      404,
      'not-found',
      'No such environment',
      'This service has no deployments in that environment.',
    )
  }
  // Paging ("before") applies to one environment: without one, each shows its newest page.
  const shown = environment === null ? environments : [environment]
  const now = Date.now()
  const stallMs = settings.stallMinutes * 60_000
  const sections: TimelineSection[] = []
  for (const env of shown) {
    const page = await serviceTimeline(db, user.accountId, service, {
      environment: env,
      limit: TIMELINE_PAGE + 1,
      ...(environment !== null && before !== undefined ? { beforeId: before } : {}),
    })
    const more = page.length > TIMELINE_PAGE
    const rows = page.slice(0, TIMELINE_PAGE)
    const details = await deploymentDetails(db, user.accountId, rows)
    const last = rows.at(-1)
    sections.push({
      environment: env,
      deployments: rows.map((d) => ({
        deployment: d,
        outcome: outcomeAt(d, now, stallMs),
        durationMs: durationMs(d),
        details: details.get(d.id),
        bad: badMark(guardrails, service, d.version, null),
      })),
      olderHref:
        more && last ? servicePath(service, '', { environment: env, before: String(last.id) }) : null,
      newestHref:
        environment !== null && before !== undefined ? servicePath(service, '', { environment: env }) : null,
    })
  }
  return ctx.page(
    reply,
    servicePage({
      user,
      csrfToken: ctx.csrfToken(request, reply),
      meta,
      sections,
      environment,
      guards: {
        now,
        environments: environmentGuards(guardrails, environments, now),
        serviceLocks: environments.flatMap((env) => serviceLocks(guardrails, service, env, now)),
        upcoming: upcomingFreezes(guardrails, environments, now, UPCOMING_MS),
        badVersions: guardrails.badVersions.filter((b) => b.service === service),
      },
      ...extra,
    }),
    status,
  )
}
