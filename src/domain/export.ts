// Event exports: RFC 4180 CSV (formula-safe) and a JSON array, produced chunk by chunk.
import type { EventRow } from '../db/schema.js'
import { toPublicEvent } from './events.js'

/** Column order of the CSV header and key order of each JSON object (SPEC §3.1). */
export const EXPORT_COLUMNS = [
  'id',
  'received_at',
  'service',
  'environment',
  'version',
  'status',
  'url',
  'commit',
  'description',
  'deployer',
  'source',
  'api_key_name',
] as const

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

export function eventToCsvLine(row: EventRow): string {
  return (
    `${row.id},${new Date(row.received_at).toISOString()},${csvCell(row.service)},${csvCell(row.environment)},` +
    `${csvCell(row.version)},${row.status},${csvCell(row.url)},${csvCell(row.commit_sha)},` +
    `${csvCell(row.description)},${csvCell(row.deployer)},${row.source},${csvCell(row.api_key_name)}\r\n`
  )
}

/** CSV text for an async sequence of row chunks: one string per chunk, header first. */
export async function* eventsToCsv(chunks: AsyncIterable<EventRow[]>): AsyncGenerator<string> {
  // No byte-order mark: tools that read the header literally would see it as part of "id".
  yield CSV_HEADER
  for await (const rows of chunks) {
    let out = ''
    for (const row of rows) out += eventToCsvLine(row)
    yield out
  }
}

/** A JSON array, one object a line, for an async sequence of row chunks. */
export async function* eventsToJson(chunks: AsyncIterable<EventRow[]>): AsyncGenerator<string> {
  let first = true
  yield '['
  for await (const rows of chunks) {
    let out = ''
    for (const row of rows) {
      out += `${first ? '\n' : ',\n'}${JSON.stringify(toPublicEvent(row))}`
      first = false
    }
    yield out
  }
  yield first ? ']\n' : '\n]\n'
}
