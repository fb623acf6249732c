// The 403 a key gets for a route outside its scopes (SPEC §7), shared by the ingest and read routes.
import type { KeyScope } from '../../domain/keys.js'
import { HttpProblem } from '../problem.js'

/** The problem answered when a valid key lacks the scope a route needs. */
export function insufficientScope(needed: KeyScope): HttpProblem {
  const doing = needed === 'ingest' ? 'record events' : 'read the API'
  return new HttpProblem(
    403,
    'insufficient-scope',
    'Insufficient scope',
    `This API key may not ${doing}: it lacks the "${needed}" scope. Create a key with that scope in Settings or with shiplog keys create --scope.`,
    {
      headers: {
        'www-authenticate': `Bearer realm="shiplog", error="insufficient_scope", scope="${needed}"`,
      },
    },
  )
}
