// Starts the HTTP server and shuts it down gracefully on SIGTERM/SIGINT; nothing else.
import type { Server } from 'node:http'
import type { Socket } from 'node:net'
import { type Logger, pino } from 'pino'
import { type App, buildApp } from './app.js'
import { type Config, configurationWarnings } from './config.js'
import { type Database, openDatabase } from './db/connect.js'
import { migrateToLatest } from './db/migrate.js'
import { countUsers } from './domain/accounts.js'
import { outageLogFor } from './domain/database-errors.js'
import { loggerOptions } from './http/logging.js'
import { type OpenedResources, openResources } from './resources.js'

export interface RunningServer {
  app: App
  database: Database
  address: string
  stop(): Promise<void>
}

export interface StartOptions {
  /** Where the server logs; by default JSON lines (loggerOptions) on stdout. */
  logger?: Logger
}

/**
 * Opens everything in order (logger, database and its migrations, secret, Redis, revocation
 * channel), builds the app from them and listens; stop() closes them in reverse.
 */
export async function startServer(config: Config, options: StartOptions = {}): Promise<RunningServer> {
  const log = options.logger ?? pino(loggerOptions(config.logLevel))
  const database = openDatabase(config.database, {
    // One line per outage, not one per dropped connection (see OutageLog).
    onPoolError: (err) => outageLogFor(database).failed(log, err),
  })
  let resources: OpenedResources | undefined
  let app: App | undefined
  const closeAll = async () => {
    await app?.close()
    await resources?.close()
    await database.close()
  }
  try {
    await migrateToLatest(database)
    resources = await openResources(config, database, log)
    app = await buildApp({ config, database, resources, loggerInstance: log })
    boundSlowClients(app.server, config)
    const connections = new Set<Socket>()
    app.server.on('connection', (socket: Socket) => {
      connections.add(socket)
      socket.once('close', () => connections.delete(socket))
    })
    // Fastify's own line is the one "listening" line (serveUntilSignalled adds none).
    const address = await app.listen({
      port: config.port,
      host: config.host,
      listenTextResolver: (at) => `shiplog listening on ${at} (database: ${config.database.dialect})`,
    })
    const running = app
    let stopping: Promise<void> | null = null
    return {
      app: running,
      database,
      address,
      stop: () => {
        if (!stopping) {
          // Stop accepting, let in-flight requests and the pending batch finish, then close the
          // rest in reverse order. Keep-alive connections that finish their last request after
          // close() began would stay open until keepAliveTimeout (65 s); close each as soon as it
          // falls idle. A connection that has sent nothing yet (a browser's or fetch's spare one)
          // is not idle to Node, and once close() began Node no longer times it out: it would
          // hold the stop until the 25 s bound. It has no request to lose, so it is closed too.
          const sweep = setInterval(() => {
            running.server.closeIdleConnections()
            for (const socket of connections) if (socket.bytesRead === 0) socket.destroy()
          }, 100)
          stopping = closeAll().finally(() => clearInterval(sweep))
        }
        return stopping
      },
    }
  } catch (err) {
    await closeAll().catch(() => {})
    throw err
  }
}

/**
 * Cuts off clients that send their request too slowly (slowloris) with a 408. Node enforces these
 * bounds only when it sweeps its connections, every 30 s by default, so a slow client could stay up
 * to 30 s past them; a sweep every quarter of the headers bound (at most 1 s) keeps them close.
 * Node reads the sweep interval when the server starts listening, so this must run before listen().
 */
function boundSlowClients(server: Server, config: Config): void {
  server.requestTimeout = config.requestTimeoutMs
  server.headersTimeout = config.headersTimeoutMs
  // A documented createServer() option that @types/node does not declare as a property.
  const sweeping = server as Server & { connectionsCheckingInterval: number }
  sweeping.connectionsCheckingInterval = Math.min(1000, Math.floor(config.headersTimeoutMs / 4))
}

/**
 * The log for a person at a terminal: one readable line per entry (pino-pretty), times of day
 * instead of epoch milliseconds. Loaded only then, so a server under a supervisor never loads it.
 */
async function terminalLogger(config: Config): Promise<Logger> {
  const { default: pretty } = await import('pino-pretty')
  return pino(
    loggerOptions(config.logLevel),
    pretty({
      colorize: true,
      translateTime: 'SYS:HH:MM:ss',
      ignore: 'pid,hostname,reqId',
      singleLine: true,
      sync: true,
    }),
  )
}

/** The address to tell a person: the public one, else where the server listens. */
function addressForPeople(config: Config): string {
  if (config.publicUrl) return config.publicUrl
  // Listening on every interface: this machine reaches it as localhost.
  const host = ['0.0.0.0', '::', ''].includes(config.host) ? 'localhost' : config.host
  return `http://${host.includes(':') ? `[${host}]` : host}:${config.port}`
}

export interface ServeOptions {
  /** Whether a person watches stdout (a terminal); by default whether stdout is a TTY. */
  tty?: boolean
}

/** Runs until SIGTERM or SIGINT, then exits 0 after a graceful stop (1 if the stop failed). */
export async function serveUntilSignalled(config: Config, options: ServeOptions = {}): Promise<void> {
  const tty = options.tty ?? process.stdout.isTTY === true
  const server = await startServer(config, tty ? { logger: await terminalLogger(config) } : {})
  const { app } = server
  for (const warning of configurationWarnings(config)) app.log.warn(warning)
  let signalled = false
  const onSignal = (reason: string) => {
    if (signalled) return
    signalled = true
    app.log.info(`${reason}: finishing in-flight requests`)
    const force = setTimeout(() => {
      app.log.error('graceful stop took longer than 25 s; exiting')
      process.exit(1)
    }, 25_000)
    force.unref()
    server.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        app.log.error({ err }, 'error while stopping')
        process.exit(1)
      },
    )
  }
  process.on('SIGTERM', () => onSignal('SIGTERM received'))
  process.on('SIGINT', () => onSignal('SIGINT received'))
  // Only now, with Ctrl-C handled, is a person told the server is ready.
  if (tty) {
    const url = config.port === 0 ? server.address : addressForPeople(config)
    const next = (await countUsers(server.database.db)) === 0 ? 'create the first account' : 'log in'
    process.stdout.write(`\nShiplog is ready at ${url} — open it to ${next}\n\n`)
  }
  // npm and npx run the server under `sh -c`, and stopping npm stops that shell, which does not
  // pass the signal on: this process would keep the port for ever. `npm start` execs node, so npm
  // signals it directly; `npx shiplog serve` cannot, so under npm a parent that goes away counts as
  // SIGTERM. Only under npm: a server started from a script with `&` must outlive the script.
  if (process.env.npm_lifecycle_event !== undefined) {
    const parent = process.ppid
    const watch = setInterval(() => {
      if (process.ppid !== parent) onSignal('npm, which started this server, has stopped')
    }, 250)
    watch.unref()
  }
}
