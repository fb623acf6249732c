// `shiplog load`: reads a dump into a new or empty database in one transaction, checking every
// line, so a truncated or altered dump loads nothing.
import { createReadStream } from 'node:fs'
import { open } from 'node:fs/promises'
import type { Readable } from 'node:stream'
import { createGunzip } from 'node:zlib'
import type { Database } from '../../db/connect.js'
import { migrateToLatest } from '../../db/migrate.js'
import { type Row, TableChecksum, type TableSummary } from './checksum.js'
import {
  DUMP_FORMAT,
  DUMP_FORMAT_VERSION,
  type DumpHeader,
  type DumpTableLine,
  type DumpTrailer,
  MAX_LINE_BYTES,
} from './dump.js'
import { secondaryIndexes } from './indexes.js'
import { DEFAULT_BATCH_ROWS, openWriter, type Writer } from './rows.js'
import { applicationTables, appliedMigrations, quoteIdent, type TableInfo } from './tables.js'

/** A load that cannot go on; `line` is the dump line at fault, when there is one. */
export class LoadError extends Error {
  constructor(
    message: string,
    readonly line?: number,
  ) {
    super(line === undefined ? message : `line ${line}: ${message}`)
  }
}

/**
 * Tables a migration fills with a starting row (deployments' high-water mark, the chains' heads). They do not count as
 * data when deciding whether a database is empty, and load/copy replace their rows with the source's.
 */
export const SEEDED_BY_MIGRATIONS: readonly string[] = ['deployments_progress', 'chain_heads']

/** The first application table that holds rows (beyond what migrations put there), if any. */
export async function firstTableWithData(
  database: Database,
  tables: readonly TableInfo[],
): Promise<string | null> {
  for (const table of tables) {
    if (SEEDED_BY_MIGRATIONS.includes(table.name)) continue
    const row = await database.db
      .selectFrom(table.name as never)
      .select((eb) => eb.lit(1).as('one'))
      .limit(1)
      .executeTakeFirst()
    if (row) return table.name
  }
  return null
}

async function isGzip(path: string): Promise<boolean> {
  const handle = await open(path, 'r')
  try {
    const { buffer, bytesRead } = await handle.read(Buffer.alloc(2), 0, 2, 0)
    return bytesRead === 2 && buffer[0] === 0x1f && buffer[1] === 0x8b
  } finally {
    await handle.close()
  }
}

function parseLine(text: string, line: number): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return failAt(line, 'not valid JSON (the dump is corrupted)')
  }
}

function failAt(line: number, message: string): never {
  throw new LoadError(message, line)
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** Checks a dump's first line: the format, its version and the schema it was taken at. */
export function checkHeader(value: unknown, migrations: readonly string[]): DumpHeader {
  if (!isObject(value) || value.format !== DUMP_FORMAT)
    failAt(1, 'not a Shiplog dump (no shiplog-dump header)')
  if (value.version !== DUMP_FORMAT_VERSION) {
    failAt(
      1,
      `dump format version ${String(value.version)} is not supported (this Shiplog reads version ${DUMP_FORMAT_VERSION})`,
    )
  }
  const schema = value.schema
  if (typeof schema !== 'string') failAt(1, 'the header names no schema version')
  const latest = migrations[migrations.length - 1]
  if (!migrations.includes(schema)) {
    failAt(
      1,
      `the dump is from a newer schema (${schema}) than this Shiplog knows (${latest}): load it with a newer version`,
    )
  }
  if (schema !== latest) {
    failAt(
      1,
      `the dump is from an older schema (${schema}; this Shiplog is at ${latest}): load it with the Shiplog version that made it, then upgrade`,
    )
  }
  return value as unknown as DumpHeader
}

export interface LoadOutcome {
  tables: Record<string, TableSummary>
  header: DumpHeader
}

/** A line that goes on past MAX_LINE_BYTES without its newline. */
class LineTooLong extends Error {}

/**
 * The dump's lines, split at "\n" only. JSON keeps U+2028 and U+2029 unescaped inside strings, and
 * Node 24's readline ends a line at them, which cut such an event in two; a "\r" before the "\n"
 * (a file that went through a Windows editor) is dropped, as JSON never holds a raw one.
 *
 * Bytes are searched, each chunk once from where the last search stopped, and a line's pieces are
 * joined only when its newline arrives: linear in the input. A line is given up as soon as it grows
 * past `maxBytes`, so a small gzip of one endless line costs at most that much memory. "\n" never
 * occurs inside a multi-byte UTF-8 sequence, so splitting bytes there splits no character.
 */
async function* dumpLines(input: Readable, maxBytes = MAX_LINE_BYTES): AsyncGenerator<string> {
  let pieces: Buffer[] = []
  let pending = 0
  for await (const chunk of input as AsyncIterable<Buffer>) {
    let start = 0
    for (let end = chunk.indexOf(0x0a); end !== -1; end = chunk.indexOf(0x0a, start)) {
      if (pending + end - start > maxBytes) throw new LineTooLong()
      pieces.push(chunk.subarray(start, end))
      const line = pieces.length === 1 ? (pieces[0] as Buffer) : Buffer.concat(pieces, pending + end - start)
      pieces = []
      pending = 0
      start = end + 1
      yield withoutCr(line.toString('utf8'))
    }
    if (start < chunk.length) {
      pending += chunk.length - start
      if (pending > maxBytes) throw new LineTooLong()
      pieces.push(chunk.subarray(start))
    }
  }
  if (pending > 0) yield withoutCr(Buffer.concat(pieces, pending).toString('utf8'))
}

function withoutCr(line: string): string {
  return line.endsWith('\r') ? line.slice(0, -1) : line
}

/**
 * Loads `path` into `database`. The schema is created first (migrations commit on their own, so a
 * refused load can leave an empty, migrated database); then every row goes in inside one transaction
 * that commits only after the trailer's counts and checksums matched. A database holding data is
 * refused before anything is written.
 */
export async function loadDump(
  database: Database,
  path: string,
  onTable?: (table: string, rows: number) => void,
): Promise<LoadOutcome> {
  let input: Readable
  try {
    const gzip = await isGzip(path)
    const file = createReadStream(path)
    input = gzip ? file.pipe(createGunzip()) : file
    // A gunzip error is reported by the reader below with its line number.
    file.on('error', (err) => input.destroy(err))
  } catch (err) {
    throw new LoadError(`cannot read ${path}: ${(err as Error).message}`)
  }
  const lines = dumpLines(input)
  let lineNumber = 0
  async function next(): Promise<string | null> {
    try {
      const { value, done } = await lines.next()
      if (done) return null
      lineNumber++
      return value
    } catch (err) {
      if (err instanceof LineTooLong) {
        throw new LoadError(
          `longer than ${MAX_LINE_BYTES / (1024 * 1024)} MiB, the most a dump line holds (the file is corrupted, or not a Shiplog dump)`,
          lineNumber + 1,
        )
      }
      throw new LoadError(
        `the dump cannot be read past here (${(err as Error).message}): it is truncated or corrupted`,
        lineNumber + 1,
      )
    }
  }

  try {
    const first = await next()
    if (first === null) throw new LoadError(`${path} is empty`)
    // Checked against this Shiplog's migrations before the target is touched.
    const headerValue = parseLine(first, 1)
    await migrateToLatest(database)
    const header = checkHeader(headerValue, await appliedMigrations(database))
    const tables = await applicationTables(database)
    const holding = await firstTableWithData(database, tables)
    if (holding) {
      throw new LoadError(
        `the database already holds data (table ${holding} has rows): load needs a new or empty database`,
      )
    }
    const byName = new Map(tables.map((t) => [t.name, t]))
    const writer = await openWriter(database)
    try {
      await writer.begin()
      for (const seeded of SEEDED_BY_MIGRATIONS) {
        if (byName.has(seeded)) await writer.run(`delete from ${quoteIdent(seeded)}`)
      }
      // Built once over all rows at the end rather than updated row by row; inside the same
      // transaction, so a failed load leaves them as they were.
      const indexes = await secondaryIndexes(database, tables)
      for (const index of indexes) await writer.run(`drop index ${quoteIdent(index.name)}`)
      const loaded = await readTables(writer, byName, next, () => lineNumber, onTable)
      for (const index of indexes) await writer.run(index.definition)
      await writer.commit()
      return { tables: loaded, header }
    } catch (err) {
      await writer.rollback()
      throw err
    } finally {
      await writer.release()
    }
  } finally {
    input.destroy()
  }
}

async function readTables(
  writer: Writer,
  byName: Map<string, TableInfo>,
  next: () => Promise<string | null>,
  lineNumber: () => number,
  onTable?: (table: string, rows: number) => void,
): Promise<Record<string, TableSummary>> {
  const loaded: Record<string, TableSummary> = {}
  const sequences = new Map<TableInfo, number | null>()
  let current: { table: TableInfo; checksum: TableChecksum; batch: Row[] } | null = null
  const flush = async () => {
    if (!current || current.batch.length === 0) return
    await writer.insert(current.table, current.batch)
    current.batch = []
  }
  const close = async () => {
    if (!current) return
    await flush()
    loaded[current.table.name] = current.checksum.summary()
    onTable?.(current.table.name, current.checksum.rows)
    current = null
  }
  for (;;) {
    const text = await next()
    const at = lineNumber()
    if (text === null) {
      throw new LoadError(`the dump ends after line ${at} without its trailer: it is truncated`)
    }
    if (text.startsWith('[')) {
      if (!current) failAt(at, 'a row before any table line')
      const row = parseLine(text, at)
      checkRow(row, current.table, at)
      current.checksum.addLine(text)
      current.batch.push(row)
      if (current.batch.length >= DEFAULT_BATCH_ROWS) await flush()
      continue
    }
    const value = parseLine(text, at)
    if (!isObject(value)) failAt(at, 'expected a table line, a row or the trailer')
    await close()
    if (typeof value.table === 'string') {
      const line = value as unknown as DumpTableLine
      const table = byName.get(line.table)
      if (!table) failAt(at, `table ${line.table} does not exist in this schema`)
      if (line.table in loaded || sequences.has(table)) failAt(at, `table ${line.table} appears twice`)
      const expected = table.columns.map((c) => c.name).join(',')
      if (!Array.isArray(line.columns) || line.columns.join(',') !== expected) {
        failAt(at, `table ${line.table} has columns (${String(line.columns)}), this schema has (${expected})`)
      }
      sequences.set(table, typeof line.sequence === 'number' ? line.sequence : null)
      current = { table, checksum: new TableChecksum(), batch: [] }
      continue
    }
    if (value.end === DUMP_FORMAT && isObject(value.tables)) {
      checkTrailer(value as unknown as DumpTrailer, loaded, byName, at)
      if ((await next()) !== null) failAt(lineNumber(), 'text after the trailer (the dump is corrupted)')
      for (const [table, sequence] of sequences) await writer.raiseSequence(table, sequence)
      return loaded
    }
    failAt(at, 'expected a table line, a row or the trailer')
  }
}

function checkRow(row: unknown, table: TableInfo, at: number): asserts row is Row {
  if (!Array.isArray(row) || row.length !== table.columns.length) {
    failAt(at, `a row of ${table.name} must be an array of ${table.columns.length} values`)
  }
  for (let i = 0; i < row.length; i++) {
    const value: unknown = row[i]
    if (value === null) continue
    const column = table.columns[i] as TableInfo['columns'][number]
    const fits = column.kind === 'integer' ? Number.isSafeInteger(value) : typeof value === 'string'
    if (!fits)
      failAt(
        at,
        `${table.name}.${column.name} must be ${column.kind === 'integer' ? 'a whole number' : 'text'}`,
      )
  }
}

function checkTrailer(
  trailer: DumpTrailer,
  loaded: Record<string, TableSummary>,
  byName: Map<string, TableInfo>,
  at: number,
): void {
  for (const name of byName.keys()) {
    if (!(name in loaded)) failAt(at, `the dump has no rows section for table ${name}`)
  }
  for (const [name, summary] of Object.entries(loaded)) {
    const expected = trailer.tables[name]
    if (!expected) failAt(at, `the trailer does not list table ${name}`)
    if (expected.rows !== summary.rows) {
      failAt(
        at,
        `table ${name}: the trailer counts ${expected.rows} rows, the dump holds ${summary.rows} (it is corrupted)`,
      )
    }
    if (expected.sha256 !== summary.sha256) {
      failAt(at, `table ${name}: the checksum does not match its rows (the dump is corrupted)`)
    }
  }
}
