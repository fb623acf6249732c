// `shiplog dump`: every application table as versioned NDJSON (gzip when the name ends in .gz),
// streamed from one consistent snapshot and renamed into place only when complete.
import { randomBytes } from 'node:crypto'
import { closeSync, createWriteStream, existsSync, fsyncSync, openSync, renameSync, rmSync } from 'node:fs'
import { basename, dirname, join } from 'node:path'
import { Readable, type Transform } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { createGzip } from 'node:zlib'
import type { Database } from '../../db/connect.js'
import { type Row, rowLine, TableChecksum, type TableSummary } from './checksum.js'
import { keyOf, openSnapshot } from './rows.js'
import { applicationTables, schemaVersion, type TableInfo } from './tables.js'

export const DUMP_FORMAT = 'shiplog-dump'
export const DUMP_FORMAT_VERSION = 1

/**
 * The longest line a dump may hold, in bytes. The longest legitimate row is a deployment folding
 * many retries: its event_ids list grows by about 11 bytes per retried event, so this leaves room
 * for some 1.5 million retries of one deployment; every other column is bounded far below it.
 */
export const MAX_LINE_BYTES = 16 * 1024 * 1024

/**
 * Rows a dump leaves out, each with the reason. The master secret (kept in settings on PostgreSQL
 * without SHIPLOG_SECRET) seals the webhook secrets and signs sessions: a dump holding both would
 * hand a reader of the file everything the sealing protects. It is kept apart, like a key from its
 * safe; `copy` carries it, as it writes straight into the operator's other database.
 */
export const LEFT_OUT_OF_DUMPS: readonly { table: string; column: string; value: string; reason: string }[] =
  [
    {
      table: 'settings',
      column: 'name',
      value: 'session_secret',
      reason: 'the master secret: sealed webhook secrets and sessions must not travel with it',
    },
  ]

/** Whether a row of `table` is left out of dumps (see LEFT_OUT_OF_DUMPS). */
function leftOutTest(table: TableInfo): (row: Row) => boolean {
  const rules = LEFT_OUT_OF_DUMPS.filter((r) => r.table === table.name).map((r) => ({
    at: table.columns.findIndex((c) => c.name === r.column),
    value: r.value,
  }))
  if (rules.length === 0) return () => false
  return (row) => rules.some((r) => row[r.at] === r.value)
}

/** The first line of a dump. */
export interface DumpHeader {
  format: typeof DUMP_FORMAT
  version: number
  /** The latest migration applied to the database it came from. */
  schema: string
  dialect: 'sqlite' | 'postgres'
  created_at: string
}

/** Opens each table's rows; they follow one JSON array per line, values in `columns` order. */
export interface DumpTableLine {
  table: string
  columns: string[]
  primary_key: string[]
  /** The table's sequence high-water mark at dump time (null when it has no generated id). */
  sequence: number | null
}

/** The last line: what every table held, to prove the dump complete and unaltered. */
export interface DumpTrailer {
  end: typeof DUMP_FORMAT
  tables: Record<string, TableSummary>
}

export class DumpError extends Error {}

export interface DumpOptions {
  force?: boolean
  onTable?: (table: string, summary: TableSummary) => void
}

/** Writes the dump to `out`; returns what each table held. */
export async function dumpDatabase(
  database: Database,
  out: string,
  options: DumpOptions = {},
): Promise<Record<string, TableSummary>> {
  if (existsSync(out) && !options.force) {
    throw new DumpError(`${out} already exists (pass --force to replace it)`)
  }
  const schema = await schemaVersion(database).catch(() => null)
  if (!schema)
    throw new DumpError('the database has no Shiplog schema (run shiplog migrate, or check DATABASE_URL)')
  const snapshot = await openSnapshot(database)
  const temporary = join(dirname(out), `.${basename(out)}.${randomBytes(4).toString('hex')}.partial`)
  const summaries: Record<string, TableSummary> = {}
  try {
    // Read inside the snapshot, so the list and the rows agree.
    const tables = await applicationTables(database)
    const header: DumpHeader = {
      format: DUMP_FORMAT,
      version: DUMP_FORMAT_VERSION,
      schema,
      dialect: database.dialect,
      created_at: new Date().toISOString(),
    }
    async function* lines(): AsyncGenerator<string> {
      yield `${JSON.stringify(header)}\n`
      for (const table of tables) {
        yield `${JSON.stringify(await tableLine(table))}\n`
        const checksum = new TableChecksum()
        const leftOut = leftOutTest(table)
        for await (const rows of snapshot.batches(table, null)) {
          let text = ''
          for (const row of rows) {
            if (leftOut(row)) continue
            const line = rowLine(row)
            // What load would refuse is refused here, while the source can still be looked at.
            if (line.length * 3 > MAX_LINE_BYTES && Buffer.byteLength(line) > MAX_LINE_BYTES) {
              throw new DumpError(
                `a row of ${table.name} (${JSON.stringify(keyOf(table, row))}) is longer than ${MAX_LINE_BYTES / (1024 * 1024)} MiB, the most a dump line holds`,
              )
            }
            checksum.addLine(line)
            text += `${line}\n`
          }
          yield text
        }
        summaries[table.name] = checksum.summary()
        options.onTable?.(table.name, checksum.summary())
      }
      const trailer: DumpTrailer = { end: DUMP_FORMAT, tables: summaries }
      yield `${JSON.stringify(trailer)}\n`
    }
    async function tableLine(table: TableInfo): Promise<DumpTableLine> {
      return {
        table: table.name,
        columns: table.columns.map((c) => c.name),
        primary_key: [...table.primaryKey],
        sequence: await snapshot.sequenceValue(table),
      }
    }
    // The dump holds password hashes, key digests and sealed secrets: owner-only, like the database.
    const file = createWriteStream(temporary, { mode: 0o600, flags: 'wx' })
    const stages: (Readable | Transform | NodeJS.WritableStream)[] = [Readable.from(lines())]
    if (out.endsWith('.gz')) stages.push(createGzip({ level: 6 }))
    stages.push(file)
    // pipeline() waits for each stage to drain before pulling more rows: memory stays flat.
    await pipeline(stages as [Readable, ...NodeJS.WritableStream[]])
    // On disk before it takes the final name: a crash never leaves a short file called `out`.
    const fd = openSync(temporary, 'r+')
    try {
      fsyncSync(fd)
    } finally {
      closeSync(fd)
    }
    renameSync(temporary, out)
    return summaries
  } catch (err) {
    rmSync(temporary, { force: true })
    throw err
  } finally {
    await snapshot.close()
  }
}
