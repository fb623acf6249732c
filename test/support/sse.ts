// Live-stream tests' client: opens GET /api/v1/stream over a real socket and parses its messages.
import assert from 'node:assert/strict'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import type { App } from '../../src/app.js'

export interface SseMessage {
  event: string
  id: string | undefined
  data: Record<string, unknown>
}

export interface OpenStream {
  status: number
  headers: http.IncomingHttpHeaders
  messages: SseMessage[]
  /** The last `id:` the stream sent, as EventSource keeps it (messages with only an id count). */
  lastEventId: string | undefined
  /** Waits until `count` messages arrived (bounded); returns them all. */
  waitFor(count: number, ms?: number): Promise<SseMessage[]>
  /** Resolves when the server ended or cut the stream. */
  ended: Promise<void>
  response: http.IncomingMessage
  /** The body of a refusal (status other than 200). */
  body?: string
  close(): void
}

export async function listen(app: App): Promise<string> {
  await app.listen({ port: 0, host: '127.0.0.1' })
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
}

/** Opens the stream with node:http and parses its messages as they come. */
export function openStream(
  base: string,
  headers: Record<string, string>,
  path = '/api/v1/stream',
): Promise<OpenStream> {
  return new Promise((resolve, reject) => {
    const request = http.get(`${base}${path}`, { headers }, (response) => {
      const messages: SseMessage[] = []
      const waiters: Array<() => void> = []
      let buffer = ''
      let body = ''
      const ended = new Promise<void>((done) => {
        response.on('end', done)
        response.on('close', done)
        response.on('error', () => done())
      })
      response.setEncoding('utf8')
      response.on('data', (chunk: string) => {
        if (response.statusCode !== 200) {
          body += chunk
          return
        }
        buffer += chunk
        for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
          const block = buffer.slice(0, end)
          buffer = buffer.slice(end + 2)
          let event = 'message'
          let id: string | undefined
          let data = ''
          for (const line of block.split('\n')) {
            if (line.startsWith('event: ')) event = line.slice(7)
            else if (line.startsWith('id: ')) id = line.slice(4)
            else if (line.startsWith('data: ')) data += line.slice(6)
          }
          if (id !== undefined) stream.lastEventId = id
          if (data !== '') messages.push({ event, id, data: JSON.parse(data) as Record<string, unknown> })
        }
        for (const w of waiters.splice(0)) w()
      })
      const stream: OpenStream = {
        status: response.statusCode ?? 0,
        headers: response.headers,
        messages,
        lastEventId: undefined,
        ended,
        response,
        close: () => request.destroy(),
        waitFor: async (count, ms = 5000) => {
          const deadline = Date.now() + ms
          while (messages.length < count) {
            const left = deadline - Date.now()
            if (left <= 0)
              assert.fail(`expected ${count} messages within ${ms} ms, got ${JSON.stringify(messages)}`)
            await new Promise<void>((wake) => {
              const timer = setTimeout(wake, left)
              waiters.push(() => {
                clearTimeout(timer)
                wake()
              })
            })
          }
          return messages
        },
      }
      if (response.statusCode !== 200) {
        response.on('end', () => {
          Object.assign(stream, { body })
          resolve(stream)
        })
      } else resolve(stream)
    })
    request.on('error', reject)
  })
}

export async function until(condition: () => boolean, ms = 3000): Promise<void> {
  const deadline = Date.now() + ms
  while (!condition()) {
    assert.ok(Date.now() < deadline, `condition not met within ${ms} ms`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}
