// Response compression (gzip, Brotli) for pages, the read API, /docs and the streamed exports; never for ingest or the live stream.
import { constants } from 'node:zlib'
import compress from '@fastify/compress'
import type { FastifyInstance } from 'fastify'

/**
 * Levels chosen for the exports, the largest and hottest bodies: streamed at several hundred
 * thousand rows a second, they must not wait on the compressor (docs/PERFORMANCE.md, "Compressed
 * exports"). Brotli's default quality, 11, compresses a few MB/s; 4 keeps up and still beats gzip on
 * size. gzip's level 6 costs about twice level 4 for a few percent.
 */
export const BROTLI_QUALITY = 4
export const GZIP_LEVEL = 4

/** Bodies under this many bytes go as they are: their compressed form saves nothing worth the CPU. */
export const COMPRESSION_THRESHOLD = 1024

/**
 * What is worth compressing: text, JSON, XML/SVG and scripts. Not text/event-stream: each live
 * message must leave at once, and a compressor holds bytes back until it has enough.
 */
const COMPRESSIBLE = /^text\/(?!event-stream)|[+/]json(?:;|$)|[+/]xml(?:;|$)|\/javascript(?:;|$)/

/**
 * Registers @fastify/compress for every route added after it, except `uncompressed` ones (the
 * ingest paths and the stream): those get no hook at all, so each ingest request costs exactly
 * what it did. Call before the routes it should cover (Swagger UI's among them).
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
    // The client's q-values decide; between equals, Brotli (smaller at the same speed here).
    encodings: ['br', 'gzip'],
    threshold: COMPRESSION_THRESHOLD,
    brotliOptions: { params: { [constants.BROTLI_PARAM_QUALITY]: BROTLI_QUALITY } },
    zlibOptions: { level: GZIP_LEVEL },
    customTypes: COMPRESSIBLE,
    // Request bodies are not inflated: nothing here takes compressed uploads, and a small gzip
    // body could expand to far more than the body limit allows.
    globalDecompression: false,
  })
}
