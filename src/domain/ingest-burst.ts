// Background work that can wait (chaining, deriving deployments) stands aside while a burst of
// ingest lasts: on two cores its CPU would otherwise come out of the requests' (deriving deployments
// at full pace halved POST /deploy on PostgreSQL in `npm run bench`). It is bounded: once it has
// waited MAX_YIELD_MS since it first waited with work left (one long burst, or bursts with pauses
// too short to catch up in), the work catches up at its usual pace and waits again only once a run
// no longer finds more than it can take, so it is never more than MAX_YIELD_MS and one catch-up
// behind.

/**
 * Events a second stored by this instance above which background work waits: far above what
 * pipelines send (a few a minute), far below what a burst or a load test sends.
 */
export const BUSY_INGEST = 500
/** The longest background work waits for one burst before it catches up anyway. */
export const MAX_YIELD_MS = 30_000
/** While a burst lasts, how soon the next look comes. */
export const LOOK_AGAIN_MS = 250

export interface BurstOptions {
  /**
   * Events this instance has stored so far (a running count); while they arrive faster than
   * `busyIngest` a second, the work waits. Without it only the event loop is looked at.
   */
  storedEvents?: () => number
  /** The ingest rate, events a second, above which the work waits (BUSY_INGEST). */
  busyIngest?: number
  /**
   * Event-loop utilisation (0–1) above which the work waits too; unset, the loop is not looked at.
   * On SQLite a burst saturates the loop; on PostgreSQL the database server does much of the work of
   * ingest, so a burst seldom does, which is why the ingest rate is looked at as well.
   */
  busyLoop?: number
  /** The longest the work waits for one burst (MAX_YIELD_MS). */
  maxYieldMs?: number
}

/** One task's view of the bursts: ask `wait()` at the start of each turn, tell `ran()` after. */
export class IngestBurst {
  #loop = performance.eventLoopUtilization()
  #stored: number
  #lookedAt = performance.now()
  #yieldingSince: number | null = null
  // Waited its bound under a burst: catching up until a run is no longer full.
  #catchingUp = false
  #busy = false

  constructor(private readonly options: BurstOptions = {}) {
    this.#stored = options.storedEvents?.() ?? 0
  }

  /** How long to wait before looking again while a burst lasts, or null: run now. */
  wait(): number | null {
    const sinceLast = performance.eventLoopUtilization(this.#loop)
    this.#loop = performance.eventLoopUtilization()
    const now = performance.now()
    const storedNow = this.options.storedEvents?.() ?? 0
    const ingestRate = now > this.#lookedAt ? ((storedNow - this.#stored) * 1000) / (now - this.#lookedAt) : 0
    this.#stored = storedNow
    this.#lookedAt = now
    const busyLoop = this.options.busyLoop
    const busy =
      (busyLoop !== undefined && sinceLast.utilization > busyLoop) ||
      ingestRate > (this.options.busyIngest ?? BUSY_INGEST)
    this.#busy = busy
    if (!this.#catchingUp && busy) {
      // The bound counts from the first wait while work is left: a pause between bursts in which a
      // run or two cannot clear it does not start it again.
      this.#yieldingSince ??= now
      if (now - this.#yieldingSince < (this.options.maxYieldMs ?? MAX_YIELD_MS)) return LOOK_AGAIN_MS
      this.#catchingUp = true
    }
    return null
  }

  /**
   * Whether the last look found a burst, waiting or catching up: work that could go elsewhere (a
   * run sooner than the task's) should leave it to the task while this holds. It is the last look's
   * verdict: a task looks at least once a second while its runs succeed, and while they fail only as
   * often as the runner retries them.
   */
  get busy(): boolean {
    return this.#busy
  }

  /**
   * After a turn that ran: whether more was left than the run could take (a full batch). A catch-up,
   * and the bound's clock, last until a run is not full.
   */
  ran(more: boolean): void {
    if (more) return
    this.#catchingUp = false
    this.#yieldingSince = null
  }
}
