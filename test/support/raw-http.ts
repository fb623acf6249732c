// Sends a request byte for byte over a socket, the way curl and other real clients do, and parses
// the answer; `inject` would skip the HTTP parser that real pipelines go through.
import { connect } from 'node:net'

export interface RawResponse {
  status: number
  headers: Record<string, string>
  body: string
  json(): unknown
}

/** `head` is the request line and headers without the blank line; Content-Length is added for a body. */
export function rawRequest(port: number, head: string[], body?: string | Buffer): Promise<RawResponse> {
  const payload =
    body === undefined ? Buffer.alloc(0) : Buffer.isBuffer(body) ? body : Buffer.from(body, 'utf8')
  const lines = [...head, 'Host: 127.0.0.1', 'Connection: close']
  if (body !== undefined) lines.push(`Content-Length: ${payload.length}`)
  const request = Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), payload])
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1')
    const chunks: Buffer[] = []
    socket.setTimeout(10_000, () => socket.destroy(new Error('raw request timed out')))
    socket.on('data', (c) => chunks.push(c))
    socket.on('error', reject)
    socket.on('end', () => {
      const raw = Buffer.concat(chunks)
      const split = raw.indexOf('\r\n\r\n')
      const [statusLine, ...headerLines] = raw.subarray(0, split).toString('latin1').split('\r\n')
      const headers: Record<string, string> = {}
      for (const line of headerLines) {
        const i = line.indexOf(':')
        headers[line.slice(0, i).toLowerCase()] = line.slice(i + 1).trim()
      }
      let rest: Buffer = raw.subarray(split + 4)
      if (headers['transfer-encoding'] === 'chunked') rest = dechunk(rest)
      const text = rest.toString('utf8')
      resolve({
        status: Number(statusLine?.split(' ')[1]),
        headers,
        body: text,
        json: () => JSON.parse(text),
      })
    })
    socket.write(request)
  })
}

function dechunk(data: Buffer): Buffer {
  const parts: Buffer[] = []
  let at = 0
  for (;;) {
    const lineEnd = data.indexOf('\r\n', at)
    const size = Number.parseInt(data.subarray(at, lineEnd).toString('latin1'), 16)
    if (!size) return Buffer.concat(parts)
    parts.push(data.subarray(lineEnd + 2, lineEnd + 2 + size))
    at = lineEnd + 2 + size + 2
  }
}
