// Runs seedSqlite in a worker thread: better-sqlite3 is synchronous, and a multi-million-row
// transaction on the main thread would keep the watchdog and the SIGINT handler from running.
import { parentPort, workerData } from 'node:worker_threads'
import { seedSqlite } from './seed.mjs'

const { file, plan, target } = workerData
parentPort?.postMessage(seedSqlite(file, plan, target))
