// Event exports (SPEC §3.1): RFC 4180 CSV (formula-safe) and a JSON array, streamed from the database.
import { setImmediate as nextTurn } from 'node:timers/promises'
import { sql } from 'kysely'
import type { Database, PostgresHandle, SqliteHandle } from '../../db/connect.js'
import { loadPg } from '../../db/connect.js'
import { copyOut } from '../../db/copy-out.js'
import type { EventRow } from '../../db/schema.js'
import { EXPORT_COLUMNS, toPublicEvent } from './event.js'
import {
  type EventFilter,
  type EventQueryPlan,
  type Position,
  planEventExport,
  selectEvents,
} from './queries.js'

export type ExportFormat = 'csv' | 'json'

const NEEDS_QUOTES = /[",\r\n]/
// A cell starting with one of these is a formula to a spreadsheet; a leading ' makes it text.
const FORMULA_START = /^[=+\-@\t\r]/

export function csvCell(value: string | number | null): string {
  if (value === null) return ''
  let text = typeof value === 'number' ? String(value) : value
  if (FORMULA_START.test(text)) text = `'${text}`
  return NEEDS_QUOTES.test(text) ? `"${text.replaceAll('"', '""')}"` : text
}

export const CSV_HEADER = `${EXPORT_COLUMNS.join(',')}\r\n`

/**
 * One CSV record, the plain way. It defines the format: the streaming code below produces the same
 * bytes faster (test/ui/export-format.test.ts holds them to it), and falls back to it for cells it
 * cannot vouch for.
 */
export function eventToCsvLine(row: EventRow): string {
  return (
    `${row.id},${new Date(row.received_at).toISOString()},${csvCell(row.service)},${csvCell(row.environment)},` +
    `${csvCell(row.version)},${row.status},${csvCell(row.url)},${csvCell(row.commit_sha)},` +
    `${csvCell(row.description)},${csvCell(row.deployer)},${row.source},${csvCell(row.api_key_name)}\r\n`
  )
}

/** One JSON export record, the plain way (see eventToCsvLine). */
export function eventToJson(row: EventRow): string {
  return JSON.stringify(toPublicEvent(row))
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
  const chunks =
    database.dialect === 'sqlite'
      ? sqliteChunks(database, plan, format, options.chunkRows ?? SQLITE_CHUNK_ROWS)
      : postgresChunks(database, plan, format, options.chunkRows ?? POSTGRES_CHUNK_ROWS)
  let first = await chunks.next()
  // No byte-order mark: tools that read the header literally would see it as part of "id".
  yield Buffer.from(format === 'csv' ? CSV_HEADER : '[', 'latin1')
  let empty = true
  while (!first.done) {
    empty = false
    yield first.value
    first = await chunks.next()
  }
  if (format === 'json') yield Buffer.from(empty ? ']\n' : '\n]\n', 'latin1')
}

// ---------------------------------------------------------------------------------------------
// Output buffers and the timestamp

/**
 * The bytes of one chunk, written row by row straight into one Buffer: no string per row or per
 * chunk (see the byte writers below).
 */
class ChunkBytes {
  buffer: Buffer
  length = 0

  constructor(capacity: number) {
    this.buffer = Buffer.allocUnsafe(capacity)
  }

  /** Makes room for `bytes` more; writers that index `buffer` directly call this first. */
  reserve(bytes: number): void {
    if (this.length + bytes <= this.buffer.length) return
    const bigger = Buffer.allocUnsafe(Math.max(this.buffer.length * 2, this.length + bytes))
    this.buffer.copy(bigger, 0, 0, this.length)
    this.buffer = bigger
  }

  take(): Buffer {
    return this.buffer.subarray(0, this.length)
  }
}

const DAY_MS = 86_400_000
let cachedDay = Number.NaN
let cachedDayPrefix = ''

// The bytes CSV and JSON care about.
const QUOTE = 0x22
const COMMA = 0x2c
const LF = 0x0a
const CR = 0x0d
const BACKSLASH = 0x5c

// The byte writers below take the output and a position and return the new one: with the buffer and
// the position in locals V8 keeps them in registers, where fields of an object are reloaded at every
// byte. They make no strings either: some of what an export allocates per row outlives two
// scavenges and is promoted, and with a string or two per row the old generation, so the server's
// memory, grew steadily over a download (heap 59 to 79 MB over 3M rows). Callers reserve the room
// first.

function writeAscii(out: Buffer, at: number, text: string): number {
  let pos = at
  for (let i = 0; i < text.length; i++) out[pos++] = text.charCodeAt(i)
  return pos
}

/** A non-negative safe integer's digits (anything else as String() writes it). */
function writeInteger(out: Buffer, at: number, value: number): number {
  if (!Number.isSafeInteger(value) || value < 0) return writeAscii(out, at, String(value))
  let digits = 1
  for (let rest = value; rest >= 10; rest = Math.floor(rest / 10)) digits++
  let rest = value
  for (let i = at + digits - 1; i >= at; i--) {
    out[i] = 0x30 + (rest % 10)
    rest = Math.floor(rest / 10)
  }
  return at + digits
}

/** Text of any kind, as UTF-8. */
function writeText(out: Buffer, at: number, text: string): number {
  return at + out.write(text, at)
}

function copyBytes(source: Buffer, start: number, end: number, out: Buffer, at: number): number {
  // Short runs by hand: a Buffer.copy call costs more than copying a few dozen bytes.
  if (end - start > 64) return at + source.copy(out, at, start, end)
  let pos = at
  for (let i = start; i < end; i++) out[pos++] = source[i] as number
  return pos
}

/**
 * `new Date(ms).toISOString()` as bytes, several times faster: consecutive events mostly share their
 * day, so its "YYYY-MM-DDT" is kept and only the time of day is formatted. Anything unusual (a
 * fraction of a millisecond, a year outside 0000–9999) takes the slow way.
 */
function writeIsoTime(out: Buffer, at: number, ms: number): number {
  const day = Math.floor(ms / DAY_MS)
  if (day !== cachedDay || !Number.isInteger(ms)) {
    const iso = new Date(ms).toISOString()
    if (iso.length !== 24 || !Number.isInteger(ms)) return writeAscii(out, at, iso)
    cachedDay = day
    cachedDayPrefix = iso.slice(0, 11)
  }
  let pos = writeAscii(out, at, cachedDayPrefix)
  let rest = ms - day * DAY_MS
  const hours = Math.floor(rest / 3_600_000)
  rest -= hours * 3_600_000
  const minutes = Math.floor(rest / 60_000)
  rest -= minutes * 60_000
  const seconds = Math.floor(rest / 1000)
  rest -= seconds * 1000
  out[pos++] = 0x30 + Math.floor(hours / 10)
  out[pos++] = 0x30 + (hours % 10)
  out[pos++] = 0x3a // :
  out[pos++] = 0x30 + Math.floor(minutes / 10)
  out[pos++] = 0x30 + (minutes % 10)
  out[pos++] = 0x3a
  out[pos++] = 0x30 + Math.floor(seconds / 10)
  out[pos++] = 0x30 + (seconds % 10)
  out[pos++] = 0x2e // .
  out[pos++] = 0x30 + Math.floor(rest / 100)
  out[pos++] = 0x30 + (Math.floor(rest / 10) % 10)
  out[pos++] = 0x30 + (rest % 10)
  out[pos++] = 0x5a // Z
  return pos
}

// ---------------------------------------------------------------------------------------------
// SQLite: raw rows (arrays, no objects), formatted here

/**
 * Rows per chunk. Each chunk is one statement run to completion (a read transaction of a couple of
 * milliseconds), so the writer is never held up and no statement stays open across requests. Small
 * enough that the rows of a chunk are garbage before V8's next scavenge: with 4000 the survivors were
 * promoted and the heap, and the server's memory, grew over a long export.
 */
const SQLITE_CHUNK_ROWS = 1000

/** The description's CSV cell, as csvCell writes it, made by SQLite. */
const SQLITE_DESCRIPTION_CELL = `case
  when events.description is null then ''
  when instr(events.description, '"') or instr(events.description, ',')
    or instr(events.description, char(10)) or instr(events.description, char(13))
  then '"' || iif(unicode(events.description) in (61, 43, 45, 64, 9, 13), '''', '')
    || replace(events.description, '"', '""') || '"'
  when unicode(events.description) in (61, 43, 45, 64, 9, 13) then '''' || events.description
  else events.description end`

/**
 * What SQLite selects for a CSV record: id, received_at, and the other ten cells joined by commas.
 * One string a row costs a fraction of one value per cell (better-sqlite3 pays per value). The
 * description's cell is escaped by SQLite, for it often needs quotes; the others are almost always
 * plain (no quote, comma or line break, no formula start) and are taken as they are when the record
 * shows it (PLAIN_CELLS), else read again one by one (sqliteCsvCells).
 */
const SQLITE_CSV_COLUMNS = sql.raw(
  [
    'events.id',
    'events.received_at',
    "events.service || ',' || events.environment || ',' || events.version || ',' || events.status || ',' || " +
      `ifnull(events.url, '') || ',' || ifnull(events.commit_sha, '') || ',' || ${SQLITE_DESCRIPTION_CELL} || ',' || ` +
      "ifnull(events.deployer, '') || ',' || events.source || ',' || ifnull(events.api_key_name, '')",
  ].join(', '),
)

/**
 * What SQLite selects for a JSON record: id, received_at, and the other keys as SQLite's own JSON
 * object, whose string escapes are JSON.stringify's (test/ui/export-format.test.ts checks every
 * control character and more).
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

/**
 * Whether the cells SQLite joined are already the record's CSV form: six plain cells (no quote,
 * comma or line break, no formula start), the description's cell (quoted or not, as SQLite escaped
 * it), three plain cells. A plain cell's own comma would show as one cell too many; its quote, as a
 * cell that is neither plain nor a quoted one in the description's place.
 */
const PLAIN_CELLS = (() => {
  const plain = '(?:[^",\\r\\n=+\\-@\\t][^",\\r\\n]*)?'
  const description = '(?:"(?:[^"]|"")*"|[^",\\r\\n]*)'
  return new RegExp(`^${plain}(?:,${plain}){5},${description}(?:,${plain}){3}$`)
})()

interface CsvCellsRow {
  service: string
  environment: string
  version: string
  status: string
  url: string | null
  commit_sha: string | null
  description: string | null
  deployer: string | null
  source: string
  api_key_name: string | null
}

/**
 * The ten cells after id and time of one event, read and escaped one by one; undefined when the
 * event was deleted since its chunk was read (it is then left out, as if deleted just before).
 */
function sqliteCsvCells(database: SqliteHandle, id: number): string | undefined {
  const row = database
    .prepare(
      'select service, environment, version, status, url, commit_sha, description, deployer, source, api_key_name ' +
        'from events where id = ?',
    )
    .get(id) as CsvCellsRow | undefined
  if (!row) return undefined
  return (
    `${csvCell(row.service)},${csvCell(row.environment)},${csvCell(row.version)},${row.status},` +
    `${csvCell(row.url)},${csvCell(row.commit_sha)},${csvCell(row.description)},${csvCell(row.deployer)},` +
    `${row.source},${csvCell(row.api_key_name)}`
  )
}

type CsvRow = [id: number, receivedAt: number, cells: string]
type JsonRow = [id: number, receivedAt: number, object: string]

function sqliteCsvChunk(database: SqliteHandle, rows: CsvRow[]): Buffer {
  const chunk = new ChunkBytes(rows.length * 256)
  for (const [id, receivedAt, joined] of rows) {
    const cells = PLAIN_CELLS.test(joined) ? joined : sqliteCsvCells(database, id)
    if (cells === undefined) continue
    // UTF-8 takes at most three bytes per UTF-16 unit; id, time and separators fit in 64.
    chunk.reserve(cells.length * 3 + 64)
    const out = chunk.buffer
    let pos = writeInteger(out, chunk.length, id)
    out[pos++] = COMMA
    pos = writeIsoTime(out, pos, receivedAt)
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

async function* sqliteChunks(
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
          ? sqliteCsvChunk(database, rows as CsvRow[])
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

// ---------------------------------------------------------------------------------------------
// PostgreSQL: binary COPY of the raw columns, formatted here from the bytes

/**
 * Rows per COPY. Each chunk is its own short statement (well inside statement_timeout) and holds a
 * pooled connection only while it runs, so a slow download never pins a connection; the next chunk
 * is read while the previous one is being sent.
 */
const POSTGRES_CHUNK_ROWS = 10_000

/**
 * The columns, in export order. Binary COPY sends each as its length and its raw bytes (text as
 * UTF-8, bigint as 8 bytes): the server does no formatting at all, which made it the bottleneck
 * (to_char, row_to_json and the CSV cell expressions cost it several times the plain copy), and
 * here the bytes go to the output with a scan for the few that CSV or JSON must escape.
 */
const PG_COLUMNS = sql.raw(
  'events.id, events.received_at, events.service, events.environment, events.version, events.status, ' +
    'events.url, events.commit_sha, events.description, events.deployer, events.source, events.api_key_name',
)
const PG_FIELDS = 12

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

// The binary COPY format: an 11-byte signature, flags and header-extension length; then per row a
// field count and each field's length (-1 for NULL) and bytes; a field count of -1 ends the data.
const BINARY_SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1')

/** JSON text before each value: `,"service":`, …, in EXPORT_COLUMNS order (id and time are written whole). */
const JSON_KEYS = EXPORT_COLUMNS.map((key) => Buffer.from(`,"${key}":`, 'latin1'))

function isFormulaStart(byte: number): boolean {
  // = + - @ tab CR: all ASCII, so the first byte is the first character.
  return byte === 0x3d || byte === 0x2b || byte === 0x2d || byte === 0x40 || byte === 0x09 || byte === CR
}

/** The bytes of a text value as csvCell writes it. Every byte csvCell looks at is ASCII. */
function csvCellBytes(source: Buffer, start: number, end: number, out: Buffer, at: number): number {
  let quote = false
  for (let i = start; i < end; i++) {
    const b = source[i] as number
    if (b === QUOTE || b === COMMA || b === LF || b === CR) {
      quote = true
      break
    }
  }
  let pos = at
  if (quote) out[pos++] = QUOTE
  if (isFormulaStart(source[start] as number)) out[pos++] = 0x27 // '
  if (!quote) return copyBytes(source, start, end, out, pos)
  for (let i = start; i < end; i++) {
    const b = source[i] as number
    out[pos++] = b
    if (b === QUOTE) out[pos++] = QUOTE
  }
  out[pos++] = QUOTE
  return pos
}

/** The bytes of a text value as JSON.stringify writes it. */
function jsonStringBytes(source: Buffer, start: number, end: number, out: Buffer, at: number): number {
  for (let i = start; i < end; i++) {
    const b = source[i] as number
    if (b < 0x20 || b === QUOTE || b === BACKSLASH) {
      // Rare: JSON.stringify escapes it. Other bytes, UTF-8 sequences included, are as it leaves
      // them (PostgreSQL's UTF-8 holds no lone surrogates).
      return writeText(out, at, JSON.stringify(source.toString('utf8', start, end)))
    }
  }
  let pos = at
  out[pos++] = QUOTE
  pos = copyBytes(source, start, end, out, pos)
  out[pos++] = QUOTE
  return pos
}

/** Formats binary COPY rows into one chunk of the export; knows where the last row left off. */
class PostgresRowWriter {
  readonly out: ChunkBytes
  rows = 0
  lastId = 0
  lastReceivedAt = 0
  private header = true

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
    let at = 0
    if (this.header) {
      if (!message.subarray(0, BINARY_SIGNATURE.length).equals(BINARY_SIGNATURE))
        throw new Error('export: not a binary COPY')
      at = BINARY_SIGNATURE.length + 8 + message.readInt32BE(BINARY_SIGNATURE.length + 4)
      this.header = false
    }
    if (at >= message.length) return
    const fields = message.readInt16BE(at)
    if (fields === -1) return
    if (fields !== PG_FIELDS) throw new Error(`export: COPY row of ${fields} fields`)
    const id = int8(message, at + 2)
    const receivedAt = int8(message, at + 14)
    at += 26
    // Worst case: every byte escaped as \u00XX in JSON, plus keys, quotes and the time.
    this.out.reserve((message.length - at) * 6 + 512)
    const out = this.out.buffer
    let pos = this.out.length
    if (this.format === 'csv') {
      pos = writeInteger(out, pos, id)
      out[pos++] = COMMA
      pos = writeIsoTime(out, pos, receivedAt)
      for (let field = 2; field < PG_FIELDS; field++) {
        out[pos++] = COMMA
        const length = message.readInt32BE(at)
        at += 4
        if (length <= 0) continue // NULL and '' are both an empty cell
        // status and source are written as they are, like eventToCsvLine does.
        pos =
          field === 5 || field === 10
            ? copyBytes(message, at, at + length, out, pos)
            : csvCellBytes(message, at, at + length, out, pos)
        at += length
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
        const length = message.readInt32BE(at)
        at += 4
        if (length < 0) {
          pos = writeAscii(out, pos, 'null')
          continue
        }
        pos = jsonStringBytes(message, at, at + length, out, pos)
        at += length
      }
      out[pos++] = 0x7d // }
    }
    this.out.length = pos
    this.rows++
    this.lastId = id
    this.lastReceivedAt = receivedAt
  }
}

/** A bigint field's value (its 4-byte length is at `at`); ids and epoch milliseconds fit 2^53. */
function int8(message: Buffer, at: number): number {
  if (message.readInt32BE(at) !== 8) throw new Error('export: bigint field of unexpected length')
  return message.readInt32BE(at + 4) * 0x1_0000_0000 + message.readUInt32BE(at + 8)
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

async function* postgresChunks(
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
