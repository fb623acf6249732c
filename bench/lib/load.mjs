// Load generation with autocannon, used programmatically: a warm-up run, then the measured run.
import autocannon from 'autocannon'

/**
 * @typedef {object} LoadStats
 * @property {number} seconds measured duration
 * @property {number} ok 2xx responses
 * @property {number} okPerSecond 2xx responses per second
 * @property {number} requestsPerSecond all responses per second (autocannon's average)
 * @property {number | null} p50 latency of 2xx responses, ms (null without any)
 * @property {number | null} p99
 * @property {number | null} max
 * @property {number} non2xx
 * @property {number} errors socket errors and timeouts
 * @property {number} timeouts
 * @property {Record<string, number>} statusCodes count per status code
 */

/**
 * One request shape for autocannon. `next()` builds each request afresh so every one can differ.
 * @typedef {object} RequestShape
 * @property {'GET' | 'POST'} method
 * @property {Record<string, string>} headers
 * @property {() => { path: string, body?: string }} next
 * @property {(body: string) => void} [onAck] called with the body of every 2xx answer (the bench
 *   reads which events were acknowledged from it)
 */

/**
 * Runs autocannon against `url` for `seconds`, bounded by a watchdog.
 * @param {{ url: string, shape: RequestShape, seconds: number, connections: number, title: string }} options
 * @returns {Promise<LoadStats>}
 */
export function runLoad({ url, shape, seconds, connections, title }) {
  return new Promise((resolve, reject) => {
    const first = shape.next()
    const instance = autocannon(
      {
        url,
        title,
        connections,
        pipelining: 1,
        duration: seconds,
        timeout: 10,
        requests: [
          {
            method: shape.method,
            path: first.path,
            headers: shape.headers,
            ...(first.body === undefined ? {} : { body: first.body }),
            ...(shape.onAck
              ? {
                  onResponse: (/** @type {number} */ status, /** @type {unknown} */ body) => {
                    if (status >= 200 && status < 300) shape.onAck?.(String(body))
                  },
                }
              : {}),
            setupRequest: (request) => {
              const next = shape.next()
              return { ...request, path: next.path, ...(next.body === undefined ? {} : { body: next.body }) }
            },
          },
        ],
      },
      (err, result) => {
        clearTimeout(watchdog)
        if (err) reject(err)
        else resolve(summarise(result))
      },
    )
    // autocannon stops itself after `seconds`; this only guards against a run that never ends.
    const watchdog = setTimeout(() => instance.stop(), (seconds + 20) * 1000)
  })
}

/** @param {autocannon.Result} result */
function summarise(result) {
  const ok = result['2xx']
  /** @type {Record<string, number>} */
  const statusCodes = {}
  for (const [code, stats] of Object.entries(result.statusCodeStats ?? {})) statusCodes[code] = stats.count
  const seconds = result.duration
  return {
    seconds,
    ok,
    okPerSecond: seconds > 0 ? ok / seconds : 0,
    requestsPerSecond: result.requests.average,
    p50: ok > 0 ? result.latency.p50 : null,
    p99: ok > 0 ? result.latency.p99 : null,
    max: ok > 0 ? result.latency.max : null,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    statusCodes,
  }
}
