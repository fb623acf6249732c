// A small HTTP client for the read benchmarks: logs in through the real form (CSRF token and cookies),
// then times pages over one kept-alive connection and streams downloads, counting records as the
// bytes arrive (nothing is buffered whole).
import http from 'node:http'
import { performance } from 'node:perf_hooks'

/**
 * @typedef {object} Session
 * @property {string} baseUrl
 * @property {http.Agent} agent one socket, kept alive
 * @property {Map<string, string>} cookies
 */

/** @param {Session} session */
function cookieHeader(session) {
  return [...session.cookies.entries()].map(([name, value]) => `${name}=${value}`).join('; ')
}

/** @param {Session} session @param {http.IncomingMessage} res */
function keepCookies(session, res) {
  for (const line of res.headers['set-cookie'] ?? []) {
    const pair = line.split(';', 1)[0] ?? ''
    const eq = pair.indexOf('=')
    if (eq > 0) session.cookies.set(pair.slice(0, eq).trim(), pair.slice(eq + 1).trim())
  }
}

/**
 * One request; `onData` sees each chunk of the body. Resolves when the body has ended.
 * @param {Session} session
 * @param {{ method?: string, path: string, body?: string, headers?: Record<string, string>,
 *   timeoutMs?: number, onResponse?: (res: http.IncomingMessage) => void, onData?: (chunk: Buffer) => void }} options
 * @returns {Promise<{ status: number, headers: http.IncomingHttpHeaders, reused: boolean }>}
 */
export function request(session, options) {
  const { method = 'GET', path, body, headers = {}, timeoutMs = 60_000, onResponse, onData } = options
  return new Promise((resolve, reject) => {
    const req = http.request(`${session.baseUrl}${path}`, {
      method,
      agent: session.agent,
      headers: {
        ...headers,
        ...(session.cookies.size > 0 ? { cookie: cookieHeader(session) } : {}),
        ...(body === undefined ? {} : { 'content-length': String(Buffer.byteLength(body)) }),
      },
    })
    const timer = setTimeout(
      () => req.destroy(new Error(`${method} ${path} took longer than ${timeoutMs} ms`)),
      timeoutMs,
    )
    req.once('error', (err) => {
      clearTimeout(timer)
      reject(err)
    })
    req.once('response', (res) => {
      keepCookies(session, res)
      onResponse?.(res)
      res.on('data', (chunk) => onData?.(chunk))
      res.once('error', (err) => {
        clearTimeout(timer)
        reject(err)
      })
      res.once('end', () => {
        clearTimeout(timer)
        resolve({ status: res.statusCode ?? 0, headers: res.headers, reused: req.reusedSocket })
      })
    })
    req.end(body)
  })
}

/** GET returning the body as text (small pages only). @param {Session} session @param {string} path */
export async function getText(session, path) {
  /** @type {Buffer[]} */
  const chunks = []
  const res = await request(session, { path, onData: (c) => chunks.push(c) })
  return { ...res, text: Buffer.concat(chunks).toString('utf8') }
}

/**
 * Logs in through GET /login (hidden `_csrf` field + CSRF cookie) and POST /login (form-encoded).
 * @param {string} baseUrl @param {string} email @param {string} password
 * @returns {Promise<Session>}
 */
export async function login(baseUrl, email, password) {
  /** @type {Session} */
  const session = {
    baseUrl,
    agent: new http.Agent({ keepAlive: true, maxSockets: 1 }),
    cookies: new Map(),
  }
  const page = await getText(session, '/login')
  if (page.status !== 200) throw new Error(`GET /login answered ${page.status}`)
  const token =
    /name="_csrf"\s+value="([^"]+)"/.exec(page.text)?.[1] ??
    /value="([^"]+)"\s+name="_csrf"/.exec(page.text)?.[1]
  if (!token) throw new Error('GET /login: no _csrf field in the form')
  const form = new URLSearchParams({ email, password, _csrf: token.replaceAll('&amp;', '&') }).toString()
  const res = await request(session, {
    method: 'POST',
    path: '/login',
    body: form,
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
  })
  if (res.status !== 303 || !session.cookies.has('shiplog_session'))
    throw new Error(`POST /login answered ${res.status} without a session cookie`)
  return session
}

/** @param {Session} session */
export function closeSession(session) {
  session.agent.destroy()
}

/**
 * Times one GET from sending the request to the end of the body (client-observed, on the kept-alive
 * socket) and returns the body.
 * @param {Session} session @param {string} path @param {number} timeoutMs
 */
export async function timedGet(session, path, timeoutMs) {
  /** @type {Buffer[]} */
  const chunks = []
  const t0 = performance.now()
  const res = await request(session, { path, timeoutMs, onData: (c) => chunks.push(c) })
  const ms = performance.now() - t0
  return { ...res, ms, text: Buffer.concat(chunks).toString('utf8') }
}

/**
 * Counts CSV records (RFC 4180: a line break inside a quoted cell does not end a record) without
 * keeping the text. Keeps the first line to check the header.
 */
export function csvCounter() {
  let inQuotes = false
  let lineBreaks = 0
  let head = ''
  let lastByte = -1
  return {
    /** @param {Buffer} chunk */
    push(chunk) {
      if (head.length < 4096 && !head.includes('\n')) head += chunk.subarray(0, 4096).toString('utf8')
      if (chunk.length > 0) lastByte = /** @type {number} */ (chunk[chunk.length - 1])
      if (!inQuotes && chunk.indexOf(0x22) === -1) {
        for (let at = chunk.indexOf(0x0a); at !== -1; at = chunk.indexOf(0x0a, at + 1)) lineBreaks++
        return
      }
      for (let k = 0; k < chunk.length; k++) {
        const b = chunk[k]
        if (b === 0x22) inQuotes = !inQuotes
        else if (b === 0x0a && !inQuotes) lineBreaks++
      }
    },
    result() {
      const header = head.split('\n', 1)[0]?.replace(/\r$/, '') ?? ''
      // Every record, the header included, ends with CRLF.
      return {
        records: lineBreaks - 1,
        header,
        endsWithNewline: lastByte === 0x0a,
        unbalancedQuotes: inQuotes,
      }
    },
  }
}

/**
 * Counts the objects of Shiplog's JSON export (one object a line: "[\n{...},\n{...}\n]\n"; raw line
 * breaks only occur between objects, because JSON.stringify escapes them inside strings) without
 * parsing it whole. Keeps the first object's line to check its keys.
 */
export function jsonLinesCounter() {
  let objects = 0
  let previousWasNewline = false
  let firstByte = -1
  let head = ''
  let tail = ''
  return {
    /** @param {Buffer} chunk */
    push(chunk) {
      if (chunk.length === 0) return
      if (firstByte === -1) firstByte = /** @type {number} */ (chunk[0])
      if (head.length < 65536) head += chunk.subarray(0, 65536).toString('utf8')
      if (previousWasNewline && chunk[0] === 0x7b) objects++
      for (let at = chunk.indexOf(0x0a); at !== -1; at = chunk.indexOf(0x0a, at + 1)) {
        if (chunk[at + 1] === 0x7b) objects++
      }
      previousWasNewline = chunk[chunk.length - 1] === 0x0a
      tail = (tail + chunk.subarray(Math.max(0, chunk.length - 16)).toString('utf8')).slice(-16)
    },
    result() {
      const firstLine = head.split('\n')[1] ?? ''
      /** @type {string[] | null} */
      let firstKeys = null
      try {
        const parsed = JSON.parse(firstLine.replace(/,$/, ''))
        firstKeys = Object.keys(parsed)
      } catch {
        firstKeys = null
      }
      return {
        records: objects,
        startsWithBracket: firstByte === 0x5b,
        endsWithBracket: /\]\n?$/.test(tail),
        firstKeys,
      }
    },
  }
}
