// Helpers for web UI tests over app.inject: a cookie-keeping browser, login, CSRF tokens, users,
// seeded events, and small parsers for the HTML pages and the CSV export.
import assert from 'node:assert/strict'
import { after } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import type { App } from '../../src/app.js'
import type { Database } from '../../src/db/connect.js'
import type { EventSource, EventStatus, User, UserRole } from '../../src/db/schema.js'
import { createUser } from '../../src/domain/accounts.js'
import type { TestApp } from '../helper.js'

export type Response = LightMyRequestResponse

/** What buildTestApp needs to clean up after itself. */
export interface Cleanup {
  after(fn: () => Promise<void> | void): void
}

/**
 * A fixture built once, on first use, and shared by the tests of one file (which must only read
 * it); torn down after the file's last test. Call at module top level.
 */
export function sharedFixture<T>(build: (cleanup: Cleanup) => Promise<T>): () => Promise<T> {
  const teardown: (() => Promise<void> | void)[] = []
  after(async () => {
    for (const fn of teardown.reverse()) await fn()
  })
  let built: Promise<T> | undefined
  return () => {
    built ??= build({ after: (fn) => teardown.push(fn) })
    return built
  }
}

export const PASSWORD = 'correct horse battery staple'

/** One cookie from a Set-Cookie header: name, value and its attributes (names lower-cased). */
export interface SetCookie {
  name: string
  value: string
  attributes: Map<string, string>
  raw: string
}

export function setCookies(res: Response): SetCookie[] {
  const header = res.headers['set-cookie']
  const lines = header === undefined ? [] : Array.isArray(header) ? header : [String(header)]
  return lines.map((raw) => {
    const [pair = '', ...attrs] = raw.split(';')
    const eq = pair.indexOf('=')
    const attributes = new Map<string, string>()
    for (const attr of attrs) {
      const i = attr.indexOf('=')
      const name = (i === -1 ? attr : attr.slice(0, i)).trim().toLowerCase()
      attributes.set(name, i === -1 ? '' : attr.slice(i + 1).trim())
    }
    return { name: pair.slice(0, eq).trim(), value: pair.slice(eq + 1).trim(), attributes, raw }
  })
}

function expires(cookie: SetCookie): boolean {
  if (cookie.value === '') return true
  const maxAge = cookie.attributes.get('max-age')
  if (maxAge !== undefined && Number(maxAge) <= 0) return true
  const at = cookie.attributes.get('expires')
  return at !== undefined && Date.parse(at) <= Date.now()
}

/** A client that keeps cookies across inject calls, as a browser would. */
export class Browser {
  readonly jar = new Map<string, string>()

  constructor(
    readonly app: App,
    readonly defaultHeaders: Record<string, string> = {},
  ) {}

  /** The Cookie header this browser sends now. */
  cookieHeader(): string {
    return [...this.jar].map(([name, value]) => `${name}=${value}`).join('; ')
  }

  /** Another browser holding a copy of these cookies (e.g. to replay them later). */
  copy(): Browser {
    const other = new Browser(this.app, this.defaultHeaders)
    for (const [name, value] of this.jar) other.jar.set(name, value)
    return other
  }

  async request(
    method: 'GET' | 'POST',
    url: string,
    form?: Record<string, string>,
    headers: Record<string, string> = {},
  ): Promise<Response> {
    const all: Record<string, string> = { ...this.defaultHeaders, ...headers }
    const cookie = this.cookieHeader()
    if (cookie) all.cookie = cookie
    if (form) all['content-type'] = 'application/x-www-form-urlencoded'
    const res = await this.app.inject({
      method,
      url,
      headers: all,
      ...(form ? { payload: new URLSearchParams(form).toString() } : {}),
    })
    for (const c of setCookies(res)) {
      if (expires(c)) this.jar.delete(c.name)
      else this.jar.set(c.name, c.value)
    }
    return res
  }

  get(url: string, headers?: Record<string, string>): Promise<Response> {
    return this.request('GET', url, undefined, headers)
  }

  post(url: string, form: Record<string, string>, headers?: Record<string, string>): Promise<Response> {
    return this.request('POST', url, form, headers)
  }

  /** The CSRF token of a page's forms (GET must answer 200). */
  async csrf(path = '/settings/'): Promise<string> {
    const res = await this.get(path)
    assert.equal(res.statusCode, 200, `GET ${path} for a CSRF token answered ${res.statusCode}`)
    return csrfFrom(res.payload)
  }

  /** Posts a form with the CSRF token taken from `fromPage`, as submitting it in a browser does. */
  async submit(fromPage: string, action: string, form: Record<string, string>): Promise<Response> {
    const token = await this.csrf(fromPage)
    return this.post(action, { ...form, _csrf: token })
  }
}

/** The value of the first hidden `_csrf` field in a page. */
export function csrfFrom(html: string): string {
  const match = /<input type="hidden" name="_csrf" value="([^"]*)">/.exec(html)
  assert.ok(match?.[1], 'the page has a hidden _csrf field with a value')
  return unescapeHtml(match[1])
}

export function unescapeHtml(text: string): string {
  return text
    .replaceAll('&lt;', '<')
    .replaceAll('&gt;', '>')
    .replaceAll('&quot;', '"')
    .replaceAll('&#39;', "'")
    .replaceAll('&#96;', '`')
    .replaceAll('&amp;', '&')
}

/** The href of the link whose whole text is `text` (undefined when there is none). */
export function linkHref(html: string, text: string): string | undefined {
  for (const m of html.matchAll(/<a\b([^>]*)>([^<]*)<\/a>/g)) {
    if (m[2] !== text) continue
    const href = /\bhref="([^"]*)"/.exec(m[1] ?? '')
    if (href?.[1] !== undefined) return unescapeHtml(href[1])
  }
  return undefined
}

/** The href of the link with rel="…" (pager links), if any. */
export function relHref(html: string, rel: string): string | undefined {
  for (const m of html.matchAll(/<a\b([^>]*)>/g)) {
    const attrs = m[1] ?? ''
    if (!new RegExp(`\\brel="${rel}"`).test(attrs)) continue
    const href = /\bhref="([^"]*)"/.exec(attrs)
    if (href?.[1] !== undefined) return unescapeHtml(href[1])
  }
  return undefined
}

/** The versions shown in the log table, top to bottom (the version cell is the only td.mono). */
export function shownVersions(html: string): string[] {
  return [...html.matchAll(/<td class="mono">([^<]*)<\/td>/g)].map((m) => unescapeHtml(m[1] ?? ''))
}

/** Text of the element with this id (e.g. the one-time key or password block). */
export function textOfId(html: string, id: string): string | undefined {
  const m = new RegExp(`<code id="${id}">([^<]*)</code>`).exec(html)
  return m?.[1] === undefined ? undefined : unescapeHtml(m[1])
}

/**
 * A strict RFC 4180 reader: records end with CRLF (the last one too), a bare CR or LF outside
 * quotes is an error, quotes only around whole cells, "" inside quotes is one quote.
 */
export function parseCsv(text: string): string[][] {
  const rows: string[][] = []
  let row: string[] = []
  let i = 0
  const n = text.length
  while (i < n) {
    let cell = ''
    if (text[i] === '"') {
      i++
      for (;;) {
        if (i >= n) throw new Error('CSV: unterminated quoted cell')
        if (text[i] === '"') {
          if (text[i + 1] === '"') {
            cell += '"'
            i += 2
            continue
          }
          i++
          break
        }
        cell += text[i]
        i++
      }
    } else {
      while (i < n && text[i] !== ',' && text[i] !== '\r' && text[i] !== '\n') {
        if (text[i] === '"') throw new Error(`CSV: quote inside an unquoted cell at ${i}`)
        cell += text[i]
        i++
      }
    }
    row.push(cell)
    if (i >= n) throw new Error('CSV: the last record does not end with CRLF')
    if (text[i] === ',') {
      i++
      continue
    }
    if (text[i] === '\r' && text[i + 1] === '\n') {
      rows.push(row)
      row = []
      i += 2
      continue
    }
    throw new Error(`CSV: expected , or CRLF at ${i}, found ${JSON.stringify(text.slice(i, i + 10))}`)
  }
  return rows
}

export async function createUserIn(
  database: Database,
  accountId: number,
  email: string,
  options: { role?: UserRole; password?: string; oneTimePassword?: boolean } = {},
): Promise<User> {
  return createUser(database.db, {
    accountId,
    email,
    password: options.password ?? PASSWORD,
    role: options.role ?? 'admin',
    oneTimePassword: options.oneTimePassword ?? false,
  })
}

/** Logs in through the form (GET /login for the token and cookie, then POST /login). */
export async function login(
  app: App,
  email: string,
  password = PASSWORD,
  headers: Record<string, string> = {},
): Promise<Browser> {
  const browser = new Browser(app, headers)
  const token = await browser.csrf('/login')
  const res = await browser.post('/login', { _csrf: token, email, password })
  assert.equal(res.statusCode, 303, `login of ${email} answered ${res.statusCode}`)
  assert.ok(browser.jar.has('shiplog_session'), 'a session cookie was set')
  return browser
}

/** Creates a user in the account and returns a browser logged in as them. */
export async function userSession(
  ctx: TestApp,
  accountId: number,
  email: string,
  role: UserRole = 'admin',
): Promise<{ browser: Browser; user: User }> {
  const user = await createUserIn(ctx.database, accountId, email, { role })
  return { browser: await login(ctx.app, email), user }
}

/** Records one event through POST /deploy, as a pipeline does; returns the status and body. */
export async function deploy(
  app: App,
  key: string,
  fields: Record<string, string>,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await app.inject({
    method: 'POST',
    url: '/deploy',
    headers: { 'x-api-key': key, 'content-type': 'application/json' },
    payload: JSON.stringify(fields),
  })
  return { status: res.statusCode, body: res.json() as Record<string, unknown> }
}

export interface EventSeed {
  service?: string
  environment?: string
  version?: string
  status?: EventStatus
  url?: string | null
  commit_sha?: string | null
  description?: string | null
  deployer?: string | null
  source?: EventSource
  api_key_name?: string | null
  received_at?: number
}

export const SEED_EPOCH = Date.UTC(2026, 0, 1)

/**
 * Stores events straight into the database (fast, with chosen times). Returns their ids in the
 * order given; ids grow in that order. Times default to one minute apart from SEED_EPOCH.
 */
export async function insertEvents(
  database: Database,
  accountId: number,
  seeds: EventSeed[],
): Promise<number[]> {
  const ids: number[] = []
  for (let start = 0; start < seeds.length; start += 500) {
    const values = seeds.slice(start, start + 500).map((s, j) => ({
      account_id: accountId,
      service: s.service ?? 'svc',
      environment: s.environment ?? 'prod',
      version: s.version ?? `v${start + j}`,
      status: s.status ?? ('Deployed' as const),
      url: s.url ?? null,
      commit_sha: s.commit_sha ?? null,
      description: s.description ?? null,
      deployer: s.deployer ?? null,
      source: s.source ?? ('deploy' as const),
      api_key_id: null,
      api_key_name: s.api_key_name === undefined ? 'ci' : s.api_key_name,
      received_at: s.received_at ?? SEED_EPOCH + (start + j) * 60_000,
      occurred_at: s.received_at ?? SEED_EPOCH + (start + j) * 60_000,
    }))
    const rows = await database.db.insertInto('events').values(values).returning('id').execute()
    ids.push(...rows.map((r) => r.id).sort((a, b) => a - b))
  }
  return ids
}

export async function userRow(database: Database, id: number): Promise<User | undefined> {
  return database.db.selectFrom('users').selectAll().where('id', '=', id).executeTakeFirst()
}

export async function countRows(
  database: Database,
  table: 'users' | 'api_keys' | 'sessions',
): Promise<number> {
  const row = await database.db
    .selectFrom(table)
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .executeTakeFirstOrThrow()
  return Number(row.n)
}

/** Asserts a 303/302/301 redirect to `path` (compared without the query unless it has one). */
export function assertRedirect(res: Response, path: string | RegExp, status?: number): void {
  assert.ok(
    res.statusCode >= 300 && res.statusCode < 400,
    `expected a redirect, got ${res.statusCode}: ${res.payload.slice(0, 200)}`,
  )
  if (status !== undefined) assert.equal(res.statusCode, status)
  const location = String(res.headers.location ?? '')
  if (typeof path === 'string') {
    const compared = path.includes('?') ? location : location.split('?')[0]
    assert.equal(compared, path, `redirect target of ${res.statusCode}`)
  } else assert.match(location, path)
}
