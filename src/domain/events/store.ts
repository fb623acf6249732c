// The SQL behind recording events, written by hand for each database. Every accepted request runs
// through here, so it skips the query builder: statements are prepared once (SQLite) or named so
// the server parses them once per connection (PostgreSQL), and a batch of plain events costs one
// statement on either database.

import type pg from 'pg'
import type { Database, SqliteHandle, SqlWriter } from '../../db/connect.js'
import { type ColumnType, eventColumn, INSERTED_COLUMNS } from '../../db/event-columns.js'
import type { EventRow, EventSource } from '../../db/schema.js'
import type { GuardrailRule } from '../../text-rules.js'
import type { EventInput } from './event.js'
import { isOverride, OVERRIDE_AUDIT_COLUMNS, overrideAuditValues } from './override-audit.js'

/** How long an Idempotency-Key holds: a retry after this records a new event. */
export const IDEMPOTENCY_WINDOW_MS = 24 * 60 * 60 * 1000

/** One accepted request waiting to be stored. */
export interface PendingEvent {
  accountId: number
  /** Null for events `shiplog import` stored (no key sent them). */
  apiKeyId: number | null
  apiKeyName: string | null
  source: EventSource
  input: EventInput
  idempotencyKey: string | null
  receivedAt: number
  /** The guardrails it broke when it arrived (SPEC §11), in GUARDRAIL_RULES order; absent: none. */
  guardrails?: readonly GuardrailRule[]
  /** The client's address, for the audit entry of an override (`input.overrideReason` set). */
  clientAddress?: string | null
}

/**
 * What became of one request. `stored`: a new event. `replayed`: its Idempotency-Key matched an
 * earlier request with the same values, nothing new was stored and `event` is the first one.
 * `key-reused`: the key matched an earlier request with different values (a client bug), nothing
 * was stored and `event` is the earlier event, which the caller must not answer as this one.
 */
export interface RecordOutcome {
  kind: 'stored' | 'replayed' | 'key-reused'
  event: EventRow
}

/**
 * Whether a request repeats a stored event: the validated event fields and the times the caller
 * gave, which are what a caller means by "the same event". The request form (source), the key and the arrival time are left
 * out: a pipeline that retries through another form still sends the same event.
 */
export function sameEventValues(stored: EventRow, input: EventInput): boolean {
  return (
    stored.service === input.service &&
    stored.environment === input.environment &&
    stored.version === input.version &&
    stored.status === input.status &&
    stored.url === input.url &&
    stored.commit_sha === input.commit &&
    stored.description === input.description &&
    stored.deployer === input.deployer &&
    // No time sent: the stored one must have been its own arrival too (none sent then either).
    Number(stored.occurred_at) === (input.occurredAt ?? Number(stored.received_at)) &&
    (stored.commit_time === null ? null : Number(stored.commit_time)) === input.commitTime &&
    stored.override_reason === (input.overrideReason ?? null)
  )
}

/** The answer to a request whose Idempotency-Key was already claimed by `original`. */
function repeatOutcome(original: EventRow, item: PendingEvent): RecordOutcome {
  return { kind: sameEventValues(original, item.input) ? 'replayed' : 'key-reused', event: original }
}

/**
 * Stores a batch in one transaction: all of it, in order, or (when it throws) none of it. It
 * resolves only once the batch is durable: on disk, or committed by PostgreSQL.
 */
export interface EventStore {
  writeBatch(items: readonly PendingEvent[]): Promise<RecordOutcome[]>
}

export function eventStoreFor(database: Database): EventStore {
  if (database.dialect === 'sqlite') return new SqliteEventStore(database)
  return new PostgresEventStore(database.pool)
}

/** The columns an insert names, in table order (db/event-columns.ts). */
const COLUMNS = INSERTED_COLUMNS

type ColumnValue = string | number | null

/**
 * The values a pending event is stored with, by column: every column but the id, which the
 * database gives. The one place a request's fields meet the table's columns.
 */
function insertedRow(item: PendingEvent): Omit<EventRow, 'id'> {
  const { input } = item
  return {
    account_id: item.accountId,
    service: input.service,
    environment: input.environment,
    version: input.version,
    status: input.status,
    url: input.url,
    commit_sha: input.commit,
    description: input.description,
    deployer: input.deployer,
    source: item.source,
    api_key_id: item.apiKeyId,
    api_key_name: item.apiKeyName,
    received_at: item.receivedAt,
    occurred_at: input.occurredAt ?? item.receivedAt,
    commit_time: input.commitTime,
    guardrails:
      item.guardrails === undefined || item.guardrails.length === 0 ? null : item.guardrails.join(','),
    override_reason: input.overrideReason ?? null,
  }
}

/** The row an event becomes once stored under `id`: what RETURNING * would give, built here. */
function storedRow(item: PendingEvent, id: number): EventRow {
  return { id, ...insertedRow(item) }
}

/**
 * What writing one item gave: the new event's id, or, for an Idempotency-Key already claimed, the
 * outcome of the repeat (replayed or key-reused).
 */
export type WriteResult = number | RecordOutcome

export function outcomesOf(items: readonly PendingEvent[], results: readonly WriteResult[]): RecordOutcome[] {
  if (results.length !== items.length) throw new Error(`stored ${results.length} of ${items.length} events`)
  return results.map((result, i) =>
    typeof result === 'number'
      ? { kind: 'stored', event: storedRow(items[i] as PendingEvent, result) }
      : result,
  )
}

/** The stored values of one event, in COLUMNS order. */
function columnValues(item: PendingEvent): ColumnValue[] {
  const row = insertedRow(item)
  return COLUMNS.map((column) => row[column])
}

const SQLITE_SQL = {
  insertEvent: `INSERT INTO events (${COLUMNS.join(', ')}) VALUES (${COLUMNS.map(() => '?').join(', ')})`,
  dropExpiredKey: 'DELETE FROM idempotency_keys WHERE account_id = ? AND idem_key = ? AND created_at <= ?',
  claimKey:
    'INSERT INTO idempotency_keys (account_id, idem_key, event_id, created_at) VALUES (?, ?, NULL, ?) ' +
    'ON CONFLICT (account_id, idem_key) DO NOTHING RETURNING idem_key',
  claimedEvent:
    'SELECT events.* FROM idempotency_keys JOIN events ON events.id = idempotency_keys.event_id ' +
    'WHERE idempotency_keys.account_id = ? AND idempotency_keys.idem_key = ?',
  linkKey: 'UPDATE idempotency_keys SET event_id = ? WHERE account_id = ? AND idem_key = ?',
  auditOverride: `INSERT INTO audit_entries (${OVERRIDE_AUDIT_COLUMNS.join(', ')}) VALUES (${OVERRIDE_AUDIT_COLUMNS.map(() => '?').join(', ')})`,
}

/**
 * Writes one batch with the write connection the unit was given. The unit is one transaction with
 * the write lock taken at BEGIN (IMMEDIATE), so a CLI process writing at the same moment makes the
 * unit wait its turn instead of failing half-way.
 */
function writeSqliteBatch(sql: SqlWriter, items: readonly PendingEvent[]): WriteResult[] {
  const insertEvent = sql.statement(SQLITE_SQL.insertEvent)
  const insert = (item: PendingEvent): number => {
    // An array binds its values in order, without spreading them into arguments.
    const id = Number(insertEvent.run(columnValues(item)).lastInsertRowid)
    // An override is audited in the same unit: the entry exists exactly when the event does.
    if (isOverride(item)) sql.statement(SQLITE_SQL.auditOverride).run(overrideAuditValues(item, id))
    return id
  }
  return items.map((item): WriteResult => {
    const key = item.idempotencyKey
    if (key === null) return insert(item)
    // A record older than the window no longer counts: drop it so the key can be claimed again.
    sql.run(SQLITE_SQL.dropExpiredKey, item.accountId, key, item.receivedAt - IDEMPOTENCY_WINDOW_MS)
    if (sql.get(SQLITE_SQL.claimKey, item.accountId, key, item.receivedAt) === undefined) {
      const original = sql.get<EventRow>(SQLITE_SQL.claimedEvent, item.accountId, key)
      if (!original) throw new Error('idempotency record without its event')
      return repeatOutcome(original, item)
    }
    const id = insert(item)
    sql.run(SQLITE_SQL.linkKey, id, item.accountId, key)
    return id
  })
}

/**
 * Events on SQLite: each batch is one unit of the write connection's queue (db/sqlite/owner.ts),
 * which resolves only after the WAL holding its commit has been fsynced. The commit itself does not
 * wait for the disk (synchronous=NORMAL): the fsync runs on libuv's thread pool while the event loop
 * goes on reading requests for the next batch.
 */
class SqliteEventStore implements EventStore {
  constructor(private readonly database: SqliteHandle) {}

  async writeBatch(items: readonly PendingEvent[]): Promise<RecordOutcome[]> {
    const results = await this.database.write((sql) => writeSqliteBatch(sql, items))
    return outcomesOf(items, results)
  }
}

/** PostgreSQL type of a column's array parameter for unnest(), by how the column is stored. */
const PG_ARRAY_TYPES: Record<ColumnType, string> = {
  serial: 'bigint[]',
  integer: 'bigint[]',
  text: 'text[]',
  time: 'bigint[]',
  words: 'text[]',
}

/**
 * Any number of events in one statement: each column arrives as one array parameter. ORDER BY the
 * ordinality makes the identity values follow the order of the arrays, so sorting the returned rows
 * by id pairs each with its request.
 */
const PG_INSERT_EVENTS = {
  name: 'shiplog_insert_events',
  text:
    `INSERT INTO events (${COLUMNS.join(', ')}) SELECT ${COLUMNS.join(', ')} FROM unnest(` +
    COLUMNS.map((c, i) => `$${i + 1}::${PG_ARRAY_TYPES[eventColumn(c).type]}`).join(', ') +
    `) WITH ORDINALITY AS t(${COLUMNS.join(', ')}, ord) ORDER BY ord RETURNING id`,
}

const PG_SQL = {
  dropExpiredKey: {
    name: 'shiplog_drop_expired_key',
    text: 'DELETE FROM idempotency_keys WHERE account_id = $1 AND idem_key = $2 AND created_at <= $3',
  },
  claimKey: {
    name: 'shiplog_claim_key',
    text:
      'INSERT INTO idempotency_keys (account_id, idem_key, event_id, created_at) VALUES ($1, $2, NULL, $3) ' +
      'ON CONFLICT (account_id, idem_key) DO NOTHING RETURNING idem_key',
  },
  claimedEvent: {
    name: 'shiplog_claimed_event',
    text:
      'SELECT events.* FROM idempotency_keys JOIN events ON events.id = idempotency_keys.event_id ' +
      'WHERE idempotency_keys.account_id = $1 AND idempotency_keys.idem_key = $2',
  },
  linkKey: {
    name: 'shiplog_link_key',
    text: 'UPDATE idempotency_keys SET event_id = $1 WHERE account_id = $2 AND idem_key = $3',
  },
}

type Queryable = Pick<pg.PoolClient, 'query'>

class PostgresEventStore implements EventStore {
  constructor(private readonly pool: pg.Pool) {}

  async writeBatch(items: readonly PendingEvent[]): Promise<RecordOutcome[]> {
    // Plain events only (the common case): one statement, which is its own transaction.
    if (items.every(isPlain)) return insertPlain(this.pool, items)
    const client = await this.pool.connect()
    let broken: Error | undefined
    try {
      await client.query('BEGIN')
      const outcomes: RecordOutcome[] = []
      let plain: PendingEvent[] = []
      for (const item of items) {
        if (isPlain(item)) {
          plain.push(item)
          continue
        }
        if (plain.length > 0) outcomes.push(...(await insertPlain(client, plain)))
        plain = []
        outcomes.push(await writeOne(client, item))
      }
      if (plain.length > 0) outcomes.push(...(await insertPlain(client, plain)))
      await client.query('COMMIT')
      return outcomes
    } catch (err) {
      try {
        await client.query('ROLLBACK')
      } catch (rollback) {
        // The connection itself failed: do not hand it back to the pool.
        broken = rollback as Error
      }
      throw err
    } finally {
      client.release(broken)
    }
  }
}

/** An event that is one row and nothing else: no Idempotency-Key to claim, no override to audit. */
function isPlain(item: PendingEvent): boolean {
  return item.idempotencyKey === null && !isOverride(item)
}

/** An event that needs more than its row, inside the batch's transaction. */
async function writeOne(db: Queryable, item: PendingEvent): Promise<RecordOutcome> {
  const [outcome] =
    item.idempotencyKey === null
      ? await insertPlain(db, [item])
      : [await writeIdempotent(db, item, item.idempotencyKey)]
  if (!outcome) throw new Error('event write returned no row')
  // Only a new event is audited: a replay answers the first one, whose entry exists already.
  if (outcome.kind === 'stored' && isOverride(item)) {
    await db.query({ ...PG_AUDIT_OVERRIDE, values: overrideAuditValues(item, Number(outcome.event.id)) })
  }
  return outcome
}

const PG_AUDIT_OVERRIDE = {
  name: 'shiplog_audit_override',
  text: `INSERT INTO audit_entries (${OVERRIDE_AUDIT_COLUMNS.join(', ')}) VALUES (${OVERRIDE_AUDIT_COLUMNS.map((_, i) => `$${i + 1}`).join(', ')})`,
}

async function insertPlain(db: Queryable, items: readonly PendingEvent[]): Promise<RecordOutcome[]> {
  const columns: ColumnValue[][] = COLUMNS.map(() => new Array<ColumnValue>(items.length))
  items.forEach((item, row) => {
    columnValues(item).forEach((value, column) => {
      ;(columns[column] as ColumnValue[])[row] = value
    })
  })
  const result = await db.query<{ id: number }>({ ...PG_INSERT_EVENTS, values: columns })
  const ids = result.rows.map((row) => row.id).sort((a, b) => a - b)
  return outcomesOf(items, ids)
}

async function writeIdempotent(db: Queryable, item: PendingEvent, key: string): Promise<RecordOutcome> {
  await db.query({
    ...PG_SQL.dropExpiredKey,
    values: [item.accountId, key, item.receivedAt - IDEMPOTENCY_WINDOW_MS],
  })
  // Claim the key first. A concurrent claim by another instance waits here until the first
  // transaction ends, then sees its row: at most one event per key, across instances.
  const claimed = await db.query({ ...PG_SQL.claimKey, values: [item.accountId, key, item.receivedAt] })
  if (claimed.rowCount === 0) {
    const original = await db.query<EventRow>({ ...PG_SQL.claimedEvent, values: [item.accountId, key] })
    const event = original.rows[0]
    if (!event) throw new Error('idempotency record without its event')
    return repeatOutcome(event, item)
  }
  const [outcome] = await insertPlain(db, [item])
  if (!outcome) throw new Error('event write returned no row')
  await db.query({ ...PG_SQL.linkKey, values: [outcome.event.id, item.accountId, key] })
  return outcome
}
