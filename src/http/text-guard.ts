// The text rules at the door: path parameters and form fields no route could store or find
// (PostgreSQL cannot hold U+0000 in text) are refused before any handler runs.
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { FieldError } from '../domain/events/event.js'
import { hasNul, namesNothing } from '../text-rules.js'
import { HttpProblem } from './problem.js'

/** How deep a parsed body is searched; deeper nesting is refused by the routes' schemas anyway. */
const MAX_DEPTH = 8

/** Names of the fields (dotted for nesting) of a parsed body whose text or name holds U+0000. */
function fieldsWithNul(value: unknown, path: string, depth: number, out: string[]): void {
  if (typeof value === 'string') {
    if (hasNul(value)) out.push(path === '' ? '(body)' : path)
    return
  }
  if (depth >= MAX_DEPTH || typeof value !== 'object' || value === null) return
  for (const [key, inner] of Object.entries(value)) {
    const name = path === '' ? key : `${path}.${key}`
    if (hasNul(key)) out.push(path === '' ? '(a field name)' : `${path}.(a field name)`)
    else fieldsWithNul(inner, name, depth + 1, out)
  }
}

/** The guard itself: a preValidation hook. */
async function checkText(request: FastifyRequest): Promise<void> {
  const params = request.params as Record<string, unknown> | undefined
  if (params && typeof params === 'object') {
    for (const value of Object.values(params)) {
      if (typeof value === 'string' && namesNothing(value)) {
        throw new HttpProblem(404, 'not-found', 'Not Found', 'There is nothing at this address.')
      }
    }
  }
  if (request.body === undefined) return
  const bad: string[] = []
  fieldsWithNul(request.body, '', 0, bad)
  if (bad.length === 0) return
  const errors: FieldError[] = bad.map((field) => ({
    field,
    message: `${field} must not contain control characters`,
  }))
  throw new HttpProblem(
    422,
    'invalid-text',
    'Invalid text',
    `${bad.join(', ')} must not contain control characters; nothing was changed.`,
    { errors },
  )
}

/**
 * Puts the guard first on every route added to `app` after this call. `ownRules` lists routes
 * that answer such text themselves in a contract's shape: ingest lists every bad field (and has no
 * path parameters), so an ingest request costs exactly what it did; a badge answers "unknown
 * badge" in the format asked for, as for any other path that names no badge.
 */
export function guardText(app: FastifyInstance, ownRules: ReadonlySet<string>): void {
  app.addHook('onRoute', (route) => {
    if (ownRules.has(route.url ?? '')) return
    const own = route.preValidation
    route.preValidation = own === undefined ? [checkText] : [checkText, ...(Array.isArray(own) ? own : [own])]
  })
}
