// The tamper-evidence chain under ingest load (src/domain/chain/): how far the chain is behind the
// events when a measured run ends and how long it takes to catch up, and the CPU it costs per event
// to chain, measured without HTTP in a process of its own (like bench/lib/derive-child.mjs).
//
//   node bench/lib/chain.mjs rechain DATABASE_URL   forget the links and chain every row again;
//                                                    prints {rows, cpuMs, seconds} as JSON
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import { parseDatabaseUrl } from '../../dist/config.js'
import { openDatabase } from '../../dist/db/connect.js'
import { genesisLink } from '../../dist/domain/chain/canonical.js'
import { chainCaughtUp, chainLag } from '../../dist/domain/chain/chainer.js'

const self = fileURLToPath(import.meta.url)

/**
 * Rows behind the chain head right now, then the time until none are (bounded).
 * @param {string} databaseUrl
 * @param {number} [limitMs]
 * @returns {Promise<{ behind: number, catchUpMs: number | null }>}
 */
export async function chainLagAfterRun(databaseUrl, limitMs = 60_000) {
  const database = openDatabase(parseDatabaseUrl(databaseUrl))
  try {
    const started = performance.now()
    const first = await chainLag(database)
    const behind = first.events + first.audit
    let lag = behind
    while (lag > 0) {
      if (performance.now() - started > limitMs) return { behind, catchUpMs: null }
      await new Promise((resolve) => setTimeout(resolve, 20))
      const now = await chainLag(database)
      lag = now.events + now.audit
    }
    return { behind, catchUpMs: performance.now() - started }
  } finally {
    await database.close()
  }
}

/**
 * Keeps the chain task of a server on a PostgreSQL database from running until `release()`: holds
 * its head rows FOR UPDATE in an open transaction; the task takes them FOR UPDATE SKIP LOCKED and
 * skips its turn while they are taken (src/domain/chain/chainer.ts). Ingest does not touch them.
 * @param {string} databaseUrl
 */
export function holdChain(databaseUrl) {
  return holdRows(
    databaseUrl,
    'SELECT stream FROM chain_heads FOR UPDATE',
    'no chain head to hold (the chain has not started)',
  )
}

/**
 * Keeps the deployments' derivation of a server on a PostgreSQL database from running until
 * `release()`: holds the progress row FOR UPDATE, which every derivation run takes first as its
 * lock (src/domain/deployments/store-postgres.ts), so the background task (or a run live updates
 * asked for before the burst was seen) waits there, holding one of the pool's connections, and
 * derives the held-off events once released. Ingest does not touch the row. The wait is a statement,
 * so it must end within the server's statement_timeout (15 s): warm-up and run together stay under
 * it (3 s + 10 s by default).
 * @param {string} databaseUrl
 */
export function holdDerivation(databaseUrl) {
  return holdRows(
    databaseUrl,
    'SELECT id FROM deployments_progress FOR UPDATE',
    'no derivation progress row to hold',
  )
}

/**
 * @param {string} databaseUrl @param {string} query takes the rows FOR UPDATE @param {string} missing
 * @returns {Promise<{ release: () => Promise<void> }>}
 */
async function holdRows(databaseUrl, query, missing) {
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  try {
    await client.query('BEGIN')
    const { rowCount } = await client.query(query)
    if (!rowCount) throw new Error(missing)
  } catch (err) {
    await client.end()
    throw err
  }
  return {
    release: async () => {
      try {
        await client.query('ROLLBACK')
      } finally {
        await client.end()
      }
    },
  }
}

/**
 * Chains every row of the database again in a child process (no server may be running on it) and
 * returns the CPU per row.
 * @param {string} databaseUrl
 * @returns {Promise<{ rows: number, cpuMs: number, seconds: number, usPerRow: number }>}
 */
export function chainCpu(databaseUrl) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [self, 'rechain', databaseUrl], {
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    let out = ''
    child.stdout.on('data', (chunk) => {
      out += chunk
    })
    child.on('error', reject)
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`bench/lib/chain.mjs rechain exited with ${code}`))
      const result = JSON.parse(out)
      resolve({ ...result, usPerRow: result.rows > 0 ? (result.cpuMs * 1000) / result.rows : 0 })
    })
  })
}

async function rechain(databaseUrl) {
  const database = openDatabase(parseDatabaseUrl(databaseUrl))
  try {
    await database.db.deleteFrom('chain_links').execute()
    for (const stream of ['events', 'audit']) {
      await database.db
        .updateTable('chain_heads')
        .set({
          through: 0,
          link: genesisLink(stream),
          hole_from: null,
          hole_seen_at: null,
          hole_writers: null,
        })
        .where('stream', '=', stream)
        .execute()
    }
    const before = process.cpuUsage()
    const t0 = performance.now()
    const rows = await chainCaughtUp(database, { graceMs: 0, settleMs: 0 })
    const cpu = process.cpuUsage(before)
    console.log(
      JSON.stringify({
        rows,
        cpuMs: (cpu.user + cpu.system) / 1000,
        seconds: (performance.now() - t0) / 1000,
      }),
    )
  } finally {
    await database.close()
  }
}

if (process.argv[1] === self && process.argv[2] === 'rechain') {
  const url = process.argv[3]
  if (!url) {
    console.error('usage: node bench/lib/chain.mjs rechain DATABASE_URL')
    process.exit(2)
  }
  await rechain(url)
}
