// An HTTP proxy in front of a real server whose answers a test scripts request by request: answer itself, forward, or forward and then lose the answer.
import {
  createServer,
  request as httpRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type Server,
  type ServerResponse,
} from 'node:http'
import { performance } from 'node:perf_hooks'

/** What the proxy does with one request. */
export type ProxyAction =
  /** Pass the request to the server and its answer back. */
  | { kind: 'forward' }
  /** Answer without asking the server. */
  | { kind: 'answer'; status: number; headers?: Record<string, string>; body?: string }
  /** Pass the request on, let the server finish it, then cut the client's connection. */
  | { kind: 'forward-then-drop' }
  /** Pass the request on, let the server finish it, then answer this instead of what it said. */
  | { kind: 'forward-then-answer'; status: number; headers?: Record<string, string>; body?: string }

export interface ProxiedRequest {
  /** 0 for the first request the proxy received, 1 for the next, … */
  index: number
  method: string
  /** Path and query string, as sent. */
  path: string
  headers: IncomingHttpHeaders
  body: Buffer
  /** performance.now() when the request arrived (monotonic, milliseconds). */
  at: number
  action: ProxyAction['kind']
  /** What the real server answered, when the request was forwarded. */
  upstream?: { status: number; headers: IncomingHttpHeaders; body: Buffer }
}

/** Answers in the order given, then forwards everything after them. */
export function scripted(actions: ProxyAction[]): (request: ProxiedRequest) => ProxyAction {
  return (request) => actions[request.index] ?? { kind: 'forward' }
}

/** A problem+json answer like the server's own, e.g. a 503 with Retry-After. */
export function problemAnswer(
  status: number,
  title: string,
  headers: Record<string, string> = {},
): ProxyAction {
  return {
    kind: 'answer',
    status,
    headers: { 'content-type': 'application/problem+json', ...headers },
    body: JSON.stringify({ type: 'about:blank', title, status, detail: `${title} (from the test proxy)` }),
  }
}

// Headers that belong to one connection, not to the message (RFC 9110 §7.6.1), plus the length,
// which is recomputed because bodies are buffered.
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'content-length',
])

function endToEnd(headers: IncomingHttpHeaders): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {}
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined && !HOP_BY_HOP.has(name)) out[name] = value
  }
  return out
}

const UPSTREAM_TIMEOUT_MS = 20_000

function readBody(message: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    message.on('data', (chunk: Buffer) => chunks.push(chunk))
    message.on('end', () => resolve(Buffer.concat(chunks)))
    message.on('error', reject)
  })
}

export class FlakyProxy {
  #server: Server | null = null
  readonly #target: URL
  readonly #plan: (request: ProxiedRequest) => ProxyAction
  /** Every request received so far, in arrival order. */
  readonly requests: ProxiedRequest[] = []
  port = 0

  constructor(target: string, plan: (request: ProxiedRequest) => ProxyAction) {
    this.#target = new URL(target)
    this.#plan = plan
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`
  }

  async start(): Promise<void> {
    const server = createServer((request, response) => {
      this.#handle(request, response).catch(() => {
        // The client went away or the server failed: nothing left to answer.
        request.socket.destroy()
      })
    })
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(0, '127.0.0.1', () => resolve())
    })
    const address = server.address()
    if (address === null || typeof address !== 'object') throw new Error('the proxy has no port')
    this.port = address.port
    this.#server = server
  }

  async close(): Promise<void> {
    const server = this.#server
    this.#server = null
    if (!server) return
    server.closeAllConnections()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  }

  async #handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const at = performance.now()
    const body = await readBody(request)
    const seen: ProxiedRequest = {
      index: this.requests.length,
      method: request.method ?? 'GET',
      path: request.url ?? '/',
      headers: request.headers,
      body,
      at,
      action: 'forward',
    }
    const action = this.#plan(seen)
    seen.action = action.kind
    this.requests.push(seen)

    if (action.kind === 'answer') {
      send(response, action.status, action.headers ?? {}, Buffer.from(action.body ?? ''))
      return
    }
    let upstream: ProxiedRequest['upstream']
    try {
      upstream = await this.#forward(seen)
    } catch (err) {
      send(response, 502, { 'content-type': 'text/plain' }, Buffer.from(`proxy: ${(err as Error).message}`))
      return
    }
    seen.upstream = upstream
    if (action.kind === 'forward-then-drop') {
      // The server has stored the event and answered; the client never hears of it.
      request.socket.destroy()
      return
    }
    if (action.kind === 'forward-then-answer') {
      send(response, action.status, action.headers ?? {}, Buffer.from(action.body ?? ''))
      return
    }
    send(response, upstream.status, endToEnd(upstream.headers), upstream.body)
  }

  #forward(seen: ProxiedRequest): Promise<NonNullable<ProxiedRequest['upstream']>> {
    return new Promise((resolve, reject) => {
      const outgoing = httpRequest(
        {
          host: this.#target.hostname,
          port: this.#target.port,
          method: seen.method,
          path: seen.path,
          headers: { ...endToEnd(seen.headers), host: this.#target.host, 'content-length': seen.body.length },
          agent: false,
        },
        (incoming) => {
          readBody(incoming).then(
            (buffer) =>
              resolve({ status: incoming.statusCode ?? 0, headers: incoming.headers, body: buffer }),
            reject,
          )
        },
      )
      outgoing.setTimeout(UPSTREAM_TIMEOUT_MS, () => outgoing.destroy(new Error('the server did not answer')))
      outgoing.on('error', reject)
      outgoing.end(seen.body)
    })
  }
}

function send(response: ServerResponse, status: number, headers: OutgoingHttpHeaders, body: Buffer): void {
  response.writeHead(status, { ...headers, 'content-length': body.length })
  response.end(body)
}

/** Starts a proxy in front of `target`; it is closed after the test. */
export async function startFlakyProxy(
  t: { after(fn: () => Promise<void> | void): void },
  target: string,
  plan: (request: ProxiedRequest) => ProxyAction = scripted([]),
): Promise<FlakyProxy> {
  const proxy = new FlakyProxy(target, plan)
  await proxy.start()
  t.after(() => proxy.close())
  return proxy
}
