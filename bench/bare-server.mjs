// Baseline for the benchmark: a bare Fastify 5 server doing the least an ingest route can do. It parses
// the same JSON body as POST /deploy (and the same query string as GET /put) and answers 201 with a
// small JSON body, with no key check, validation, logging or database. Run by bench/run.mjs as its
// own process: PORT and HOST come from the environment, GET /healthz says it is up.
import Fastify from 'fastify'

const port = Number(process.env.PORT ?? 0)
const host = process.env.HOST ?? '127.0.0.1'

const app = Fastify({ logger: false })
let nextId = 0

app.get('/healthz', async () => ({ status: 'ok' }))

app.post('/deploy', async (request, reply) => {
  const body = /** @type {Record<string, unknown>} */ (request.body ?? {})
  return reply
    .code(201)
    .send({ id: ++nextId, service: body.service, version: body.version, status: body.status })
})

app.get('/put', async (request, reply) => {
  const query = /** @type {Record<string, unknown>} */ (request.query ?? {})
  return reply
    .code(201)
    .send({ id: ++nextId, service: query.app, version: query.version, status: query.status })
})

const stop = () => {
  app.close().then(
    () => process.exit(0),
    () => process.exit(1),
  )
}
process.on('SIGTERM', stop)
process.on('SIGINT', stop)

await app.listen({ port, host })
