// The export format of SPEC §3.1, defined plainly: the CSV cell rule, the header, one record per event.
import type { EventRow } from '../../../db/schema.js'
import { EXPORT_COLUMNS, toPublicEvent } from '../event.js'

export type ExportFormat = 'csv' | 'json'

/*
 * The CSV cell rule, stated once. csvCell below applies it to a string; the byte writer (bytes.ts:
 * csvCellBytes and the two functions over a record's separated values) builds its byte tables from
 * these lists, and test/domain/export-cell.test.ts holds it to csvCell. Every character in them is
 * ASCII, so in UTF-8 each is one byte that never occurs inside another character's encoding (the
 * byte writer relies on it).
 */

/** The RFC 4180 quote: a cell holding one of CSV_QUOTE_TRIGGERS is written between two, its own doubled. */
export const CSV_QUOTE = '"'
/** Characters that make a cell quoted: the quote, the separator, line breaks. */
export const CSV_QUOTE_TRIGGERS: readonly string[] = [CSV_QUOTE, ',', '\r', '\n']
/** First characters that make a spreadsheet read a cell as a formula (SPEC §3.1). */
export const CSV_FORMULA_STARTS: readonly string[] = ['=', '+', '-', '@', '\t', '\r']
/** What a formula start is prefixed with, making the cell text. */
export const CSV_FORMULA_GUARD = "'"

for (const c of [...CSV_QUOTE_TRIGGERS, ...CSV_FORMULA_STARTS, CSV_FORMULA_GUARD]) {
  if (c.length !== 1 || c.charCodeAt(0) > 0x7f)
    throw new Error(`export: CSV rule character ${JSON.stringify(c)} is not one ASCII character`)
}

function characterClass(characters: readonly string[]): RegExp {
  const escaped = characters.map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
  return new RegExp(`[${escaped.join('')}]`)
}

const NEEDS_QUOTES = characterClass(CSV_QUOTE_TRIGGERS)
const FORMULA_START = new RegExp(`^${characterClass(CSV_FORMULA_STARTS).source}`)

/** One CSV cell: '' for null, a guard before a formula start, quotes where RFC 4180 needs them. */
export function csvCell(value: string | number | null): string {
  if (value === null) return ''
  let text = typeof value === 'number' ? String(value) : value
  if (FORMULA_START.test(text)) text = `${CSV_FORMULA_GUARD}${text}`
  return NEEDS_QUOTES.test(text)
    ? `${CSV_QUOTE}${text.replaceAll(CSV_QUOTE, CSV_QUOTE + CSV_QUOTE)}${CSV_QUOTE}`
    : text
}

export const CSV_HEADER = `${EXPORT_COLUMNS.map(csvCell).join(',')}\r\n`

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
