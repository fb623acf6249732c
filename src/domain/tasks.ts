// The one shape of background work: named tasks run on a timer, stopped on shutdown, counted per run,
// and those that can wait stand aside while a burst of ingest lasts (the burst policy, ingest-burst.ts).
import { type BurstGate, BurstPolicy } from './ingest-burst.js'
import { MAX_BACKOFF_MS } from './pacing.js'

/** The part of a pino (Fastify) logger that the runner writes to. */
export interface TaskLogger {
  debug(fields: Record<string, unknown>, message: string): void
  info(fields: Record<string, unknown>, message: string): void
  warn(fields: Record<string, unknown>, message: string): void
}

export interface Task {
  /** Short and stable: it names the task in log lines and counters. */
  readonly name: string
  /** Milliseconds between runs; before the first one too, unless `firstRunMs` says otherwise. */
  readonly intervalMs: number
  readonly firstRunMs?: number
  /**
   * Work that can wait while a burst of ingest lasts: the runner's burst policy holds its runs back
   * (at most its bound; ingest-burst.ts), and a run asked for sooner (`runSoon`) is left to its turn
   * meanwhile. Its runs say whether they left work behind (`Ran`).
   */
  readonly standsAside?: boolean
  /**
   * One run. It may return how long to wait before the next one (a task catching up runs again
   * sooner); otherwise `intervalMs`.
   */
  run(): Promise<RunResult> | RunResult
}

/** A run's answer that says whether work was left: more than the run could take (a full batch). */
export interface Ran {
  readonly nextMs: number | undefined
  readonly more: boolean
}

export type RunResult = number | undefined | Ran

/**
 * The task as the runner runs it when it stands aside: each turn first asks the gate, and waits
 * LOOK_AGAIN_MS instead of running while a burst lasts (within the bound).
 */
export function standingAside(task: Task, gate: BurstGate): Task {
  return {
    ...task,
    run: async () => {
      const wait = gate.wait()
      if (wait !== null) return wait
      const result = await task.run()
      if (typeof result === 'object') {
        gate.ran(result.more)
        return result.nextMs
      }
      gate.ran(false)
      return result
    },
  }
}

/** What the runner counts for each task: ready to be exported as metrics. */
export interface TaskCounters {
  runs: number
  failures: number
  /** Failures since the last run that succeeded (0 while the task is healthy). */
  failingFor: number
  lastRunMs: number
}

interface Scheduled {
  task: Task
  counters: TaskCounters
  timer: NodeJS.Timeout | null
  /** When the timer fires (performance.now()). */
  dueAt: number
  running: Promise<void> | null
  /** A run was asked for within this many milliseconds while one was running. */
  soonMs: number | null
}

/**
 * Runs tasks one run at a time each, until stopped. A run that fails is logged once with its
 * error; while it keeps failing it is only counted, and retried less and less often (up to a
 * minute); the run that succeeds again says so in one line. `reportFailure` may take a failure
 * over (the database outage log does): then the runner only counts it. Tasks that stand aside
 * (`standsAside`) run under `burst`, which the app tells of every event stored.
 */
export class TaskRunner {
  readonly #tasks = new Map<string, Scheduled>()
  #started = false
  #stopped = false

  constructor(
    private readonly log: TaskLogger,
    private readonly reportFailure: (task: string, err: unknown) => boolean = () => false,
    readonly burst: BurstPolicy = new BurstPolicy(),
  ) {}

  add(task: Task): void {
    if (this.#tasks.has(task.name)) throw new Error(`a task named ${task.name} is already added`)
    const scheduled: Scheduled = {
      task: task.standsAside ? standingAside(task, this.burst.gate()) : task,
      counters: { runs: 0, failures: 0, failingFor: 0, lastRunMs: 0 },
      timer: null,
      dueAt: 0,
      running: null,
      soonMs: null,
    }
    this.#tasks.set(task.name, scheduled)
    if (this.#started) this.#schedule(scheduled, task.firstRunMs ?? task.intervalMs)
  }

  start(): void {
    if (this.#started || this.#stopped) return
    this.#started = true
    for (const scheduled of this.#tasks.values()) {
      this.#schedule(scheduled, scheduled.task.firstRunMs ?? scheduled.task.intervalMs)
    }
  }

  /** Stops every task and waits for the runs in progress to end. */
  async stop(): Promise<void> {
    this.#stopped = true
    const running: Promise<void>[] = []
    for (const scheduled of this.#tasks.values()) {
      if (scheduled.timer) clearTimeout(scheduled.timer)
      scheduled.timer = null
      if (scheduled.running) running.push(scheduled.running)
    }
    await Promise.all(running)
  }

  /**
   * Asks for a run of `name` within `ms`, sooner than its turn (live updates after a commit); asks
   * that come while one is due sooner share it, and one that comes during a run has the next follow
   * within `ms`. Left to the task's turn while it fails (it waits its backoff) and, for a task that
   * stands aside, while a burst lasts: the task then takes the burst in fewer, larger runs.
   */
  runSoon(name: string, ms: number): void {
    const scheduled = this.#tasks.get(name)
    if (!scheduled || !this.#started || this.#stopped) return
    if (scheduled.counters.failingFor > 0) return
    if (scheduled.task.standsAside && this.burst.busy) return
    // The timer goes when a run starts and comes back as it ends: without one, a run is under way.
    if (!scheduled.timer) {
      scheduled.soonMs = Math.min(scheduled.soonMs ?? ms, ms)
      return
    }
    if (scheduled.dueAt - performance.now() <= ms) return
    clearTimeout(scheduled.timer)
    this.#schedule(scheduled, ms)
  }

  /** The counters of every task, by name. */
  counters(): Record<string, Readonly<TaskCounters>> {
    return Object.fromEntries([...this.#tasks].map(([name, s]) => [name, { ...s.counters }]))
  }

  #schedule(scheduled: Scheduled, ms: number): void {
    if (this.#stopped) return
    scheduled.dueAt = performance.now() + ms
    scheduled.timer = setTimeout(() => {
      scheduled.timer = null
      scheduled.running = this.#run(scheduled).finally(() => {
        scheduled.running = null
      })
    }, ms)
    // Never the reason the process stays up.
    scheduled.timer.unref()
  }

  async #run(scheduled: Scheduled): Promise<void> {
    const { task, counters } = scheduled
    const started = Date.now()
    let next = task.intervalMs
    try {
      const asked = await task.run()
      // A task that stands aside answered standingAside, which read its Ran; of any other's Ran only
      // the pause counts.
      const nextMs = typeof asked === 'object' ? asked.nextMs : asked
      if (typeof nextMs === 'number') next = nextMs
      if (scheduled.soonMs !== null) next = Math.min(next, scheduled.soonMs)
      counters.runs++
      counters.lastRunMs = Date.now() - started
      if (counters.failingFor > 0) {
        this.log.info(
          { task: task.name, failures: counters.failingFor },
          `background task ${task.name} works again after ${counters.failingFor} failed runs`,
        )
      }
      counters.failingFor = 0
      this.log.debug({ task: task.name, ms: counters.lastRunMs, runs: counters.runs }, 'background task ran')
    } catch (err) {
      counters.runs++
      counters.failures++
      counters.failingFor++
      counters.lastRunMs = Date.now() - started
      if (!this.reportFailure(task.name, err) && counters.failingFor === 1) {
        this.log.warn(
          { task: task.name, err },
          `background task ${task.name} failed; retrying (further failures are counted, not logged)`,
        )
      }
      next = Math.min(task.intervalMs * 2 ** counters.failingFor, MAX_BACKOFF_MS)
    }
    scheduled.soonMs = null
    this.#schedule(scheduled, next)
  }
}
