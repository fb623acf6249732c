// How fast background work goes, in one place: how often each task runs, how it spaces its runs
// while it catches up, and when it stands aside for a burst of ingest (ingest-burst.ts). The task
// runner (tasks.ts) and the tasks read them from here; each says why it has its value.

/**
 * Events a second stored by this instance above which background work that can wait stands aside:
 * far above what pipelines send (a few a minute), far below what a burst or a load test sends.
 */
export const BUSY_INGEST = 500
/**
 * Event-loop utilisation (0–1) above which it stands aside too. On SQLite a burst saturates the
 * loop; on PostgreSQL the database server does much of the work of ingest, so a burst seldom does,
 * which is why the ingest rate is looked at as well.
 */
export const BUSY_LOOP = 0.85
/** The longest background work waits for one burst before it catches up anyway. */
export const MAX_YIELD_MS = 30_000
/** While a burst lasts, how soon a task that stands aside looks again. */
export const LOOK_AGAIN_MS = 250

/** The longest pause between the runs of a task that keeps failing. */
export const MAX_BACKOFF_MS = 60_000

/** Deriving deployments, the chain and webhook delivery: a run a second while idle. */
export const DEPLOYMENTS_INTERVAL_MS = 1000
export const CHAIN_INTERVAL_MS = 1000
export const WEBHOOK_INTERVAL_MS = 1000

/**
 * While events still wait after a deployments run, the shortest pause before the next: long enough
 * that under steady ingest each run takes what arrived over a few hundred milliseconds, not the few
 * events of the last instant (reads do not wait for it: they derive what they need themselves).
 */
export const MIN_BACKLOG_PAUSE_MS = 200
/** While rows wait to be chained, the shortest pause before the next run. */
export const MIN_CHAIN_PAUSE_MS = 20
/** How soon a gap in the ids that the chain waits at is looked at again. */
export const HOLE_SETTLE_MS = 100

/**
 * After a local commit, how soon live updates have the deployments task run (rather than at its
 * next turn): events reach open streams within about this, and a flurry of commits shares one run.
 */
export const LIVE_DERIVE_DELAY_MS = 100
/** The live hub's fallback look for what was derived elsewhere (SHIPLOG_STREAM_POLL_MS's default). */
export const LIVE_POLL_MS = 2000
