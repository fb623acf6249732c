// A TCP relay in front of PostgreSQL that a test can cut and restore, to stage a database outage.
import { connect, createServer, type Server, type Socket } from 'node:net'

export class TcpProxy {
  #server: Server | null = null
  readonly #sockets = new Set<Socket>()
  port = 0

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  /** Starts relaying (again) on the same port as before, or a free one the first time. */
  async start(): Promise<void> {
    const server = createServer((client) => {
      const upstream = connect(this.targetPort, this.targetHost)
      this.#sockets.add(client).add(upstream)
      const drop = () => {
        client.destroy()
        upstream.destroy()
        this.#sockets.delete(client)
        this.#sockets.delete(upstream)
      }
      client.on('error', drop).on('close', drop)
      upstream.on('error', drop).on('close', drop)
      client.pipe(upstream).pipe(client)
    })
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(this.port, '127.0.0.1', () => resolve())
    })
    const address = server.address()
    if (address && typeof address === 'object') this.port = address.port
    this.#server = server
  }

  /** Refuses new connections and cuts every open one, like a database that went away. */
  async stop(): Promise<void> {
    const server = this.#server
    this.#server = null
    for (const s of this.#sockets) s.destroy()
    this.#sockets.clear()
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()))
  }
}
