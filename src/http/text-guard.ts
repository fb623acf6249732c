// The text rules at the door: path parameters and form fields no route could store or find
// (PostgreSQL cannot hold U+0000 in text) are refused before any handler runs.
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { FieldError } from '../domain/events/event.js'
import { hasNul, isWellFormedText } from '../domain/text-rules.js'
import { HttpProblem } from './problem.js'

/** How deep a parsed body is searched; deeper nesting is refused by the routes' schemas anyway. */
const MAX_DEPTH = 8

/**
 * A path parameter with a C0 control, DEL or an unpaired surrogate names nothing: no stored name
 * could ever hold one (SPEC §1.1 refused them from the start), so the answer is the route's 404.
 * C1 controls and text-direction overrides are refused from new text only, and names stored before
 * that may hold them, so a path may still name one.
 */
function badPathParam(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i)
    if (c <= 0x1f || c === 0x7f) return true
  }
  return !isWellFormedText(value)
}

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

/**
 * Registers the guard for every route of `app` (call it before the routes are registered).
 * `ownRules` lists routes whose handlers list every bad field themselves in a contract's shape
 * (ingest): their bodies are left to them. Their path parameters are none.
 */
export function guardText(app: FastifyInstance, ownRules: ReadonlySet<string>): void {
  app.addHook('preValidation', async (request: FastifyRequest) => {
    const params = request.params as Record<string, unknown> | undefined
    if (params && typeof params === 'object') {
      for (const value of Object.values(params)) {
        if (typeof value === 'string' && badPathParam(value)) {
          throw new HttpProblem(404, 'not-found', 'Not Found', 'There is nothing at this address.')
        }
      }
    }
    if (request.body === undefined || ownRules.has(request.routeOptions.url ?? '')) return
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
  })
}
