// Hostile requests to every route the app has, for test/api/route-fuzz.test.ts: the route list is
// read from Fastify itself (printRoutes), so a new route is fuzzed without anyone listing it.
import fc from 'fast-check'

export interface AppRoute {
  /** The pattern as registered, e.g. /settings/webhooks/:id/ or /docs/* */
  path: string
  methods: string[]
}

/**
 * Reads `app.printRoutes({ commonPrefix: false })`: a tree whose lines are "<indent>├── <segment>
 * (<METHODS>)", each segment appended to its parent's path.
 */
export function routesFromTree(tree: string): AppRoute[] {
  const stack: string[] = []
  const out: AppRoute[] = []
  for (const line of tree.split('\n')) {
    const m = /^(.*?)(?:├── |└── )(.+) \(([A-Z, ]+)\)$/.exec(line)
    if (!m) continue
    const depth = [...(m[1] ?? '')].length / 4
    stack.length = depth
    stack.push(m[2] ?? '')
    out.push({ path: stack.join(''), methods: (m[3] ?? '').split(',').map((s) => s.trim()) })
  }
  return out
}

/** A value as it goes on the wire: `encoded` is already percent-encoded for a URL or form. */
export interface WireValue {
  encoded: string
  /** The value as a JSON body carries it (lone surrogates included). */
  json: string
  /** Holds U+0000 or another C0 control once decoded: no route may store it or find a thing by it. */
  control: boolean
}

/** C0 controls and DEL: what SPEC §1.1 refused from the start. */
function hasC0(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i)
    if (c <= 0x1f || c === 0x7f) return true
  }
  return false
}

const text = (value: string, control = false): WireValue => ({
  encoded: value.isWellFormed() ? encodeURIComponent(value) : encodeURIComponent(value.toWellFormed()),
  json: value,
  control,
})

/** Percent-sequences sent as they are: broken escapes, overlong and surrogate UTF-8, escaped NUL. */
const raw = (encoded: string, json: string, control = false): WireValue => ({ encoded, json, control })

const HOSTILE_TEXT: WireValue[] = [
  text('\u0000', true),
  text('a\u0000b', true),
  text('billing\u0000', true),
  text('\u0001', true),
  text('x\u001fy', true),
  text('\u007f', true),
  text('\r\n', true),
  text('\u0085'),
  text('red\u009b31m'),
  text('x\u202ey'),
  text('\u2066iso\u2069'),
  text('\u2028'),
  text('\ufeff'),
  text('\uffff'),
  text('\u{10ffff}'),
  text('Déploiement ✓ 部署 🚀'),
  text('<script>alert(1)</script>'),
  text("' OR '1'='1"),
  text('../../etc/passwd'),
  text('a/b'),
  text(''),
  text(' '),
  text('-1'),
  text('0x10'),
  text('1e999'),
  text('99999999999999999999999'),
  text('2026-11-20'),
  text('x'.repeat(5000)),
  text('\u{1f680}'.repeat(3000)),
  raw('%', '%'),
  raw('%zz', '%zz'),
  raw('%00', '\u0000', true),
  raw('a%00', 'a\u0000', true),
  raw('%25%30%30', '%00'),
  raw('%ED%A0%80', '\ud800'),
  raw('%C0%80', '\udfff'),
  raw('%FF%FE', '\ud83d'),
  raw('%E2%80%AE', '\u202e'),
  raw('%C2%9B', '\u009b'),
]

export const hostileValue: fc.Arbitrary<WireValue> = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...HOSTILE_TEXT) },
  {
    weight: 2,
    arbitrary: fc
      .tuple(fc.constantFrom(...HOSTILE_TEXT), fc.string({ maxLength: 12 }), fc.string({ maxLength: 12 }))
      .map(([h, a, b]) => ({
        encoded: `${encodeURIComponent(a.toWellFormed())}${h.encoded}${encodeURIComponent(b.toWellFormed())}`,
        json: `${a}${h.json}${b}`,
        control: h.control,
      })),
  },
  {
    weight: 1,
    arbitrary: fc.string({ unit: 'binary', maxLength: 30 }).map((s) => text(s, hasC0(s))),
  },
)

/** Query parameter names the routes read, and one nobody reads. */
export const QUERY_NAMES = [
  'service',
  'environment',
  'env',
  'app',
  'version',
  'status',
  'from',
  'to',
  'tz',
  'at',
  'before',
  'after',
  'limit',
  'cursor',
  'team',
  'q',
  'filter',
  'next',
  'state',
  'code',
  'error',
  'bom',
  'format',
  'days',
  'errors',
  'last',
  'outcome',
  'action',
  'actor',
  'target',
  'id',
  'unknown',
]

/** Form field names the forms read. */
export const FIELD_NAMES = [
  'name',
  'email',
  'role',
  'url',
  'format',
  'status',
  'outcome',
  'environments',
  'services',
  'grafana_token',
  'team',
  'description',
  'repository_url',
  'runbook_url',
  'dashboard_url',
  'environment',
  'action',
  'minutes',
  'days',
  'password',
  'confirm',
  'account',
  'current',
  'password_login',
  'scope',
  'scopes_offered',
  'app',
  'env',
  'version',
  'service',
  'commit',
  'deployer',
  'next',
  'limit',
  'cursor',
]
