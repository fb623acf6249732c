// GET /api/v1/stream: the account's new events and the deployments they change, as server-sent
// events, resumable with Last-Event-ID; a slow client is dropped rather than buffered for ever.
import type { ServerResponse } from 'node:http'
import type { FastifyInstance } from 'fastify'
import { Type } from 'typebox'
import { stallMsOf } from '../../domain/deployments/read-queries.js'
import { toPublicEvent } from '../../domain/events/event.js'
import { type LiveHub, type LiveItem, type LiveListener, MAX_REPLAY } from '../../domain/live/hub.js'
import { HttpProblem, methodNotAllowed } from '../problem.js'
import { problemResponses, READ_SECURITY } from './openapi-schemas.js'
import { type ReadOptions, readerOf, requireReader } from './read-auth.js'
import { ParamReader } from './read-params.js'
import { toApiDeployment } from './read-routes.js'

export const STREAM_PATH = '/api/v1/stream'
/** A comment line this often keeps proxies and the connection timeout from closing an idle stream. */
const HEARTBEAT_MS = 15_000
/** A client whose socket stays full this long is dropped, however little is queued. */
const STALL_MS = 10_000
/** What EventSource waits before it reconnects (the `retry:` field). */
const RETRY_MS = 2000

export interface StreamOptions extends ReadOptions {
  hub: LiveHub
}

/** One SSE message; `data` is one line of JSON. */
function message(type: string, data: unknown, id?: number): string {
  return `event: ${type}\n${id === undefined ? '' : `id: ${id}\n`}data: ${JSON.stringify(data)}\n\n`
}

/**
 * One open stream. Per event it writes an `event` message, then a `deployment` message with the
 * deployment holding it; the last of the two carries the id, so a client that resumes from an id
 * has had both.
 */
class LiveStream implements LiveListener {
  #closed = false
  #stall: NodeJS.Timeout | null = null
  readonly #heartbeat: NodeJS.Timeout
  /**
   * The highest event id this client has been given (or resumed from). An event that committed
   * late has a lower id; it carries this one instead, so Last-Event-ID never goes back and a
   * reconnect replays nothing twice.
   */
  #lastId: number

  constructor(
    readonly accountId: number,
    private readonly res: ServerResponse,
    private readonly limits: { stallMs: number; bufferBytes: number },
    private readonly onDrop: (why: string) => void,
    since: number | null,
  ) {
    this.#lastId = since ?? 0
    this.#heartbeat = setInterval(() => this.#write(': heartbeat\n\n'), HEARTBEAT_MS)
    this.#heartbeat.unref()
  }

  deliver(items: readonly LiveItem[]): void {
    const now = Date.now()
    let text = ''
    for (const { event, deployment } of items) {
      this.#lastId = Math.max(this.#lastId, event.id)
      const last = deployment === null
      text += message('event', toPublicEvent(event), last ? this.#lastId : undefined)
      if (deployment)
        text += message('deployment', toApiDeployment(deployment, now, this.limits.stallMs), this.#lastId)
    }
    this.#write(text)
  }

  reset(through: number): void {
    this.#lastId = Math.max(this.#lastId, through)
    this.#write(
      message(
        'reset',
        {
          reason: `more than ${MAX_REPLAY} events were missed; reload, then follow from here`,
          through,
        },
        through,
      ),
    )
  }

  /** Ends the stream (shutdown): the client's EventSource reconnects elsewhere or later. */
  end(): void {
    if (this.#closed) return
    this.#stop()
    this.res.end()
  }

  /** Called when the connection closed, whoever closed it. */
  closed(): void {
    this.#stop()
  }

  #stop(): void {
    this.#closed = true
    clearInterval(this.#heartbeat)
    if (this.#stall) clearTimeout(this.#stall)
  }

  #write(text: string): void {
    if (this.#closed || text === '') return
    // What the socket has not taken yet stays in memory: past the bound, drop the client.
    if (this.res.writableLength + Buffer.byteLength(text) > this.limits.bufferBytes) {
      this.#drop(`more than ${this.limits.bufferBytes} bytes waited for the client`)
      return
    }
    if (!this.res.write(text) && !this.#stall) {
      this.#stall = setTimeout(() => this.#drop(`the client read nothing for ${STALL_MS} ms`), STALL_MS)
      this.#stall.unref()
      this.res.once('drain', () => {
        if (this.#stall) clearTimeout(this.#stall)
        this.#stall = null
      })
    }
  }

  #drop(why: string): void {
    if (this.#closed) return
    this.#stop()
    this.onDrop(why)
    this.res.destroy()
  }
}

const StreamQuery = Type.Object(
  {
    lastEventId: Type.Optional(
      Type.String({
        description:
          'Resume after this event id, for clients that cannot send the Last-Event-ID header (the header wins).',
        examples: ['1234'],
      }),
    ),
  },
  { additionalProperties: true },
)

export async function streamRoutes(app: FastifyInstance, options: StreamOptions): Promise<void> {
  const { hub, config, database } = options
  const open = new Set<LiveStream>()
  const perAccount = new Map<number, number>()
  methodNotAllowed(app, STREAM_PATH, ['GET', 'HEAD'])

  // Streams never finish by themselves: end them before the server waits for its connections.
  app.addHook('preClose', async () => {
    hub.close()
    for (const stream of open) stream.end()
  })

  await app.register(async (scope) => {
    await requireReader(scope, options, { sessions: true })

    scope.get(STREAM_PATH, {
      attachValidation: true,
      schema: {
        operationId: 'streamEvents',
        tags: ['read'],
        summary: 'Live events and deployment changes (server-sent events)',
        description: [
          "A `text/event-stream` of the account's new events, each once it is derived, as `event` messages (the event, shaped as in the ingest 201 answer) followed by a `deployment` message (the deployment holding it, shaped as in /api/v1/deployments). The last message of each event carries `id: <event id>` (an event that committed late, with an id below one already sent, carries the highest id sent instead, so `Last-Event-ID` never goes back).",
          `Resume with the \`Last-Event-ID\` header (EventSource sends it) or \`lastEventId\`: what was missed is sent first, or, beyond ${MAX_REPLAY} events, one \`reset\` message (\`{"reason", "through"}\`): reload, then follow.`,
          'A comment line every 15 s keeps the connection open. A client that reads too slowly is disconnected. Limits: streams per account (429) and per server (503).',
        ].join('\n\n'),
        security: READ_SECURITY,
        querystring: StreamQuery,
        response: {
          200: {
            description: 'The stream (never ends on its own).',
            content: {
              'text/event-stream': {
                schema: Type.String({
                  examples: [
                    'event: event\ndata: {"id":120,"service":"App1",…}\n\nevent: deployment\nid: 120\ndata: {"id":120,"outcome":"in_progress",…}\n\n',
                  ],
                }),
              },
            },
          },
          ...problemResponses(401, 403, 422, 429, 503),
        },
      },
      handler: async (request, reply) => {
        const reader = readerOf(request)
        const header = request.headers['last-event-id']
        const query = request.query as Record<string, unknown>
        const params = new ParamReader({ lastEventId: header ?? query.lastEventId })
        const raw = params.text('lastEventId', 40)
        if (raw !== undefined && !/^\d{1,15}$/.test(raw))
          params.fail('lastEventId', 'Last-Event-ID (or lastEventId) must be an event id: a whole number')
        params.check()
        const since = raw === undefined ? null : Number(raw)

        const mine = perAccount.get(reader.accountId) ?? 0
        if (mine >= config.streamsPerAccount) {
          throw new HttpProblem(
            429,
            'too-many-streams',
            'Too many streams',
            `This account already has ${mine} live streams open (the limit is ${config.streamsPerAccount}); close one first.`,
            { headers: { 'retry-after': '30' } },
          )
        }
        if (open.size >= config.streamsPerProcess) {
          throw new HttpProblem(
            503,
            'too-many-streams',
            'Service unavailable',
            'This server holds as many live streams as it may; retry shortly.',
            { headers: { 'retry-after': '30' } },
          )
        }
        const stallMs = await stallMsOf(database.db, reader.accountId)

        reply.hijack()
        const res = reply.raw
        const stream = new LiveStream(
          reader.accountId,
          res,
          { stallMs, bufferBytes: config.streamBufferBytes },
          (why) => request.log.warn({ account: reader.accountId }, `live stream dropped: ${why}`),
          since,
        )
        open.add(stream)
        perAccount.set(reader.accountId, mine + 1)
        const closed = () => {
          if (!open.delete(stream)) return
          stream.closed()
          hub.leave(stream)
          const left = (perAccount.get(reader.accountId) ?? 1) - 1
          if (left > 0) perAccount.set(reader.accountId, left)
          else perAccount.delete(reader.accountId)
        }
        res.on('close', closed)
        // Hijacked: the headers set so far (security, rate limits) are written here, not by Fastify.
        for (const [name, value] of Object.entries(reply.getHeaders()))
          if (value !== undefined) res.setHeader(name, value)
        res.writeHead(200, {
          'content-type': 'text/event-stream; charset=utf-8',
          'cache-control': 'no-store',
          // nginx would otherwise hold the messages back to fill its buffer.
          'x-accel-buffering': 'no',
        })
        if (request.method === 'HEAD') {
          res.end()
          return
        }
        res.write(`retry: ${RETRY_MS}\n: shiplog live events\n\n`)
        try {
          await hub.join(stream, since)
          // Closed while it joined: leave again, or the hub would write to it for ever.
          if (!open.has(stream)) hub.leave(stream)
        } catch (err) {
          request.log.error({ err }, 'live stream could not start')
          res.destroy()
        }
      },
    })
  })
}
