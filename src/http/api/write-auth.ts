// Who may change what the API writes besides events (incident marks, bad versions): an API key with
// the ingest scope (pipelines and incident tools write, as they record events), or a signed-in
// admin's browser session sending JSON. The answers for a missing or bad key are the ingest routes'.
import cookie from '@fastify/cookie'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { AuditSource } from '../../domain/audit/log.js'
import { findSession } from '../../domain/sessions.js'
import { HttpProblem, problems } from '../problem.js'
import { keyActor, requestActor } from '../ui/audit-context.js'
import { cookiePolicy } from '../ui/context.js'
import { presentedKey, spendKeyBudget } from './ingest.js'
import type { ReadOptions } from './read-auth.js'
import { insufficientScope } from './scopes.js'

/** Who writes, for which account, named for the audit log. */
export interface ApiWriter {
  accountId: number
  via: 'key' | 'session'
  source: AuditSource
}

declare module 'fastify' {
  interface FastifyRequest {
    apiWriter: ApiWriter | null
  }
}

/**
 * Makes every route of `scope` need a writer. A key decides alone (with the ingest scope; its budget
 * is the ingest one); without a key, an admin's session. A session's writes must be JSON (a
 * cross-site form cannot send that without the browser asking first), so a page elsewhere cannot
 * make one. `what` completes "Only an admin … can …" for a member's refusal.
 */
export async function requireWriter(
  scope: FastifyInstance,
  options: ReadOptions,
  what: string,
): Promise<void> {
  const { sessionCookie } = cookiePolicy(options.config)
  await scope.register(cookie, { secret: options.secret })
  scope.decorateRequest('apiWriter', null)
  scope.addHook('onRequest', async (request, reply) => {
    reply.header('cache-control', 'no-store')
    const presented = presentedKey(request)
    if (presented === undefined) {
      const raw = request.cookies[sessionCookie]
      const unsigned = raw ? request.unsignCookie(raw) : undefined
      const user =
        unsigned?.valid && unsigned.value ? await findSession(options.database.db, unsigned.value) : undefined
      if (!user) throw problems.missingKey()
      if (user.mustChangePassword || user.role !== 'admin') {
        throw new HttpProblem(
          403,
          'admin-only',
          'Admins only',
          `Only an admin of this account can ${what} from a browser session (or use an API key with the ingest scope).`,
        )
      }
      const type = request.headers['content-type'] ?? ''
      // A form elsewhere can POST without asking; DELETE and JSON need the browser's preflight.
      if (request.method === 'POST' && !/^application\/json\s*(;|$)/i.test(type)) {
        throw new HttpProblem(
          415,
          'unsupported-media-type',
          'Unsupported Media Type',
          'With a browser session, send the body as application/json.',
        )
      }
      request.apiWriter = {
        accountId: user.accountId,
        via: 'session',
        source: { actor: requestActor(request, user), address: request.ip },
      }
      return
    }
    const key = await options.verifier.verify(presented)
    if (!key) throw problems.invalidKey()
    if (!key.canIngest) throw insufficientScope('ingest')
    await spendKeyBudget(
      request,
      reply,
      options.rateLimitStore,
      `key:${key.digest}`,
      options.rateLimitPerMinute,
      `send ${options.rateLimitPerMinute} requests a minute`,
    )
    options.usage.touch(key.id, Date.now())
    request.apiWriter = {
      accountId: key.accountId,
      via: 'key',
      source: { actor: keyActor(key), address: request.ip },
    }
  })
}

export function writerOf(request: FastifyRequest): ApiWriter {
  if (!request.apiWriter) throw problems.missingKey()
  return request.apiWriter
}
