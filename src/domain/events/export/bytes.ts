// The byte writer of the exports: one Buffer per chunk, and writers for integers, times, CSV cells and JSON strings.
import { CSV_FORMULA_GUARD, CSV_FORMULA_STARTS, CSV_QUOTE, csvCell } from './format.js'

/**
 * The bytes of one chunk, written row by row straight into one Buffer: no string per row or per
 * chunk (see the byte writers below).
 */
export class ChunkBytes {
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

// The bytes CSV and JSON care about.
export const QUOTE = 0x22
export const COMMA = 0x2c
export const LF = 0x0a
export const CR = 0x0d
const BACKSLASH = 0x5c

// The CSV rule (format.ts) as byte tables: its characters are ASCII, so each is one UTF-8 byte that
// no multi-byte sequence contains.
/** The CSV quote's byte. */
export const QUOTE_BYTE = CSV_QUOTE.charCodeAt(0)
export const GUARD_BYTE = CSV_FORMULA_GUARD.charCodeAt(0)
/** 1 for the first bytes of a formula (CSV_FORMULA_STARTS), 0 for any other byte. */
export const FORMULA_START = byteTable(CSV_FORMULA_STARTS)

/** A table of 256 entries, 1 for the bytes of these (one-byte) characters. */
export function byteTable(characters: readonly string[]): Uint8Array {
  const table = new Uint8Array(256)
  for (const c of characters) table[c.charCodeAt(0)] = 1
  return table
}

// The byte writers take the output and a position and return the new one: with the buffer and
// the position in locals V8 keeps them in registers, where fields of an object are reloaded at every
// byte. They make no strings either: some of what an export allocates per row outlives two
// scavenges and is promoted, and with a string or two per row the old generation, so the server's
// memory, grew steadily over a download (heap 59 to 79 MB over 3M rows). Callers reserve the room
// first.

export function writeAscii(out: Buffer, at: number, text: string): number {
  let pos = at
  for (let i = 0; i < text.length; i++) out[pos++] = text.charCodeAt(i)
  return pos
}

/** A non-negative safe integer's digits (anything else as String() writes it). */
export function writeInteger(out: Buffer, at: number, value: number): number {
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

/** An integer as its CSV cell, bare; a negative one starts with "-", a formula start, so csvCell has it. */
export function writeCsvInteger(out: Buffer, at: number, value: number): number {
  if (!Number.isSafeInteger(value) || value < 0) return writeText(out, at, csvCell(value))
  return writeInteger(out, at, value)
}

/** Text of any kind, as UTF-8. */
export function writeText(out: Buffer, at: number, text: string): number {
  return at + out.write(text, at)
}

export function copyBytes(source: Buffer, start: number, end: number, out: Buffer, at: number): number {
  // Short runs by hand: a Buffer.copy call costs more than copying a few dozen bytes.
  if (end - start > 64) return at + source.copy(out, at, start, end)
  let pos = at
  for (let i = start; i < end; i++) out[pos++] = source[i] as number
  return pos
}

const DAY_MS = 86_400_000
let cachedDay = Number.NaN
let cachedDayPrefix = ''

/**
 * `new Date(ms).toISOString()` as bytes, several times faster: consecutive events mostly share their
 * day, so its "YYYY-MM-DDT" is kept and only the time of day is formatted. Anything unusual (a
 * fraction of a millisecond, a year outside 0000–9999) takes the slow way.
 */
export function writeIsoTime(out: Buffer, at: number, ms: number): number {
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

/** 0000-01-01T00:00:00.000Z and 9999-12-31T23:59:59.999Z: between them an ISO time starts with a digit. */
const FOUR_DIGIT_YEARS_FROM = -62_167_219_200_000
const FOUR_DIGIT_YEARS_TO = 253_402_300_799_999

/**
 * A time as its CSV cell, quoted like all text: outside years 0000–9999 the ISO form starts with "-"
 * or "+", so csvCell has it.
 */
export function writeCsvTime(out: Buffer, at: number, ms: number): number {
  if (ms < FOUR_DIGIT_YEARS_FROM || ms > FOUR_DIGIT_YEARS_TO) {
    return writeText(out, at, csvCell(new Date(ms).toISOString()))
  }
  out[at] = QUOTE_BYTE
  const pos = writeIsoTime(out, at + 1, ms)
  out[pos] = QUOTE_BYTE
  return pos + 1
}

/** An absent value's CSV cell, `""` (csvCell(null)). */
export function writeCsvEmpty(out: Buffer, at: number): number {
  out[at] = QUOTE_BYTE
  out[at + 1] = QUOTE_BYTE
  return at + 2
}

/**
 * The UTF-8 bytes of a text value as csvCell writes it, from its UTF-8 bytes: quoted, its quotes
 * doubled, a guard before a formula start. Room needed: twice the length plus three.
 */
export function csvCellBytes(source: Buffer, start: number, end: number, out: Buffer, at: number): number {
  let pos = at
  out[pos++] = QUOTE_BYTE
  // An empty value has no first byte: source[start] is then another field's, or undefined.
  if (end > start && FORMULA_START[source[start] as number] === 1) out[pos++] = GUARD_BYTE
  for (let i = start; i < end; i++) {
    const b = source[i] as number
    out[pos++] = b
    if (b === QUOTE_BYTE) out[pos++] = QUOTE_BYTE
  }
  out[pos++] = QUOTE_BYTE
  return pos
}

/** The bytes of a text value as JSON.stringify writes it, from its UTF-8 bytes. */
export function jsonStringBytes(source: Buffer, start: number, end: number, out: Buffer, at: number): number {
  for (let i = start; i < end; i++) {
    const b = source[i] as number
    if (b < 0x20 || b === QUOTE || b === BACKSLASH) {
      // Rare: JSON.stringify escapes it. Other bytes, UTF-8 sequences included, are as it leaves
      // them (well-formed UTF-8 holds no lone surrogates).
      return writeText(out, at, JSON.stringify(source.toString('utf8', start, end)))
    }
  }
  let pos = at
  out[pos++] = QUOTE
  pos = copyBytes(source, start, end, out, pos)
  out[pos++] = QUOTE
  return pos
}
