// Fans newly derived events out to the live streams of this process: one query per wake-up per
// account with listeners (not per listener), in event id order, resumable by event id.
import type { Kysely } from 'kysely'
import type { Database } from '../../db/connect.js'
import type { DB, EventRow } from '../../db/schema.js'
import { rowToDeployment } from '../deployments/derivation.js'
import type { Deployment } from '../deployments/rules.js'
import { LIVE_POLL_MS } from '../pacing.js'
import type { Task } from '../tasks.js'

/** One new event and the deployment it belongs to (null if none holds it). */
export interface LiveItem {
  event: EventRow
  deployment: Deployment | null
}

/**
 * Why a listener is told to reload: it missed more than a replay sends, or it resumed from an id
 * above every event in the database (restored from a backup, or another database), whose events
 * it would otherwise never be sent until the ids caught up.
 */
export type ResetCause = 'missed' | 'ahead'

/** What a stream hands the hub: its account, and how to take what the hub sends. */
export interface LiveListener {
  readonly accountId: number
  /** New items in id order; the listener must not throw or block. */
  deliver(items: readonly LiveItem[]): void
  /** The client should reload (see ResetCause); `through` is where it resumes. */
  reset(through: number, cause: ResetCause): void
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

/** The highest event id in the database, of any account (0 when there is none). */
export async function newestEventId(db: Kysely<DB>): Promise<number> {
  const row = await db
    .selectFrom('events')
    .select((eb) => eb.fn.max('id').as('newest'))
    .executeTakeFirst()
  return Number(row?.newest ?? 0)
}

/** An inclusive range of event ids. */
export interface IdRange {
  from: number
  to: number
}

/**
 * The id ranges derivation has passed while an event there may still commit (on PostgreSQL a
 * transaction that took a lower id can commit after a higher one): such an event, once it commits
 * and is derived, is new although its id is below what was sent.
 */
export async function derivationGaps(db: Kysely<DB>): Promise<IdRange[]> {
  const rows = await db
    .selectFrom('deployment_gaps')
    .select(['from_id', 'to_id'])
    .orderBy('from_id')
    .execute()
  return rows.map((r) => ({ from: Number(r.from_id), to: Number(r.to_id) }))
}

function inRanges(id: number, ranges: readonly IdRange[]): boolean {
  for (const r of ranges) if (id >= r.from && id <= r.to) return true
  return false
}

/** `ranges` cut off above `through`. */
function upTo(ranges: readonly IdRange[], through: number): IdRange[] {
  return ranges.filter((r) => r.from <= through).map((r) => ({ from: r.from, to: Math.min(r.to, through) }))
}

/**
 * Each event with the deployment that holds it. Deployments are read per service and environment:
 * the ones opened by these events and the one before them, which may hold the first.
 */
async function withDeployments(db: Kysely<DB>, accountId: number, events: EventRow[]): Promise<LiveItem[]> {
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

/** A page of a range of events: the items to send, and how far the page read (for the next). */
export interface LivePage {
  items: LiveItem[]
  /** Rows read, those left out included. */
  read: number
  /** The highest id read, or null when the page was empty. */
  lastId: number | null
}

/**
 * The account's events in (after, through], oldest first, at most `limit` read, each with the
 * deployment that holds it; those in `pending` (derivation gaps: they go out once derived) left out.
 */
export async function liveItems(
  db: Kysely<DB>,
  accountId: number,
  after: number,
  through: number,
  limit: number,
  pending: readonly IdRange[] = [],
): Promise<LivePage> {
  const events = await db
    .selectFrom('events')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('id', '>', after)
    .where('id', '<=', through)
    .orderBy('id')
    .limit(limit)
    .execute()
  const items = await withDeployments(
    db,
    accountId,
    pending.length === 0 ? events : events.filter((e) => !inRanges(Number(e.id), pending)),
  )
  const last = events.at(-1)
  return { items, read: events.length, lastId: last ? Number(last.id) : null }
}

/** The account's events in `ranges` that are not in `pending`, oldest first, with deployments. */
async function lateItems(
  db: Kysely<DB>,
  accountId: number,
  ranges: readonly IdRange[],
  pending: readonly IdRange[],
): Promise<LiveItem[]> {
  if (ranges.length === 0) return []
  const events = await db
    .selectFrom('events')
    .selectAll()
    .where('account_id', '=', accountId)
    .where((eb) => eb.or(ranges.map((r) => eb.between('id', r.from, r.to))))
    .orderBy('id')
    .execute()
  const arrived = events.filter((e) => !inRanges(Number(e.id), pending))
  return arrived.length === 0 ? [] : withDeployments(db, accountId, arrived)
}

export interface LiveHubOptions {
  onError?: (err: unknown) => void
}

/**
 * One per process. `wake()` when something may have been derived (here, or on another instance);
 * the hub reads how far derivation got and sends each account's new events to its listeners.
 * Work is serialised: a listener joins (with its replay) between two wake-ups, so it misses nothing
 * and gets nothing twice. Notices can be missed: `pollTask` looks now and then as well.
 */
export class LiveHub {
  readonly #listeners = new Map<number, Set<LiveListener>>()
  /** The last event id each listener was sent. */
  readonly #cursors = new Map<LiveListener, number>()
  /** Every derived event up to this id has been sent; null until first read. */
  #sent: number | null = null
  /** Derivation gaps at or below #sent: an event that commits in one goes out once derived. */
  #gaps: IdRange[] = []
  #chain: Promise<void> = Promise.resolve()
  #wakePending = false
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
  join(listener: LiveListener, resumeFrom: number | null): Promise<void> {
    return this.#serial(async () => {
      // With nobody listening the hub stopped following: a first stream starts from now.
      if (this.#listeners.size === 0) this.#sent = null
      const through = await this.#sentThrough()
      let since = resumeFrom
      // Above `through` is normal (another instance had sent further), but not above every event
      // there is: those ids came from another history (a restored backup). Following on from them
      // would skip every new event until the ids caught up.
      if (since !== null && since > through && since > (await newestEventId(this.database.db))) {
        listener.reset(through, 'ahead')
        since = through
      }
      if (since !== null && since < through) {
        // Events in a gap are not replayed: they go out to every listener once derived.
        const { items: missed, read } = await liveItems(
          this.database.db,
          listener.accountId,
          since,
          through,
          MAX_REPLAY + 1,
          this.#gaps,
        )
        if (read > MAX_REPLAY) listener.reset(through, 'missed')
        else if (missed.length > 0) listener.deliver(missed)
      }
      const set = this.#listeners.get(listener.accountId) ?? new Set()
      set.add(listener)
      this.#listeners.set(listener.accountId, set)
      // An id from the future (another instance that had sent further) is not replayed twice later.
      this.#cursors.set(listener, Math.max(through, since ?? 0))
    })
  }

  leave(listener: LiveListener): void {
    const set = this.#listeners.get(listener.accountId)
    if (!set) return
    set.delete(listener)
    this.#cursors.delete(listener)
    if (set.size === 0) this.#listeners.delete(listener.accountId)
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

  /**
   * The fallback look, on the task runner: every `intervalMs` while listeners are connected (with
   * none it reads nothing), a run that ends once the look is done.
   */
  pollTask(intervalMs = LIVE_POLL_MS): Task {
    return {
      name: 'live-poll',
      intervalMs,
      run: async () => {
        this.wake()
        await this.#chain
        return undefined
      },
    }
  }

  /** Wakes no more; the streams themselves are ended by their owner. */
  close(): void {
    this.#closed = true
  }

  /**
   * Where sending stands; the first time, the current `through` (a stream starts from now) and the
   * gaps below it (read after it: derivation writes both in one transaction, and a gap it records
   * later lies above this `through`).
   */
  async #sentThrough(): Promise<number> {
    if (this.#sent === null) {
      const through = await derivedThrough(this.database.db)
      this.#gaps = upTo(await derivationGaps(this.database.db), through)
      this.#sent = through
    }
    return this.#sent
  }

  async #send(): Promise<void> {
    if (this.#listeners.size === 0) return
    const from = await this.#sentThrough()
    const through = await derivedThrough(this.database.db)
    // Read after `through`: a gap recorded by a later run lies above it, and is cut off below.
    const gaps = await derivationGaps(this.database.db)
    // Events that committed late in a gap already passed, and are derived now.
    if (this.#gaps.length > 0) {
      for (const [accountId, set] of this.#listeners) {
        const late = await lateItems(this.database.db, accountId, this.#gaps, gaps)
        if (late.length > 0) for (const listener of [...set]) listener.deliver(late)
      }
    }
    // A rebuild starts `through` again from 0: streams go on from the highest id sent.
    if (through <= from) {
      this.#gaps = upTo(gaps, from)
      return
    }
    for (const [accountId, set] of this.#listeners) {
      let after = from
      for (;;) {
        const page = await liveItems(this.database.db, accountId, after, through, PAGE, gaps)
        const items = page.items
        const last = items.at(-1)
        if (last)
          for (const listener of [...set]) {
            const cursor = this.#cursors.get(listener) ?? 0
            const fresh = items.filter((item) => item.event.id > cursor)
            if (fresh.length > 0) listener.deliver(fresh)
            this.#cursors.set(listener, Math.max(cursor, last.event.id))
          }
        if (page.read < PAGE || page.lastId === null) break
        after = page.lastId
      }
    }
    this.#gaps = upTo(gaps, through)
    this.#sent = through
  }

  #serial(work: () => Promise<void>): Promise<void> {
    const run = this.#chain.then(work)
    this.#chain = run.catch((err: unknown) => this.options.onError?.(err))
    return run
  }
}
