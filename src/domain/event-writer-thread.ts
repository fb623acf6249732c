// The SQLite writer thread: it owns a connection of its own and runs each batch it is sent as one
// transaction, so the fsync at every commit happens here and never stalls the event loop that
// serves requests. See ThreadedSqliteEventStore for the other side.
import { parentPort, workerData } from 'node:worker_threads'
import { openSqliteConnection } from '../db/connect.js'
import type { PendingEvent, WriteResult } from './event-store.js'
import { sqliteBatchWriter } from './event-store.js'

/** The items travel as JSON text: one string copies faster than a structured clone of objects. */
export interface BatchRequest {
  id: number
  items: string
}

export type BatchReply =
  | { id: number; ok: true; results: WriteResult[] }
  | { id: number; ok: false; error: { name: string; message: string; code: string | undefined } }

const port = parentPort
if (!port) throw new Error('event-writer-thread runs as a worker thread')

const { path } = workerData as { path: string }
const { sqlite, statements } = openSqliteConnection(path)
const write = sqliteBatchWriter(sqlite, (sql) => statements.prepare(sql))

port.on('message', ({ id, items }: BatchRequest) => {
  let reply: BatchReply
  try {
    reply = { id, ok: true, results: write(JSON.parse(items) as PendingEvent[]) }
  } catch (err) {
    const { name, message } = err instanceof Error ? err : new Error(String(err))
    const code = (err as { code?: unknown }).code
    reply = { id, ok: false, error: { name, message, code: typeof code === 'string' ? code : undefined } }
  }
  port.postMessage(reply)
})
