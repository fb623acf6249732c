// The export alone, without HTTP: a full export of a seeded SQLite file streamed in-process through
// the event exports' compressors into a sink that counts bytes, with the CPU time of the process
// (compressor threads included) per row. CPU per row is the figure that holds on a busy machine.
//
//   node bench/export-cpu.mjs [--rows N] [--db FILE] [--root DIR] [--runs K] [--formats csv,json]
//                             [--encodings identity,gzip,br]
//
// Without --db it seeds a fresh file of N events (default 1,000,000) as the bench does, under
// .bench-tmp/, and removes it at the end; with --db it reads that file (seeded by an earlier
// run with --keep, or by the bench), so two builds can be compared in turn on the same data:
// --root names another checkout whose dist/ is used (built with `npm run build` there).
// Prints one line a download: rows/s (wall), CPU µs a row, MB out, the process's peak RSS.
import { mkdirSync, rmSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { Writable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { parseArgs } from 'node:util'
import { createBrotliCompress, createGzip } from 'node:zlib'
import { benchAccountEnv } from './lib/reads.mjs'
import { historyPlan, seedSqlite, sqliteSeedTarget } from './lib/seed.mjs'

const here = resolve(import.meta.dirname, '..')
const { values: args } = parseArgs({
  options: {
    rows: { type: 'string', default: '1000000' },
    db: { type: 'string' },
    root: { type: 'string', default: here },
    runs: { type: 'string', default: '1' },
    formats: { type: 'string', default: 'csv' },
    encodings: { type: 'string', default: 'identity,gzip,br' },
    keep: { type: 'boolean', default: false },
  },
})
const root = resolve(args.root)
const { openDatabase } = await import(join(root, 'dist/db/connect.js'))
const { exportEvents } = await import(join(root, 'dist/domain/events/export/index.js'))
const compression = await import(join(root, 'dist/http/compression.js'))
// The levels the event export routes use (older builds had one EXPORT_COMPRESSION for all).
const levels = compression.EVENT_EXPORT_COMPRESSION ?? compression.EXPORT_COMPRESSION

let file = args.db
let dir = null
if (!file) {
  const n = Number(args.rows)
  dir = join(here, '.bench-tmp', `export-cpu-${process.pid}`)
  mkdirSync(dir, { recursive: true })
  file = join(dir, 'shiplog.db')
  await benchAccountEnv(
    { root: here, shiplogBin: join(here, 'bin/shiplog.js'), serverLogLevel: 'warn' },
    `sqlite:${file}`,
  )
  const t0 = performance.now()
  const seeded = seedSqlite(file, historyPlan(n, Date.now() - 60_000), sqliteSeedTarget(file))
  console.error(`seeded ${seeded.count} events in ${((performance.now() - t0) / 1000).toFixed(1)} s: ${file}`)
}

const db = openDatabase({ dialect: 'sqlite', path: file })
try {
  const account = await db.db
    .selectFrom('accounts')
    .select('id')
    .where('name', '=', 'Bench')
    .executeTakeFirstOrThrow()
  const { count } = await db.db
    .selectFrom('events')
    .select((eb) => eb.fn.countAll().as('count'))
    .where('account_id', '=', account.id)
    .executeTakeFirstOrThrow()
  const rows = Number(count)
  for (let run = 0; run < Number(args.runs); run++) {
    for (const format of args.formats.split(',')) {
      for (const encoding of args.encodings.split(',')) {
        let bytes = 0
        const sink = new Writable({
          write(chunk, _encoding, done) {
            bytes += chunk.length
            done()
          },
        })
        const compressor =
          encoding === 'gzip'
            ? [createGzip(levels.zlibOptions)]
            : encoding === 'br'
              ? [createBrotliCompress(levels.brotliOptions)]
              : []
        const cpu0 = process.cpuUsage()
        const t0 = performance.now()
        await pipeline(exportEvents(db, account.id, {}, format), ...compressor, sink)
        const seconds = (performance.now() - t0) / 1000
        const cpu = process.cpuUsage(cpu0)
        const cpuSeconds = (cpu.user + cpu.system) / 1e6
        console.log(
          `${format} ${encoding}: ${Math.round(rows / seconds).toLocaleString('en-US')} rows/s, ` +
            `${((cpuSeconds / rows) * 1e6).toFixed(2)} µs CPU a row, ${(bytes / 2 ** 20).toFixed(1)} MB, ` +
            `peak RSS ${(process.resourceUsage().maxRSS / 1024).toFixed(0)} MB`,
        )
      }
    }
  }
} finally {
  await db.close()
  if (dir && !args.keep) rmSync(dir, { recursive: true, force: true })
}
