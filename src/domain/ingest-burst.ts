// The task runner's burst policy (tasks.ts): background work that can wait (deriving deployments,
// chaining) stands aside while a burst of ingest lasts; on two cores its CPU would otherwise come out
// of the requests' (deriving deployments at full pace halved POST /deploy on PostgreSQL in
// `npm run bench`). One load signal says what a burst is: events stored by this instance faster than
// BUSY_INGEST a second, or an event loop busier than BUSY_LOOP, since the task last looked. It is
// bounded: once a task has waited MAX_YIELD_MS since it first waited with work left (one long burst,
// or bursts with pauses too short to catch up in), it catches up at its usual pace and waits again
// only once a run no longer finds more than it can take, so it is never more than MAX_YIELD_MS and
// one catch-up behind.
import { BUSY_INGEST, BUSY_LOOP, LOOK_AGAIN_MS, MAX_YIELD_MS } from './pacing.js'

export interface BurstOptions {
  /** The ingest rate, events a second, above which work waits (BUSY_INGEST). */
  busyIngest?: number
  /** Event-loop utilisation (0–1) above which work waits (BUSY_LOOP); above 1 the loop never counts. */
  busyLoop?: number
  /** The longest work waits for one burst (MAX_YIELD_MS). */
  maxYieldMs?: number
}

/** One per runner: counts what is stored, and hands each task that stands aside a gate of its own. */
export class BurstPolicy {
  #stored = 0
  #busy = false
  readonly busyIngest: number
  readonly busyLoop: number
  readonly maxYieldMs: number

  constructor(options: BurstOptions = {}) {
    this.busyIngest = options.busyIngest ?? BUSY_INGEST
    this.busyLoop = options.busyLoop ?? BUSY_LOOP
    this.maxYieldMs = options.maxYieldMs ?? MAX_YIELD_MS
  }

  /** Events this instance stored (EventWriter.onCommit): the ingest rate is counted from them. */
  stored(events: number): void {
    this.#stored += events
  }

  /** Events stored so far (a running count). */
  get storedSoFar(): number {
    return this.#stored
  }

  /**
   * Whether the last look, by any task, found a burst, waiting or catching up: a run asked for
   * sooner than a task's turn is left to that turn while this holds. Tasks that stand aside look at
   * least once a second while their runs succeed, and while they fail as often as they are retried.
   */
  get busy(): boolean {
    return this.#busy
  }

  /** A task's view of the bursts: ask `wait()` at the start of each turn, tell `ran()` after. */
  gate(): BurstGate {
    return new BurstGate(this, (busy) => {
      this.#busy = busy
    })
  }
}

/** The load since the task last looked, and the task's own bound. */
export class BurstGate {
  #loop = performance.eventLoopUtilization()
  #stored: number
  #lookedAt = performance.now()
  #yieldingSince: number | null = null
  // Waited its bound under a burst: catching up until a run is no longer full.
  #catchingUp = false

  constructor(
    private readonly policy: BurstPolicy,
    private readonly verdict: (busy: boolean) => void,
  ) {
    this.#stored = policy.storedSoFar
  }

  /** How long to wait before looking again while a burst lasts, or null: run now. */
  wait(): number | null {
    const sinceLast = performance.eventLoopUtilization(this.#loop)
    this.#loop = performance.eventLoopUtilization()
    const now = performance.now()
    const storedNow = this.policy.storedSoFar
    const ingestRate = now > this.#lookedAt ? ((storedNow - this.#stored) * 1000) / (now - this.#lookedAt) : 0
    this.#stored = storedNow
    this.#lookedAt = now
    const busy = sinceLast.utilization > this.policy.busyLoop || ingestRate > this.policy.busyIngest
    this.verdict(busy)
    if (!this.#catchingUp && busy) {
      // The bound counts from the first wait while work is left: a pause between bursts in which a
      // run or two cannot clear it does not start it again.
      this.#yieldingSince ??= now
      if (now - this.#yieldingSince < this.policy.maxYieldMs) return LOOK_AGAIN_MS
      this.#catchingUp = true
    }
    return null
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
