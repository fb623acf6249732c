// Records events durably with group commit: requests that arrive while a commit is under way are
// written together in the next transaction, so many requests share one fsync.
import { isDatabaseUnavailable } from '../database-errors.js'
import type { EventStore, PendingEvent, RecordOutcome } from './store.js'

export type { PendingEvent, RecordOutcome } from './store.js'

interface Waiting {
  item: PendingEvent
  resolve: (outcome: RecordOutcome) => void
  reject: (err: unknown) => void
}

export class WriterClosedError extends Error {
  override readonly name = 'WriterClosedError'
}

export class EventWriter {
  readonly #queue: Waiting[] = []
  #pumping: Promise<void> | null = null
  #closed = false
  /** Counters for tests and metrics: transactions committed and events they held. */
  readonly stats = { batches: 0, events: 0 }
  readonly #listeners: Array<(outcomes: readonly RecordOutcome[]) => void> = []

  constructor(
    private readonly store: EventStore,
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

  /**
   * Calls `listener` after each committed transaction with its outcomes (stored events, replays and
   * refused repeats alike), before the requests are answered. A listener must not throw or block:
   * metrics count here, and live updates learn that something arrived.
   */
  onCommit(listener: (outcomes: readonly RecordOutcome[]) => void): void {
    this.#listeners.push(listener)
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
      const outcomes = await this.store.writeBatch(batch.map((w) => w.item))
      this.stats.batches++
      this.stats.events += batch.length
      this.#tell(outcomes)
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
          const [outcome] = await this.store.writeBatch([w.item])
          if (outcome) this.#tell([outcome])
          if (outcome) w.resolve(outcome)
          else w.reject(new Error('event write returned no row'))
        } catch (single) {
          w.reject(single)
        }
      }
    }
  }

  #tell(outcomes: readonly RecordOutcome[]): void {
    for (const listener of this.#listeners) listener(outcomes)
  }
}
