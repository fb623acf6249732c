// A real HTTP receiver on 127.0.0.1 for webhook tests: records each request and answers as told.
import { createHmac, timingSafeEqual } from 'node:crypto'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Cleanup } from '../helper.js'

export interface Received {
  method: string
  url: string
  headers: IncomingMessage['headers']
  body: string
}

export type Answer = (req: Received, res: ServerResponse, n: number) => void

export interface Receiver {
  url: string
  received: Received[]
  answer: Answer
}

export async function startReceiver(
  t: Cleanup,
  answer: Answer = (_q, res) => res.end('ok'),
): Promise<Receiver> {
  const receiver: Receiver = { url: '', received: [], answer }
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const r = {
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
      }
      receiver.received.push(r)
      receiver.answer(r, res, receiver.received.length)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  t.after(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  )
  return receiver
}

/** The README's recipe: HMAC-SHA256 of "<t>.<body>", compared in constant time, t within 5 minutes. */
export function verifySignature(
  secret: string,
  header: string | undefined,
  body: string,
  nowMs = Date.now(),
): boolean {
  const match = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(header ?? '')
  if (!match?.[1] || !match[2]) return false
  if (Math.abs(nowMs / 1000 - Number(match[1])) > 300) return false
  const expected = createHmac('sha256', secret).update(`${match[1]}.${body}`).digest()
  return timingSafeEqual(expected, Buffer.from(match[2], 'hex'))
}
