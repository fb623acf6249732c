// Reading a file for `shiplog import`: NDJSON (one JSON object a line) or CSV in the export's own
// columns (SPEC §3.1, plus optional occurred_at and commit_time), gzip when the name ends in .gz.
// Streams: memory does not grow with the file.
import { createReadStream } from 'node:fs'
import { createInterface } from 'node:readline'
import type { Readable } from 'node:stream'
import { createGunzip } from 'node:zlib'

export type ImportFormat = 'ndjson' | 'csv'

/** The columns a CSV must have: what an event cannot be without. */
export const REQUIRED_COLUMNS = ['service', 'environment', 'version', 'status'] as const

/** One record of the file: its first line's number and its fields by column name. */
export interface SourceRow {
  line: number
  fields: Record<string, unknown>
}

/** A line that cannot be read as a record at all (bad JSON, an unclosed quote). */
export interface UnreadableRow {
  line: number
  message: string
}

/** The format by the name (.csv, .ndjson, .jsonl, .json, each optionally .gz). */
export function formatOf(path: string): ImportFormat | undefined {
  const name = path.toLowerCase().replace(/\.gz$/, '')
  if (name.endsWith('.csv')) return 'csv'
  if (name.endsWith('.ndjson') || name.endsWith('.jsonl') || name.endsWith('.json')) return 'ndjson'
  return undefined
}

function lines(path: string): AsyncIterable<string> {
  let stream: Readable = createReadStream(path)
  if (path.toLowerCase().endsWith('.gz')) stream = stream.pipe(createGunzip())
  stream.setEncoding('utf8')
  return createInterface({ input: stream, crlfDelay: Number.POSITIVE_INFINITY })
}

/**
 * The export guards cells that begin with = + - @ tab or CR with a leading `'` (formula injection):
 * read back, that quote goes again. (A value that itself began with `'` and then one of those
 * characters cannot be told apart; it loses its quote.)
 */
function unguard(cell: string): string {
  return cell.length > 1 && cell[0] === "'" && '=+-@\t\r'.includes(cell[1] as string) ? cell.slice(1) : cell
}

/** Splits one CSV record (RFC 4180; the text may span lines) into cells. */
function csvCells(record: string): string[] | undefined {
  const cells: string[] = []
  let i = 0
  for (;;) {
    let cell = ''
    if (record[i] === '"') {
      i++
      for (;;) {
        const q = record.indexOf('"', i)
        if (q === -1) return undefined
        cell += record.slice(i, q)
        if (record[q + 1] === '"') {
          cell += '"'
          i = q + 2
          continue
        }
        i = q + 1
        break
      }
      if (i < record.length && record[i] !== ',') return undefined
    } else {
      const comma = record.indexOf(',', i)
      cell = record.slice(i, comma === -1 ? record.length : comma)
      i = comma === -1 ? record.length : comma
    }
    cells.push(cell)
    if (i >= record.length) return cells
    i++ // the comma
  }
}

function quoteCount(text: string): number {
  let n = 0
  for (let i = text.indexOf('"'); i !== -1; i = text.indexOf('"', i + 1)) n++
  return n
}

/**
 * The file's records in order. A CSV's first record is its header; an empty cell (or a JSON null) is
 * an absent value. Unreadable lines are yielded as such, so every problem is reported with its line.
 */
export async function* readSource(
  path: string,
  format: ImportFormat,
): AsyncGenerator<SourceRow | UnreadableRow> {
  let number = 0
  if (format === 'ndjson') {
    for await (const text of lines(path)) {
      number++
      const trimmed = number === 1 ? text.replace(/^\uFEFF/, '').trim() : text.trim()
      if (trimmed === '') continue
      let value: unknown
      try {
        value = JSON.parse(trimmed)
      } catch (err) {
        yield { line: number, message: `not JSON: ${(err as Error).message}` }
        continue
      }
      if (typeof value !== 'object' || value === null || Array.isArray(value)) {
        yield { line: number, message: 'not a JSON object' }
        continue
      }
      yield { line: number, fields: value as Record<string, unknown> }
    }
    return
  }
  let header: string[] | undefined
  let pending = ''
  let start = 0
  for await (const text of lines(path)) {
    number++
    if (pending === '') {
      start = number
      pending = number === 1 ? text.replace(/^\uFEFF/, '') : text
    } else {
      pending += `\n${text}`
    }
    // An odd number of quotes: a quoted cell goes on over the next line.
    if (quoteCount(pending) % 2 === 1) continue
    const record = pending
    pending = ''
    if (record.trim() === '') continue
    const cells = csvCells(record)
    if (!cells) {
      yield { line: start, message: 'not a CSV record (a quote out of place)' }
      continue
    }
    if (!header) {
      header = cells.map((c) => c.trim())
      const missing = REQUIRED_COLUMNS.filter((c) => !header?.includes(c))
      if (missing.length > 0) {
        yield {
          line: start,
          message: `the header lacks ${missing.join(', ')} (the export's columns: ${REQUIRED_COLUMNS.join(', ')}, …)`,
        }
        return
      }
      continue
    }
    if (cells.length !== header.length) {
      yield { line: start, message: `has ${cells.length} cells, the header ${header.length}` }
      continue
    }
    const fields: Record<string, unknown> = Object.create(null)
    header.forEach((name, i) => {
      const cell = cells[i] as string
      if (cell !== '') fields[name] = unguard(cell)
    })
    yield { line: start, fields }
  }
  if (pending !== '') yield { line: start, message: 'a quoted cell is never closed' }
}
