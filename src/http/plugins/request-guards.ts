// What every request meets before its route: the forwarded scheme cleaned (behind a proxy), the
// security headers, a missing Host refused, and text no route could store refused.
import fp from 'fastify-plugin'
import { INGEST_PATHS } from '../api/ingest.js'
import { problems } from '../problem.js'
import { API_SECURITY_HEADERS, SECURITY_HEADERS } from '../security-headers.js'
import { guardText } from '../text-guard.js'
import { BADGE_PATH } from '../ui/badge-routes.js'

/** Registered before any route: the text guard is added to routes as they are registered. */
export const requestGuards = fp<{ trustProxy: boolean }>(
  async (app, { trustProxy }) => {
    if (trustProxy) {
      // Behind a proxy, the scheme the client used comes from X-Forwarded-Proto, and it ends up in
      // links, snippets and cookie flags: anything but http or https (`javascript`) is dropped, so
      // the connection's own scheme counts instead.
      app.addHook('onRequest', (request, _reply, done) => {
        const forwarded = request.raw.headers['x-forwarded-proto']
        if (forwarded !== undefined) {
          const last = String(forwarded).split(',').at(-1)?.trim().toLowerCase()
          if (last === 'http' || last === 'https') request.raw.headers['x-forwarded-proto'] = last
          else delete request.raw.headers['x-forwarded-proto']
        }
        done()
      })
    }

    app.addHook('onRequest', (request, reply, done) => {
      reply.headers(
        INGEST_PATHS.has(request.routeOptions.url ?? '') ? API_SECURITY_HEADERS : SECURITY_HEADERS,
      )
      if (request.headers.host === undefined && request.raw.httpVersion === '1.1') {
        done(problems.missingHost())
        return
      }
      done()
    })

    // Text no route could store (U+0000 on PostgreSQL) never reaches a handler.
    guardText(app, new Set([...INGEST_PATHS, BADGE_PATH]))
  },
  { name: 'request-guards' },
)
