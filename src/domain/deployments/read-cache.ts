// Remembers what the board and the metrics read from the deployments, keyed by the derivation's
// generation: every write to the deployments (a derivation run, a rebuild, retention), from any
// instance, moves the progress row's generation in the same transaction, so a cached answer whose
// generation still stands is exactly what the plain query would read again.
import type { Kysely } from 'kysely'
import type { DB } from '../../db/schema.js'

/**
 * The progress row's generation: read after the read-your-writes wait and before the data, so
 * what is then read is at least as new as the generation it is stored under.
 */
export async function derivedGeneration(db: Kysely<DB>): Promise<number> {
  const row = await db
    .selectFrom('deployments_progress')
    .select('generation')
    .where('id', '=', 1)
    .executeTakeFirst()
  return Number(row?.generation ?? 0)
}

/**
 * A small map of recent answers by key, each valid for one generation. Bounded by entries (the
 * least recently used goes first); an entry of an older generation is never returned. Values are
 * shared between requests: callers must not change them.
 */
export class GenerationCache<V> {
  readonly #entries = new Map<string, { generation: number; value: Promise<V> }>()

  constructor(private readonly maxEntries: number) {}

  async get(key: string, generation: number, load: () => Promise<V>): Promise<V> {
    const found = this.#entries.get(key)
    if (found && found.generation === generation) {
      // Most recently used last, so the first key is the one to drop.
      this.#entries.delete(key)
      this.#entries.set(key, found)
      return found.value
    }
    // Concurrent requests for the same key and generation share one load.
    const value = load()
    const entry = { generation, value }
    this.#entries.delete(key)
    this.#entries.set(key, entry)
    while (this.#entries.size > this.maxEntries) {
      const oldest = this.#entries.keys().next().value
      if (oldest === undefined) break
      this.#entries.delete(oldest)
    }
    try {
      return await value
    } catch (err) {
      // A failed read is not remembered.
      if (this.#entries.get(key) === entry) this.#entries.delete(key)
      throw err
    }
  }

  clear(): void {
    this.#entries.clear()
  }

  get size(): number {
    return this.#entries.size
  }
}

/** One cache per database handle, so two handles (two test apps, two instances) never share one. */
export function cachePerHandle<V>(maxEntries: number): (db: Kysely<DB>) => GenerationCache<V> {
  const caches = new WeakMap<Kysely<DB>, GenerationCache<V>>()
  return (db) => {
    let cache = caches.get(db)
    if (!cache) {
      cache = new GenerationCache<V>(maxEntries)
      caches.set(db, cache)
    }
    return cache
  }
}
