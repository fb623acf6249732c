// Event exports (SPEC §3.1): RFC 4180 CSV (formula-safe) and a JSON array, streamed from the database.
import type { Database } from '../../../db/connect.js'
import type { EventFilter } from '../logs-query.js'
import { planEventExport } from '../query-plan.js'
import { CSV_HEADER, type ExportFormat } from './format.js'
import { POSTGRES_CHUNK_ROWS, postgresChunks } from './postgres.js'
import { SQLITE_CHUNK_ROWS, sqliteChunks } from './sqlite.js'

export {
  CSV_HEADER,
  csvCell,
  type ExportFormat,
  eventToCsvLine,
  eventToJson,
  parseBomParameter,
  UTF8_BOM,
} from './format.js'
export { POSTGRES_CHUNK_ROWS, SQLITE_CHUNK_ROWS }

/** Rows per chunk when the caller does not choose: each dialect's own (see its chunker). */
export function defaultChunkRows(dialect: Database['dialect']): number {
  return dialect === 'sqlite' ? SQLITE_CHUNK_ROWS : POSTGRES_CHUNK_ROWS
}

/**
 * The whole download, chunk by chunk: the CSV header and records, or the JSON array with one object
 * a line. The first step plans the query and reads the first chunk before anything is yielded, so a
 * database that is down fails the request before a byte is sent. Memory holds a chunk or two,
 * however many events match.
 */
export async function* exportEvents(
  database: Database,
  accountId: number,
  filter: EventFilter,
  format: ExportFormat,
  options: { chunkRows?: number } = {},
): AsyncGenerator<Buffer> {
  const plan = await planEventExport(database.db, database.dialect, accountId, filter)
  const chunkRows = options.chunkRows ?? defaultChunkRows(database.dialect)
  const chunks =
    database.dialect === 'sqlite'
      ? sqliteChunks(database, plan, format, chunkRows)
      : postgresChunks(database, plan, format, chunkRows)
  let first = await chunks.next()
  // No byte-order mark: tools that read the header literally would see it as part of "id" (the
  // route adds one when asked, `?bom=1`).
  yield Buffer.from(format === 'csv' ? CSV_HEADER : '[', 'latin1')
  let empty = true
  while (!first.done) {
    empty = false
    yield first.value
    first = await chunks.next()
  }
  if (format === 'json') yield Buffer.from(empty ? ']\n' : '\n]\n', 'latin1')
}
