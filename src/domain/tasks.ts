// The one shape of background work: named tasks run on a timer, stopped on shutdown, counted per run.

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
   * One run. It may return how long to wait before the next one (a task catching up runs again
   * sooner); otherwise `intervalMs`.
   */
  run(): Promise<number | undefined> | number | undefined
}

/** What the runner counts for each task: ready to be exported as metrics. */
export interface TaskCounters {
  runs: number
  failures: number
  /** Failures since the last run that succeeded (0 while the task is healthy). */
  failingFor: number
  lastRunMs: number
}

/** Longest pause after repeated failures. */
const MAX_BACKOFF_MS = 60_000

interface Scheduled {
  task: Task
  counters: TaskCounters
  timer: NodeJS.Timeout | null
  running: Promise<void> | null
}

/**
 * Runs tasks one run at a time each, until stopped. A run that fails is logged once with its
 * error; while it keeps failing it is only counted, and retried less and less often (up to a
 * minute); the run that succeeds again says so in one line. `reportFailure` may take a failure
 * over (the database outage log does): then the runner only counts it.
 */
export class TaskRunner {
  readonly #tasks = new Map<string, Scheduled>()
  #started = false
  #stopped = false

  constructor(
    private readonly log: TaskLogger,
    private readonly reportFailure: (task: string, err: unknown) => boolean = () => false,
  ) {}

  add(task: Task): void {
    if (this.#tasks.has(task.name)) throw new Error(`a task named ${task.name} is already added`)
    const scheduled: Scheduled = {
      task,
      counters: { runs: 0, failures: 0, failingFor: 0, lastRunMs: 0 },
      timer: null,
      running: null,
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

  /** The counters of every task, by name. */
  counters(): Record<string, Readonly<TaskCounters>> {
    return Object.fromEntries([...this.#tasks].map(([name, s]) => [name, { ...s.counters }]))
  }

  #schedule(scheduled: Scheduled, ms: number): void {
    if (this.#stopped) return
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
      if (typeof asked === 'number') next = asked
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
    this.#schedule(scheduled, next)
  }
}
