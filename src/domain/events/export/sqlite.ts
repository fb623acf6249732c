// The SQLite side of the exports: SQLite joins a chunk of records into one blob, and joined.ts turns it into bytes.
import { isUtf8 } from 'node:buffer'
import { setImmediate as nextTurn } from 'node:timers/promises'
import { sql } from 'kysely'
import type { SqliteHandle, SqlReader } from '../../../db/connect.js'
import { EVENT_COLUMN_NAMES } from '../../../db/event-columns.js'
import type { EventRow } from '../../../db/schema.js'
import type { EventQueryPlan, Position } from '../query-plan.js'
import { selectEvents } from '../query-plan.js'
import { EXPORT_SHAPE, type ExportFormat, eventToCsvLine, eventToJson } from './format.js'
import {
  type ChunkEnd,
  csvFromJoined,
  FIELD_SEPARATOR,
  type JoinedOutput,
  jsonFromJoined,
  RECORD_SEPARATOR,
} from './joined.js'

/**
 * Rows per chunk. Each chunk is one statement run to completion (a read transaction of a few
 * milliseconds), so the writer is never held up, no statement stays open across requests, and other
 * requests get their turn between chunks. A chunk reaches JavaScript as one blob, not a value per
 * row, so its size no longer decides how much the heap keeps (with a string or two per row, 4000
 * rows made the survivors of a scavenge promoted and the server's memory grow over a long export).
 */
export const SQLITE_CHUNK_ROWS = 2000

/** The text columns after id and received_at, in export order. */
const SQLITE_TEXT_COLUMNS = EXPORT_SHAPE.texts.map(({ column }) => `events.${column}`)

/** The separators as SQL string literals (the raw control characters; SQLite takes any text there). */
const FIELD = `'${String.fromCharCode(FIELD_SEPARATOR)}'`
const RECORD = `'${String.fromCharCode(RECORD_SEPARATOR)}'`

/**
 * One CSV record as SQLite joins it: id, received_at and the ten values, NULL as empty (concat()
 * takes NULL as ''), one call a row. Quoting, doubling quotes and guarding formula starts are left
 * to joined.ts, which does them while it copies the bytes once: in SQL, escaping each cell took
 * some sixty function calls a row and more than doubled the export's CPU time.
 */
const SQLITE_CSV_RECORD = `concat(events.id, ${FIELD}, events.received_at, ${SQLITE_TEXT_COLUMNS.map((c) => `${FIELD}, ${c}`).join(', ')})`

/**
 * One JSON record: id, received_at and SQLite's own JSON object of the other keys, whose string
 * escapes are JSON.stringify's (test/ui/export-format.test.ts checks every control character, and
 * fuzzes the rest) and leave no raw control character, so no separator, in it.
 */
const SQLITE_JSON_RECORD =
  `concat(events.id, ${FIELD}, events.received_at, ${FIELD}, ` +
  `json_object(${EXPORT_SHAPE.texts.map(({ column, key }) => `'${key}', events.${column}`).join(', ')}))`

/**
 * What the plain way reads: the stored row, column by column (never `*`: the row is read as the
 * table is described, whatever a newer schema may have added).
 */
const PLAIN_COLUMNS = sql.raw(EVENT_COLUMN_NAMES.map((column) => `events.${column}`).join(', '))

/** A compiled statement. */
interface Query {
  sql: string
  parameters: readonly unknown[]
}

interface Chunk {
  bytes: Buffer
  /** Its last record: the next chunk starts after it. */
  last: Position
  /** Whether it holds chunkRows records (so more may follow). */
  full: boolean
}

/**
 * One chunk: the records SQLite joined into one blob (how many it counted beside them), written by
 * joined.ts; when it refuses them (a value holding a separator or invalid UTF-8, or SQLite handing
 * the rows over in another order), the same chunk from its rows, the plain way (format.ts).
 */
function sqliteChunk(
  reader: SqlReader,
  queries: { joined: Query; plain: Query },
  format: ExportFormat,
  byTime: boolean,
  after: Position | undefined,
  chunkRows: number,
): Chunk | null {
  const [[rows, blob]] = reader.arrays(queries.joined.sql, ...queries.joined.parameters) as [
    [number, Buffer | null],
  ]
  if (rows === 0 || blob === null) return null
  const out: JoinedOutput = { buffer: Buffer.allocUnsafe(blob.length * 2), length: 0 }
  let last: ChunkEnd = null
  if (isUtf8(blob)) {
    last =
      format === 'csv'
        ? csvFromJoined(blob, rows, after, byTime, out)
        : jsonFromJoined(blob, rows, after, byTime, out)
  }
  if (last === null) return plainChunk(reader, queries.plain, format, after, chunkRows)
  return { bytes: out.buffer.subarray(0, out.length), last, full: rows === chunkRows }
}

/** A chunk from its rows, record by record with format.ts's plain encoder. */
function plainChunk(
  reader: SqlReader,
  query: Query,
  format: ExportFormat,
  after: Position | undefined,
  chunkRows: number,
): Chunk | null {
  const rows = reader.all<EventRow>(query.sql, ...query.parameters)
  const last = rows.at(-1)
  if (!last) return null
  const text =
    format === 'csv'
      ? rows.map(eventToCsvLine).join('')
      : rows.map((row, i) => `${after === undefined && i === 0 ? '' : ','}\n${eventToJson(row)}`).join('')
  return {
    bytes: Buffer.from(text, 'utf8'),
    last: { id: last.id, receivedAt: last.received_at },
    full: rows.length === chunkRows,
  }
}

/** The export's records, chunk by chunk, each chunk one short statement. */
export async function* sqliteChunks(
  database: SqliteHandle,
  plan: EventQueryPlan,
  format: ExportFormat,
  chunkRows: number,
): AsyncGenerator<Buffer> {
  const record = sql.raw(`${format === 'csv' ? SQLITE_CSV_RECORD : SQLITE_JSON_RECORD} as record`)
  let after: Position | undefined
  for (const part of plan.parts) {
    for (;;) {
      const inner = selectEvents(plan, part, { columns: record, after, limit: chunkRows })
      const queries = {
        joined:
          sql`select count(*), cast(group_concat(record, ${sql.raw(RECORD)}) as blob) from (${inner})`.compile(
            database.db,
          ),
        plain: selectEvents(plan, part, { columns: PLAIN_COLUMNS, after, limit: chunkRows }).compile(
          database.db,
        ),
      }
      const from = after
      // One read of the read connection: the chunk's blob, and its bytes.
      const chunk = await database.read((reader) =>
        sqliteChunk(reader, queries, format, plan.byTime, from, chunkRows),
      )
      if (!chunk) break
      after = chunk.last
      yield chunk.bytes
      if (!chunk.full) break
      // better-sqlite3 is synchronous: give other requests their turn between chunks.
      await nextTurn()
    }
  }
}
