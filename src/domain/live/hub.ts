// Fans newly derived events out to the live streams of this process: one query per wake-up per
// account with listeners (not per listener), in event id order, resumable by event id.
import type { Kysely } from 'kysely'
import type { Database } from '../../db/connect.js'
import type { DB, EventRow } from '../../db/schema.js'
import { rowToDeployment } from '../deployments/derivation.js'
import type { Deployment } from '../deployments/rules.js'

/** One new event and the deployment it belongs to (null if none holds it). */
export interface LiveItem {
  event: EventRow
  deployment: Deployment | null
}

/** What a stream hands the hub: its account, and how to take what the hub sends. */
export interface LiveListener {
  readonly accountId: number
  /** New items in id order; the listener must not throw or block. */
  deliver(items: readonly LiveItem[]): void
  /** More was missed than a replay sends: the client should reload; `through` is where it resumes. */
  reset(through: number): void
}

/** Most events replayed to a client that resumes; beyond, it is told to reload (`reset`). */
export const MAX_REPLAY = 1000
/** Events read per query while catching up. */
const PAGE = 500

/** Every event up to this id is derived: what the live streams may send. */
export async function derivedThrough(db: Kysely<DB>): Promise<number> {
  const row = await db
    .selectFrom('deployments_progress')
    .select('through')
    .where('id', '=', 1)
    .executeTakeFirst()
  return Number(row?.through ?? 0)
}

/**
 * The account's events in (after, through], oldest first, at most `limit`, each with the deployment
 * that holds it. Deployments are read per service and environment: the ones opened by these events
 * and the one before them, which may hold the first.
 */
export async function liveItems(
  db: Kysely<DB>,
  accountId: number,
  after: number,
  through: number,
  limit: number,
): Promise<LiveItem[]> {
  const events = await db
    .selectFrom('events')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('id', '>', after)
    .where('id', '<=', through)
    .orderBy('id')
    .limit(limit)
    .execute()
  const groups = new Map<string, EventRow[]>()
  for (const event of events) {
    const key = JSON.stringify([event.service, event.environment])
    const group = groups.get(key)
    if (group) group.push(event)
    else groups.set(key, [event])
  }
  const holder = new Map<number, Deployment>()
  for (const group of groups.values()) {
    const first = group[0]
    const last = group.at(-1)
    if (!first || !last) continue
    const rows = await db
      .selectFrom('deployments')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('service', '=', first.service)
      .where('environment', '=', first.environment)
      .where('id', '<=', last.id)
      .orderBy('id', 'desc')
      .limit(group.length + 1)
      .execute()
    const deployments = rows.map(rowToDeployment)
    for (const event of group) {
      const found = deployments.find((d) => d.eventIds.includes(event.id))
      if (found) holder.set(event.id, found)
    }
  }
  return events.map((event) => ({ event, deployment: holder.get(event.id) ?? null }))
}

export interface LiveHubOptions {
  /** Fallback poll while listeners are connected (notices can be missed). */
  pollMs?: number
  onError?: (err: unknown) => void
}

/**
 * One per process. `wake()` when something may have been derived (here, or on another instance);
 * the hub reads how far derivation got and sends each account's new events to its listeners.
 * Work is serialised: a listener joins (with its replay) between two wake-ups, so it misses nothing
 * and gets nothing twice.
 */
export class LiveHub {
  readonly #listeners = new Map<number, Set<LiveListener>>()
  /** The last event id each listener was sent. */
  readonly #cursors = new Map<LiveListener, number>()
  /** Every derived event up to this id has been sent; null until first read. */
  #sent: number | null = null
  #chain: Promise<void> = Promise.resolve()
  #wakePending = false
  #poll: NodeJS.Timeout | null = null
  #closed = false

  constructor(
    private readonly database: Database,
    private readonly options: LiveHubOptions = {},
  ) {}

  /** Connected listeners (for metrics). */
  clients(): number {
    let n = 0
    for (const set of this.#listeners.values()) n += set.size
    return n
  }

  clientsOf(accountId: number): number {
    return this.#listeners.get(accountId)?.size ?? 0
  }

  /**
   * Adds a listener. With `since` (the last event id it saw) it first gets what it missed, or a
   * reset when that is more than MAX_REPLAY events. Resolves once it is live.
   */
  join(listener: LiveListener, since: number | null): Promise<void> {
    return this.#serial(async () => {
      // With nobody listening the hub stopped following: a first stream starts from now.
      if (this.#listeners.size === 0) this.#sent = await derivedThrough(this.database.db)
      const through = await this.#sentThrough()
      if (since !== null && since < through) {
        const missed = await liveItems(this.database.db, listener.accountId, since, through, MAX_REPLAY + 1)
        if (missed.length > MAX_REPLAY) listener.reset(through)
        else if (missed.length > 0) listener.deliver(missed)
      }
      const set = this.#listeners.get(listener.accountId) ?? new Set()
      set.add(listener)
      this.#listeners.set(listener.accountId, set)
      // An id from the future (another instance that had sent further) is not replayed twice later.
      this.#cursors.set(listener, Math.max(through, since ?? 0))
      this.#startPolling()
    })
  }

  leave(listener: LiveListener): void {
    const set = this.#listeners.get(listener.accountId)
    if (!set) return
    set.delete(listener)
    this.#cursors.delete(listener)
    if (set.size === 0) this.#listeners.delete(listener.accountId)
    if (this.#listeners.size === 0) this.#stopPolling()
  }

  /** Something may have been derived: look (coalesced; at most one look waits behind the current one). */
  wake(): void {
    if (this.#closed || this.#listeners.size === 0 || this.#wakePending) return
    this.#wakePending = true
    void this.#serial(async () => {
      this.#wakePending = false
      await this.#send()
    })
  }

  /** Stops polling; the streams themselves are ended by their owner. */
  close(): void {
    this.#closed = true
    this.#stopPolling()
  }

  /** Where sending stands; the first time, the current `through` (a stream starts from now). */
  async #sentThrough(): Promise<number> {
    this.#sent ??= await derivedThrough(this.database.db)
    return this.#sent
  }

  async #send(): Promise<void> {
    if (this.#listeners.size === 0) return
    const from = await this.#sentThrough()
    const through = await derivedThrough(this.database.db)
    // A rebuild starts `through` again from 0: streams go on from the highest id sent.
    if (through <= from) return
    for (const [accountId, set] of this.#listeners) {
      let after = from
      for (;;) {
        const items = await liveItems(this.database.db, accountId, after, through, PAGE)
        const last = items.at(-1)
        if (last)
          for (const listener of [...set]) {
            const cursor = this.#cursors.get(listener) ?? 0
            const fresh = items.filter((item) => item.event.id > cursor)
            if (fresh.length > 0) listener.deliver(fresh)
            this.#cursors.set(listener, Math.max(cursor, last.event.id))
          }
        if (items.length < PAGE || !last) break
        after = last.event.id
      }
    }
    this.#sent = through
  }

  #serial(work: () => Promise<void>): Promise<void> {
    const run = this.#chain.then(work)
    this.#chain = run.catch((err: unknown) => this.options.onError?.(err))
    return run
  }

  #startPolling(): void {
    if (this.#poll || this.#closed) return
    this.#poll = setInterval(() => this.wake(), this.options.pollMs ?? 2000)
    this.#poll.unref()
  }

  #stopPolling(): void {
    if (this.#poll) clearInterval(this.#poll)
    this.#poll = null
  }
}
