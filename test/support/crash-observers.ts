// Readers that keep a crashing server's read side busy through its real interfaces, and note what
// they saw: live streams (SSE) that reconnect after each kill, and a logged-in user's CSV exports.
import { sleep } from './processes.js'
import { parseCsv, unescapeHtml } from './ui.js'

/** Why a request got no answer: the errno of a refused or reset connection, or the error's text. */
export function failureOf(err: unknown): string {
  const error = err as Error
  const cause = error.cause
  if (cause instanceof Error) return (cause as NodeJS.ErrnoException).code ?? cause.message
  return error.name === 'TimeoutError' ? 'timeout' : error.message
}

/** A stream that has sent nothing (not even its 15 s heartbeat) for this long is taken for dead. */
const STREAM_IDLE_MS = 40_000

export interface StreamStats {
  connections: number
  /** Connections that ended without the client asking: a kill, mostly. */
  cut: number
  /** Attempts to connect that found no server (down between a kill and its restart). */
  refusedConnections: number
  events: number
  resets: number
  /** Answers other than 200 by status (503 and 429 are allowed: a server starting, limits). */
  refused: Record<string, number>
  /** Events a stream sent again after it had sent them whole and the client resumed past them. */
  replayedTwice: string[]
  unexpected: string[]
}

/**
 * `count` clients of GET /api/v1/stream, spread over the servers, each reconnecting at once after
 * its stream ends, with the Last-Event-ID it last received, as EventSource does.
 */
export class LiveStreams {
  readonly stats: StreamStats = {
    connections: 0,
    cut: 0,
    refusedConnections: 0,
    events: 0,
    resets: 0,
    refused: {},
    replayedTwice: [],
    unexpected: [],
  }
  readonly #abort = new AbortController()
  #loops: Promise<void> | null = null

  constructor(
    private readonly urls: readonly string[],
    private readonly key: string,
    private readonly count: number,
  ) {}

  start(): void {
    this.#loops = Promise.all(Array.from({ length: this.count }, (_, n) => this.#client(n))).then(() => {})
  }

  async stop(): Promise<void> {
    this.#abort.abort()
    await this.#loops
  }

  async #client(n: number): Promise<void> {
    const base = this.urls[n % this.urls.length] ?? ''
    let lastId: string | null = null
    // Events this client has had whole (the message carrying the id came after them): a resumed
    // stream starts after the last id, so none of these may come again.
    const whole = new Set<number>()
    while (!this.#abort.signal.aborted) {
      const idle = new AbortController()
      let timer: NodeJS.Timeout | undefined
      const touch = () => {
        clearTimeout(timer)
        timer = setTimeout(() => idle.abort(), STREAM_IDLE_MS)
      }
      touch()
      let connected = false
      try {
        const response = await fetch(`${base}/api/v1/stream`, {
          headers: { 'x-api-key': this.key, ...(lastId === null ? {} : { 'last-event-id': lastId }) },
          signal: AbortSignal.any([this.#abort.signal, idle.signal]),
        })
        if (response.status !== 200) {
          const status = String(response.status)
          this.stats.refused[status] = (this.stats.refused[status] ?? 0) + 1
          if (status !== '503' && status !== '429')
            this.stats.unexpected.push(`stream ${n}: ${status} ${(await response.text()).slice(0, 200)}`)
          else await response.arrayBuffer()
          await sleep(200)
          continue
        }
        this.stats.connections++
        connected = true
        let buffer = ''
        let pending: number | null = null
        const decoder = new TextDecoder()
        for await (const chunk of response.body ?? []) {
          touch()
          buffer += decoder.decode(chunk as Uint8Array, { stream: true })
          for (let end = buffer.indexOf('\n\n'); end !== -1; end = buffer.indexOf('\n\n')) {
            const block = buffer.slice(0, end)
            buffer = buffer.slice(end + 2)
            const fields = new Map<string, string>()
            for (const line of block.split('\n')) {
              if (line.startsWith(':')) continue
              const colon = line.indexOf(':')
              fields.set(line.slice(0, colon), line.slice(colon + 1).trimStart())
            }
            const type = fields.get('event')
            const id = fields.get('id')
            if (type === 'event') {
              const eventId = Number((JSON.parse(fields.get('data') ?? '{}') as { id?: unknown }).id)
              this.stats.events++
              if (whole.has(eventId)) this.stats.replayedTwice.push(`stream ${n}: event ${eventId}`)
              pending = eventId
            } else if (type === 'reset') {
              this.stats.resets++
              pending = null
            }
            if (id !== undefined) {
              lastId = id
              if (pending !== null) whole.add(pending)
              pending = null
            }
          }
        }
        // The server ended the stream (a SIGTERM would); reconnect as after a cut.
        this.stats.cut++
      } catch (err) {
        if (this.#abort.signal.aborted) break
        const failure = failureOf(err)
        // A server killed mid-stream resets the connection; a dead one refuses it.
        if (!['ECONNREFUSED', 'ECONNRESET', 'UND_ERR_SOCKET', 'terminated'].includes(failure))
          this.stats.unexpected.push(`stream ${n}: ${failure}`)
        if (connected) this.stats.cut++
        else this.stats.refusedConnections++
        await sleep(100)
      } finally {
        clearTimeout(timer)
      }
    }
  }
}

export interface ExportStats {
  logins: number
  started: number
  /** Downloads read whole and checked. */
  complete: number
  /** Of those, the ones parsed as RFC 4180 in full. */
  parsed: number
  /** Downloads a kill cut short (or that found the server down). */
  cut: number
  rows: number
  pagedReads: number
  answers503: number
  problems: string[]
}

/** Cookies as a browser keeps them: the last value of each name. */
function remember(jar: Map<string, string>, response: Response): void {
  for (const line of response.headers.getSetCookie()) {
    const pair = line.split(';')[0] ?? ''
    const eq = pair.indexOf('=')
    if (eq > 0) jar.set(pair.slice(0, eq).trim(), pair.slice(eq + 1).trim())
  }
}

function cookieHeader(jar: Map<string, string>): string {
  return [...jar].map(([name, value]) => `${name}=${value}`).join('; ')
}

/** One download in this many is parsed as RFC 4180 in full. */
const STRICT_EVERY = 5

const CSV_HEADER =
  'id,received_at,service,environment,version,status,url,commit,description,deployer,source,api_key_name'

/**
 * A user who downloads the whole log as CSV from /logs/ again and again (logged in once through
 * /login; the session lives in the database, so it outlasts the kills), and between downloads reads
 * the newest pages of GET /api/v1/events with a read key. A download read whole must hold every
 * event acknowledged before it began, once.
 */
export class Exporter {
  readonly stats: ExportStats = {
    logins: 0,
    started: 0,
    complete: 0,
    parsed: 0,
    cut: 0,
    rows: 0,
    pagedReads: 0,
    answers503: 0,
    problems: [],
  }
  #stopping = false
  #loop: Promise<void> | null = null
  #jar: Map<string, string> | null = null

  constructor(
    private readonly urls: readonly string[],
    private readonly user: { email: string; password: string },
    private readonly readKey: string,
    /** Ids of the events acknowledged so far. */
    private readonly acknowledged: () => number[],
  ) {}

  start(): void {
    this.#loop = this.#run()
  }

  async stop(): Promise<void> {
    this.#stopping = true
    await this.#loop
  }

  async #run(): Promise<void> {
    for (let round = 0; !this.#stopping; round++) {
      const base = this.urls[round % this.urls.length] ?? ''
      try {
        if (this.#jar === null) this.#jar = await this.#login(base)
        await this.#download(base, this.#jar)
        await this.#pages(base)
      } catch (err) {
        const failure = failureOf(err)
        if (!['ECONNREFUSED', 'ECONNRESET', 'UND_ERR_SOCKET', 'terminated'].includes(failure))
          this.stats.problems.push(`export via ${base}: ${failure}`)
        this.stats.cut++
        await sleep(100)
      }
      // A pause between downloads: each reads the whole log, and the machine has other work.
      await sleep(300)
    }
  }

  async #login(base: string): Promise<Map<string, string>> {
    const jar = new Map<string, string>()
    const page = await fetch(`${base}/login`, { redirect: 'manual', signal: AbortSignal.timeout(15_000) })
    remember(jar, page)
    const html = await page.text()
    if (page.status === 503) {
      this.stats.answers503++
      throw new Error('503')
    }
    const token = /<input type="hidden" name="_csrf" value="([^"]*)">/.exec(html)?.[1]
    if (page.status !== 200 || token === undefined) throw new Error(`GET /login answered ${page.status}`)
    const response = await fetch(`${base}/login`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: cookieHeader(jar) },
      body: new URLSearchParams({ _csrf: unescapeHtml(token), ...this.user }).toString(),
      signal: AbortSignal.timeout(15_000),
    })
    remember(jar, response)
    await response.arrayBuffer()
    if (response.status !== 303 || !jar.has('shiplog_session')) {
      throw new Error(`POST /login answered ${response.status} without a session`)
    }
    this.stats.logins++
    return jar
  }

  async #download(base: string, jar: Map<string, string>): Promise<void> {
    const before = this.acknowledged()
    this.stats.started++
    const response = await fetch(`${base}/logs/export.csv`, {
      headers: { cookie: cookieHeader(jar) },
      redirect: 'manual',
      signal: AbortSignal.timeout(60_000),
    })
    if (response.status === 503) {
      this.stats.answers503++
      await response.arrayBuffer()
      this.stats.cut++
      return
    }
    if (response.status !== 200) {
      this.stats.problems.push(
        `GET /logs/export.csv answered ${response.status}: ${(await response.text()).slice(0, 200)}`,
      )
      // A session the server no longer knows: log in again next time.
      this.#jar = null
      return
    }
    // A kill while the body streams makes text() throw: that download was cut, not wrong.
    const text = await response.text()
    // The strict parser takes about 20 ms per 1000 rows of this process's event loop, which also
    // serves the clients and the webhook receiver: every STRICT_EVERY-th download is parsed whole,
    // the others only read for their ids (no value the harness sends holds a line break).
    const strict = this.stats.complete % STRICT_EVERY === 0
    const rows = strict ? parseCsv(text) : text.split('\r\n').map((line) => line.split(',', 1))
    if (!strict) rows.pop()
    if (rows[0]?.join(',') !== (strict ? CSV_HEADER : 'id')) {
      this.stats.problems.push(`the CSV header is ${JSON.stringify(rows[0])}`)
      return
    }
    if (strict) this.stats.parsed++
    const ids = rows.slice(1).map((row) => Number(row[0]))
    const seen = new Set(ids)
    if (seen.size !== ids.length)
      this.stats.problems.push(`a CSV export lists ${ids.length - seen.size} rows twice`)
    const missing = before.filter((id) => !seen.has(id))
    if (missing.length > 0) {
      this.stats.problems.push(
        `a CSV export lacks ${missing.length} events acknowledged before it began, e.g. ${missing.slice(0, 5).join(', ')}`,
      )
    }
    this.stats.complete++
    this.stats.rows += ids.length
  }

  /** The newest few pages of the read API, newest first, following next_cursor. */
  async #pages(base: string): Promise<void> {
    let url: string | null = `${base}/api/v1/events?limit=1000`
    const ids: number[] = []
    for (let page = 0; page < 3 && url !== null; page++) {
      const response: Response = await fetch(url, {
        headers: { 'x-api-key': this.readKey },
        signal: AbortSignal.timeout(30_000),
      })
      if (response.status === 503) {
        this.stats.answers503++
        await response.arrayBuffer()
        return
      }
      if (response.status !== 200) {
        this.stats.problems.push(
          `GET /api/v1/events answered ${response.status}: ${(await response.text()).slice(0, 200)}`,
        )
        return
      }
      const body = (await response.json()) as { events: Array<{ id: number }>; next_cursor: string | null }
      ids.push(...body.events.map((e) => e.id))
      url =
        body.next_cursor === null
          ? null
          : `${base}/api/v1/events?limit=1000&cursor=${encodeURIComponent(body.next_cursor)}`
    }
    if (ids.some((id, i) => i > 0 && id >= (ids[i - 1] ?? 0))) {
      this.stats.problems.push('GET /api/v1/events pages are not strictly newest first (or repeat an event)')
    }
    this.stats.pagedReads++
  }
}
