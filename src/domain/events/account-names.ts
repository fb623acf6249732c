// The account's service and environment names: the one rule by which a filter matches them
// (sameName), the loose index scans that list them, and the condition a name filter becomes.
import { type Kysely, type RawBuilder, sql } from 'kysely'
import type { DB } from '../../db/schema.js'

/** What the casefold() SQL function (connect.ts) and the version index (migration 0003) compute. */
export function casefold(text: string): string {
  return text.toLowerCase()
}

/**
 * One rule for names everywhere: two service (or environment) names are the same to a filter when
 * they are equal after lower-casing with the Unicode default mapping, exactly as JavaScript's
 * toLowerCase() does (so "ÄPP" finds "äpp", and "İ" finds "i̇", i with a dot above, but not "i").
 * It is applied here, in one place, to the account's distinct names, rather than by each database:
 * PostgreSQL's lower() follows the database's locale (ASCII only under C, "İ" to "i" under libc),
 * and an index on SQLite's casefold() would make every write to events need that function, which
 * only Shiplog's own connections register (the bench seeder, the sqlite3 shell, a backup restored
 * elsewhere would fail to insert or delete).
 */
export function sameName(a: string, b: string): boolean {
  return a === b || casefold(a) === casefold(b)
}

export const NAME_COLUMNS = ['service', 'environment'] as const
export type NameColumn = (typeof NAME_COLUMNS)[number]

/**
 * Every distinct name of the account in a column, in binary order, read by a loose index scan: one
 * seek on the (account_id, column, id) index per name, so the cost follows the number of names, not
 * of events.
 */
export async function distinctNames(
  db: Kysely<DB>,
  accountId: number,
  column: NameColumn,
): Promise<string[]> {
  const col = sql.ref(`events.${column}`)
  const { rows } = await sql<{ name: string }>`with recursive names(name) as (
      select min(${col}) from events where events.account_id = ${accountId}
      union all
      select (select min(${col}) from events where events.account_id = ${accountId} and ${col} > names.name)
        from names where names.name is not null
    ) select name from names where name is not null`.execute(db)
  return rows.map((r) => r.name)
}

/**
 * The account's names in this column that a filter for `needle` matches (sameName), from the names
 * the page already read when that list was whole.
 */
export async function namesLike(
  db: Kysely<DB>,
  accountId: number,
  column: NameColumn,
  needle: string,
  known?: AccountNames,
): Promise<string[]> {
  const names = known?.complete[column] ? known[column] : await distinctNames(db, accountId, column)
  return names.filter((name) => sameName(name, needle))
}

/**
 * The condition for one name column. Nearly always one name matches, and equality keeps the
 * (account_id, column, id) index serving order and keyset; several spellings of one name (App1 and
 * APP1) become an IN list.
 */
export function nameIn(column: NameColumn, names: string[]): RawBuilder<unknown> {
  const col = sql.ref(`events.${column}`)
  const [only] = names
  if (only === undefined) return sql`1 = 0`
  if (names.length === 1) return sql`${col} = ${only}`
  return sql`${col} in (${sql.join(names)})`
}

/** How many names of each kind the filter fields suggest (a <datalist> of every known name). */
const SUGGESTED_NAMES = 500

/** The account's services and environments (at most SUGGESTED_NAMES each), in binary order. */
export interface AccountNames {
  service: string[]
  environment: string[]
  /** Whether the list holds every name of the account, so a filter can be resolved from it. */
  complete: Record<NameColumn, boolean>
}

/**
 * Both lists of names in one statement (one round trip, one plan): the page suggests them, and its
 * filter resolves from them (listEventPage's `known`) instead of reading them again.
 */
export async function accountNames(db: Kysely<DB>, accountId: number): Promise<AccountNames> {
  const scan = (column: NameColumn, cte: string) => {
    const col = sql.ref(`events.${column}`)
    const self = sql.table(cte)
    return sql`${self}(name) as (
      select min(${col}) from events where events.account_id = ${accountId}
      union all
      select (select min(${col}) from events where events.account_id = ${accountId} and ${col} > ${self}.name)
        from ${self} where ${self}.name is not null)`
  }
  const { rows } = await sql<{ kind: NameColumn; name: string }>`with recursive
      ${scan('service', 'service_names')}, ${scan('environment', 'environment_names')}
    select 'service' as kind, name from (
      select name from service_names where name is not null limit ${SUGGESTED_NAMES + 1}) as s
    union all
    select 'environment' as kind, name from (
      select name from environment_names where name is not null limit ${SUGGESTED_NAMES + 1}) as e`.execute(
    db,
  )
  const names: AccountNames = { service: [], environment: [], complete: { service: true, environment: true } }
  for (const row of rows) names[row.kind].push(row.name)
  for (const column of NAME_COLUMNS) {
    if (names[column].length > SUGGESTED_NAMES) {
      names[column] = names[column].slice(0, SUGGESTED_NAMES)
      names.complete[column] = false
    }
  }
  return names
}

/** Names as people read them, for the suggestions. */
export function byName(a: string, b: string): number {
  return a.localeCompare(b)
}
