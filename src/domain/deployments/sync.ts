// Keeps the derived deployments in step with the events: a background task that derives what
// arrived, and a wait that every read of deployments calls first, so an event the server has
// acknowledged shows on the next page or API answer (read-your-writes).
import type { Database } from '../../db/connect.js'
import { DEPLOYMENTS_INTERVAL_MS, MIN_BACKLOG_PAUSE_MS } from '../pacing.js'
import type { Task } from '../tasks.js'
import { CATCH_UP_BATCH, type CatchUpResult, catchUpDeployments, deploymentsBehind } from './store.js'

/**
 * Events per run of the background task and of a read that finds events waiting. A run costs about
 * one write per index page it dirtied, and with events spread over many services nearly every event
 * of a small run dirties pages of its own; a run of 5000 costs about half as much per event as one of
 * 1000, and still holds the write lock (and, on SQLite, the event loop) for only tens of milliseconds.
 */
const RUN_BATCH = 5 * CATCH_UP_BATCH

/** Runs a reader may wait for before it answers with what is derived so far (50,000 events). */
const MAX_RUNS_PER_READ = 10

/** The background task's name: live updates ask the runner for a run of it by name. */
export const DEPLOYMENTS_TASK = 'deployments'

export class DeploymentSync {
  #running: Promise<boolean> | null = null
  readonly #listeners: Array<(result: CatchUpResult) => void> = []

  constructor(private readonly database: Database) {}

  /**
   * Derives the events that wait, if any, before a read. Concurrent readers share one run; a run
   * that began before the reader's event committed is followed by another. A backlog bigger than
   * MAX_RUNS_PER_READ batches (a rebuild in progress) is left to the background task.
   */
  async current(): Promise<void> {
    for (let attempt = 0; attempt < 2; attempt++) {
      if (!(await deploymentsBehind(this.database.db))) return
      await this.catchUp(MAX_RUNS_PER_READ, RUN_BATCH)
    }
  }

  /**
   * Calls `listener` after each committed run of this process that derived something (live updates
   * and metrics). A listener must not throw or block.
   */
  onDerived(listener: (result: CatchUpResult) => void): void {
    this.#listeners.push(listener)
  }

  /**
   * Derives up to `runs` batches of at most `limit` events; joins the run in progress rather than
   * starting a second. True when the last batch was full: more events waited beyond it.
   */
  catchUp(runs: number, limit = CATCH_UP_BATCH): Promise<boolean> {
    if (this.#running) return this.#running
    const run = (async () => {
      try {
        let more = false
        for (let i = 0; i < runs; i++) {
          const result = await catchUpDeployments(this.database, { limit })
          if (result.events > 0 || result.regrouped > 0)
            for (const listener of this.#listeners) listener(result)
          more = result.more
          if (!more) break
        }
        return more
      } finally {
        this.#running = null
      }
    })()
    this.#running = run
    return run
  }

  /**
   * The background task: a run a second while idle; while a backlog remains, the next run follows
   * after twice as long as this one took (at least MIN_BACKLOG_PAUSE_MS), so deriving takes at most
   * about a third of the event loop from ingest under load. It stands aside while a burst of ingest
   * lasts (the runner's burst policy, ingest-burst.ts), for at most MAX_YIELD_MS, and derives the
   * burst after it in large runs: deriving at full pace during one halved POST /deploy on PostgreSQL.
   * Reads derive what they need themselves, so pages and the API are never behind; live updates
   * (which ask the runner for a run soon after a commit), webhooks and metrics follow the task.
   */
  task(): Task {
    return {
      name: DEPLOYMENTS_TASK,
      intervalMs: DEPLOYMENTS_INTERVAL_MS,
      firstRunMs: 0,
      standsAside: true,
      run: async () => {
        // Reads may have derived what the task waited for.
        if (!(await deploymentsBehind(this.database.db))) return { nextMs: undefined, more: false }
        const started = performance.now()
        // A catch-up past the burst bound lasts while runs come back full, not while anything at all
        // waits: under steady ingest a little always has arrived since the run read its batch.
        const more = await this.catchUp(1, RUN_BATCH)
        if (!(await deploymentsBehind(this.database.db))) return { nextMs: undefined, more }
        return { nextMs: Math.max(MIN_BACKLOG_PAUSE_MS, 2 * (performance.now() - started)), more }
      },
    }
  }
}
