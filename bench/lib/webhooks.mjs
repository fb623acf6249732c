// A webhook receiver that answers slowly: each request is read whole, then answered 200 after
// `delayMs`, so the server's senders wait on it the way they would on a sluggish real target.
import { createServer } from 'node:http'

/**
 * @param {number} delayMs
 * @returns {Promise<{ url: string, received: () => number, close: () => Promise<void> }>}
 */
export async function slowReceiver(delayMs) {
  let received = 0
  /** @type {Set<NodeJS.Timeout>} */
  const timers = new Set()
  const server = createServer((request, response) => {
    request.resume()
    request.on('end', () => {
      received++
      const timer = setTimeout(() => {
        timers.delete(timer)
        response.writeHead(200, { 'content-type': 'application/json' }).end('{"id":1}')
      }, delayMs)
      timers.add(timer)
    })
  })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)))
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('the webhook receiver has no port')
  let closed = null
  return {
    url: `http://127.0.0.1:${address.port}`,
    received: () => received,
    close: () => {
      closed ??= new Promise((resolve) => {
        for (const timer of timers) clearTimeout(timer)
        server.closeAllConnections()
        server.close(() => resolve(undefined))
      })
      return closed
    },
  }
}
