// The per-table row count and checksum that dump, load and copy compare: computed the same way from
// either database, so equal checksums mean equal data.
import { createHash, type Hash } from 'node:crypto'

/** A row as it travels: its values in the table's column order (sorted by name). */
export type Row = unknown[]

/**
 * The canonical text of a row: JSON of its values in column order. Both drivers give whole numbers
 * as numbers (pg's int8 parser is set in db/connect.ts), text as strings and NULL as null, so a row
 * reads back identically from SQLite and PostgreSQL. It is also the row's line in a dump.
 */
export function rowLine(row: Row): string {
  return JSON.stringify(row)
}

export interface TableSummary {
  rows: number
  sha256: string
}

/** SHA-256 over each row's canonical line and a newline, in primary-key order. */
export class TableChecksum {
  private readonly hash: Hash = createHash('sha256')
  rows = 0

  /** Adds a row by its canonical line (what rowLine gives). */
  addLine(line: string): void {
    this.hash.update(line)
    this.hash.update('\n')
    this.rows++
  }

  add(row: Row): void {
    this.addLine(rowLine(row))
  }

  /** Adds rows in order, as `add` does one by one, with one hash update for the lot. */
  addRows(rows: readonly Row[]): void {
    if (rows.length === 0) return
    let text = ''
    for (const row of rows) text += `${rowLine(row)}\n`
    this.hash.update(text)
    this.rows += rows.length
  }

  summary(): TableSummary {
    return { rows: this.rows, sha256: this.hash.copy().digest('hex') }
  }
}
