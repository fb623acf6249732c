// Per-API-key fixed-window rate limits, in memory or shared by every instance through Redis.
//
// @fastify/rate-limit keeps a separate counter per route, but one key's budget must cover all
// three ingest routes together, so the counting lives here.
import type { Redis } from 'ioredis'

export interface WindowCount {
  /** Requests counted in the current window, this one included. */
  count: number
  /** Milliseconds until the window ends. */
  resetMs: number
}

export interface RateLimitStore {
  hit(key: string, windowMs: number): Promise<WindowCount>
}

export class MemoryRateLimitStore implements RateLimitStore {
  readonly #windows = new Map<string, { count: number; endsAt: number }>()
  #lastSweep = Date.now()

  async hit(key: string, windowMs: number): Promise<WindowCount> {
    const now = Date.now()
    if (now - this.#lastSweep > windowMs) this.#sweep(now)
    let window = this.#windows.get(key)
    if (!window || window.endsAt <= now) {
      window = { count: 0, endsAt: now + windowMs }
      this.#windows.set(key, window)
    }
    window.count++
    return { count: window.count, resetMs: window.endsAt - now }
  }

  #sweep(now: number): void {
    this.#lastSweep = now
    for (const [key, window] of this.#windows) if (window.endsAt <= now) this.#windows.delete(key)
  }
}

// INCR and the expiry in one atomic step, so a window always ends even if an instance dies between.
const HIT_SCRIPT = `
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]); ttl = tonumber(ARGV[1]) end
return {count, ttl}
`

/** A store failure the store has already reported (to its RedisHealthLog): not to be logged again. */
class ReportedStoreError extends Error {}

export class RedisRateLimitStore implements RateLimitStore {
  constructor(
    private readonly redis: Redis,
    /** Where a failed count is reported, once per outage rather than once per request. */
    private readonly health?: RedisHealthLog,
    private readonly prefix = 'shiplog:ratelimit:',
  ) {}

  async hit(key: string, windowMs: number): Promise<WindowCount> {
    let result: [number, number]
    try {
      result = (await this.redis.eval(HIT_SCRIPT, 1, this.prefix + key, String(windowMs))) as [number, number]
    } catch (err) {
      if (!this.health) throw err
      this.health.failed(err)
      throw new ReportedStoreError('rate limit store unavailable', { cause: err })
    }
    return { count: Number(result[0]), resetMs: Number(result[1]) }
  }
}

export interface RateLimitDecision {
  allowed: boolean
  headers: Record<string, string>
}

/**
 * Counts one request for `key` and says whether it may proceed, with the RateLimit-* headers
 * (IETF draft) to send either way. When the store fails the request is allowed: an outage of the
 * shared counter must not stop deployments from being recorded.
 */
export async function checkRateLimit(
  store: RateLimitStore,
  key: string,
  limit: number,
  windowMs: number,
  onStoreError: (err: unknown) => void,
): Promise<RateLimitDecision> {
  let counted: WindowCount
  try {
    counted = await store.hit(key, windowMs)
  } catch (err) {
    if (!(err instanceof ReportedStoreError)) onStoreError(err)
    return { allowed: true, headers: {} }
  }
  const resetSeconds = String(Math.max(1, Math.ceil(counted.resetMs / 1000)))
  const headers: Record<string, string> = {
    'ratelimit-policy': `${limit};w=${Math.round(windowMs / 1000)}`,
    'ratelimit-limit': String(limit),
    'ratelimit-remaining': String(Math.max(0, limit - counted.count)),
    'ratelimit-reset': resetSeconds,
  }
  if (counted.count <= limit) return { allowed: true, headers }
  return { allowed: false, headers: { ...headers, 'retry-after': resetSeconds } }
}

/** The part of a pino (Fastify) logger that a RedisHealthLog writes to. */
export interface RedisHealthLogger {
  warn(fields: Record<string, unknown>, message: string): void
  info(fields: Record<string, unknown>, message: string): void
}

/**
 * Says once that Redis is away instead of at every reconnect attempt: ioredis reports each failed
 * attempt (about one a second), and a warning with a stack trace for each buried everything else.
 * Later failures are counted, with a reminder at most every `reminderMs`; one line says when it is
 * back. Like the database's OutageLog, but a warning: requests are still served meanwhile.
 */
export class RedisHealthLog {
  #downSince: number | null = null
  #lastLineAt = 0
  #failures = 0

  constructor(
    private readonly log: RedisHealthLogger,
    private readonly reminderMs = 60_000,
    private readonly now: () => number = Date.now,
  ) {}

  failed(err: unknown): void {
    const now = this.now()
    const reason = err instanceof Error ? err.message : String(err)
    const code = (err as { code?: unknown } | null)?.code
    this.#failures++
    if (this.#downSince === null) {
      this.#downSince = now
      this.#lastLineAt = now
      this.#failures = 1
      this.log.warn(
        { code: typeof code === 'string' ? code : null },
        `redis unavailable: ${reason}; rate limits allow requests until it is back ` +
          '(further failures are counted, not logged one by one)',
      )
      return
    }
    if (now - this.#lastLineAt >= this.reminderMs) {
      this.#lastLineAt = now
      this.log.warn(
        { failures: this.#failures, downForMs: now - this.#downSince },
        `redis still unavailable: ${reason}; ${this.#failures} failed attempts so far`,
      )
    }
  }

  recovered(): void {
    if (this.#downSince === null) return
    this.log.info(
      { failures: this.#failures, downForMs: this.now() - this.#downSince },
      'redis available again; rate limits are shared again',
    )
    this.#downSince = null
  }
}
