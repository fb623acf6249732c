// The chain head that downloads carry (`Shiplog-Chain-Head: events:<id>:<hex>`), so that a later
// `shiplog verify --head …` can prove the events up to that id were not rewritten since.
import type { Kysely } from 'kysely'
import type { DB } from '../../db/schema.js'
import { currentHead } from './verify.js'

export const CHAIN_HEAD_HEADER = 'shiplog-chain-head'

/**
 * The head covering event `newestId` (the first link at or after it) when it is chained already,
 * otherwise the current head; null while nothing is chained. One index lookup.
 */
export async function eventsHeadFor(db: Kysely<DB>, newestId: number | null): Promise<string | null> {
  if (newestId !== null) {
    const link = await db
      .selectFrom('chain_links')
      .innerJoin('chain_heads', 'chain_heads.stream', 'chain_links.stream')
      .select(['chain_links.row_id', 'chain_links.link'])
      .where('chain_links.stream', '=', 'events')
      .where('chain_links.row_id', '>=', newestId)
      .whereRef('chain_links.row_id', '<=', 'chain_heads.through')
      .orderBy('chain_links.row_id')
      .limit(1)
      .executeTakeFirst()
    if (link) return `events:${Number(link.row_id)}:${link.link}`
  }
  return currentHead(db, 'events')
}
