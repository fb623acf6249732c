// Schemas the public routes share in the OpenAPI document: the one problem shape and the problem
// answers each route can give, with examples.
import { Type } from 'typebox'

/** RFC 9457 problem details, as every error of the API is answered (src/http/problem.ts). */
export const ProblemSchema = Type.Object(
  {
    type: Type.String({ examples: ['urn:shiplog:problem:invalid-parameters'] }),
    title: Type.String({ examples: ['Invalid query parameters'] }),
    status: Type.Integer({ examples: [422] }),
    detail: Type.String({ examples: ['limit must be a whole number from 1 to 1000'] }),
    errors: Type.Optional(
      Type.Array(Type.Object({ field: Type.String(), message: Type.String() }), {
        description: 'Every refused field or parameter, each named.',
      }),
    ),
  },
  { $id: 'Problem', title: 'Problem', additionalProperties: true },
)

// Refers to the shared schema (app.addSchema), which the document lists once under components.
const problem = (description: string) => ({ $ref: 'Problem#', description })

/** The problem answers, by status, with what each means. */
export const PROBLEMS = {
  400: problem('The request cannot be read (malformed body or URL, or no Host header).'),
  401: problem('No API key, or an unknown, malformed or revoked one (one identical answer).'),
  403: problem('The key lacks the scope this route needs (type urn:shiplog:problem:insufficient-scope).'),
  404: problem('Nothing of that name in the account.'),
  405: problem('Wrong method on a known path; see the Allow header.'),
  413: problem('The body is larger than 16 KiB.'),
  414: problem(
    'A path parameter is longer than the server takes (the badge path: service and environment names).',
  ),
  415: problem('The content type is not accepted here.'),
  422: problem('Invalid fields or parameters; every one is listed in `errors`.'),
  429: problem('Rate limit of the key exceeded; see Retry-After and RateLimit-* headers.'),
  503: problem('The database is unavailable or the server is restarting; retry after Retry-After.'),
} as const

type ProblemStatus = keyof typeof PROBLEMS

/** The problem responses of a route, picked by status. */
export function problemResponses(...statuses: ProblemStatus[]): Partial<typeof PROBLEMS> {
  return Object.fromEntries(statuses.map((s) => [s, PROBLEMS[s]]))
}

/** The security requirements: a key in X-API-Key or Authorization: Bearer, or (reads) a session. */
export const KEY_SECURITY: Record<string, string[]>[] = [{ apiKey: [] }, { bearer: [] }]
/** No credential: the operation is open to anyone (health checks, badges, this document). */
export const PUBLIC: Record<string, string[]>[] = []
export const READ_SECURITY: Record<string, string[]>[] = [{ apiKey: [] }, { bearer: [] }, { session: [] }]
