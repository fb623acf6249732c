// Checks an answer against the served OpenAPI document: the operation (method and path template),
// the status, the content type, the body (ajv, JSON Schema 2020-12) and the declared headers.
import { brotliDecompressSync, gunzipSync, inflateSync } from 'node:zlib'
import type { ValidateFunction } from 'ajv/dist/2020.js'
import { Ajv2020 } from 'ajv/dist/2020.js'
import addFormatsModule from 'ajv-formats'

// ajv-formats is CommonJS: under ESM its function arrives as the module's `default` export.
const addFormats = (addFormatsModule as unknown as { default: (ajv: Ajv2020) => Ajv2020 }).default

type Schema = Record<string, unknown>
interface Header {
  required?: boolean
  schema?: Schema
}
interface Response {
  content?: Record<string, { schema?: Schema }>
  headers?: Record<string, Header>
}
type Operation = { responses?: Record<string, Response> }
export interface OpenApiDocument {
  paths: Record<string, Record<string, Operation>>
  [key: string]: unknown
}

/** What the check needs of an answer (a light-my-request response carries all of it). */
export interface Answer {
  method: string
  /** The request target: path and query string. */
  url: string
  status: number
  headers: Record<string, string | string[] | number | undefined>
  body: Buffer
}

/** One segment of a JSON pointer inside a URI fragment (RFC 6901 escapes, then percent-encoding). */
const pointerSegment = (s: string) => encodeURIComponent(s.replaceAll('~', '~0').replaceAll('/', '~1'))

const firstValue = (v: string | string[] | number | undefined): string | undefined =>
  v === undefined ? undefined : Array.isArray(v) ? v.join(', ') : String(v)

function decoded(body: Buffer, encoding: string | undefined): Buffer {
  switch (encoding?.trim().toLowerCase()) {
    case 'gzip':
      return gunzipSync(body)
    case 'br':
      return brotliDecompressSync(body)
    case 'deflate':
      return inflateSync(body)
    default:
      return body
  }
}

/** A header's value in the type its schema names (headers travel as text). */
function headerValue(raw: string, schema: Schema | undefined): unknown {
  const type = schema?.type
  if ((type === 'integer' || type === 'number') && /^-?\d+(\.\d+)?$/.test(raw)) return Number(raw)
  return raw
}

export class OpenApiContract {
  readonly #ajv: Ajv2020
  readonly #doc: OpenApiDocument
  readonly #templates: { path: string; pattern: RegExp }[]
  readonly #validators = new Map<string, ValidateFunction>()

  constructor(doc: OpenApiDocument) {
    this.#doc = doc
    // strict off: the document's own keywords (openapi, paths, example…) sit beside the schemas.
    this.#ajv = new Ajv2020({ strict: false, allErrors: true })
    addFormats(this.#ajv)
    this.#ajv.addSchema(structuredClone(doc) as Schema, 'openapi')
    // Literal paths before templates, so /api/v1/events never matches a /{x}/… template first.
    this.#templates = Object.keys(doc.paths)
      .sort((a, b) => Number(a.includes('{')) - Number(b.includes('{')))
      .map((path) => ({
        path,
        pattern: new RegExp(
          `^${path
            .split(/\{[^}]+\}/)
            .map((part) => part.replace(/[.*+?^$()|[\]\\]/g, '\\$&'))
            .join('[^/]+')}$`,
        ),
      }))
  }

  #validator(pointer: string[]): ValidateFunction {
    const ref = `openapi#/${pointer.map(pointerSegment).join('/')}`
    let validate = this.#validators.get(ref)
    if (!validate) {
      validate = this.#ajv.getSchema(ref)
      if (!validate) throw new Error(`the document has no schema at ${ref}`)
      this.#validators.set(ref, validate)
    }
    return validate
  }

  /** The part of the document a JSON pointer (as segments) names. */
  #at(pointer: string[]): unknown {
    let node: unknown = this.#doc
    for (const segment of pointer) node = (node as Record<string, unknown> | undefined)?.[segment]
    return node
  }

  #errors(validate: ValidateFunction): string {
    return this.#ajv.errorsText(validate.errors, { separator: '; ' })
  }

  /** The document's path template for a request path, if it documents one. */
  pathOf(requestPath: string): string | undefined {
    return this.#templates.find((t) => t.pattern.test(requestPath))?.path
  }

  /** What is wrong with the answer by the document; empty when it agrees or the route is not documented. */
  check(answer: Answer): string[] {
    const requestPath = answer.url.split('?')[0] ?? '/'
    const path = this.pathOf(requestPath)
    if (path === undefined) return []
    const item = this.#doc.paths[path] ?? {}
    const method = answer.method.toLowerCase()
    // HEAD and OPTIONS are answered by the framework for every route; not operations of the API.
    if (method === 'head' || method === 'options') return []
    const where = `${answer.method} ${path} → ${answer.status}`
    const operation = item[method]
    let pointer: string[]
    // A URL refused before routing (not percent-encoded UTF-8: 400; a path parameter over the
    // length limit: 414) is refused whatever the method: it must be what the path's operations
    // declare for that status.
    const beforeRouting = answer.status === 400 || answer.status === 414
    const declaring = beforeRouting
      ? Object.entries(item).find(([, op]) => op?.responses?.[String(answer.status)] !== undefined)
      : undefined
    if (!operation && declaring) {
      pointer = ['paths', path, declaring[0], 'responses', String(answer.status)]
    } else if (!operation) {
      // A method the path does not offer: the document's shared 405 answer, and nothing else.
      if (answer.status !== 405) return [`${where}: not an operation of the document`]
      pointer = ['components', 'responses', 'MethodNotAllowed']
    } else {
      const responses = operation.responses ?? {}
      const statusKey = [String(answer.status), `${String(answer.status)[0]}XX`, 'default'].find(
        (k) => responses[k] !== undefined,
      )
      if (statusKey === undefined)
        return [`${where}: status not declared (declared: ${Object.keys(responses).join(', ')})`]
      pointer = ['paths', path, method, 'responses', statusKey]
    }
    // A response may be a reference to a shared one (#/components/responses/…).
    let response = this.#at(pointer) as (Response & { $ref?: string }) | undefined
    if (response?.$ref) {
      pointer = response.$ref
        .replace(/^#\//, '')
        .split('/')
        .map((s) => s.replaceAll('~1', '/').replaceAll('~0', '~'))
      response = this.#at(pointer) as (Response & { $ref?: string }) | undefined
    }
    if (!response) return [`${where}: the document's response at /${pointer.join('/')} is missing`]
    const problems: string[] = []

    const headers = Object.fromEntries(
      Object.entries(answer.headers).map(([name, value]) => [name.toLowerCase(), firstValue(value)]),
    )
    for (const [name, header] of Object.entries(response.headers ?? {})) {
      const raw = headers[name.toLowerCase()]
      if (raw === undefined) {
        if (header.required) problems.push(`${where}: required header ${name} missing`)
        continue
      }
      if (!header.schema) continue
      const validate = this.#validator([...pointer, 'headers', name, 'schema'])
      if (!validate(headerValue(raw, header.schema)))
        problems.push(`${where}: header ${name}: ${JSON.stringify(raw)} ${this.#errors(validate)}`)
    }

    const body = decoded(answer.body, headers['content-encoding'])
    const contentType = headers['content-type']?.split(';')[0]?.trim().toLowerCase()
    const content = response.content ?? {}
    if (body.length === 0 && (contentType === undefined || Object.keys(content).length === 0)) return problems
    if (contentType === undefined) return [...problems, `${where}: a body without a content type`]
    const media = content[contentType]
    if (!media) {
      const declared = Object.keys(content).join(', ') || 'no body'
      return [...problems, `${where}: content type ${contentType} not declared (declared: ${declared})`]
    }
    if (!media.schema) return problems
    const text = body.toString('utf8')
    let value: unknown = text
    if (/^application\/(.+\+)?json$/.test(contentType)) {
      try {
        value = JSON.parse(text)
      } catch {
        return [...problems, `${where}: ${contentType} body is not JSON: ${text.slice(0, 200)}`]
      }
    }
    const validate = this.#validator([...pointer, 'content', contentType, 'schema'])
    if (!validate(value)) problems.push(`${where}: body ${this.#errors(validate)}: ${text.slice(0, 300)}`)
    return problems
  }
}

const contracts = new Map<string, OpenApiContract>()
/**
 * The contract of each document object already seen: an app answers the same object on every call,
 * and serialising its 100 kB again for each answer checked was a large part of every inject's time.
 */
const byDocument = new WeakMap<OpenApiDocument, OpenApiContract>()

/** One compiled contract per distinct document (the document differs only with the configuration). */
export function contractFor(doc: OpenApiDocument): OpenApiContract {
  const seen = byDocument.get(doc)
  if (seen) return seen
  const key = JSON.stringify(doc)
  let contract = contracts.get(key)
  if (!contract) {
    contract = new OpenApiContract(doc)
    contracts.set(key, contract)
  }
  byDocument.set(doc, contract)
  return contract
}
