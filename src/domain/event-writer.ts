// Records events durably with group commit: requests that arrive while a commit is under way are
// written together in the next transaction, so many requests share one fsync.
import type { Kysely } from 'kysely'
import type { DB, EventRow, EventSource, NewEvent } from '../db/schema.js'
import { isDatabaseUnavailable } from './database-errors.js'
import type { EventInput } from './events.js'

export const IDEMPOTENCY_WINDOW_MS = 24 * 60 * 60 * 1000

/** One accepted request waiting to be stored. */
export interface PendingEvent {
  accountId: number
  apiKeyId: number
  apiKeyName: string
  source: EventSource
  input: EventInput
  idempotencyKey: string | null
  receivedAt: number
}

export interface RecordOutcome {
  event: EventRow
  /** True when the Idempotency-Key matched an earlier request and nothing new was stored. */
  replayed: boolean
}

interface Waiting {
  item: PendingEvent
  resolve: (outcome: RecordOutcome) => void
  reject: (err: unknown) => void
}

export class WriterClosedError extends Error {
  override readonly name = 'WriterClosedError'
}

// 13 bound values a row: 400 rows stay far below SQLite's and PostgreSQL's parameter limits.
const ROWS_PER_INSERT = 400

export class EventWriter {
  readonly #queue: Waiting[] = []
  #pumping: Promise<void> | null = null
  #closed = false
  /** Counters for tests and metrics: transactions committed and events they held. */
  readonly stats = { batches: 0, events: 0 }

  constructor(
    private readonly db: Kysely<DB>,
    private readonly options: { maxBatch: number } = { maxBatch: 2000 },
  ) {}

  /** Resolves once the event is committed (or found to be a replay); rejects when it was not stored. */
  record(item: PendingEvent): Promise<RecordOutcome> {
    if (this.#closed) return Promise.reject(new WriterClosedError('the server is shutting down'))
    return new Promise<RecordOutcome>((resolve, reject) => {
      this.#queue.push({ item, resolve, reject })
      if (!this.#pumping) this.#pumping = this.#pump()
    })
  }

  /** Refuses new events and waits until every queued one has been answered. */
  async close(): Promise<void> {
    this.#closed = true
    while (this.#pumping) await this.#pumping
  }

  async #pump(): Promise<void> {
    // Yield once so that requests parsed in the same turn of the event loop join the first batch.
    await new Promise<void>((resolve) => setImmediate(resolve))
    try {
      while (this.#queue.length > 0) {
        const batch = this.#queue.splice(0, this.options.maxBatch)
        await this.#commit(batch)
      }
    } finally {
      this.#pumping = null
    }
  }

  async #commit(batch: Waiting[]): Promise<void> {
    try {
      const outcomes = await this.db.transaction().execute((trx) =>
        writeEvents(
          trx,
          batch.map((w) => w.item),
        ),
      )
      this.stats.batches++
      this.stats.events += batch.length
      batch.forEach((w, i) => {
        const outcome = outcomes[i]
        if (outcome) w.resolve(outcome)
        else w.reject(new Error('event write returned no row'))
      })
    } catch (err) {
      if (batch.length === 1 || isDatabaseUnavailable(err)) {
        for (const w of batch) w.reject(err)
        return
      }
      // Something in the batch was refused by the database: write each on its own so that only the
      // offending request fails and its neighbours are stored.
      for (const w of batch) {
        try {
          const [outcome] = await this.db.transaction().execute((trx) => writeEvents(trx, [w.item]))
          if (outcome) w.resolve(outcome)
          else w.reject(new Error('event write returned no row'))
        } catch (single) {
          w.reject(single)
        }
      }
    }
  }
}

function toRow(item: PendingEvent): NewEvent {
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
  }
}

/** Writes the items in order inside one transaction; returns one outcome per item. */
export async function writeEvents(trx: Kysely<DB>, items: PendingEvent[]): Promise<RecordOutcome[]> {
  const outcomes: RecordOutcome[] = []
  let plain: PendingEvent[] = []
  const flushPlain = async () => {
    for (let start = 0; start < plain.length; start += ROWS_PER_INSERT) {
      const chunk = plain.slice(start, start + ROWS_PER_INSERT)
      const rows = await trx.insertInto('events').values(chunk.map(toRow)).returningAll().execute()
      // Ids are handed out in the order of the VALUES list; sort to pair each row with its request.
      rows.sort((a, b) => a.id - b.id)
      for (const row of rows) outcomes.push({ event: row, replayed: false })
    }
    plain = []
  }
  for (const item of items) {
    if (item.idempotencyKey === null) {
      plain.push(item)
      continue
    }
    await flushPlain()
    outcomes.push(await writeIdempotent(trx, item, item.idempotencyKey))
  }
  await flushPlain()
  return outcomes
}

async function writeIdempotent(trx: Kysely<DB>, item: PendingEvent, key: string): Promise<RecordOutcome> {
  // A record older than the window no longer counts: drop it so the key can be claimed again.
  await trx
    .deleteFrom('idempotency_keys')
    .where('account_id', '=', item.accountId)
    .where('idem_key', '=', key)
    .where('created_at', '<=', item.receivedAt - IDEMPOTENCY_WINDOW_MS)
    .execute()
  // Claim the key first. On PostgreSQL a concurrent claim by another instance waits here until the
  // first transaction ends, then sees its row: at most one event per key, across instances.
  const claimed = await trx
    .insertInto('idempotency_keys')
    .values({ account_id: item.accountId, idem_key: key, event_id: null, created_at: item.receivedAt })
    .onConflict((oc) => oc.columns(['account_id', 'idem_key']).doNothing())
    .returning('idem_key')
    .executeTakeFirst()
  if (!claimed) {
    const original = await trx
      .selectFrom('idempotency_keys')
      .innerJoin('events', 'events.id', 'idempotency_keys.event_id')
      .selectAll('events')
      .where('idempotency_keys.account_id', '=', item.accountId)
      .where('idempotency_keys.idem_key', '=', key)
      .executeTakeFirst()
    if (!original) throw new Error('idempotency record without its event')
    return { event: original, replayed: true }
  }
  const event = await trx.insertInto('events').values(toRow(item)).returningAll().executeTakeFirstOrThrow()
  await trx
    .updateTable('idempotency_keys')
    .set({ event_id: event.id })
    .where('account_id', '=', item.accountId)
    .where('idem_key', '=', key)
    .execute()
  return { event, replayed: false }
}
