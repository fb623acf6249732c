// The PostgreSQL side of the exports: binary COPY of the raw columns, formatted into chunks of bytes here.
import { sql } from 'kysely'
import type { PostgresHandle } from '../../../db/connect.js'
import { loadPg } from '../../../db/connect.js'
import { BinaryCopyReader } from '../../../db/copy-binary.js'
import { copyOut } from '../../../db/copy-out.js'
import { EXPORTED_COLUMNS } from '../../../db/event-columns.js'
import { EXPORT_COLUMNS } from '../event.js'
import type { EventQueryPlan, Position } from '../query-plan.js'
import { selectEvents } from '../query-plan.js'
import {
  ChunkBytes,
  COMMA,
  CR,
  copyBytes,
  csvCellBytes,
  jsonStringBytes,
  LF,
  QUOTE,
  writeAscii,
  writeCsvEmpty,
  writeCsvInteger,
  writeCsvTime,
  writeInteger,
  writeIsoTime,
} from './bytes.js'
import { EXPORT_SHAPE, type ExportFormat } from './format.js'

/**
 * Rows per COPY. Each chunk is its own short statement (well inside statement_timeout) and holds a
 * pooled connection only while it runs, so a slow download never pins a connection; the next chunk
 * is read while the previous one is being sent.
 */
export const POSTGRES_CHUNK_ROWS = 10_000

/**
 * The columns, in export order. Binary COPY sends each as its length and its raw bytes (text as
 * UTF-8, bigint as 8 bytes): the server does no formatting at all, which made it the bottleneck
 * (to_char, row_to_json and the CSV cell expressions cost it several times the plain copy), and
 * here the bytes go to the output with a scan for the few that CSV or JSON must escape.
 */
const PG_COLUMNS = sql.raw(EXPORTED_COLUMNS.map(({ column }) => `events.${column}`).join(', '))
const PG_FIELDS = EXPORTED_COLUMNS.length

/**
 * COPY takes no bind parameters, so the filter's values are written into the statement: numbers as
 * digits, strings with pg's escapeLiteral (which also handles backslashes whatever
 * standard_conforming_strings says). The only $n in this module's SQL are Kysely's placeholders.
 */
function inlineParameters(text: string, parameters: readonly unknown[]): string {
  return text.replace(/\$(\d+)/g, (_, n: string) => {
    const value = parameters[Number(n) - 1]
    if (typeof value === 'number' && Number.isSafeInteger(value)) return String(value)
    if (typeof value === 'string') return loadPg().escapeLiteral(value)
    throw new Error(`export: cannot write parameter $${n} (${typeof value}) into a COPY statement`)
  })
}

const JSON_ID = Buffer.from(`{"${EXPORT_SHAPE.id.key}":`, 'latin1')
const JSON_TIME = Buffer.from(`,"${EXPORT_SHAPE.receivedAt.key}":"`, 'latin1')
/** JSON text before each value: `,"service":`, …, in EXPORT_COLUMNS order (id and time are written whole). */
const JSON_KEYS = EXPORT_COLUMNS.map((key) => Buffer.from(`,"${key}":`, 'latin1'))

/** Formats binary COPY rows into one chunk of the export; knows where the last row left off. */
class PostgresRowWriter {
  readonly out: ChunkBytes
  rows = 0
  lastId = 0
  lastReceivedAt = 0
  private readonly reader = new BinaryCopyReader()

  constructor(
    private readonly format: ExportFormat,
    /** Whether the export has rows before this chunk (JSON separates objects with commas). */
    private readonly continues: boolean,
    capacity: number,
  ) {
    this.out = new ChunkBytes(capacity)
  }

  /** One CopyData message: a row (the first one after the file header), or the end marker. */
  row(message: Buffer): void {
    const reader = this.reader
    const fields = reader.row(message)
    if (fields === -1) return
    if (fields !== PG_FIELDS) throw new Error(`export: COPY row of ${fields} fields`)
    const id = reader.int8()
    const receivedAt = reader.int8()
    // Worst case: every byte escaped as \u00XX in JSON, plus keys, quotes and the time.
    this.out.reserve(message.length * 6 + 512)
    const out = this.out.buffer
    let pos = this.out.length
    if (this.format === 'csv') {
      pos = writeCsvInteger(out, pos, id)
      out[pos++] = COMMA
      pos = writeCsvTime(out, pos, receivedAt)
      for (let field = 2; field < PG_FIELDS; field++) {
        out[pos++] = COMMA
        const length = reader.field()
        // NULL and '' are both the quoted empty cell.
        pos =
          length < 0
            ? writeCsvEmpty(out, pos)
            : csvCellBytes(message, reader.start, reader.start + length, out, pos)
      }
      out[pos++] = CR
      out[pos++] = LF
    } else {
      if (this.rows > 0 || this.continues) out[pos++] = COMMA
      out[pos++] = LF
      pos = copyBytes(JSON_ID, 0, JSON_ID.length, out, pos)
      pos = writeInteger(out, pos, id)
      pos = copyBytes(JSON_TIME, 0, JSON_TIME.length, out, pos)
      pos = writeIsoTime(out, pos, receivedAt)
      out[pos++] = QUOTE
      for (let field = 2; field < PG_FIELDS; field++) {
        const key = JSON_KEYS[field] as Buffer
        pos = copyBytes(key, 0, key.length, out, pos)
        const length = reader.field()
        pos =
          length < 0
            ? writeAscii(out, pos, 'null')
            : jsonStringBytes(message, reader.start, reader.start + length, out, pos)
      }
      out[pos++] = 0x7d // }
    }
    this.out.length = pos
    this.rows++
    this.lastId = id
    this.lastReceivedAt = receivedAt
  }
}

interface PostgresChunk {
  bytes: Buffer
  /** Where the next chunk starts, or null when this one was the last. */
  next: Position | null
}

async function postgresChunk(
  database: PostgresHandle,
  plan: EventQueryPlan,
  format: ExportFormat,
  chunkRows: number,
  after: Position | undefined,
): Promise<PostgresChunk> {
  const pool = database.pool
  // PostgreSQL plans have one part: its trigram index is the planner's business.
  const part = plan.parts[0]
  if (!part || plan.parts.length !== 1) throw new Error('export: a PostgreSQL plan has one part')
  const query = selectEvents(plan, part, { columns: PG_COLUMNS, after, limit: chunkRows }).compile(
    database.db,
  )
  const text = `copy (${inlineParameters(query.sql, query.parameters)}) to stdout with (format binary)`
  const writer = new PostgresRowWriter(
    format,
    after !== undefined,
    chunkRows * (format === 'csv' ? 200 : 400),
  )
  const client = await pool.connect()
  let broken: Error | undefined
  try {
    await copyOut(client, text, (row) => writer.row(row))
  } catch (err) {
    // A connection that failed mid-COPY is not handed to anyone else.
    broken = err instanceof Error ? err : new Error(String(err))
    throw err
  } finally {
    client.release(broken)
  }
  return {
    bytes: writer.out.take(),
    next: writer.rows < chunkRows ? null : { id: writer.lastId, receivedAt: writer.lastReceivedAt },
  }
}

/** The export's records, chunk by chunk; the next chunk is read while one is sent. */
export async function* postgresChunks(
  database: PostgresHandle,
  plan: EventQueryPlan,
  format: ExportFormat,
  chunkRows: number,
): AsyncGenerator<Buffer> {
  let pending: Promise<PostgresChunk> | null = postgresChunk(database, plan, format, chunkRows, undefined)
  try {
    while (pending) {
      const chunk: PostgresChunk = await pending
      // The next chunk is read while this one is sent.
      pending = chunk.next ? postgresChunk(database, plan, format, chunkRows, chunk.next) : null
      if (chunk.bytes.length > 0) yield chunk.bytes
    }
  } finally {
    // A download abandoned half-way: the chunk in flight is dropped (its failure too).
    pending?.catch(() => {})
  }
}
