// The export format of SPEC §3.1, defined plainly: the CSV cell rule, the header, one record per event.
import { EXPORTED_COLUMNS, eventColumn, type ShownColumn } from '../../../db/event-columns.js'
import type { EventRow } from '../../../db/schema.js'
import { EXPORT_COLUMNS, toPublicEvent } from '../event.js'

export type ExportFormat = 'csv' | 'json'

/**
 * The export's columns as the fast writers (sqlite.ts, joined.ts, postgres.ts) read them: the id,
 * the arrival, then text values. They write the first two as digits and as a time, and copy the
 * rest; a description of the columns that broke that shape would stop the server here.
 */
function fastShape(): { id: ShownColumn; receivedAt: ShownColumn; texts: readonly ShownColumn[] } {
  const [id, receivedAt, ...texts] = EXPORTED_COLUMNS
  if (
    id === undefined ||
    eventColumn(id.column).type !== 'serial' ||
    receivedAt?.column !== 'received_at' ||
    texts.some(({ column }) => eventColumn(column).type !== 'text')
  )
    throw new Error('export: the columns are not the id, the arrival and then text')
  return { id, receivedAt, texts }
}

export const EXPORT_SHAPE = fastShape()

/*
 * The CSV cell rule, stated once. csvCell below applies it to a value; the byte writer (bytes.ts)
 * builds its byte tables from these constants, and test/domain/export-cell.test.ts holds it to
 * csvCell. Every character in them is ASCII, so in UTF-8 each is one byte that never occurs inside
 * another character's encoding (the byte writer relies on it).
 *
 * Every text cell is quoted, whatever it holds (OWASP's advice on CSV injection): a spreadsheet
 * whose locale separates cells with `;` splits an unquoted `x;=cmd|…` into a second cell starting
 * with `=`, while inside quotes a `;` (or a `,`, a tab, a line break) is text in every locale. An
 * absent value is `""`, the quoted empty text. Only integers (the id) stay bare: digits are the
 * same cell in every locale.
 */

/** The RFC 4180 quote: every text cell is written between two, its own doubled. */
export const CSV_QUOTE = '"'
/** First characters that make a spreadsheet read a cell as a formula (SPEC §3.1). */
export const CSV_FORMULA_STARTS: readonly string[] = ['=', '+', '-', '@', '\t', '\r']
/** What a formula start is prefixed with, making the cell text. */
export const CSV_FORMULA_GUARD = "'"

for (const c of [CSV_QUOTE, ...CSV_FORMULA_STARTS, CSV_FORMULA_GUARD]) {
  if (c.length !== 1 || c.charCodeAt(0) > 0x7f)
    throw new Error(`export: CSV rule character ${JSON.stringify(c)} is not one ASCII character`)
}

function characterClass(characters: readonly string[]): RegExp {
  const escaped = characters.map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
  return new RegExp(`[${escaped.join('')}]`)
}

const FORMULA_START = new RegExp(`^${characterClass(CSV_FORMULA_STARTS).source}`)

/**
 * One CSV cell: a non-negative integer as its digits; any other value quoted, its quotes doubled, a
 * guard before a formula start; null as `""`.
 */
export function csvCell(value: string | number | null): string {
  if (value === null) return `${CSV_QUOTE}${CSV_QUOTE}`
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return String(value)
  let text = String(value)
  if (FORMULA_START.test(text)) text = `${CSV_FORMULA_GUARD}${text}`
  return `${CSV_QUOTE}${text.replaceAll(CSV_QUOTE, CSV_QUOTE + CSV_QUOTE)}${CSV_QUOTE}`
}

/**
 * The header stays bare (`id,received_at,…`, SPEC §3.1): the names are this module's own, plain
 * ASCII words, and tools that look for the header literally keep finding it.
 */
export const CSV_HEADER = `${EXPORT_COLUMNS.join(',')}\r\n`

/**
 * The UTF-8 byte-order mark `?bom=1` puts before a CSV download: Excel on Windows reads a CSV
 * without one in the machine's legacy code page, so `é` or `日本` arrive garbled. Off by default:
 * other tools would read it as part of the first column's name.
 */
export const UTF8_BOM = Buffer.from([0xef, 0xbb, 0xbf])

/**
 * The `bom` parameter of the CSV downloads: `1` asks for the mark, `0` or nothing for none; any
 * other value, or the parameter twice, is refused (the caller's 422 names it).
 */
export function parseBomParameter(raw: unknown): { bom: boolean; error?: { field: 'bom'; message: string } } {
  if (raw === undefined || raw === '' || raw === '0') return { bom: false }
  if (raw === '1') return { bom: true }
  return {
    bom: false,
    error: {
      field: 'bom',
      message:
        typeof raw === 'string' ? 'bom must be 1 (add a byte-order mark) or 0' : 'bom may be given once',
    },
  }
}

/**
 * One CSV record, the plain way: csvCell of every field of the public event, in column order. It
 * defines the format; the streaming chunkers write the same bytes faster (the export tests hold
 * them to an encoder of their own, and to this).
 */
export function eventToCsvLine(row: EventRow): string {
  const event = toPublicEvent(row)
  return `${EXPORT_COLUMNS.map((column) => csvCell(event[column])).join(',')}\r\n`
}

/** One JSON export record, the plain way (see eventToCsvLine). */
export function eventToJson(row: EventRow): string {
  return JSON.stringify(toPublicEvent(row))
}
