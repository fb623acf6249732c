// Hardening proven on the real server process: slow clients are cut off within the configured
// bounds while others are served, size limits hold on real sockets, and no secret reaches the log.
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { connect } from 'node:net'
import { test } from 'node:test'
import { parseDatabaseUrl } from '../../src/config.js'
import { openDatabase } from '../../src/db/connect.js'
import { migrateToLatest } from '../../src/db/migrate.js'
import { createUser } from '../../src/domain/accounts.js'
import { createApiKey, revokeApiKey } from '../../src/domain/keys.js'
import { redactRequestUrl } from '../../src/http/logging.js'
import { addTenant, type Cleanup, freshDatabaseUrl } from '../helper.js'
import { type ServerProcess, sleep, startServer } from '../support/processes.js'
import { csrfFrom, PASSWORD, textOfId } from '../support/ui.js'

const ADMIN_EMAIL = 'ada@example.com'
const EVENT = { service: 'App1', environment: 'Prod', version: '1.0.3', status: 'Deployed' }

interface Prepared {
  databaseUrl: string
  accountId: number
  key: string
  revokedKey: string
}

/** A database with the account "Acme", its admin, one live and one revoked key, for a server process. */
async function prepare(t: Cleanup): Promise<Prepared> {
  const databaseUrl = await freshDatabaseUrl(t)
  const database = openDatabase(parseDatabaseUrl(databaseUrl))
  try {
    await migrateToLatest(database)
    const { account, key } = await addTenant(database, 'Acme', 'ci')
    await createUser(database.db, {
      accountId: account.id,
      email: ADMIN_EMAIL,
      password: PASSWORD,
      role: 'admin',
      oneTimePassword: false,
    })
    const revoked = await createApiKey(database.db, { accountId: account.id, name: 'old', createdBy: 'test' })
    await revokeApiKey(database.db, account.id, revoked.key)
    return { databaseUrl, accountId: account.id, key, revokedKey: revoked.key }
  } finally {
    await database.close()
  }
}

async function eventCount(databaseUrl: string): Promise<number> {
  const database = openDatabase(parseDatabaseUrl(databaseUrl))
  try {
    const row = await database.db
      .selectFrom('events')
      .select((eb) => eb.fn.countAll<number | string>().as('n'))
      .executeTakeFirstOrThrow()
    return Number(row.n)
  } finally {
    await database.close()
  }
}

interface Cutoff {
  /** From connecting until the server closed the connection. */
  elapsedMs: number
  /** Everything the server sent before closing. */
  received: string
}

/**
 * A slowloris client: connects, writes `prefix` at once, then one more byte of `drip(i)` every
 * `everyMs`, never finishing, until the server closes the connection. Fails if the server has not
 * done so after `giveUpMs`.
 */
function slowClient(
  port: number,
  options: { prefix: string; drip: (i: number) => string; everyMs: number; giveUpMs: number },
): Promise<Cutoff> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1')
    let started = 0
    let received = ''
    let sent = 0
    let dripper: NodeJS.Timeout | undefined
    const giveUp = setTimeout(() => {
      clearInterval(dripper)
      socket.destroy()
      reject(new Error(`the server kept a slow client for ${options.giveUpMs} ms; it said: ${received}`))
    }, options.giveUpMs)
    socket.setEncoding('latin1')
    socket.on('connect', () => {
      started = Date.now()
      if (options.prefix) socket.write(options.prefix)
      dripper = setInterval(() => {
        if (!socket.destroyed && socket.writable) socket.write(options.drip(sent++))
      }, options.everyMs)
    })
    socket.on('data', (chunk: string) => {
      received += chunk
    })
    // Writing to a connection the server has just cut is expected here.
    socket.on('error', () => {})
    socket.on('close', () => {
      clearInterval(dripper)
      clearTimeout(giveUp)
      resolve({ elapsedMs: Date.now() - started, received })
    })
  })
}

/** Writes `request` and reads until the end of the response's head; the status code, or 0 if the connection closed first. */
function statusOf(port: number, request: string | Buffer, timeoutMs = 5_000): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1')
    let received = ''
    const timer = setTimeout(() => {
      socket.destroy()
      reject(new Error(`no answer within ${timeoutMs} ms; got ${JSON.stringify(received.slice(0, 200))}`))
    }, timeoutMs)
    const done = (status: number) => {
      clearTimeout(timer)
      socket.destroy()
      resolve(status)
    }
    socket.setEncoding('latin1')
    socket.on('data', (chunk: string) => {
      received += chunk
      if (received.includes('\r\n\r\n')) done(Number(received.split(' ')[1]))
    })
    socket.on('error', () => {})
    socket.on('close', () => done(Number(received.split(' ')[1] ?? 0) || 0))
    socket.write(request)
  })
}

function deployRequest(key: string): RequestInit {
  return {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key },
    body: JSON.stringify({ ...EVENT, version: `v-${randomBytes(3).toString('hex')}` }),
    signal: AbortSignal.timeout(10_000),
  }
}

test('slow clients are cut off after SHIPLOG_HEADERS_TIMEOUT_MS / SHIPLOG_REQUEST_TIMEOUT_MS while other clients are served', async (t) => {
  const HEADERS_MS = 1000
  const REQUEST_MS = 2000
  // The server sweeps its connections every quarter of the headers bound; the rest is room for a
  // busy, shared test machine. The bounds without configuration would be 30 s and more.
  const SLACK_MS = HEADERS_MS / 4 + 1500
  const prepared = await prepare(t)
  const server = await startServer(t, {
    databaseUrl: prepared.databaseUrl,
    env: {
      SHIPLOG_HEADERS_TIMEOUT_MS: String(HEADERS_MS),
      SHIPLOG_REQUEST_TIMEOUT_MS: String(REQUEST_MS),
      SHIPLOG_RATE_LIMIT: '100000',
    },
  })
  const giveUpMs = REQUEST_MS + 15_000

  const headerTricklers = Array.from({ length: 8 }, () =>
    slowClient(server.port, {
      prefix: 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: ',
      drip: () => 'a',
      everyMs: 100,
      giveUpMs,
    }),
  )
  const silent = Array.from({ length: 4 }, () =>
    slowClient(server.port, { prefix: '', drip: () => '', everyMs: 100, giveUpMs }),
  )
  const body = JSON.stringify(EVENT)
  const bodyTricklers = Array.from({ length: 4 }, () =>
    slowClient(server.port, {
      prefix: [
        'POST /deploy HTTP/1.1',
        'Host: 127.0.0.1',
        `X-API-Key: ${prepared.key}`,
        'Content-Type: application/json',
        // Longer than the body can ever get at this pace: the request never completes.
        `Content-Length: ${body.length + 1000}`,
        '',
        '',
      ].join('\r\n'),
      drip: (i) => (i < body.length ? body.charAt(i) : ' '),
      everyMs: 100,
      giveUpMs,
    }),
  )

  // Meanwhile ordinary clients come and go, and are answered promptly throughout.
  const served: number[] = []
  let recorded = 0
  const until = Date.now() + REQUEST_MS + 1000
  while (Date.now() < until) {
    const began = Date.now()
    const health = await fetch(`${server.url}/healthz`, { signal: AbortSignal.timeout(10_000) })
    await health.arrayBuffer()
    assert.equal(health.status, 200)
    const deploy = await fetch(`${server.url}/deploy`, deployRequest(prepared.key))
    await deploy.arrayBuffer()
    assert.equal(deploy.status, 201)
    recorded++
    served.push(Date.now() - began)
    await sleep(150)
  }
  assert.ok(served.length >= 5, `ordinary clients were served ${served.length} times`)
  assert.ok(Math.max(...served) < 2_000, `ordinary clients waited at most ${Math.max(...served)} ms`)

  // A client that paces itself within the bounds is still served (the bounds are not too tight).
  const patient = await new Promise<string>((resolve, reject) => {
    const request = 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n'
    const socket = connect(server.port, '127.0.0.1')
    let answer = ''
    let at = 0
    socket.setEncoding('latin1')
    socket.on('connect', () => {
      const timer = setInterval(() => {
        socket.write(request.slice(at, at + 8))
        at += 8
        if (at >= request.length) clearInterval(timer)
      }, HEADERS_MS / 20)
    })
    socket.on('data', (chunk: string) => {
      answer += chunk
    })
    socket.on('error', reject)
    socket.on('close', () => resolve(answer))
  })
  assert.match(patient, /^HTTP\/1\.1 200 /, 'a slow but timely client gets its answer')

  const check = (label: string, cut: Cutoff, boundMs: number) => {
    t.diagnostic(`${label}: cut off after ${cut.elapsedMs} ms (bound ${boundMs} ms)`)
    assert.ok(
      cut.elapsedMs >= boundMs - 100,
      `${label}: cut after ${cut.elapsedMs} ms, not before ${boundMs} ms`,
    )
    assert.ok(
      cut.elapsedMs <= boundMs + SLACK_MS,
      `${label}: cut after ${cut.elapsedMs} ms, within ${boundMs} ms + ${SLACK_MS} ms`,
    )
    assert.match(cut.received, /^HTTP\/1\.1 408 /, `${label}: answered 408 before being cut off`)
  }
  for (const cut of await Promise.all(headerTricklers))
    check('headers sent a byte at a time', cut, HEADERS_MS)
  for (const cut of await Promise.all(silent)) check('a connection that sends nothing', cut, HEADERS_MS)
  for (const cut of await Promise.all(bodyTricklers)) check('a body sent a byte at a time', cut, REQUEST_MS)

  assert.equal(await eventCount(prepared.databaseUrl), recorded, 'the unfinished bodies recorded nothing')
  assert.ok(server.isRunning())
  assert.equal((await fetch(`${server.url}/readyz`)).status, 200)
})

test('size limits on real sockets: headers over 16 KiB → 431; a body over 16 KiB → 413 without reading it; a form over 64 KiB → 413', async (t) => {
  const prepared = await prepare(t)
  const server = await startServer(t, { databaseUrl: prepared.databaseUrl })
  const head = (lines: string[]) =>
    `${[...lines, 'Host: 127.0.0.1', 'Connection: close'].join('\r\n')}\r\n\r\n`

  const bigHeader = head([
    'GET /put?app=a&env=b&version=c&status=Deployed HTTP/1.1',
    `X-API-Key: ${prepared.key}`,
    `X-Pad: ${'a'.repeat(20 * 1024)}`,
  ])
  assert.equal(await statusOf(server.port, bigHeader), 431)

  // Ten gigabytes announced, none sent: the answer comes from the Content-Length alone.
  const began = Date.now()
  const announced = head([
    'POST /deploy HTTP/1.1',
    `X-API-Key: ${prepared.key}`,
    'Content-Type: application/json',
    'Content-Length: 10737418240',
  ])
  assert.equal(await statusOf(server.port, announced), 413)
  assert.ok(Date.now() - began < 3_000, 'refused at once')

  // Without a Content-Length the limit is counted while reading.
  const chunk = `{"description":"${'x'.repeat(8 * 1024)}",`
  const chunked =
    head([
      'POST /put HTTP/1.1',
      `X-API-Key: ${prepared.key}`,
      'Content-Type: application/json',
      'Transfer-Encoding: chunked',
    ]) +
    [chunk, chunk, chunk].map((c) => `${c.length.toString(16)}\r\n${c}\r\n`).join('') +
    '0\r\n\r\n'
  assert.equal(await statusOf(server.port, chunked), 413)

  const form = `email=a%40b.c&password=${'p'.repeat(70 * 1024)}`
  const bigForm = `${head(['POST /login HTTP/1.1', 'Content-Type: application/x-www-form-urlencoded', `Content-Length: ${form.length}`])}${form}`
  assert.equal(await statusOf(server.port, bigForm), 413)

  assert.equal(await eventCount(prepared.databaseUrl), 0)
  const ok = await fetch(`${server.url}/deploy`, deployRequest(prepared.key))
  assert.equal(ok.status, 201, 'the server is fine afterwards')
})

test('the real server sends the security headers on pages and on API answers', async (t) => {
  const prepared = await prepare(t)
  const server = await startServer(t, { databaseUrl: prepared.databaseUrl })
  const page = await fetch(`${server.url}/login`)
  await page.arrayBuffer()
  const csp = page.headers.get('content-security-policy') ?? ''
  assert.match(csp, /script-src 'self'(;|$)/)
  assert.match(csp, /frame-ancestors 'none'/)
  assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/)
  assert.equal(page.headers.get('x-content-type-options'), 'nosniff')
  assert.equal(page.headers.get('cache-control'), 'no-store')
  assert.equal(page.headers.get('x-powered-by'), null)

  const refused = await fetch(
    `${server.url}/deploy`,
    deployRequest('shl_wrongwrongwrongwrongwrongwrongwrongwrong'),
  )
  assert.equal(refused.status, 401)
  assert.match(refused.headers.get('content-type') ?? '', /^application\/problem\+json/)
  assert.equal(refused.headers.get('x-content-type-options'), 'nosniff')
})

/** A cookie-keeping client over fetch, for the real server. */
class WebClient {
  readonly jar = new Map<string, string>()
  constructor(readonly base: string) {}

  async request(
    method: 'GET' | 'POST',
    path: string,
    form?: Record<string, string>,
  ): Promise<{ status: number; body: string; location: string | null }> {
    const headers: Record<string, string> = {}
    if (this.jar.size > 0) headers.cookie = [...this.jar].map(([n, v]) => `${n}=${v}`).join('; ')
    if (form) headers['content-type'] = 'application/x-www-form-urlencoded'
    const res = await fetch(`${this.base}${path}`, {
      method,
      headers,
      redirect: 'manual',
      signal: AbortSignal.timeout(10_000),
      ...(form ? { body: new URLSearchParams(form).toString() } : {}),
    })
    for (const line of res.headers.getSetCookie()) {
      const [pair = ''] = line.split(';')
      const eq = pair.indexOf('=')
      const value = pair.slice(eq + 1)
      if (value === '' || /max-age=0|expires=thu, 01 jan 1970/i.test(line)) this.jar.delete(pair.slice(0, eq))
      else this.jar.set(pair.slice(0, eq), value)
    }
    return { status: res.status, body: await res.text(), location: res.headers.get('location') }
  }

  async submit(page: string, action: string, form: Record<string, string>) {
    const token = csrfFrom((await this.request('GET', page)).body)
    return { token, res: await this.request('POST', action, { ...form, _csrf: token }) }
  }
}

/** Turns pino's rendering of Buffers ({"type":"Buffer","data":[…]}) back into text, so bytes are scanned too. */
function decodedBuffers(log: string): string {
  return [...log.matchAll(/"data":\[([\d,]*)\]/g)]
    .map((m) => Buffer.from((m[1] ?? '').split(',').filter(Boolean).map(Number)).toString('latin1'))
    .join('\n')
}

test('no API key, password, session cookie or CSRF token reaches the log, even at LOG_LEVEL=trace', async (t) => {
  const prepared = await prepare(t)
  const server: ServerProcess = await startServer(t, {
    databaseUrl: prepared.databaseUrl,
    env: { LOG_LEVEL: 'trace' },
  })
  const { key, revokedKey } = prepared
  const secrets = new Map<string, string>()
  const keep = (label: string, value: string) => {
    assert.ok(value.length >= 8, `${label} is long enough to search for`)
    secrets.set(label, value)
  }
  keep('the API key', key)
  keep('the API key without its prefix', key.slice(4))
  keep('the revoked key', revokedKey)
  keep('the revoked key without its prefix', revokedKey.slice(4))
  const unknownKey = `shl_${randomBytes(30).toString('base64url').replace(/[-_]/g, 'x').slice(0, 40)}`
  keep('an unknown key', unknownKey)
  const malformedKey = `not-a-key-${randomBytes(12).toString('hex')}`
  keep('a malformed key', malformedKey)
  const query = 'app=App1&env=Prod&version=1.0.3&status=Deployed'

  // The three forms, each key header spelling, and bad keys of every kind.
  const calls: Array<[string, RequestInit, number]> = [
    [`/put?${query}`, { headers: { 'x-api-key': key } }, 201],
    [
      `/put`,
      {
        method: 'POST',
        headers: { 'X-API-KEY': key },
        body: JSON.stringify({ app: 'App1', env: 'Prod', version: '1', status: 'Deployed', key }),
      },
      201,
    ],
    [
      `/put`,
      {
        method: 'POST',
        headers: { 'x-api-key': key, 'content-type': 'application/x-www-form-urlencoded' },
        body: `${query}&key=${key}`,
      },
      201,
    ],
    [
      `/deploy`,
      {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify(EVENT),
      },
      201,
    ],
    [
      `/deploy`,
      {
        method: 'POST',
        headers: { authorization: `bearer ${key}`, 'content-type': 'application/json' },
        body: '{not json',
      },
      400,
    ],
    [
      `/deploy`,
      {
        method: 'POST',
        headers: { 'x-api-key': key, 'content-type': 'application/json' },
        body: JSON.stringify({ ...EVENT, status: key }),
      },
      422,
    ],
    // No form takes the key from the URL, but a pipeline that puts it there must not see it logged.
    [`/put?${query}&key=${key}`, {}, 401],
    [`/put?${query}&api_key=${key}`, {}, 401],
    // Percent-encoded, the key is still a key once decoded.
    [`/put?${query}&version=${key.replace('shl_', 'shl%5F')}`, {}, 401],
    [`/put?${query}&note=%73${key.slice(1)}`, {}, 401],
    [`/put/${key.replace('shl_', 'shl%5f')}?${query}`, {}, 404],
    [`/put?${query}&v=${key.replace('shl_', 'shl%255F')}`, {}, 401],
    [`/put/${key}?${query}`, { headers: { 'x-api-key': key } }, 404],
    [`/put?${query}`, { headers: { 'x-api-key': revokedKey } }, 401],
    [`/put?${query}`, { headers: { 'x-api-key': unknownKey } }, 401],
    [`/put?${query}`, { headers: { authorization: `Bearer ${malformedKey}` } }, 401],
    [`/deploy`, { method: 'POST', headers: { 'x-api-key': malformedKey }, body: '{}' }, 401],
    [`/deploy`, { method: 'GET', headers: { 'x-api-key': key } }, 405],
  ]
  for (const [path, init, expected] of calls) {
    const res = await fetch(`${server.url}${path}`, { ...init, signal: AbortSignal.timeout(10_000) })
    await res.arrayBuffer()
    assert.equal(res.status, expected, `${init.method ?? 'GET'} ${path.replace(key, 'KEY')}`)
  }
  // Requests the HTTP parser itself refuses: Node attaches their raw bytes, key header included.
  assert.equal(
    await statusOf(
      server.port,
      `GET /put?${query} HTTP/1.1\r\nHost: x\r\nX-API-Key: ${key}\r\nBroken header line\r\n\r\n`,
    ),
    400,
  )
  assert.equal(
    await statusOf(
      server.port,
      `GET /put?${query} HTTP/1.1\r\nHost: x\r\nX-API-Key: ${key}\r\nX-Pad: ${'a'.repeat(20 * 1024)}\r\n\r\n`,
    ),
    431,
  )

  // A key sent as the Host header (fetch cannot set it): the request log must not carry it.
  assert.equal(await statusOf(server.port, `GET /healthz HTTP/1.1\r\nHost: ${key}\r\n\r\n`), 200)
  assert.equal(await statusOf(server.port, `GET /nowhere HTTP/1.1\r\nHost: ${key}:80\r\n\r\n`), 404)

  // The web UI: failed and successful logins, a forged form, a key and a user created, a password
  // changed, logout.
  const web = new WebClient(server.url)
  const wrongPassword = `${PASSWORD}!`
  keep('a mistyped password', wrongPassword)
  keep('the password', PASSWORD)
  const failed = await web.submit('/login', '/login', { email: ADMIN_EMAIL, password: wrongPassword })
  assert.equal(failed.res.status, 401)
  keep('a CSRF token', failed.token)
  const forged = await web.request('POST', '/login', {
    email: ADMIN_EMAIL,
    password: PASSWORD,
    _csrf: `${failed.token}x`,
  })
  assert.equal(forged.status, 403)
  const loggedIn = await web.submit('/login', '/login', { email: ADMIN_EMAIL, password: PASSWORD })
  assert.equal(loggedIn.res.status, 303)
  const session = web.jar.get('shiplog_session')
  const csrfCookie = web.jar.get('shiplog_csrf')
  assert.ok(session && csrfCookie)
  keep('the session cookie', session)
  keep('the session token (without its signature)', decodeURIComponent(session).split('.')[0] ?? '')
  keep('the CSRF cookie', csrfCookie)
  assert.equal((await web.request('GET', '/logs/')).status, 200)
  assert.equal((await web.request('GET', `/logs/export.csv?version=${encodeURIComponent(key)}`)).status, 200)

  // Post/redirect/get: each secret is on the page the form redirects to.
  const createdKey = await web.submit('/settings/', '/settings/keys', { name: 'from-the-ui' })
  assert.equal(createdKey.res.status, 303)
  const newKey = textOfId((await web.request('GET', '/settings/')).body, 'new-key')
  assert.ok(newKey)
  keep('a key created in Settings', newKey)
  const createdUser = await web.submit('/settings/', '/settings/users', {
    email: 'mel@example.com',
    role: 'member',
  })
  assert.equal(createdUser.res.status, 303)
  const oneTime = textOfId((await web.request('GET', '/settings/')).body, 'new-password')
  assert.ok(oneTime)
  keep('a one-time password', oneTime)
  const newPassword = `another ${randomBytes(6).toString('hex')} password`
  keep('a new password', newPassword)
  const changed = await web.submit('/account/password', '/account/password', {
    current: PASSWORD,
    password: newPassword,
    confirm: newPassword,
  })
  assert.equal(changed.res.status, 303)
  const bye = await web.submit('/logs/', '/logout', {})
  assert.equal(bye.res.status, 303)
  // The old session cookie, replayed after logout.
  const replay = await fetch(`${server.url}/logs/`, {
    headers: { cookie: `shiplog_session=${session}` },
    redirect: 'manual',
  })
  assert.equal(replay.status, 303)

  server.signal('SIGTERM')
  assert.deepEqual(await server.waitForExit(15_000), { code: 0, signal: null })
  const log = server.output()
  const haystack = `${log}\n${decodedBuffers(log)}`
  const leaks: string[] = []
  for (const [label, value] of secrets) {
    const spellings = new Set([
      value,
      encodeURIComponent(value),
      value.replaceAll(' ', '+'),
      JSON.stringify(value).slice(1, -1),
    ])
    for (const spelling of spellings) if (haystack.includes(spelling)) leaks.push(`${label} (${spelling})`)
  }
  assert.deepEqual(leaks, [], `secrets found in the log:\n${leaks.join('\n')}`)
  // The log did record all this (a silent logger would pass the scan), with the secrets blanked.
  const logged = (log.match(/"request completed"/g) ?? []).length
  assert.ok(logged >= calls.length + 10, `every request was logged (${logged} lines)`)
  assert.ok(
    log.includes('"url":"/put?app=App1&env=Prod&version=1.0.3&status=Deployed&key=[redacted]"'),
    'the URL carrying a key was logged, with the key blanked',
  )
  // The refused request is logged by its parser error code only: its raw bytes (headers and all)
  // never reach the log.
  assert.match(log, /"code":"HPE_[A-Z_]+"[^\n]*client error answered 400/, 'the parser error was logged')
  assert.ok(!log.includes('rawPacket'), 'without its bytes')
})

test('redactRequestUrl blanks key-shaped strings and credential-like parameters, and keeps the rest', () => {
  const key = 'shl_0123456789abcdefghijABCDEFGHIJ0123456789'
  assert.equal(redactRequestUrl('/put?app=A&env=P'), '/put?app=A&env=P')
  assert.equal(redactRequestUrl(`/put?app=A&key=${key}`), '/put?app=A&key=[redacted]')
  assert.equal(
    redactRequestUrl('/put?app=A&api%5Fkey=abcdef&token=t&password=p'),
    '/put?app=A&api%5Fkey=[redacted]&token=[redacted]&password=[redacted]',
  )
  assert.equal(redactRequestUrl(`/x/${key}/y`), '/x/shl_[redacted]/y')
  assert.equal(redactRequestUrl(`/put?version=${key}`), '/put?version=shl_[redacted]')
  assert.equal(
    redactRequestUrl('/logs/?service=a&status=Failed&before=12'),
    '/logs/?service=a&status=Failed&before=12',
  )
  assert.equal(redactRequestUrl('/put?%zz=1&key'), '/put?%zz=1&key')
  // Percent-encoded keys, in values, names and path segments, beside a broken escape.
  const encoded = key.replace('shl_', 'shl%5F')
  assert.equal(redactRequestUrl(`/put?version=${encoded}&x=%zz`), '/put?version=shl_[redacted]&x=%zz')
  assert.equal(redactRequestUrl(`/put?v=%73${key.slice(1)}`), '/put?v=shl_[redacted]')
  assert.equal(redactRequestUrl(`/put?${encoded}`), '/put?shl_[redacted]')
  assert.equal(redactRequestUrl(`/put/${encoded}/x`), '/put/shl_[redacted]/x')
  assert.equal(redactRequestUrl(`/put?v=${key.slice(0, 10)}%41${key.slice(10)}`), '/put?v=shl_[redacted]')
  assert.equal(redactRequestUrl(`/put?v=${key.replace('shl_', 'shl%255f')}`), '/put?v=shl_[redacted]')
  assert.equal(redactRequestUrl(`/put?v=${key.replace('shl_', 'SHL_')}`), '/put?v=shl_[redacted]')
})
