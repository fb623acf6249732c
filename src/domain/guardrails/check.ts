// May this version be deployed here now? (SPEC §11) The check the API answers, and the rules an
// event breaks as it is recorded, from one evaluation (rules.ts) over the account's guardrails.
// Recording asks a cache (GuardrailCache) that an account without guardrails answers from memory,
// so the feature adds no query to an ingest request of an account that uses none.
import type { Kysely } from 'kysely'
import type { DB } from '../../db/schema.js'
import type { GuardrailRule } from '../../text-rules.js'
import {
  brokenRules,
  type Deployment,
  type Guardrails,
  hasAny,
  promotionRulesOf,
  type Reason,
  reasonsAgainst,
} from './rules.js'
import { currentNames, firstSuccesses, loadGuardrails } from './store.js'

export interface CheckAnswer {
  readonly allowed: boolean
  readonly reasons: readonly Reason[]
  /** The names the rules were applied to: renamed or merged names are followed to the current one. */
  readonly deployment: Deployment
}

type Names = Awaited<ReturnType<typeof currentNames>>

function currentDeployment(names: Names, d: Deployment): Deployment {
  return {
    service: names.service.get(d.service) ?? d.service,
    environment: names.environment.get(d.environment) ?? d.environment,
    version: d.version,
  }
}

/**
 * Every reason against deploying `d` at `at`, given the account's guardrails. Deployments must be
 * derived up to `at` when the environment has promotion rules (the caller derives first).
 */
export async function reasonsFor(
  db: Kysely<DB>,
  accountId: number,
  guardrails: Guardrails,
  d: Deployment,
  at: number,
): Promise<Reason[]> {
  if (!hasAny(guardrails)) return []
  const rules = promotionRulesOf(guardrails, d.environment)
  const firsts =
    rules.length === 0
      ? new Map<string, number | null>()
      : await firstSuccesses(
          db,
          accountId,
          d.service,
          d.version,
          rules.map((r) => r.afterEnvironment),
        )
  return reasonsAgainst(guardrails, d, at, firsts)
}

/** The check: read fresh from the database (the caller has derived deployments first). */
export async function checkDeployment(
  db: Kysely<DB>,
  accountId: number,
  asked: Deployment,
  at = Date.now(),
): Promise<CheckAnswer> {
  const [names, guardrails] = await Promise.all([currentNames(db, accountId), loadGuardrails(db, accountId)])
  const deployment = currentDeployment(names, asked)
  const reasons = await reasonsFor(db, accountId, guardrails, deployment, at)
  return { allowed: reasons.length === 0, reasons, deployment }
}

/** The answer for an account without guardrails: one shared list, so answering allocates nothing. */
const NONE_BROKEN: readonly GuardrailRule[] = Object.freeze([])

interface Cached {
  loadedAt: number
  guardrails: Guardrails
  names: Names
}

/**
 * One account's guardrails and current names, kept for `ttlMs` (100 ms by default): a change made
 * here is seen at once (invalidate), one made by another instance or by `shiplog` on the same
 * database within the lifetime. Accounts that have no guardrails cost a map lookup per event.
 */
export class GuardrailCache {
  readonly #entries = new Map<number, Cached>()
  readonly #loading = new Map<number, Promise<Cached>>()
  /** Bumped by invalidate: a load that began before it must not be kept. */
  #generation = 0

  constructor(
    private readonly db: Kysely<DB>,
    private readonly options: {
      ttlMs?: number
      /** Derives deployments up to now: called before a promotion rule is evaluated. */
      deriveFirst?: () => Promise<void>
    } = {},
  ) {}

  /** Forgets one account's guardrails (after a change made in this process), or every account's. */
  invalidate(accountId?: number): void {
    this.#generation++
    this.#loading.clear()
    if (accountId === undefined) this.#entries.clear()
    else this.#entries.delete(accountId)
  }

  /**
   * The rules an event broke on arrival, in GUARDRAIL_RULES order; an empty list when none. The
   * answer is synchronous when the account's guardrails are cached and it has none.
   */
  brokenBy(
    accountId: number,
    d: Deployment,
    at: number,
  ): readonly GuardrailRule[] | Promise<readonly GuardrailRule[]> {
    const cached = this.#entries.get(accountId)
    const ttl = this.options.ttlMs ?? 100
    if (cached !== undefined && at - cached.loadedAt < ttl && at >= cached.loadedAt) {
      if (!hasAny(cached.guardrails)) return NONE_BROKEN
      return this.#evaluate(accountId, cached, d, at)
    }
    return this.#load(accountId, at).then((fresh) =>
      hasAny(fresh.guardrails) ? this.#evaluate(accountId, fresh, d, at) : NONE_BROKEN,
    )
  }

  async #evaluate(
    accountId: number,
    cached: Cached,
    d: Deployment,
    at: number,
  ): Promise<readonly GuardrailRule[]> {
    const deployment = currentDeployment(cached.names, d)
    if (promotionRulesOf(cached.guardrails, deployment.environment).length > 0)
      await this.options.deriveFirst?.()
    return brokenRules(await reasonsFor(this.db, accountId, cached.guardrails, deployment, at))
  }

  #load(accountId: number, at: number): Promise<Cached> {
    const loading = this.#loading.get(accountId)
    if (loading) return loading
    const load = this.#fetch(accountId, at, this.#generation)
    this.#loading.set(accountId, load)
    const forget = () => {
      if (this.#loading.get(accountId) === load) this.#loading.delete(accountId)
    }
    load.then(forget, forget)
    return load
  }

  async #fetch(accountId: number, at: number, generation: number): Promise<Cached> {
    const [guardrails, names] = await Promise.all([
      loadGuardrails(this.db, accountId),
      currentNames(this.db, accountId),
    ])
    const entry = { loadedAt: at, guardrails, names }
    if (generation === this.#generation) this.#entries.set(accountId, entry)
    return entry
  }
}
