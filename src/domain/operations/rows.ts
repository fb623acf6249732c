// Reads tables in primary-key batches from a consistent snapshot, and writes rows with their ids,
// on either database: the shared machinery of dump, load and copy.
import type pg from 'pg'
import type { Database, WriterHold } from '../../db/connect.js'
import type { Row, TableSummary } from './checksum.js'
import { postgresTableChecksum } from './pg-checksum.js'
import { copyIn, LONG_QUERY_MS } from './pg-copy-in.js'
import { quoteIdent, type TableInfo } from './tables.js'

export const DEFAULT_BATCH_ROWS = 10_000

function columnList(table: TableInfo): string {
  return table.columns.map((c) => quoteIdent(c.name)).join(', ')
}

/** Where each primary-key column sits in a row (columns are in name order). */
export function keyPositions(table: TableInfo): number[] {
  return table.primaryKey.map((k) => table.columns.findIndex((c) => c.name === k))
}

/** The primary-key values of a row, to continue reading after it. */
export function keyOf(table: TableInfo, row: Row): unknown[] {
  return keyPositions(table).map((i) => row[i])
}

/** `select … where (key) > (last) order by key limit n`, with `?` placeholders. */
function batchQuery(table: TableInfo, after: boolean): string {
  const key = table.primaryKey.map(quoteIdent)
  const where = after
    ? key.length === 1
      ? ` where ${key[0]} > ?`
      : ` where (${key.join(', ')}) > (${key.map(() => '?').join(', ')})`
    : ''
  return `select ${columnList(table)} from ${quoteIdent(table.name)}${where} order by ${key.join(', ')} limit ?`
}

/** `?` placeholders to PostgreSQL's `$1, $2, …`. */
function numbered(text: string): string {
  let n = 0
  return text.replace(/\?/g, () => `$${++n}`)
}

/** A read-only view of a database as of one moment, whatever is written meanwhile. */
export interface Snapshot {
  /** Rows after `after` (a primary key, or null for the start), `size` at a time, in key order. */
  batches(table: TableInfo, after: unknown[] | null, size?: number): AsyncGenerator<Row[]>
  /** The table's sequence high-water mark (the last id it handed out), or null when it has none. */
  sequenceValue(table: TableInfo): Promise<number | null>
  count(table: TableInfo): Promise<number>
  /**
   * The table's count and checksum, read faster than through `batches` where the database allows
   * (PostgreSQL: binary COPY, pg-checksum.ts); null where it does not. Equal to TableChecksum over
   * `batches` by definition.
   */
  checksum?(table: TableInfo): Promise<TableSummary | null>
  close(): Promise<void>
}

/**
 * SQLite: a read transaction on a connection of its own (WAL keeps its snapshot while writers go on).
 * PostgreSQL: a REPEATABLE READ, READ ONLY transaction on one connection of the pool.
 */
export async function openSnapshot(database: Database): Promise<Snapshot> {
  if (database.dialect === 'sqlite') {
    const snapshot = await database.snapshot()
    const { sql } = snapshot
    return {
      async *batches(table, after, size = DEFAULT_BATCH_ROWS) {
        let last = after
        for (;;) {
          const rows = sql.arrays(batchQuery(table, last !== null), ...(last ?? []), size) as Row[]
          if (rows.length === 0) return
          const tail = rows[rows.length - 1] as Row
          last = keyOf(table, tail)
          yield rows
          if (rows.length < size) return
        }
      },
      async sequenceValue(table) {
        if (!table.generatedId) return null
        const row = sql.arrays('select seq from sqlite_sequence where name = ?', table.name)[0]
        return row ? Number(row[0]) : 0
      },
      async count(table) {
        const row = sql.arrays(`select count(*) from ${quoteIdent(table.name)}`)[0]
        return Number(row?.[0])
      },
      async close() {
        snapshot.close()
      },
    }
  }
  const client = await database.pool.connect()
  try {
    await client.query('begin isolation level repeatable read read only')
    // Long reads of a large table must not meet the server's per-statement limit set for requests.
    await client.query('set local statement_timeout = 0')
  } catch (err) {
    client.release(err as Error)
    throw err
  }
  return {
    async *batches(table, after, size = DEFAULT_BATCH_ROWS) {
      const read = (from: unknown[] | null): Promise<pg.QueryResult<Row>> => {
        const query = client.query<Row>({
          text: numbered(batchQuery(table, from !== null)),
          values: [...(from ?? []), size],
          rowMode: 'array',
          query_timeout: LONG_QUERY_MS,
        } as pg.QueryConfig)
        // Awaited below; a consumer that stops early leaves it to finish unread.
        query.catch(() => {})
        return query
      }
      let next: Promise<pg.QueryResult<Row>> | null = read(after)
      while (next) {
        const rows: Row[] = (await next).rows
        if (rows.length === 0) return
        // The next batch is asked for before this one is handed over: the server reads it while
        // the caller works on this one.
        next = rows.length < size ? null : read(keyOf(table, rows[rows.length - 1] as Row))
        yield rows
      }
    },
    async sequenceValue(table) {
      if (!table.generatedId) return null
      return postgresSequenceValue(client, table)
    },
    checksum: (table) => postgresTableChecksum(client, table),
    async count(table) {
      const { rows } = await client.query<[number]>({
        text: `select count(*)::int from ${quoteIdent(table.name)}`,
        rowMode: 'array',
        query_timeout: LONG_QUERY_MS,
      } as pg.QueryConfig)
      return rows[0]?.[0] ?? 0
    },
    async close() {
      try {
        await client.query('commit')
        client.release()
      } catch (err) {
        client.release(err as Error)
      }
    },
  }
}

async function postgresSequenceValue(client: pg.PoolClient, table: TableInfo): Promise<number> {
  const { rows } = await client.query<{ name: string | null }>(
    'select pg_get_serial_sequence($1, $2) as name',
    [quoteIdent(table.name), table.generatedId],
  )
  const name = rows[0]?.name
  if (!name) return 0
  const seq = await client.query<{ last_value: number; is_called: boolean }>(
    `select last_value, is_called from ${name}`,
  )
  const row = seq.rows[0]
  return row?.is_called ? Number(row.last_value) : 0
}

/** A database being written to in transactions the caller opens and ends. */
export interface Writer {
  readonly dialect: 'sqlite' | 'postgres'
  begin(): Promise<void>
  commit(): Promise<void>
  rollback(): Promise<void>
  /**
   * Inserts rows as they are, ids included. `sent` is called once the rows are on their way and the
   * database is busy with them (PostgreSQL), or before they are written (SQLite, which writes in this
   * thread): the moment to read the next batch, so reading and writing overlap.
   */
  insert(table: TableInfo, rows: Row[], sent?: () => void): Promise<void>
  /** Runs a statement with `?` placeholders; gives the rows as objects. */
  run<T>(text: string, params?: unknown[]): Promise<T[]>
  /** Makes the open transaction's commit wait for the disk, whatever the writer's durability. */
  durableCommit(): Promise<void>
  /** Moves the table's sequence past `atLeast` and past its largest id, so new rows get new ids. */
  raiseSequence(table: TableInfo, atLeast: number | null): Promise<void>
  release(): Promise<void>
}

export interface WriterOptions {
  /**
   * Commit without waiting for the disk (PostgreSQL synchronous_commit off, SQLite synchronous
   * NORMAL in WAL mode): a crash may lose the last few commits but never leaves one half-applied.
   * For copy, whose progress commits with each batch, so a lost batch is simply copied again.
   */
  relaxedDurability?: boolean
}

export async function openWriter(database: Database, options: WriterOptions = {}): Promise<Writer> {
  if (database.dialect === 'sqlite') {
    // Each transaction holds the write connection (the owner's queue waits meanwhile) from begin()
    // to commit() or rollback().
    let hold: WriterHold | null = null
    const held = (): WriterHold => {
      if (!hold) throw new Error('no transaction is open: call begin() first')
      return hold
    }
    const end = async (durable: boolean) => {
      const ending = held()
      hold = null
      await ending.commit({ durable })
    }
    return {
      dialect: 'sqlite',
      async begin() {
        const taken = await database.hold()
        try {
          await taken.begin()
        } catch (err) {
          taken.release()
          throw err
        }
        hold = taken
      },
      async commit() {
        // Relaxed: the commit is in the WAL, and the next durable commit's fsync puts it on disk too.
        await end(!options.relaxedDurability)
      },
      async durableCommit() {
        await end(true)
      },
      async rollback() {
        hold?.release()
        hold = null
      },
      async insert(table, rows, sent) {
        sent?.()
        const statement = held().sql.statement(
          `insert into ${quoteIdent(table.name)} (${columnList(table)}) values (${table.columns.map(() => '?').join(', ')})`,
        )
        for (const row of rows) statement.run(...row)
      },
      async run<T>(text: string, params: unknown[] = []) {
        return held().sql.execute(text, params) as T[]
      },
      async raiseSequence(table, atLeast) {
        if (!table.generatedId || atLeast === null) return
        // Inserting explicit ids already raised sqlite_sequence to the largest; the source's mark
        // may be higher still (rows deleted at the end), and ids are never handed out twice.
        const { sql } = held()
        const updated = sql.run(
          'update sqlite_sequence set seq = max(seq, ?) where name = ?',
          atLeast,
          table.name,
        )
        if (updated.changes === 0 && atLeast > 0) {
          sql.run('insert into sqlite_sequence (name, seq) values (?, ?)', table.name, atLeast)
        }
      },
      async release() {
        hold?.release()
        hold = null
      },
    }
  }
  const client = await database.pool.connect()
  let broken: Error | undefined
  if (options.relaxedDurability) await client.query('set synchronous_commit = off')
  return {
    dialect: 'postgres',
    async begin() {
      await client.query('begin')
      await client.query('set local statement_timeout = 0')
    },
    async commit() {
      await client.query('commit')
    },
    async durableCommit() {
      await client.query('set local synchronous_commit = on')
      await client.query('commit')
    },
    async rollback() {
      await client.query('rollback').catch((err: Error) => {
        broken = err
      })
    },
    async insert(table, rows, sent) {
      if (rows.length === 0) {
        sent?.()
        return
      }
      await copyIn(client, table, rows, sent)
    },
    async run<T>(text: string, params: unknown[] = []) {
      const result = await client.query({
        text: numbered(text),
        values: params,
        query_timeout: LONG_QUERY_MS,
      } as pg.QueryConfig)
      return result.rows as T[]
    },
    async raiseSequence(table, atLeast) {
      if (!table.generatedId) return
      const { rows } = await client.query<{ name: string | null; max: number | null }>(
        `select pg_get_serial_sequence($1, $2) as name, (select max(${quoteIdent(table.generatedId)}) from ${quoteIdent(table.name)})::bigint as max`,
        [quoteIdent(table.name), table.generatedId],
      )
      const name = rows[0]?.name
      if (!name) return
      const current = await postgresSequenceValue(client, table)
      const target = Math.max(atLeast ?? 0, Number(rows[0]?.max ?? 0), current)
      if (target > 0) await client.query('select setval($1, $2, true)', [name, target])
    },
    async release() {
      if (options.relaxedDurability && !broken) {
        await client.query('reset synchronous_commit').catch((err: Error) => {
          broken = err
        })
      }
      client.release(broken)
    },
  }
}
