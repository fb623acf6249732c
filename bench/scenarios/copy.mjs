// The copy part: N events seeded in SQLite, then `shiplog copy` to PostgreSQL (bench/lib/copy.mjs).
import { benchCopy } from '../lib/copy.mjs'
import { copyRows, pgServerUrl } from '../lib/options.mjs'
import { num } from '../lib/report.mjs'

/** Runs the copy and prints its line. @returns {Promise<Awaited<ReturnType<typeof benchCopy>>>} */
export async function runCopy() {
  const copyResult = await benchCopy({ rows: copyRows, pgServerUrl })
  console.log(
    `copy SQLite → PostgreSQL: ${copyResult.copiedRows} rows in ${num(copyResult.seconds, 1)} s = ${copyResult.rowsPerSecond} rows/s (whole command: snapshot, rows, indexes, verification); the rows alone in ${copyResult.rowsPhaseSeconds === null ? '?' : num(copyResult.rowsPhaseSeconds, 1)} s = ${copyResult.rowsPhasePerSecond ?? '?'} rows/s; peak RSS ${copyResult.peakRssMb} MB`,
  )
  return copyResult
}
