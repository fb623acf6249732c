// Sends batches of events to the SQLite writer thread (event-writer-thread.ts) and hands back its
// answers. The thread is started with the store, so it is ready by the first request, and started
// again if it ever stops.
import { Worker } from 'node:worker_threads'
import { type EventStore, outcomesOf, type PendingEvent, type RecordOutcome } from './event-store.js'
import type { BatchReply, BatchRequest } from './event-writer-thread.js'

// The thread's file sits beside this module's and has the same extension: .mjs in the bundle
// (dist/bundle/), .js compiled (dist/domain/), .ts under the test runner, where this module is
// loaded through tsx (a development dependency) and the thread loads its file through tsx's API.
const EXTENSION = import.meta.url.slice(import.meta.url.lastIndexOf('.'))
const FROM_SOURCE = EXTENSION === '.ts'
const THREAD_FILE = new URL(`./event-writer-thread${EXTENSION}`, import.meta.url)

function startThread(workerData: unknown): Worker {
  if (!FROM_SOURCE) return new Worker(THREAD_FILE, { workerData })
  const load = `import('tsx/esm/api').then((tsx) => tsx.tsImport(${JSON.stringify(THREAD_FILE.href)}, ${JSON.stringify(import.meta.url)}))`
  return new Worker(load, { eval: true, workerData })
}

interface Waiting {
  items: readonly PendingEvent[]
  resolve: (outcomes: RecordOutcome[]) => void
  reject: (err: Error) => void
}

/** An error from the thread, with the code (SQLITE_FULL, …) that tells an outage from a bad row. */
function rebuildError(error: { name: string; message: string; code: string | undefined }): Error {
  const err = new Error(error.message) as Error & { code?: string }
  err.name = error.name
  if (error.code !== undefined) err.code = error.code
  return err
}

export class ThreadedSqliteEventStore implements EventStore {
  #worker: Worker | null = null
  readonly #waiting = new Map<number, Waiting>()
  #nextId = 1
  #closed = false

  constructor(private readonly path: string) {
    this.#worker = this.#start()
  }

  #start(): Worker {
    const worker = startThread({ path: this.path })
    worker.on('message', (reply: BatchReply) => {
      const waiting = this.#waiting.get(reply.id)
      if (!waiting) return
      this.#waiting.delete(reply.id)
      // An idle thread must not keep the process alive; one with work in hand must.
      if (this.#waiting.size === 0) worker.unref()
      if (!reply.ok) waiting.reject(rebuildError(reply.error))
      else {
        try {
          waiting.resolve(outcomesOf(waiting.items, reply.results))
        } catch (err) {
          waiting.reject(err as Error)
        }
      }
    })
    worker.on('error', (err) => this.#lost(worker, err))
    worker.on('exit', (code) =>
      this.#lost(worker, new Error(`the SQLite writer thread stopped (exit ${code})`)),
    )
    worker.unref()
    return worker
  }

  /** The thread failed or stopped: whatever it had in hand is answered as not stored. */
  #lost(worker: Worker, err: Error): void {
    if (this.#worker !== worker) return
    this.#worker = null
    const waiting = [...this.#waiting.values()]
    this.#waiting.clear()
    for (const w of waiting) w.reject(err)
  }

  writeBatch(items: readonly PendingEvent[]): Promise<RecordOutcome[]> {
    if (this.#closed) return Promise.reject(new Error('the event store is closed'))
    this.#worker ??= this.#start()
    const worker = this.#worker
    const id = this.#nextId++
    return new Promise<RecordOutcome[]>((resolve, reject) => {
      this.#waiting.set(id, { items, resolve, reject })
      if (this.#waiting.size === 1) worker.ref()
      const request: BatchRequest = { id, items: JSON.stringify(items) }
      worker.postMessage(request)
    })
  }

  async close(): Promise<void> {
    this.#closed = true
    const worker = this.#worker
    this.#worker = null
    if (worker) await worker.terminate()
  }
}
