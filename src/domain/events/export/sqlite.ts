// The SQLite side of the exports: SQLite makes each record's cells, and chunks of records become bytes here.
import { setImmediate as nextTurn } from 'node:timers/promises'
import { sql } from 'kysely'
import type { SqliteHandle } from '../../../db/connect.js'
import type { EventQueryPlan, Position } from '../queries.js'
import { selectEvents } from '../queries.js'
import {
  ChunkBytes,
  COMMA,
  CR,
  copyBytes,
  LF,
  QUOTE,
  writeCsvInteger,
  writeCsvTime,
  writeInteger,
  writeIsoTime,
  writeText,
} from './bytes.js'
import {
  CSV_FORMULA_GUARD,
  CSV_FORMULA_STARTS,
  CSV_QUOTE,
  CSV_QUOTE_TRIGGERS,
  type ExportFormat,
} from './format.js'

/**
 * Rows per chunk. Each chunk is one statement run to completion (a read transaction of a couple of
 * milliseconds), so the writer is never held up and no statement stays open across requests. Small
 * enough that the rows of a chunk are garbage before V8's next scavenge: with 4000 the survivors were
 * promoted and the heap, and the server's memory, grew over a long export.
 */
export const SQLITE_CHUNK_ROWS = 1000

/** A one-character SQL string, as char(n): no quoting to get wrong, control characters included. */
function sqlChar(character: string): string {
  return `char(${character.charCodeAt(0)})`
}

/**
 * The CSV cell of a text column as csvCell writes it, as one SQLite expression made from the same
 * rule (format.ts). Every cell of a record is made this way, so the record SQLite joins is exact by
 * construction: no cell is taken on trust.
 */
export function sqliteCsvCell(column: string): string {
  const quoted = CSV_QUOTE_TRIGGERS.map((c) => `instr(${column}, ${sqlChar(c)})`).join(' or ')
  const formula = `unicode(${column}) in (${CSV_FORMULA_STARTS.map((c) => c.charCodeAt(0)).join(', ')})`
  const quote = sqlChar(CSV_QUOTE)
  const guard = sqlChar(CSV_FORMULA_GUARD)
  return (
    `(case when ${column} is null then '' ` +
    `when ${quoted} then ${quote} || iif(${formula}, ${guard}, '') || replace(${column}, ${quote}, ${quote} || ${quote}) || ${quote} ` +
    `when ${formula} then ${guard} || ${column} ` +
    `else ${column} end)`
  )
}

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
 * What SQLite selects for a CSV record: id, received_at, and the other ten cells joined by commas.
 * One string a row costs a fraction of one value per cell (better-sqlite3 pays per value).
 */
const SQLITE_CSV_COLUMNS = sql.raw(
  ['events.id', 'events.received_at', SQLITE_TEXT_COLUMNS.map(sqliteCsvCell).join(" || ',' || ")].join(', '),
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

type CsvRow = [id: number, receivedAt: number, cells: string]
type JsonRow = [id: number, receivedAt: number, object: string]

function sqliteCsvChunk(rows: CsvRow[]): Buffer {
  const chunk = new ChunkBytes(rows.length * 256)
  for (const [id, receivedAt, cells] of rows) {
    // UTF-8 takes at most three bytes per UTF-16 unit; id, time and separators fit in 64.
    chunk.reserve(cells.length * 3 + 64)
    const out = chunk.buffer
    let pos = writeCsvInteger(out, chunk.length, id)
    out[pos++] = COMMA
    pos = writeCsvTime(out, pos, receivedAt)
    out[pos++] = COMMA
    pos = writeText(out, pos, cells)
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
      // Arrays instead of one object per row. These statements' SQL is this module's own, so no
      // other user of the shared statement cache expects objects from them.
      const statement = database.prepare(query.sql).raw(true)
      const rows = statement.all(...query.parameters)
      const last = rows.at(-1) as [number, number] | undefined
      if (!last) break
      const full = rows.length === chunkRows
      const bytes =
        format === 'csv'
          ? sqliteCsvChunk(rows as CsvRow[])
          : sqliteJsonChunk(rows as JsonRow[], after === undefined)
      after = { id: last[0], receivedAt: last[1] }
      // The rows are not needed while the chunk is sent.
      yield bytes
      // better-sqlite3 is synchronous: give other requests their turn between chunks.
      await nextTurn()
      if (!full) break
    }
  }
}
