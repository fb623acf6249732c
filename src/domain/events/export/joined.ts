// The SQLite chunk as one blob of joined records (sqlite.ts), turned into CSV or JSON bytes in one pass, or refused.
import type { Position } from '../query-plan.js'
import {
  COMMA,
  CR,
  copyBytes,
  FORMULA_START,
  GUARD_BYTE,
  LF,
  QUOTE,
  QUOTE_BYTE,
  writeCsvTime,
  writeInteger,
  writeIsoTime,
} from './bytes.js'
import { EXPORT_SHAPE } from './format.js'

/*
 * SQLite hands over a chunk as one value: every record's fields joined by FIELD_SEPARATOR, the records
 * joined by RECORD_SEPARATOR, as UTF-8 bytes (one blob, so no string and no array per row reach
 * JavaScript). A record is `id␟received_at␟` and then, for CSV, the ten text values (NULL as empty),
 * for JSON SQLite's json_object of them. Both separators are control characters that ingest refuses,
 * but a column may hold anything, so a chunk is read strictly: every record has exactly its fields,
 * integers where integers belong, the records in the order asked for, as many as SQLite counted,
 * valid UTF-8. Anything else and the reader answers null: the caller writes that chunk the plain way.
 */
export const FIELD_SEPARATOR = 0x1f
export const RECORD_SEPARATOR = 0x1e

/** The text values of a CSV record, after id and received_at. */
export const CSV_TEXT_FIELDS = EXPORT_SHAPE.texts.length

// The copy of the CSV values (csvFromJoined) looks closer only at bytes up to the quote, found four
// at a time by subtracting this from a word: a byte below it borrows into its top bit.
if (FIELD_SEPARATOR >= QUOTE_BYTE || RECORD_SEPARATOR >= QUOTE_BYTE || QUOTE_BYTE >= 0x80)
  throw new Error('export: the CSV copy expects the separators below the quote, and the quote ASCII')
const ABOVE_QUOTE_WORD = (QUOTE_BYTE + 1) * 0x01010101
const TOP_BITS_WORD = 0x80808080 | 0

const DIGIT_0 = 0x30
const DIGIT_9 = 0x39
const MINUS = 0x2d

/** Where the last record of a chunk left off, or null when the chunk was refused. */
export type ChunkEnd = Position | null

/** The output of one chunk, written by the readers below. */
export interface JoinedOutput {
  buffer: Buffer
  length: number
}

/**
 * Reads an integer of at most 16 digits, optionally negative, that ends at a field separator;
 * returns the index of that separator, or -1. The value is left in `integer.value`.
 */
function readInteger(source: Buffer, at: number, integer: { value: number }): number {
  let i = at
  const negative = source[i] === MINUS
  if (negative) i++
  const digitsFrom = i
  let value = 0
  for (let b = source[i] as number; b >= DIGIT_0 && b <= DIGIT_9; b = source[++i] as number) {
    value = value * 10 + (b - DIGIT_0)
  }
  const digits = i - digitsFrom
  // SQLite writes integers without leading zeros; past 2^53 a double is not exact.
  if (digits === 0 || digits > 16 || value > Number.MAX_SAFE_INTEGER) return -1
  if (digits > 1 && source[digitsFrom] === DIGIT_0) return -1
  if (source[i] !== FIELD_SEPARATOR) return -1
  integer.value = negative ? -value : value
  return i
}

/** Whether (id, receivedAt) comes strictly after the previous record in the export's order (newest first). */
function follows(
  previousId: number,
  previousAt: number,
  id: number,
  receivedAt: number,
  byTime: boolean,
): boolean {
  if (!byTime) return id < previousId
  return receivedAt < previousAt || (receivedAt === previousAt && id < previousId)
}

const scratch = { value: 0 }

/**
 * The CSV records (format.ts: eventToCsvLine) of a chunk of `rows` joined records read after
 * `after`, appended to `out`; the position of the last record, or null (nothing appended) when the chunk is refused.
 */
export function csvFromJoined(
  source: Buffer,
  rows: number,
  after: Position | undefined,
  byTime: boolean,
  out: JoinedOutput,
): ChunkEnd {
  const end = source.length
  // Worst case: every byte a quote (two out), each separator `","` and a guard, the time in full.
  const room = out.length + 2 * end + rows * (CSV_TEXT_FIELDS * 4 + 48) + 64
  if (out.buffer.length < room) {
    const bigger = Buffer.allocUnsafe(room)
    out.buffer.copy(bigger, 0, 0, out.length)
    out.buffer = bigger
  }
  const o = out.buffer
  const words = new DataView(source.buffer, source.byteOffset, source.length)
  const outWords = new DataView(o.buffer, o.byteOffset, o.length)
  let pos = out.length
  let i = 0
  let records = 0
  // Before the first record: where the chunk starts, or past every record.
  let lastId = after ? after.id : Number.POSITIVE_INFINITY
  let lastAt = after ? after.receivedAt : Number.POSITIVE_INFINITY
  while (i < end) {
    // id: digits, bare (a negative one would be a quoted text cell: refused, written the plain way).
    const idFrom = i
    i = readInteger(source, i, scratch)
    const id = scratch.value
    if (i < 0 || id < 0) return null
    pos = copyBytes(source, idFrom, i, o, pos)
    i = readInteger(source, i + 1, scratch)
    if (i < 0) return null
    const receivedAt = scratch.value
    if (!follows(lastId, lastAt, id, receivedAt, byTime)) return null
    o[pos++] = COMMA
    pos = writeCsvTime(o, pos, receivedAt)
    // The text values in one pass: each quoted, its quotes doubled, a guard before a formula start.
    let separators = 0
    for (;;) {
      // Four bytes at a time while none of them is at or below the quote (a byte that is borrows
      // into its top bit; bytes above 0x7f, UTF-8's, are masked out by ~word).
      while (i + 4 <= end) {
        const word = words.getInt32(i, true)
        if (((word - ABOVE_QUOTE_WORD) & ~word & TOP_BITS_WORD) !== 0) break
        outWords.setInt32(pos, word, true)
        i += 4
        pos += 4
      }
      if (i === end) break
      const b = source[i++] as number
      // One comparison lets most bytes through: the three that matter lie at or below the quote.
      if (b > QUOTE_BYTE) {
        o[pos++] = b
      } else if (b === FIELD_SEPARATOR) {
        if (separators > 0) o[pos++] = QUOTE_BYTE
        o[pos++] = COMMA
        o[pos++] = QUOTE_BYTE
        if (i < end && FORMULA_START[source[i] as number] === 1) o[pos++] = GUARD_BYTE
        separators++
      } else if (b === RECORD_SEPARATOR) {
        // Between two records: one that ends the blob belongs to a value.
        if (i === end) return null
        break
      } else {
        if (b === QUOTE_BYTE) o[pos++] = QUOTE_BYTE
        o[pos++] = b
      }
    }
    // Exactly the ten values: the separator before each of them.
    if (separators !== CSV_TEXT_FIELDS) return null
    o[pos++] = QUOTE_BYTE
    o[pos++] = CR
    o[pos++] = LF
    records++
    lastId = id
    lastAt = receivedAt
  }
  // A value holding a record separator would make one record two: the count tells.
  if (records !== rows || records === 0) return null
  out.length = pos
  return { id: lastId, receivedAt: lastAt }
}

const JSON_ID = Buffer.from(`{"${EXPORT_SHAPE.id.key}":`, 'latin1')
const JSON_TIME = Buffer.from(`,"${EXPORT_SHAPE.receivedAt.key}":"`, 'latin1')
const OPEN_BRACE = 0x7b

/**
 * The JSON records (format.ts: eventToJson, one a line, comma-separated) of a chunk of `rows`
 * joined records `id␟received_at␟{…}`, where {…} is SQLite's json_object of the other keys (whose
 * escapes leave no raw control character, so no separator, inside it). A comma goes before every
 * record but the export's first (no `after`). The position of the last record, or null (nothing appended) when refused.
 */
export function jsonFromJoined(
  source: Buffer,
  rows: number,
  after: Position | undefined,
  byTime: boolean,
  out: JoinedOutput,
): ChunkEnd {
  const end = source.length
  const room = out.length + end + rows * 64 + 64
  if (out.buffer.length < room) {
    const bigger = Buffer.allocUnsafe(room)
    out.buffer.copy(bigger, 0, 0, out.length)
    out.buffer = bigger
  }
  const o = out.buffer
  let pos = out.length
  let i = 0
  let records = 0
  // Before the first record: where the chunk starts, or past every record.
  let lastId = after ? after.id : Number.POSITIVE_INFINITY
  let lastAt = after ? after.receivedAt : Number.POSITIVE_INFINITY
  while (i < end) {
    i = readInteger(source, i, scratch)
    const id = scratch.value
    if (i < 0 || id < 0) return null
    i = readInteger(source, i + 1, scratch)
    if (i < 0) return null
    const receivedAt = scratch.value
    if (!follows(lastId, lastAt, id, receivedAt, byTime)) return null
    i++
    let objectEnd = source.indexOf(RECORD_SEPARATOR, i)
    if (objectEnd === end - 1) return null
    if (objectEnd < 0) objectEnd = end
    if (source[i] !== OPEN_BRACE || objectEnd - i < 2) return null
    if (after !== undefined || records > 0) o[pos++] = COMMA
    o[pos++] = LF
    pos = copyBytes(JSON_ID, 0, JSON_ID.length, o, pos)
    pos = writeInteger(o, pos, id)
    pos = copyBytes(JSON_TIME, 0, JSON_TIME.length, o, pos)
    pos = writeIsoTime(o, pos, receivedAt)
    o[pos++] = QUOTE
    // {"service":…}: its "{" becomes the comma before its first key.
    o[pos++] = COMMA
    pos = copyBytes(source, i + 1, objectEnd, o, pos)
    i = objectEnd + 1
    records++
    lastId = id
    lastAt = receivedAt
  }
  if (records !== rows || records === 0) return null
  out.length = pos
  return { id: lastId, receivedAt: lastAt }
}
