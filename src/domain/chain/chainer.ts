// The background task that extends the chain: for each stream, the rows past its head in id order,
// a batch at a time, hashed off the request path and written with the new head in one transaction.
// One instance chains a stream at a time: SQLite's write lock (begin immediate), or on PostgreSQL
// the head row taken FOR UPDATE SKIP LOCKED (an instance that finds it taken skips its turn).
//
// Ids can commit out of order on PostgreSQL: a transaction that took id 11 may commit after one
// that took id 12. The chain never passes a gap in the ids while a row may still commit in it:
// it stops before the gap, notes when it first saw it and which transactions were writing to the
// table then, and passes it once none of those is still running or, whatever still runs, after
// HOLE_GRACE_MS. This is exact: an INSERT locks its table (RowExclusiveLock, in pg_locks) before it
// takes an id and keeps the lock until it commits or rolls back, and an id in the gap was taken
// before a higher one was visible, so whatever may still fill the gap holds the lock when the gap is
// first seen. The lock is per table and schema, so unrelated work on the server does not count. A gap passed is final: a row
// that turns up in it later was not chained and `shiplog verify` reports it as inserted. On SQLite
// one writer at a time takes ids in commit order, so a gap there is final at once (a rolled-back
// insert also rolls back its id; what remains is a row deleted before it was chained).
import { sql, type Transaction } from 'kysely'
import type { Database, PostgresHandle, SqliteHandle, SqlReader } from '../../db/connect.js'
import type { DB } from '../../db/schema.js'
import { CHAIN_INTERVAL_MS, HOLE_SETTLE_MS, MIN_CHAIN_PAUSE_MS } from '../pacing.js'
import type { Task, TaskLogger } from '../tasks.js'
import {
  type ChainRow,
  columnList,
  linkedValues,
  linkFrom,
  rowDigest,
  STREAMS,
  type StreamSpec,
} from './canonical.js'
import { currentHead } from './verify.js'

/** Rows chained per stream per run. */
export const CHAIN_BATCH = 2000
/** The most: after this a gap is passed whatever still runs (a commit later is then "inserted"). */
export const HOLE_GRACE_MS = 60_000

export interface ChainOptions {
  batch?: number
  /** How soon a gap being waited for is looked at again (the task; HOLE_SETTLE_MS). */
  settleMs?: number
  graceMs?: number
  now?: () => number
}

export interface StreamProgress {
  stream: StreamSpec['name']
  /** Rows chained by this run. */
  chained: number
  /** The head after the run. */
  through: number
  /** Whether rows wait past the head (another batch, or a gap being waited for). */
  more: boolean
  /** The id the chain waits at (a gap that may still fill), if any. */
  waitingAt: number | null
}

interface HeadRow {
  through: number
  link: string
  hole_from: number | null
  hole_seen_at: number | null
  hole_writers: string | null
}

interface Planned {
  links: Array<{ row_id: number; digest: string; link: string; account_id: number | null; at: number | null }>
  through: number
  link: string
  /** The gap stopped at, to record (null: none, or the same one as recorded). */
  hole: { from: number; keepSeen: boolean } | null
  more: boolean
}

/**
 * Plans the links for `rows` (id order, all past the head): chains them until a gap that may not
 * be passed yet. `mayPass(from)` says whether the gap starting at `from` is final.
 */
function plan(
  spec: StreamSpec,
  head: HeadRow,
  rows: readonly ChainRow[],
  full: boolean,
  mayPass: (from: number) => boolean,
): Planned {
  const planned: Planned = { links: [], through: head.through, link: head.link, hole: null, more: full }
  for (const row of rows) {
    const id = Number(row.id)
    if (id !== planned.through + 1 && !mayPass(planned.through + 1)) {
      planned.hole = { from: planned.through + 1, keepSeen: head.hole_from === planned.through + 1 }
      planned.more = true
      break
    }
    const digest = rowDigest(spec, row)
    const { accountId, at } = linkedValues(spec, row)
    planned.link = linkFrom(planned.link, digest, accountId, at)
    planned.through = id
    planned.links.push({ row_id: id, digest, link: planned.link, account_id: accountId, at })
  }
  return planned
}

async function chainSqlite(
  database: SqliteHandle,
  spec: StreamSpec,
  limit: number,
  now: number,
): Promise<StreamProgress> {
  const readHead = (sql: SqlReader) => {
    const head = sql.get<HeadRow>(
      'SELECT through, link, hole_from, hole_seen_at, hole_writers FROM chain_heads WHERE stream = ?',
      spec.name,
    )
    if (!head) throw new Error(`chain head ${spec.name} is missing (run shiplog migrate)`)
    return head
  }
  // Read and hash on the read connection (WAL readers do not hold the writer up); write the links
  // in a unit of the writer's queue, after checking that no other process chained meanwhile.
  const { head, rows } = await database.read((sql) => {
    const head = readHead(sql)
    const rows = sql.all<ChainRow>(
      `SELECT ${columnList(spec)} FROM ${spec.table} WHERE id > ? ORDER BY id LIMIT ?`,
      head.through,
      limit,
    )
    return { head, rows }
  })
  // One writer at a time hands out ids in commit order: a gap is final when it is seen.
  const planned = plan(spec, head, rows, rows.length === limit, () => true)
  const idle = { stream: spec.name, chained: 0, through: Number(head.through), more: false, waitingAt: null }
  if (planned.links.length === 0) return idle
  return database.write((sql): StreamProgress => {
    const locked = readHead(sql)
    if (Number(locked.through) !== Number(head.through))
      return { ...idle, through: Number(locked.through), more: true }
    const insert = sql.statement(
      'INSERT INTO chain_links (stream, row_id, digest, link, account_id, at) VALUES (?, ?, ?, ?, ?, ?)',
    )
    for (const l of planned.links) insert.run(spec.name, l.row_id, l.digest, l.link, l.account_id, l.at)
    sql.run(
      'UPDATE chain_heads SET through = ?, link = ?, updated_at = ?, hole_from = NULL, hole_seen_at = NULL, ' +
        'hole_writers = NULL WHERE stream = ?',
      planned.through,
      planned.link,
      now,
      spec.name,
    )
    return {
      stream: spec.name,
      chained: planned.links.length,
      through: planned.through,
      more: planned.more,
      waitingAt: null,
    }
  })
}

const ROWS_PER_STATEMENT = 1000

async function chainPostgresIn(
  trx: Transaction<DB>,
  spec: StreamSpec,
  limit: number,
  now: number,
  graceMs: number,
): Promise<StreamProgress | null> {
  const { rows: heads } = await sql<HeadRow>`select through, link, hole_from, hole_seen_at, hole_writers
    from chain_heads where stream = ${spec.name} for update skip locked`.execute(trx)
  const head = heads[0]
  // Another instance is chaining this stream right now.
  if (!head) return null
  const current = { through: Number(head.through), link: head.link }
  // Whether the recorded gap is final: none of the transactions that wrote to the table when it
  // was first seen still runs, or it has waited the whole grace time. Asked before the rows are
  // read: a writer's lock goes only after its commit is visible, so the read below sees its row.
  const recorded = head.hole_from === null ? null : Number(head.hole_from)
  const seenAt = head.hole_seen_at === null ? null : Number(head.hole_seen_at)
  let holeFinal = false
  if (recorded !== null && seenAt !== null) {
    if (now - seenAt >= graceMs) holeFinal = true
    else if (head.hole_writers !== null) {
      const writers = head.hole_writers === '' ? [] : head.hole_writers.split(',')
      const { rows: running } = await sql<{ n: number | string }>`select count(*) as n from pg_locks
        where relation = ${spec.table}::regclass and virtualtransaction = any(${writers}::text[])`.execute(
        trx,
      )
      holeFinal = Number(running[0]?.n ?? 0) === 0
    }
  }
  const { rows } = await sql<ChainRow>`select ${sql.raw(columnList(spec))} from ${sql.table(spec.table)}
    where id > ${current.through} order by id limit ${limit}`.execute(trx)
  const headRow: HeadRow = { ...head, through: current.through, link: current.link, hole_from: recorded }
  const planned = plan(spec, headRow, rows, rows.length === limit, (from) => from === recorded && holeFinal)
  for (let i = 0; i < planned.links.length; i += ROWS_PER_STATEMENT) {
    const part = planned.links.slice(i, i + ROWS_PER_STATEMENT)
    await sql`insert into chain_links (stream, row_id, digest, link, account_id, at)
      select ${spec.name}, r, d, l, a, t from unnest(${part.map((l) => l.row_id)}::bigint[],
        ${part.map((l) => l.digest)}::text[], ${part.map((l) => l.link)}::text[],
        ${part.map((l) => l.account_id)}::bigint[], ${part.map((l) => l.at)}::bigint[]) as x(r, d, l, a, t)`.execute(
      trx,
    )
  }
  let waitingAt: number | null = null
  if (planned.hole) {
    waitingAt = planned.hole.from
    if (!planned.hole.keepSeen) {
      await sql`update chain_heads set through = ${planned.through}, link = ${planned.link}, updated_at = ${now},
        hole_from = ${planned.hole.from}, hole_seen_at = ${now},
        hole_writers = (select coalesce(string_agg(distinct virtualtransaction, ','), '') from pg_locks
          where relation = ${spec.table}::regclass and mode = 'RowExclusiveLock')
        where stream = ${spec.name}`.execute(trx)
    } else if (planned.links.length > 0) {
      await sql`update chain_heads set through = ${planned.through}, link = ${planned.link}, updated_at = ${now}
        where stream = ${spec.name}`.execute(trx)
    }
  } else if (planned.links.length > 0 || recorded !== null) {
    await sql`update chain_heads set through = ${planned.through}, link = ${planned.link}, updated_at = ${now},
      hole_from = null, hole_seen_at = null, hole_writers = null where stream = ${spec.name}`.execute(trx)
  }
  return {
    stream: spec.name,
    chained: planned.links.length,
    through: planned.through,
    more: planned.more,
    waitingAt,
  }
}

async function chainPostgres(
  database: PostgresHandle,
  spec: StreamSpec,
  limit: number,
  now: number,
  graceMs: number,
): Promise<StreamProgress> {
  // Read committed (whatever the server's default): each statement sees what committed before it.
  const progress = await database.db
    .transaction()
    .setIsolationLevel('read committed')
    .execute((trx) => chainPostgresIn(trx, spec, limit, now, graceMs))
  return progress ?? { stream: spec.name, chained: 0, through: 0, more: false, waitingAt: null }
}

/** One batch of each stream. */
export async function chainOnce(database: Database, options: ChainOptions = {}): Promise<StreamProgress[]> {
  const limit = options.batch ?? CHAIN_BATCH
  const results: StreamProgress[] = []
  for (const spec of STREAMS) {
    const now = (options.now ?? Date.now)()
    if (database.dialect === 'sqlite') results.push(await chainSqlite(database, spec, limit, now))
    else results.push(await chainPostgres(database, spec, limit, now, options.graceMs ?? HOLE_GRACE_MS))
  }
  return results
}

/**
 * Chains until nothing is left that may be chained now (a gap being waited for stops it), or
 * `maxRuns` batches; returns the rows chained. For tests, the bench and the task.
 */
export async function chainCaughtUp(
  database: Database,
  options: ChainOptions & { maxRuns?: number } = {},
): Promise<number> {
  let chained = 0
  for (let run = 0; run < (options.maxRuns ?? Number.POSITIVE_INFINITY); run++) {
    const results = await chainOnce(database, options)
    const made = results.reduce((n, r) => n + r.chained, 0)
    chained += made
    if (made === 0 || !results.some((r) => r.more && r.waitingAt === null)) return chained
  }
  return chained
}

/** Rows not chained yet, per stream: rows past the head (on a large table, an index range count). */
export async function chainLag(database: Database): Promise<Record<StreamSpec['name'], number>> {
  const lag = { events: 0, audit: 0 }
  for (const spec of STREAMS) {
    const head = await database.db
      .selectFrom('chain_heads')
      .select('through')
      .where('stream', '=', spec.name)
      .executeTakeFirst()
    const { rows } = await sql<{ n: number | string }>`select count(*) as n from ${sql.table(spec.table)}
      where id > ${Number(head?.through ?? 0)}`.execute(database.db)
    lag[spec.name] = Number(rows[0]?.n ?? 0)
  }
  return lag
}

/** How often the task writes the current heads to the log (a copy outside the database). */
export const HEAD_LOG_INTERVAL_MS = 10 * 60_000

/**
 * The background task: a run a second while idle; while rows wait, the next run follows after
 * twice as long as this one took (at least MIN_CHAIN_PAUSE_MS), so chaining takes at most about a
 * third of the event loop from ingest; a gap being waited for is looked at again after
 * HOLE_SETTLE_MS. It stands aside while a burst of ingest lasts (the runner's burst policy,
 * src/domain/ingest-burst.ts), for at most MAX_YIELD_MS: a burst is answered at full speed and
 * chained right after it. Under load that never eases, once it has waited that long it catches up
 * at its usual pace, busy or not, and only waits again once nothing is left to chain: it is never
 * more than MAX_YIELD_MS and one catch-up behind. Every HEAD_LOG_INTERVAL_MS, when the chain moved,
 * it logs both heads: a log shipped elsewhere then holds heads that `shiplog verify --head` can
 * check.
 */
export function chainTask(database: Database, options: ChainOptions = {}, log?: TaskLogger): Task {
  let lastLogged = 0
  let loggedHeads = ''
  return {
    name: 'chain',
    intervalMs: CHAIN_INTERVAL_MS,
    firstRunMs: 0,
    standsAside: true,
    run: async () => {
      const started = performance.now()
      const results = await chainOnce(database, options)
      const more = results.some((r) => r.more)
      if (log && Date.now() - lastLogged >= HEAD_LOG_INTERVAL_MS) {
        const heads = [await currentHead(database.db, 'events'), await currentHead(database.db, 'audit')]
          .filter((h) => h !== null)
          .join(' ')
        lastLogged = Date.now()
        if (heads !== '' && heads !== loggedHeads) {
          loggedHeads = heads
          log.info(
            { chainHeads: heads },
            `chain heads ${heads} (keep a copy: shiplog verify --head checks it)`,
          )
        }
      }
      if (results.some((r) => r.more && r.waitingAt === null))
        return { nextMs: Math.max(MIN_CHAIN_PAUSE_MS, 2 * (performance.now() - started)), more }
      if (results.some((r) => r.waitingAt !== null))
        return { nextMs: options.settleMs ?? HOLE_SETTLE_MS, more }
      return { nextMs: undefined, more }
    },
  }
}
