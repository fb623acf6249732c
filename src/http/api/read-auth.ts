// Who may read (SPEC §7): an API key with the read scope, or a logged-in browser session. Hooks
// for the read API's scopes; the answers for a missing or bad key are the ingest routes' own.
import cookie from '@fastify/cookie'
import type { FastifyInstance } from 'fastify'
import type { Config } from '../../config.js'
import type { Database } from '../../db/connect.js'
import type { ApiKeyVerifier, KeyUsageRecorder } from '../../domain/keys.js'
import type { StreamCredential } from '../../domain/live/credentials.js'
import { findSession } from '../../domain/sessions.js'
import { HttpProblem, problems } from '../problem.js'
import type { RateLimitStore } from '../rate-limit.js'
import { cookiePolicy } from '../ui/context.js'
import { presentedKey, spendKeyBudget } from './ingest.js'
import { insufficientScope } from './scopes.js'

export interface ReadOptions {
  config: Config
  /** The cookie secret (the configuration's, or the one kept in the database). */
  secret: string
  database: Database
  verifier: ApiKeyVerifier
  usage: KeyUsageRecorder
  rateLimitStore: RateLimitStore
  rateLimitPerMinute: number
}

/** The account a read is made for, and by what. */
export interface Reader {
  accountId: number
  via: 'key' | 'session'
  /** The key or session itself: a live stream ends when it stops counting. */
  credential: StreamCredential
}

declare module 'fastify' {
  interface FastifyRequest {
    reader: Reader | null
  }
}

/**
 * Makes every route of `scope` need a reader. A presented key decides alone (a browser cookie does
 * not rescue a bad key); without a key, a session counts when `sessions` allows it.
 */
export async function requireReader(
  scope: FastifyInstance,
  options: ReadOptions,
  { sessions }: { sessions: boolean },
): Promise<void> {
  const { sessionCookie } = cookiePolicy(options.config)
  if (sessions) await scope.register(cookie, { secret: options.secret })
  scope.decorateRequest('reader', null)
  scope.addHook('onRequest', async (request, reply) => {
    const presented = presentedKey(request)
    if (presented === undefined) {
      if (sessions) {
        const raw = request.cookies[sessionCookie]
        const unsigned = raw ? request.unsignCookie(raw) : undefined
        const user =
          unsigned?.valid && unsigned.value
            ? await findSession(options.database.db, unsigned.value)
            : undefined
        if (user?.mustChangePassword) {
          // The pages send such a session to the password form; the API refuses it alike.
          throw new HttpProblem(
            403,
            'password-change-required',
            'Password change required',
            'This session signed in with a one-time password: set your own at /account/password first.',
          )
        }
        if (user) {
          request.reader = {
            accountId: user.accountId,
            via: 'session',
            credential: { kind: 'session', sessionId: user.sessionId, userId: user.userId },
          }
          reply.header('cache-control', 'no-store')
          return
        }
      }
      throw problems.missingKey()
    }
    const key = await options.verifier.verify(presented)
    if (!key) throw problems.invalidKey()
    if (!key.canRead) throw insufficientScope('read')
    await spendKeyBudget(
      request,
      reply,
      options.rateLimitStore,
      `read:${key.digest}`,
      options.rateLimitPerMinute,
      `make ${options.rateLimitPerMinute} read requests a minute`,
    )
    options.usage.touch(key.id, Date.now())
    request.reader = { accountId: key.accountId, via: 'key', credential: { kind: 'key', keyId: key.id } }
    reply.header('cache-control', 'no-store')
  })
}

/** The reader a hook above set; a route without one is a bug, answered like a missing key. */
export function readerOf(request: { reader: Reader | null }): Reader {
  if (!request.reader) throw problems.missingKey()
  return request.reader
}
