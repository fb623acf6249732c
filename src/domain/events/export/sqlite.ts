// The SQLite side of the exports: SQLite reads each record as one string, and chunks of records become bytes here.
import { setImmediate as nextTurn } from 'node:timers/promises'
import { sql } from 'kysely'
import type { SqliteHandle, SqlReader } from '../../../db/connect.js'
import type { EventRow } from '../../../db/schema.js'
import type { EventQueryPlan, Position } from '../queries.js'
import { selectEvents } from '../queries.js'
import {
  ChunkBytes,
  COMMA,
  CR,
  CSV_CELL_JOIN,
  copyBytes,
  guardQuotedCells,
  LF,
  QUOTE,
  QUOTED_AMBIGUOUS,
  QUOTED_PLAIN,
  quotedJoinState,
  writeCsvInteger,
  writeCsvTime,
  writeInteger,
  writeIsoTime,
  writeText,
} from './bytes.js'
import { type ExportFormat, eventToCsvLine } from './format.js'

/**
 * Rows per chunk. Each chunk is one statement run to completion (a read transaction of a couple of
 * milliseconds), so the writer is never held up and no statement stays open across requests. Small
 * enough that the rows of a chunk are garbage before V8's next scavenge: with 4000 the survivors were
 * promoted and the heap, and the server's memory, grew over a long export.
 */
export const SQLITE_CHUNK_ROWS = 1000

/** The ten text columns after id and received_at, in export order. */
const SQLITE_TEXT_COLUMNS = [
  'events.service',
  'events.environment',
  'events.version',
  'events.status',
  'events.url',
  'events.commit_sha',
  'events.description',
  'events.deployer',
  'events.source',
  'events.api_key_name',
]

/**
 * What SQLite selects for a CSV record: id, received_at, and the other ten values (NULL as empty)
 * joined by `","`, so that with a quote before and after they are the record's quoted cells
 * (format.ts). One string a row costs a fraction of one value per cell (better-sqlite3 pays per
 * value), and SQLite only concatenates: escaping each cell in SQL took it some sixty function calls
 * a row, more than doubling the export's CPU time. The bytes are checked here (bytes.ts:
 * quotedJoinState): a value holding a quote, rare, makes the record be written from its row.
 */
const SQLITE_CSV_COLUMNS = sql.raw(
  [
    'events.id',
    'events.received_at',
    SQLITE_TEXT_COLUMNS.map((column) => `ifnull(${column}, '')`).join(` || '${CSV_CELL_JOIN}' || `),
  ].join(', '),
)

/**
 * What SQLite selects for a JSON record: id, received_at, and the other keys as SQLite's own JSON
 * object, whose string escapes are JSON.stringify's (test/ui/export-format.test.ts checks every
 * control character, and fuzzes the rest).
 */
const SQLITE_JSON_COLUMNS = sql.raw(
  [
    'events.id',
    'events.received_at',
    "json_object('service', events.service, 'environment', events.environment, 'version', events.version, " +
      "'status', events.status, 'url', events.url, 'commit', events.commit_sha, 'description', events.description, " +
      "'deployer', events.deployer, 'source', events.source, 'api_key_name', events.api_key_name)",
  ].join(', '),
)

type CsvRow = [id: number, receivedAt: number, values: string]
type JsonRow = [id: number, receivedAt: number, object: string]

/** A record's values as UTF-8 while guards go in, reused (a record is written before the next one is read). */
let valueBytes = Buffer.allocUnsafe(4096)

function sqliteCsvChunk(sql: SqlReader, rows: CsvRow[]): Buffer {
  const chunk = new ChunkBytes(rows.length * 256)
  for (const [id, receivedAt, values] of rows) {
    // UTF-8 takes at most three bytes per UTF-16 unit; id, time, quotes, commas, a guard per value
    // and CR LF fit in 96. Reserved once: a reserve made after writing would drop what it wrote.
    chunk.reserve(values.length * 3 + 96)
    const out = chunk.buffer
    let pos = writeCsvInteger(out, chunk.length, id)
    out[pos++] = COMMA
    pos = writeCsvTime(out, pos, receivedAt)
    out[pos++] = COMMA
    out[pos++] = QUOTE
    // Most records need nothing more: their bytes, quoted at both ends, are the cells.
    const end = writeText(out, pos, values)
    const state = quotedJoinState(out, pos, end, SQLITE_TEXT_COLUMNS.length)
    if (state === QUOTED_PLAIN) {
      pos = end
    } else if (state === QUOTED_AMBIGUOUS) {
      // A value holds a quote: this record the plain way, from its row (left out when it was
      // deleted since the chunk was read, as if deleted just before).
      const row = sql.get<EventRow>('select * from events where id = ?', id)
      if (row) {
        const line = eventToCsvLine(row)
        chunk.reserve(line.length * 3)
        chunk.length = writeText(chunk.buffer, chunk.length, line)
      }
      continue
    } else {
      const length = end - pos
      if (length > valueBytes.length) valueBytes = Buffer.allocUnsafe(length * 2)
      out.copy(valueBytes, 0, pos, end)
      pos = guardQuotedCells(valueBytes, 0, length, out, pos)
    }
    out[pos++] = QUOTE
    out[pos++] = CR
    out[pos++] = LF
    chunk.length = pos
  }
  return chunk.take()
}

const JSON_ID = Buffer.from('{"id":', 'latin1')
const JSON_TIME = Buffer.from(',"received_at":"', 'latin1')

function sqliteJsonChunk(rows: JsonRow[], first: boolean): Buffer {
  const chunk = new ChunkBytes(rows.length * 512)
  let separator = !first
  for (const [id, receivedAt, object] of rows) {
    chunk.reserve(object.length * 3 + 64)
    const out = chunk.buffer
    let pos = chunk.length
    if (separator) out[pos++] = COMMA
    out[pos++] = LF
    pos = copyBytes(JSON_ID, 0, JSON_ID.length, out, pos)
    pos = writeInteger(out, pos, id)
    pos = copyBytes(JSON_TIME, 0, JSON_TIME.length, out, pos)
    pos = writeIsoTime(out, pos, receivedAt)
    out[pos++] = QUOTE
    // object is {"service":…}: its "{" becomes the comma before its first key.
    const start = pos
    pos = writeText(out, pos, object)
    out[start] = COMMA
    chunk.length = pos
    separator = true
  }
  return chunk.take()
}

/** The export's records, chunk by chunk, each chunk one short statement. */
export async function* sqliteChunks(
  database: SqliteHandle,
  plan: EventQueryPlan,
  format: ExportFormat,
  chunkRows: number,
): AsyncGenerator<Buffer> {
  const columns = format === 'csv' ? SQLITE_CSV_COLUMNS : SQLITE_JSON_COLUMNS
  let after: Position | undefined
  for (const part of plan.parts) {
    for (;;) {
      const query = selectEvents(plan, part, { columns, after, limit: chunkRows }).compile(database.db)
      // One read of the read connection: the rows as arrays (no object per row) and their bytes.
      const chunk = await database.read((sql) => {
        const rows = sql.arrays(query.sql, ...query.parameters)
        const last = rows.at(-1) as [number, number] | undefined
        if (!last) return null
        const bytes =
          format === 'csv'
            ? sqliteCsvChunk(sql, rows as CsvRow[])
            : sqliteJsonChunk(rows as JsonRow[], after === undefined)
        return { bytes, last, full: rows.length === chunkRows }
      })
      if (!chunk) break
      const { bytes, last, full } = chunk
      after = { id: last[0], receivedAt: last[1] }
      // The rows are not needed while the chunk is sent.
      yield bytes
      // better-sqlite3 is synchronous: give other requests their turn between chunks.
      await nextTurn()
      if (!full) break
    }
  }
}
