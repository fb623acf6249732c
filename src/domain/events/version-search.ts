// The version filter, a case-insensitive substring search: its SQL on each database, and what
// SQLite's trigram index (version-index.ts, migration 0003) can tell about a needle. query-plan.ts
// decides from these whether the index drives the scan.
import { type Kysely, type RawBuilder, sql } from 'kysely'
import type { DialectName } from '../../config.js'
import type { DB } from '../../db/schema.js'
import { characterCount } from '../../text-rules.js'
import { casefold } from './account-names.js'

function isAscii(text: string): boolean {
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) > 0x7f) return false
  return true
}

function escapeLike(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`)
}

/**
 * The version text search, exactly as it has always matched: PostgreSQL's ILIKE (served by the
 * pg_trgm index of migration 0003 when the planner finds that cheaper). SQLite: LIKE already
 * ignores ASCII case; for other letters both sides go through casefold() (registered in
 * connect.ts), which costs a call per row, so only then. SQLite has no default escape character,
 * so one is named for both.
 */
export function versionMatches(dialect: DialectName, needle: string): RawBuilder<unknown> {
  const pattern = `%${escapeLike(needle)}%`
  if (dialect === 'postgres') return sql`events.version ilike ${pattern} escape '\\'`
  if (isAscii(pattern)) return sql`events.version like ${pattern} escape '\\'`
  return sql`casefold(events.version) like casefold(${pattern}) escape '\\'`
}

/**
 * The FTS5 query for a SQLite version search, or null when the index cannot narrow it. The index
 * holds casefold(version) in trigrams (case-sensitive), and a quoted FTS5 string is a phrase of the
 * needle's trigrams: it matches exactly the rows whose casefold(version) contains casefold(needle).
 * Every row the search above matches is among them (an ASCII needle matched by LIKE is the same
 * letters up to ASCII case, so its casefold is there too), so the index only ever narrows the
 * candidates and the search itself still decides. Needles under three characters have no trigram.
 */
export function versionIndexQuery(needle: string): string | null {
  const folded = casefold(needle)
  if (characterCount(folded) < 3) return null
  return `"${folded.replaceAll('"', '""')}"`
}

/**
 * With a time range, the version index is used only when the needle is rare, below this many
 * events (those indexed that match, plus those not indexed yet): then reading every one and
 * sorting them by time costs a few milliseconds, while the range scan could read the whole range to
 * find them. A common needle is found within the first rows of the range anyway.
 */
export const RARE_VERSION_HITS = 2000

/** The events the version index holds: those up to this id (version-index.ts); newer ones are scanned. */
export async function indexedThrough(db: Kysely<DB>): Promise<number> {
  const { rows } = await sql<{ through: number }>`select through from events_version_index`.execute(db)
  return rows[0]?.through ?? 0
}

/**
 * Whether the needle is rare: fewer than RARE_VERSION_HITS events among those indexed that match
 * it and those not indexed yet (counting stops there, so a common needle costs little to find out).
 */
export async function isRareVersion(db: Kysely<DB>, match: string, through: number): Promise<boolean> {
  const { rows } = await sql<{ hits: number }>`select (select count(*) from (
      select 1 from events_version_fts where events_version_fts match ${match} limit ${RARE_VERSION_HITS}))
    + (select count(*) from (select 1 from events where id > ${through} limit ${RARE_VERSION_HITS})) as hits`.execute(
    db,
  )
  return (rows[0]?.hits ?? RARE_VERSION_HITS) < RARE_VERSION_HITS
}
