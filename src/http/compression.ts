// Response compression (gzip, Brotli) for pages, the read API, /docs and the streamed exports; never for ingest or the live stream.
import { constants } from 'node:zlib'
import compress from '@fastify/compress'
import type { FastifyInstance } from 'fastify'

/** Bodies under this many bytes go as they are: their compressed form saves nothing worth the CPU. */
export const COMPRESSION_THRESHOLD = 1024

/**
 * What is worth compressing: text, JSON, XML/SVG and scripts. Not text/event-stream: each live
 * message must leave at once, and a compressor holds bytes back until it has enough.
 */
const COMPRESSIBLE = /^text\/(?!event-stream)|[+/]json(?:;|$)|[+/]xml(?:;|$)|\/javascript(?:;|$)/

/** Every setting, route by route: a route's own compress options replace the plugin's, not merge. */
function settings(levels: { brotliQuality: number; gzipLevel: number }) {
  return {
    // The client's q-values decide; between equals, Brotli (smaller and faster at these levels).
    encodings: ['br', 'gzip'] as Array<'br' | 'gzip'>,
    threshold: COMPRESSION_THRESHOLD,
    brotliOptions: { params: { [constants.BROTLI_PARAM_QUALITY]: levels.brotliQuality } },
    zlibOptions: { level: levels.gzipLevel },
    customTypes: COMPRESSIBLE,
  }
}

/**
 * Pages, API answers and /docs: at most a few hundred KB (the Swagger UI bundle 1.7 MB), where
 * Brotli 4 and gzip 6 (zlib's default) take milliseconds. Brotli's own default, 11, would take
 * seconds on the bundle.
 */
export const PAGE_COMPRESSION = settings({ brotliQuality: 4, gzipLevel: 6 })

/**
 * The streamed exports: hundreds of MB at several hundred thousand rows a second, which the
 * compressor (on libuv's thread pool, beside the thread writing the rows) must keep up with.
 * Measured on export CSV, one core of this machine (docs/PERFORMANCE.md, "Compressed exports"):
 * Brotli 1 about 0.8 µs a row (200+ MB/s) at 5.8:1, Brotli 2 about 1.5 µs (110+ MB/s) at 6.1:1,
 * gzip 2 about 1.2 µs (130+ MB/s) at 5.8:1; Brotli 4 and gzip 6 were slower still for little more.
 * This one, Brotli 2, for exports written a few rows at a time (the audit log's); the event
 * exports use EVENT_EXPORT_COMPRESSION.
 */
export const EXPORT_COMPRESSION = settings({ brotliQuality: 2, gzipLevel: 2 })

/**
 * The event exports (/logs/export.csv and .json): Brotli 1, half Brotli 2's CPU a row. Brotli 0
 * and 1 compress each write as it comes, in blocks of their own, so they suit only a stream written
 * in large pieces, as these are (chunks of a thousand rows or more, src/domain/events/export): the
 * audit export, written a few rows at a time, came out larger than itself at Brotli 1.
 */
export const EVENT_EXPORT_COMPRESSION = settings({ brotliQuality: 1, gzipLevel: 2 })

/**
 * Registers @fastify/compress for every route added after it, except `uncompressed` ones (the
 * ingest paths and the stream): those get no hook at all, so each ingest request costs exactly
 * what it did. Call before the routes it should cover (Swagger UI's among them). Export routes
 * pass `compress: EXPORT_COMPRESSION` in their options.
 */
export async function registerCompression(
  app: FastifyInstance,
  options: { uncompressed: ReadonlySet<string> },
): Promise<void> {
  // Runs before the plugin's own onRoute hook, which then adds nothing to these routes.
  app.addHook('onRoute', (route) => {
    if (options.uncompressed.has(route.url ?? '')) route.compress = false
  })
  await app.register(compress, {
    ...PAGE_COMPRESSION,
    // Request bodies are not inflated: nothing here takes compressed uploads, and a small gzip
    // body could expand to far more than the body limit allows.
    globalDecompression: false,
  })
}
