// What one process remembers between derivation runs: each recent service and environment's state
// and the first deployment of recent versions, so a run reads only the new events, not the groups
// they touch. Valid only while no other derivation wrote in between (the progress row's generation
// tells), and dropped whole when a run fails.
import { type FirstRow, type LoadedGroup, versionKey } from './derivation.js'

/** Enough for every group of a large account; a group evicted is read again when it next changes. */
const MAX_GROUPS = 20_000
const MAX_FIRSTS = 100_000

export class DerivationCache {
  /** The progress row's generation after this process's last run; -1: nothing remembered. */
  #generation = -1
  readonly #groups = new Map<string, LoadedGroup>()
  /** firstKey → the id of the earliest deployment of that service and version known to be stored. */
  readonly #firsts = new Map<string, number>()

  /**
   * Called with the generation a run's lock produced: the memory holds only if the previous
   * generation was this process's own last run.
   */
  beginRun(generation: number): void {
    if (this.#generation !== generation - 1) this.clear()
    this.#generation = -1
  }

  /** The run committed: what it left behind is the stored state as of `generation`. */
  committed(generation: number, groups: ReadonlyMap<string, LoadedGroup>, firsts: readonly FirstRow[]): void {
    for (const [key, group] of groups) remember(this.#groups, key, group, MAX_GROUPS)
    for (const f of firsts) remember(this.#firsts, firstKey(f), f.deployment_id, MAX_FIRSTS)
    this.#generation = generation
  }

  clear(): void {
    this.#groups.clear()
    this.#firsts.clear()
    this.#generation = -1
  }

  /** The remembered state of a group; the run changes it in place (a failed run clears all). */
  group(key: string): LoadedGroup | undefined {
    return this.#groups.get(key)
  }

  /** Whether `first` would change nothing stored: an earlier or the same deployment is known. */
  knowsFirst(first: FirstRow): boolean {
    const known = this.#firsts.get(firstKey(first))
    return known !== undefined && known <= first.deployment_id
  }
}

function firstKey(f: FirstRow): string {
  return versionKey(f.account_id, f.service, f.version)
}

/** Keeps the most recently used entries: a Map iterates in insertion order. */
function remember<V>(map: Map<string, V>, key: string, value: V, max: number): void {
  map.delete(key)
  map.set(key, value)
  if (map.size > max) {
    const oldest = map.keys().next()
    if (!oldest.done) map.delete(oldest.value)
  }
}
