// `shiplog copy`: moves a whole installation between databases (SQLite ⇄ PostgreSQL) in batches,
// resumable after a kill, verified by per-table counts and checksums.
import { createHash } from 'node:crypto'
import { sql } from 'kysely'
import type { Database } from '../../db/connect.js'
import { migrateToLatest } from '../../db/migrate.js'
import { type Row, TableChecksum, type TableSummary } from './checksum.js'
import { type ForeignKeyDefinition, foreignKeys, type IndexDefinition, secondaryIndexes } from './indexes.js'
import { firstTableWithData, SEEDED_BY_MIGRATIONS } from './load.js'
import { DEFAULT_BATCH_ROWS, keyOf, openSnapshot, openWriter, type Snapshot, type Writer } from './rows.js'
import { allTableNames, applicationTables, quoteIdent, schemaVersion, type TableInfo } from './tables.js'

/** The target's record of an unfinished copy: which installation, and how far each table got. */
export const PROGRESS_TABLE = 'shiplog_copy_progress'

export class CopyError extends Error {}

export interface CopyProgress {
  /** Called once with every table's row count before copying starts. */
  start(totals: { table: string; rows: number; done: number }[]): void
  /** Rows of `table` copied so far (resumed rows included). */
  advance(table: string, copied: number): void
  tableDone(table: string, rows: number): void
  /** The rows are in; the indexes dropped for the bulk load are being built. */
  indexing?(): void
  verifying(): void
}

export interface CopyOptions {
  batchRows?: number
  progress?: CopyProgress
}

export interface CopyOutcome {
  resumed: boolean
  tables: Record<string, TableSummary>
  copiedRows: number
}

/**
 * What identifies an installation: the session secret it generated on first start (kept in
 * settings), else its first account; hashed, since it is only compared.
 */
async function installationIdentity(database: Database): Promise<string> {
  const secret = await database.db
    .selectFrom('settings')
    .select('value')
    .where('name', '=', 'session_secret')
    .executeTakeFirst()
  const account = await database.db
    .selectFrom('accounts')
    .select(['id', 'name', 'created_at'])
    .orderBy('id')
    .limit(1)
    .executeTakeFirst()
  const basis = secret ? `secret:${secret.value}` : account ? `account:${JSON.stringify(account)}` : 'empty'
  return createHash('sha256').update(basis).digest('hex')
}

async function readProgress(target: Database): Promise<Map<string, string> | null> {
  if (!(await allTableNames(target)).includes(PROGRESS_TABLE)) return null
  const { rows } = await sql<{ name: string; value: string }>`
    select name, value from ${sql.table(PROGRESS_TABLE)}`.execute(target.db)
  return new Map(rows.map((r) => [r.name, r.value]))
}

interface TableState {
  after: unknown[] | null
  copied: number
  done: boolean
}

function parseState(value: string | undefined): TableState {
  if (!value) return { after: null, copied: 0, done: false }
  return JSON.parse(value) as TableState
}

/**
 * Copies every application table of `source` into `target`. The source is read from one snapshot
 * (a read transaction) and never written. Each batch commits together with the table's high-water
 * mark in PROGRESS_TABLE, so a copy killed at any moment resumes after the last committed batch. A
 * target holding anything else — another installation, or this one already copied — is refused.
 */
export async function copyDatabase(
  source: Database,
  target: Database,
  options: CopyOptions = {},
): Promise<CopyOutcome> {
  const batchRows = options.batchRows ?? DEFAULT_BATCH_ROWS
  const sourceSchema = await schemaVersion(source).catch(() => null)
  if (!sourceSchema) throw new CopyError('the source has no Shiplog schema (check --from)')
  await migrateToLatest(target)
  const targetSchema = await schemaVersion(target)
  if (sourceSchema !== targetSchema) {
    throw new CopyError(
      sourceSchema > (targetSchema ?? '')
        ? `the source is at a newer schema (${sourceSchema}) than this Shiplog (${targetSchema}): use a newer version`
        : `the source is at an older schema (${sourceSchema}): run shiplog migrate on it first (this Shiplog is at ${targetSchema})`,
    )
  }

  const snapshot = await openSnapshot(source)
  try {
    const tables = await applicationTables(source)
    const targetTables = await applicationTables(target)
    const targetNames = new Set(targetTables.map((t) => t.name))
    for (const table of tables) {
      if (!targetNames.has(table.name))
        throw new CopyError(`table ${table.name} does not exist in the target`)
    }
    const identity = await installationIdentity(source)
    let progress = await readProgress(target)
    const resumed = progress !== null
    if (progress) {
      if (progress.get('source') !== identity) {
        throw new CopyError(
          'the target holds an unfinished copy of another installation: copy needs an empty database, or the same --from to resume',
        )
      }
    } else {
      const holding = await firstTableWithData(target, targetTables)
      if (holding) {
        const same = (await installationIdentity(target)) === identity
        throw new CopyError(
          same
            ? `the target already holds this installation (table ${holding} has rows) and no unfinished copy: nothing to resume`
            : `the target already holds another installation (table ${holding} has rows): copy needs a new or empty database`,
        )
      }
      const dropped = await startProgress(target, targetTables, identity)
      progress = new Map([
        ['source', identity],
        ['indexes', JSON.stringify(dropped.indexes)],
        ['foreign_keys', JSON.stringify(dropped.foreignKeys)],
      ])
    }

    const states = new Map(tables.map((t) => [t.name, parseState(progress?.get(`table:${t.name}`))]))
    const totals = []
    for (const table of tables) {
      const state = states.get(table.name) as TableState
      totals.push({ table: table.name, rows: await snapshot.count(table), done: state.copied })
    }
    options.progress?.start(totals)

    let copiedRows = 0
    const sourceSums: Record<string, TableSummary> = {}
    const writer = await openWriter(target, { relaxedDurability: true })
    try {
      for (const table of tables) {
        const state = states.get(table.name) as TableState
        if (state.done) continue
        // A table copied whole in this run is checksummed on the way: verification then reads only
        // the target. A table resumed mid-way is read again from the start at verification.
        const running = state.after === null ? new TableChecksum() : null
        // One batch is read ahead while the target stores the one before: `insert` says when the
        // rows are on their way, and the next read (and its checksum) starts then.
        const source = snapshot.batches(table, state.after, batchRows)
        const readAhead = () => {
          const step = source.next().then((result) => {
            if (!result.done && running) running.addRows(result.value)
            return result
          })
          // Awaited below; until then a failed read must not count as unhandled.
          step.catch(() => {})
          return step
        }
        let next = readAhead()
        for (let step = await next; !step.done; step = await next) {
          const rows = step.value
          state.after = keyOf(table, rows[rows.length - 1] as unknown[])
          state.copied += rows.length
          let ahead: Promise<IteratorResult<Row[]>> | null = null
          await writer.begin()
          try {
            await writer.insert(table, rows, () => {
              ahead = readAhead()
            })
            await saveState(writer, table.name, state)
            await writer.commit()
          } catch (err) {
            await writer.rollback()
            await source.return(undefined)
            throw err
          }
          next = ahead ?? readAhead()
          copiedRows += rows.length
          options.progress?.advance(table.name, state.copied)
        }
        state.done = true
        if (running) sourceSums[table.name] = running.summary()
        await writer.begin()
        await saveState(writer, table.name, state)
        await writer.commit()
        options.progress?.tableDone(table.name, state.copied)
      }
      await writer.begin()
      for (const table of tables) await writer.raiseSequence(table, await snapshot.sequenceValue(table))
      await writer.durableCommit()
      options.progress?.indexing?.()
    } finally {
      await writer.release()
    }
    const rebuild = () =>
      rebuildDropped(
        target,
        JSON.parse(progress.get('indexes') ?? '[]') as IndexDefinition[],
        JSON.parse(progress.get('foreign_keys') ?? '[]') as ForeignKeyDefinition[],
      )
    const verify = async () => {
      const unsummed = tables.filter((table) => !(table.name in sourceSums))
      Object.assign(sourceSums, await checksums(snapshot, unsummed))
      const targetSnapshot = await openSnapshot(target)
      try {
        return await checksums(targetSnapshot, tables, { fast: true })
      } finally {
        await targetSnapshot.close()
      }
    }
    let targetSums: Record<string, TableSummary>
    if (target.dialect === 'postgres') {
      // Neither changes a row, so they run at once: the server builds indexes while this process
      // reads the rows back and hashes them (their locks do not conflict with a read).
      options.progress?.verifying()
      const [built, verified] = await Promise.allSettled([rebuild(), verify()])
      if (built.status === 'rejected') throw built.reason
      if (verified.status === 'rejected') throw verified.reason
      targetSums = verified.value
    } else {
      // One SQLite connection: its snapshot must not be open while it writes the indexes.
      await rebuild()
      options.progress?.verifying()
      targetSums = await verify()
    }
    // Finished either way: a mismatch cannot be fixed by resuming, only by copying again.
    await sql`drop table ${sql.table(PROGRESS_TABLE)}`.execute(target.db)
    for (const table of tables) {
      const a = sourceSums[table.name] as TableSummary
      const b = targetSums[table.name] as TableSummary
      if (a.rows !== b.rows) {
        throw new CopyError(
          `verification failed for table ${table.name}: the source has ${a.rows} rows, the target ${b.rows} (did the source change between runs? stop its servers, empty the target and copy again)`,
        )
      }
      if (a.sha256 !== b.sha256) {
        throw new CopyError(
          `verification failed for table ${table.name}: its checksum differs between source and target (did the source change between runs? stop its servers, empty the target and copy again)`,
        )
      }
    }
    return { resumed, tables: sourceSums, copiedRows }
  } finally {
    await snapshot.close()
  }
}

/**
 * Marks the target as this installation's unfinished copy, empties the tables migrations seeded, and
 * drops the secondary indexes and foreign keys (kept in the progress table, so a resumed copy still
 * builds them again).
 */
async function startProgress(
  target: Database,
  tables: readonly TableInfo[],
  identity: string,
): Promise<{ indexes: IndexDefinition[]; foreignKeys: ForeignKeyDefinition[] }> {
  const indexes = await secondaryIndexes(target, tables)
  const keys = await foreignKeys(target, tables)
  const writer = await openWriter(target)
  try {
    await writer.begin()
    await writer.run(
      `create table ${quoteIdent(PROGRESS_TABLE)} (name text primary key, value text not null)`,
    )
    const record = [
      ['source', identity],
      ['indexes', JSON.stringify(indexes)],
      ['foreign_keys', JSON.stringify(keys)],
    ]
    for (const [name, value] of record) {
      await writer.run(`insert into ${quoteIdent(PROGRESS_TABLE)} (name, value) values (?, ?)`, [name, value])
    }
    // The starting rows migrations wrote give way to the source's.
    for (const seeded of SEEDED_BY_MIGRATIONS) await writer.run(`delete from ${quoteIdent(seeded)}`)
    for (const key of keys) {
      await writer.run(`alter table ${quoteIdent(key.table)} drop constraint ${quoteIdent(key.name)}`)
    }
    for (const index of indexes) await writer.run(`drop index ${quoteIdent(index.name)}`)
    await writer.commit()
    return { indexes, foreignKeys: keys }
  } catch (err) {
    await writer.rollback()
    throw err
  } finally {
    await writer.release()
  }
}

/** Connections that build indexes at once on PostgreSQL: GIN builds use one core, B-trees two. */
const REBUILD_CONNECTIONS = 2
/** Memory for each index build's sort (PostgreSQL's default of 64 MB spills a million rows to disk). */
const REBUILD_MEMORY = '256MB'

/**
 * Builds the dropped indexes again, then adds the foreign keys back (each checked by one scan), each
 * in its own transaction; ones already there (a resumed copy) are skipped. On PostgreSQL two
 * connections share the work, the slowest builds (GIN) first.
 */
async function rebuildDropped(
  target: Database,
  indexes: readonly IndexDefinition[],
  keys: readonly ForeignKeyDefinition[],
): Promise<void> {
  const tables = await applicationTables(target)
  const presentIndexes = new Set((await secondaryIndexes(target, tables)).map((i) => i.name))
  const presentKeys = new Set((await foreignKeys(target, tables)).map((k) => k.name))
  const slowFirst = [...indexes.filter((i) => !presentIndexes.has(i.name))].sort(
    (a, b) => Number(/ using gin/i.test(b.definition)) - Number(/ using gin/i.test(a.definition)),
  )
  const postgres = target.dialect === 'postgres'
  const width = postgres ? REBUILD_CONNECTIONS : 1
  const runAll = async (statements: string[]) => {
    const queue = [...statements]
    const worker = async () => {
      const writer = await openWriter(target)
      try {
        for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
          await writer.begin()
          try {
            if (postgres) await writer.run(`set local maintenance_work_mem = '${REBUILD_MEMORY}'`)
            await writer.run(next)
            await writer.durableCommit()
          } catch (err) {
            await writer.rollback()
            throw err
          }
        }
      } finally {
        await writer.release()
      }
    }
    // Settled, not raced: a failed build must not leave the other connection building unawaited.
    const outcomes = await Promise.allSettled(Array.from({ length: Math.min(width, queue.length) }, worker))
    for (const outcome of outcomes) if (outcome.status === 'rejected') throw outcome.reason
  }
  await runAll(slowFirst.map((i) => i.definition))
  await runAll(
    keys
      .filter((k) => !presentKeys.has(k.name))
      .map((k) => `alter table ${quoteIdent(k.table)} add constraint ${quoteIdent(k.name)} ${k.definition}`),
  )
}

async function saveState(writer: Writer, table: string, state: TableState) {
  const name = `table:${table}`
  const value = JSON.stringify(state)
  await writer.run(`delete from ${quoteIdent(PROGRESS_TABLE)} where name = ?`, [name])
  await writer.run(`insert into ${quoteIdent(PROGRESS_TABLE)} (name, value) values (?, ?)`, [name, value])
}

/**
 * Counts and checksums every table from a snapshot, the same way on either database. Reading the
 * batches is the definition; `fast` takes the snapshot's own faster reader where it has one (equal
 * by test/domain/operations-checksum.test.ts).
 */
export async function checksums(
  snapshot: Snapshot,
  tables: readonly TableInfo[],
  options: { fast?: boolean } = {},
): Promise<Record<string, TableSummary>> {
  const sums: Record<string, TableSummary> = {}
  for (const table of tables) {
    const fast = options.fast ? await snapshot.checksum?.(table) : null
    if (fast) {
      sums[table.name] = fast
      continue
    }
    const checksum = new TableChecksum()
    for await (const rows of snapshot.batches(table, null)) checksum.addRows(rows)
    sums[table.name] = checksum.summary()
  }
  return sums
}
