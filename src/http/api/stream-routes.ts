// GET /api/v1/stream: the account's new events and the deployments they change, as server-sent
// events, resumable with Last-Event-ID; a slow client is dropped rather than buffered for ever.
import type { ServerResponse } from 'node:http'
import type { FastifyInstance } from 'fastify'
import { Type } from 'typebox'
import { stallMsOf } from '../../domain/board/settings.js'
import { toApiEvent } from '../../domain/events/event.js'
import { eventMatches, filterIsEmpty } from '../../domain/events/filter-match.js'
import type { EventFilter } from '../../domain/events/logs-query.js'
import {
  type CredentialWatch,
  credentialLabel,
  type EndReason,
  type GuardedStream,
  type StreamCredential,
} from '../../domain/live/credentials.js'
import {
  type LiveHub,
  type LiveItem,
  type LiveListener,
  MAX_REPLAY,
  type ResetCause,
} from '../../domain/live/hub.js'
import { MAX_ID } from '../../domain/whole-numbers.js'
import { HttpProblem, methodNotAllowed } from '../problem.js'
import { problemResponses, READ_SECURITY } from './openapi-schemas.js'
import { type ReadOptions, readerOf, requireReader } from './read-auth.js'
import { toApiDeployment } from './read-deployments.js'
import { ParamReader, readEventNames } from './read-params.js'
import { eventNameParams } from './read-shared.js'

export const STREAM_PATH = '/api/v1/stream'
/** A comment line this often keeps proxies and the connection timeout from closing an idle stream. */
const HEARTBEAT_MS = 15_000
/** A client whose socket stays full this long is dropped, however little is queued. */
const STALL_MS = 10_000
/** What EventSource waits before it reconnects (the `retry:` field). */
const RETRY_MS = 2000

export interface StreamOptions extends ReadOptions {
  hub: LiveHub
  /** Ends streams whose key or session stopped counting. */
  credentials: CredentialWatch
}

/** What a `revoked` message tells the client, per reason. */
const ENDED: Record<EndReason, string> = {
  key_revoked: 'the API key this stream was opened with is revoked or may no longer read',
  session_ended:
    'the session this stream was opened with has ended (logged out, or signed out by a change to the user)',
}

/** What a `reset` message tells the client, per cause. */
const RESET: Record<ResetCause, string> = {
  missed: `more than ${MAX_REPLAY} events were missed; reload, then follow from here`,
  ahead:
    'the id resumed from is above the newest event here (the database was restored, or is another one); reload, then follow from here',
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
class LiveStream implements LiveListener, GuardedStream {
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
    readonly credential: StreamCredential,
    private readonly res: ServerResponse,
    private readonly limits: { stallMs: number; bufferBytes: number },
    private readonly onDrop: (why: string) => void,
    since: number | null,
    /** Only events matching it are sent; null: every event. */
    private readonly filter: EventFilter | null,
  ) {
    this.#lastId = since ?? 0
    this.#heartbeat = setInterval(() => this.#write(': heartbeat\n\n'), HEARTBEAT_MS)
    this.#heartbeat.unref()
  }

  deliver(items: readonly LiveItem[]): void {
    const now = Date.now()
    let text = ''
    let skipped = false
    for (const { event, deployment } of items) {
      this.#lastId = Math.max(this.#lastId, event.id)
      skipped = this.filter !== null && !eventMatches(this.filter, event)
      if (skipped) continue
      const last = deployment === null
      text += message('event', toApiEvent(event), last ? this.#lastId : undefined)
      if (deployment)
        text += message('deployment', toApiDeployment(deployment, now, this.limits.stallMs), this.#lastId)
    }
    // Events the filter left out still move Last-Event-ID on: a message with only an id dispatches
    // nothing in EventSource, and a reconnect then does not replay them.
    if (skipped) text += `id: ${this.#lastId}\n\n`
    this.#write(text)
  }

  reset(through: number, cause: ResetCause): void {
    // Ahead: the ids sent before belong to another history; from here on, this database's count.
    this.#lastId = cause === 'ahead' ? through : Math.max(this.#lastId, through)
    this.#write(message('reset', { reason: RESET[cause], cause, through }, through))
  }

  /**
   * The credential no longer reads: one `revoked` message (no id: Last-Event-ID stays), then the
   * end. EventSource reconnects, and its reconnect with the dead credential gets 401, which stops it.
   */
  revoked(reason: EndReason): void {
    if (this.#closed) return
    this.#write(message('revoked', { reason, detail: ENDED[reason] }))
    this.end()
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
    ...eventNameParams,
    from: Type.Optional(
      Type.String({
        description:
          'Only events received at or after this instant (ISO 8601, as `/api/v1/events`); the stream starts at "now", so this matters only when resuming.',
        examples: ['2026-11-01T00:00:00Z'],
      }),
    ),
    to: Type.Optional(
      Type.String({
        description: 'Only events received before this instant (exclusive); must be after `from`.',
        examples: ['2026-12-01T00:00:00Z'],
      }),
    ),
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
  const { hub, credentials, config, database } = options
  const open = new Set<LiveStream>()
  const perAccount = new Map<number, number>()
  /** Open streams per key or session (credentialLabel): one credential may not take the account's share. */
  const perCredential = new Map<string, number>()
  methodNotAllowed(app, STREAM_PATH, ['GET', 'HEAD'])

  // Streams never finish by themselves: end them before the server waits for its connections.
  app.addHook('preClose', async () => {
    hub.close()
    credentials.close()
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
          `Resume with the \`Last-Event-ID\` header (EventSource sends it) or \`lastEventId\`: what was missed is sent first, or, beyond ${MAX_REPLAY} events, one \`reset\` message (\`{"reason", "cause": "missed", "through"}\`): reload, then follow. A \`Last-Event-ID\` above every event in the database (it was restored from a backup) gets a \`reset\` too (\`"cause": "ahead"\`), with the id to follow from.`,
          'A stream lasts as long as its credential: within seconds of the key being revoked or the session ending (logout, password reset or change, user removed, password login turned off), one `revoked` message (`{"reason": "key_revoked" | "session_ended", "detail"}`) is sent and the stream ends; reconnecting with the same credential gets 401.',
          'Filters: `service`, `environment`, `status`, `version`, `from` and `to` select events as `/api/v1/events` does; only matching events (and their deployments) are sent, and a message with only an `id:` line moves `Last-Event-ID` past events left out.',
          'A comment line every 15 s keeps the connection open. A client that reads too slowly is disconnected. Limits: streams per key or session and per account (429), and per server (503).',
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
        const params = new ParamReader({ ...query, lastEventId: header ?? query.lastEventId })
        const since =
          params.wholeNumber(
            'lastEventId',
            0,
            MAX_ID,
            'an event id: a whole number in decimal digits',
            'Last-Event-ID (or lastEventId)',
          ) ?? null
        // The filter of /api/v1/events: a page that shows a filtered log is sent only what it lists.
        const filter = readEventNames(params)
        const from = params.instant('from')
        const to = params.instant('to')
        if (from !== undefined) filter.from = from
        if (to !== undefined) filter.to = to - 1
        if (from !== undefined && to !== undefined && from >= to) params.fail('to', 'to must be after from')
        params.check()

        const label = credentialLabel(reader.credential)
        const own = perCredential.get(label) ?? 0
        if (own >= config.streamsPerCredential) {
          const holder = reader.credential.kind === 'key' ? 'This API key' : 'This session'
          throw new HttpProblem(
            429,
            'too-many-streams',
            'Too many streams',
            `${holder} already has ${own} live streams open (the limit is ${config.streamsPerCredential} per key or session); close one first.`,
            { headers: { 'retry-after': '30' } },
          )
        }
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
          reader.credential,
          res,
          { stallMs, bufferBytes: config.streamBufferBytes },
          (why) => request.log.warn({ account: reader.accountId }, `live stream dropped: ${why}`),
          since,
          filterIsEmpty(filter) ? null : filter,
        )
        open.add(stream)
        perAccount.set(reader.accountId, mine + 1)
        perCredential.set(label, own + 1)
        credentials.add(stream)
        const closed = () => {
          if (!open.delete(stream)) return
          stream.closed()
          hub.leave(stream)
          credentials.remove(stream)
          const left = (perAccount.get(reader.accountId) ?? 1) - 1
          if (left > 0) perAccount.set(reader.accountId, left)
          else perAccount.delete(reader.accountId)
          const ownLeft = (perCredential.get(label) ?? 1) - 1
          if (ownLeft > 0) perCredential.set(label, ownLeft)
          else perCredential.delete(label)
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
