// `shiplog verify`: recomputes each chain from the rows and the stored links and names what does
// not match. Reads both tables in id order, a page at a time, in one snapshot (a repeatable-read
// transaction on PostgreSQL, one read transaction on SQLite), so memory stays flat on any size and
// a server chaining meanwhile does not disturb it.
//
// For each id, in order, with `previous` the stored link before it:
//   row and link     digest(row) must equal the stored digest ("event 12 changed"), the link's account
//                    and time must be the row's, and link = H(previous, digest, account, time)
//                    ("link of event 12 does not follow": links recomputed or edited)
//   link, no row     the row was deleted. "pruned" when the link's time is older than its account's
//                    retention cut-off (accounts.retention_days, if that column exists), else "missing";
//                    the link is still recomputed from its stored digest, account and time
//   row, no link     at or below the head: "not chained (inserted after the fact?)"; past the head:
//                    waiting to be chained (counted, not a problem)
// Then the head must be the last link. `--head STREAM:ID:HEX` (from an export or a log) must be the
// stored link at that id: if a later rewrite recomputed every link after a change, this is what
// tells.
import { type Kysely, sql } from 'kysely'
import type { Database } from '../../db/connect.js'
import type { DB } from '../../db/schema.js'
import {
  type ChainRow,
  columnList,
  genesisLink,
  linkedValues,
  linkFrom,
  rowDigest,
  STREAMS,
  type StreamName,
  type StreamSpec,
} from './canonical.js'

const PAGE = 5000
const DAY_MS = 86_400_000

export interface ExpectedHead {
  stream: StreamName
  id: number
  link: string
}

export type ProblemKind = 'changed' | 'missing' | 'inserted' | 'link' | 'head'

export interface Problem {
  stream: StreamName
  /** The row concerned; null for a problem with the head itself. */
  id: number | null
  kind: ProblemKind
  message: string
}

export interface StreamSummary {
  stream: StreamName
  /** Rows whose link was checked against the row. */
  checked: number
  /** Links whose row retention deleted. */
  pruned: number
  /** Links whose row an admin deleted with its service's history, by what was deleted. */
  erased: { reason: string; rows: number }[]
  /** Rows past the head, waiting to be chained. */
  pending: number
  /** The stored head. */
  through: number
  link: string
}

export interface VerifyResult {
  streams: StreamSummary[]
  problems: Problem[]
  /** Problems found beyond `maxProblems`, counted only. */
  moreProblems: number
  ok: boolean
}

export interface VerifyOptions {
  heads?: readonly ExpectedHead[]
  now?: number
  /** Problems listed in full; the rest are counted. */
  maxProblems?: number
}

interface LinkRow {
  row_id: number
  digest: string
  link: string
  account_id: number | null
  at: number | null
}

/** Each account's retention cut-off (ms), for those with a retention period. */
async function retentionCutoffs(db: Kysely<DB>, now: number): Promise<Map<number, number>> {
  // accounts.retention_days belongs to retention (another migration); without it nothing is pruned.
  const { rows } = await sql<Record<string, unknown>>`select * from accounts`.execute(db)
  const cutoffs = new Map<number, number>()
  for (const row of rows) {
    const days = Number(row.retention_days ?? 0)
    if (Number.isFinite(days) && days > 0) cutoffs.set(Number(row.id), now - days * DAY_MS)
  }
  return cutoffs
}

/**
 * The rows an admin deleted with a service's history (chain_erasures), each kept only when the audit
 * log holds the entry that records that deletion (service.history_deleted, same account and time):
 * a deleted row passed off as erased without one is still reported missing.
 */
async function erasures(
  db: Kysely<DB>,
  database: Database,
): Promise<Map<number, { accountId: number; reason: string }>> {
  const found = new Map<number, { accountId: number; reason: string }>()
  // A database from before migration 0014 (a backup verified as it is) has none.
  const exists =
    database.dialect === 'sqlite'
      ? await sql<{
          n: number
        }>`select count(*) as n from sqlite_master where type = 'table' and name = 'chain_erasures'`.execute(
          db,
        )
      : await sql<{ n: number }>`select count(*) as n from information_schema.tables
          where table_schema = current_schema() and table_name = 'chain_erasures'`.execute(db)
  if (Number(exists.rows[0]?.n ?? 0) === 0) return found
  const { rows } = await sql<{ row_id: number; account_id: number; reason: string }>`
    select e.row_id, e.account_id, e.reason from chain_erasures e
    where e.stream = 'events' and exists (select 1 from audit_entries a
      where a.account_id = e.account_id and a.at = e.audit_at and a.action = 'service.history_deleted')`.execute(
    db,
  )
  for (const r of rows) found.set(Number(r.row_id), { accountId: Number(r.account_id), reason: r.reason })
  return found
}

/** A keyset-paged reader of rows in id order. */
async function* paged<T>(
  fetch: (after: number) => Promise<T[]>,
  idOf: (row: T) => number,
): AsyncGenerator<T> {
  let after = Number.MIN_SAFE_INTEGER
  for (;;) {
    const rows = await fetch(after)
    for (const row of rows) yield row
    const last = rows[rows.length - 1]
    if (rows.length < PAGE || last === undefined) return
    after = idOf(last)
  }
}

class Problems {
  readonly list: Problem[] = []
  more = 0
  constructor(private readonly max: number) {}
  add(problem: Problem): void {
    if (this.list.length < this.max) this.list.push(problem)
    else this.more++
  }
}

async function verifyStream(
  db: Kysely<DB>,
  spec: StreamSpec,
  cutoffs: Map<number, number>,
  expected: readonly ExpectedHead[],
  problems: Problems,
  erased: ReadonlyMap<number, { accountId: number; reason: string }> = new Map(),
): Promise<StreamSummary> {
  const head = await db
    .selectFrom('chain_heads')
    .select(['through', 'link'])
    .where('stream', '=', spec.name)
    .executeTakeFirst()
  const through = Number(head?.through ?? 0)
  const summary: StreamSummary = {
    stream: spec.name,
    checked: 0,
    pruned: 0,
    erased: [],
    pending: 0,
    through,
    link: head?.link ?? genesisLink(spec.name),
  }
  if (!head) {
    problems.add({ stream: spec.name, id: null, kind: 'head', message: `${spec.name} chain head is missing` })
  }
  const wanted = new Map(expected.filter((h) => h.stream === spec.name).map((h) => [h.id, h.link]))
  const seenWanted = new Set<number>()
  const noun = (id: number) => `${spec.noun} ${id}`
  const erasedCounts = new Map<string, number>()

  const links = paged<LinkRow>(
    async (after) => {
      const rows = await db
        .selectFrom('chain_links')
        .select(['row_id', 'digest', 'link', 'account_id', 'at'])
        .where('stream', '=', spec.name)
        .where('row_id', '>', after)
        .orderBy('row_id')
        .limit(PAGE)
        .execute()
      return rows.map((r) => ({ ...r, row_id: Number(r.row_id) }))
    },
    (l) => l.row_id,
  )
  const rows = paged<ChainRow>(
    async (after) => {
      const { rows } = await sql<ChainRow>`select ${sql.raw(columnList(spec))} from ${sql.table(spec.table)}
      where id > ${after} order by id limit ${PAGE}`.execute(db)
      return rows
    },
    (r) => Number(r.id),
  )

  let previous = genesisLink(spec.name)
  let lastLink: LinkRow | null = null
  let link = await links.next()
  let row = await rows.next()
  while (!link.done || !row.done) {
    const linkId = link.done ? Number.POSITIVE_INFINITY : link.value.row_id
    const rowId = row.done ? Number.POSITIVE_INFINITY : Number(row.value.id)
    const id = Math.min(linkId, rowId)
    const l = linkId === id && !link.done ? link.value : null
    const r = rowId === id && !row.done ? row.value : null
    if (l) {
      const recomputed = linkFrom(previous, l.digest, l.account_id, l.at)
      if (r) {
        summary.checked++
        const values = linkedValues(spec, r)
        if (rowDigest(spec, r) !== l.digest) {
          problems.add({ stream: spec.name, id, kind: 'changed', message: `${noun(id)} changed` })
        } else if (values.accountId !== l.account_id || values.at !== l.at) {
          problems.add({
            stream: spec.name,
            id,
            kind: 'link',
            message: `link of ${noun(id)} altered (its account or time differs from the row's)`,
          })
        } else if (recomputed !== l.link) {
          problems.add({
            stream: spec.name,
            id,
            kind: 'link',
            message: `link of ${noun(id)} does not follow from the one before (links rewritten?)`,
          })
        }
      } else {
        const cutoff = l.account_id === null ? undefined : cutoffs.get(l.account_id)
        if (recomputed !== l.link) {
          problems.add({
            stream: spec.name,
            id,
            kind: 'link',
            message: `link of ${noun(id)} (row gone) does not follow from the one before (links rewritten?)`,
          })
        } else if (spec.name === 'events' && cutoff !== undefined && l.at !== null && l.at < cutoff) {
          summary.pruned++
        } else if (spec.name === 'events' && erased.get(id)?.accountId === l.account_id) {
          const reason = erased.get(id)?.reason ?? ''
          erasedCounts.set(reason, (erasedCounts.get(reason) ?? 0) + 1)
        } else {
          problems.add({ stream: spec.name, id, kind: 'missing', message: `${noun(id)} missing` })
        }
      }
      if (id > through) {
        problems.add({
          stream: spec.name,
          id,
          kind: 'head',
          message: `${noun(id)} has a link past the chain head (${through})`,
        })
      }
      const want = wanted.get(id)
      if (want !== undefined) {
        seenWanted.add(id)
        if (want !== l.link) {
          problems.add({
            stream: spec.name,
            id,
            kind: 'head',
            message: `head ${spec.name}:${id} does not match: the chain up to ${noun(id)} was rewritten since`,
          })
        }
      }
      previous = l.link
      lastLink = l
      link = await links.next()
    } else if (r) {
      if (id <= through) {
        problems.add({
          stream: spec.name,
          id,
          kind: 'inserted',
          message: `${noun(id)} not chained (inserted after the fact?)`,
        })
      } else summary.pending++
    }
    if (r) row = await rows.next()
  }
  if (head) {
    const lastId = lastLink?.row_id ?? 0
    if (lastId !== through || (lastLink?.link ?? genesisLink(spec.name)) !== head.link) {
      problems.add({
        stream: spec.name,
        id: null,
        kind: 'head',
        message: `${spec.name} chain head (${through}) is not the last link (${lastId})`,
      })
    }
  }
  summary.erased = [...erasedCounts].map(([reason, rows]) => ({ reason, rows }))
  for (const [id] of wanted) {
    if (!seenWanted.has(id))
      problems.add({
        stream: spec.name,
        id,
        kind: 'head',
        message: `head ${spec.name}:${id} not found: ${noun(id)} has no link (never chained, or its link was deleted)`,
      })
  }
  return summary
}

/** Verifies both chains; `ok` only when nothing is wrong. */
export async function verifyChains(database: Database, options: VerifyOptions = {}): Promise<VerifyResult> {
  const now = options.now ?? Date.now()
  const problems = new Problems(options.maxProblems ?? 20)
  const run = async (db: Kysely<DB>) => {
    const cutoffs = await retentionCutoffs(db, now)
    const erased = await erasures(db, database)
    const streams: StreamSummary[] = []
    for (const spec of STREAMS)
      streams.push(await verifyStream(db, spec, cutoffs, options.heads ?? [], problems, erased))
    return streams
  }
  // One consistent view of both chains, which holds no write lock: on SQLite a snapshot on a read
  // connection of its own, so a long verification beside a running server holds nothing up.
  const streams =
    database.dialect === 'postgres'
      ? await database.db
          .transaction()
          .setIsolationLevel('repeatable read')
          .setAccessMode('read only')
          .execute(run)
      : await database.db.transaction().setAccessMode('read only').execute(run)
  return { streams, problems: problems.list, moreProblems: problems.more, ok: problems.list.length === 0 }
}

/** Parses `STREAM:ID:HEX` (as exports send it in Shiplog-Chain-Head); a one-line reason if bad. */
export function parseHead(text: string): ExpectedHead | string {
  const match = /^(events|audit):(\d{1,15}):([0-9a-fA-F]{64})$/.exec(text.trim())
  if (!match)
    return `"${text}" is not a chain head (expected events:ID:HEX or audit:ID:HEX, HEX 64 hex digits)`
  return { stream: match[1] as StreamName, id: Number(match[2]), link: (match[3] as string).toLowerCase() }
}

/** The current head of a stream as `STREAM:ID:HEX`, or null while nothing is chained. */
export async function currentHead(db: Kysely<DB>, stream: StreamName): Promise<string | null> {
  const head = await db
    .selectFrom('chain_heads')
    .select(['through', 'link'])
    .where('stream', '=', stream)
    .executeTakeFirst()
  if (!head || Number(head.through) === 0) return null
  return `${stream}:${Number(head.through)}:${head.link}`
}
