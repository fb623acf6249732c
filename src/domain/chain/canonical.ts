// The bytes each link of the tamper-evidence chain covers: one documented serialisation of a row,
// the same whichever database holds it (docs/SECURITY.md, "Tamper evidence", describes it too).
//
//   link(0)   = SHA-256(UTF-8 "shiplog chain v1 " + stream)          the stream's genesis
//   digest(n) = SHA-256(canonical(row n))
//   link(n)   = SHA-256(link(n-1) || digest(n) || field(account_id) || field(time))
//               (links and digests as 32 raw bytes; n = each chained row, in id order)
//   canonical(row) = field(column 1) || field(column 2) || …        every column, in STREAMS order
//                    [ || field(tail 1 column 1) || … ]             events only: tails 1..k, where
//                                                                   k is the last tail that applies
// Columns added later are tails, written only when a row uses them, so the bytes (and the chain) of
// every row stored before them are unchanged:
//   tail 1: an event's own times (occurred_at, commit_time; SPEC §1.2), when occurred_at differs
//           from received_at or commit_time is set;
//   tail 2: what recording found (guardrails, override_reason; SPEC §11), when either is set. A row
//           with tail 2 writes tail 1 too, whether or not it applies, so each column has one place.
// The row's account and time (events: occurred_at; audit entries: at) are in canonical(row) and
// again in the link, because the link row keeps them with the digest: when retention has deleted
// the row, its link can still be recomputed, so the time that makes it count as pruned is proven
// too (rewriting it to pass a deleted row off as pruned breaks the chain there).
//   field(v) = tag (1 byte) || length of data (4 bytes, big-endian) || data
//     null    → tag "N", no data         (so null and the empty string differ)
//     integer → tag "I", decimal ASCII   ("-12", no leading zeros, no "+")
//     other number → tag "R", JavaScript's shortest round-trip decimal
//     text    → tag "T", UTF-8
//     bytes   → tag "B", as stored
// Both drivers hand over BIGINT as a number (src/db/connect.ts) and TEXT as a string, so a row
// copied from SQLite to PostgreSQL (or back) with its ids keeps its links.
// crypto.hash is the one-shot form (Node 20.12+): no Hash object per call, about half the cost.
import { createHash, hash } from 'node:crypto'

export type StreamName = 'events' | 'audit'

export interface ChainTail {
  readonly columns: readonly string[]
  readonly applies: (row: ChainRow) => boolean
}

export interface StreamSpec {
  readonly name: StreamName
  /** The table chained. */
  readonly table: 'events' | 'audit_entries'
  /** Every column, in the order the canonical bytes list them: a new column is a new version. */
  readonly columns: readonly string[]
  /**
   * The row's time, kept in the link so verify can tell a pruned row (events: occurred_at, which
   * retention goes by; equal to received_at for every event stored before it existed).
   */
  readonly timeColumn: string
  /**
   * Columns added after the stream's first version, in the order they came: a row's bytes hold
   * `columns`, then every tail up to the last one that `applies` to it.
   */
  readonly tails: readonly ChainTail[]
  /** How verify names a row of it: "event 12", "audit entry 3". */
  readonly noun: string
}

// These column lists repeat the tables' columns on purpose, apart from the events table's
// description (src/db/event-columns.ts): the chain's bytes are a frozen format, and a link made
// today must still verify after a column is added to the table. A new column enters here only as a
// new chain version (and verify must then know both); test/domain/event-columns.test.ts holds the
// events list to the description, in table order, so a column added there fails until it does.
export const STREAMS: readonly StreamSpec[] = [
  {
    name: 'events',
    table: 'events',
    columns: [
      'id',
      'account_id',
      'service',
      'environment',
      'version',
      'status',
      'url',
      'commit_sha',
      'description',
      'deployer',
      'source',
      'api_key_id',
      'api_key_name',
      'received_at',
    ],
    tails: [
      { columns: ['occurred_at', 'commit_time'], applies: hasOwnTimes },
      { columns: ['guardrails', 'override_reason'], applies: hasGuardrailFindings },
    ],
    timeColumn: 'occurred_at',
    noun: 'event',
  },
  {
    name: 'audit',
    table: 'audit_entries',
    columns: [
      'id',
      'account_id',
      'at',
      'actor_kind',
      'actor_id',
      'actor',
      'address',
      'action',
      'target',
      'details',
    ],
    tails: [],
    timeColumn: 'at',
    noun: 'audit entry',
  },
]

/** Whether an event carries times of its own: an occurred_at other than its arrival, or a commit time. */
function hasOwnTimes(row: ChainRow): boolean {
  const { commit_time: commit, occurred_at: occurred } = row
  if (commit !== null && commit !== undefined) return true
  return occurred !== null && occurred !== undefined && Number(occurred) !== Number(row.received_at)
}

/** Whether recording found a guardrail broken, or the sender gave a reason to override one. */
function hasGuardrailFindings(row: ChainRow): boolean {
  return (
    (row.guardrails !== null && row.guardrails !== undefined) ||
    (row.override_reason !== null && row.override_reason !== undefined)
  )
}

/** The tail columns a row's bytes hold: every tail up to the last one that applies. */
function tailColumns(spec: StreamSpec, row: ChainRow): readonly string[] {
  let last = -1
  spec.tails.forEach((tail, i) => {
    if (tail.applies(row)) last = i
  })
  return last < 0 ? [] : spec.tails.slice(0, last + 1).flatMap((tail) => tail.columns)
}

export function streamSpec(name: StreamName): StreamSpec {
  const spec = STREAMS.find((s) => s.name === name)
  if (!spec) throw new Error(`unknown chain stream ${name}`)
  return spec
}

export function isStreamName(value: string): value is StreamName {
  return value === 'events' || value === 'audit'
}

/** A row as either driver returns it. */
export type ChainRow = Readonly<Record<string, unknown>>

const TAG_NULL = 0x4e
const TAG_INTEGER = 0x49
const TAG_REAL = 0x52
const TAG_TEXT = 0x54
const TAG_BYTES = 0x42

function field(tag: number, data: Buffer): Buffer {
  const head = Buffer.allocUnsafe(5)
  head[0] = tag
  head.writeUInt32BE(data.length, 1)
  return data.length === 0 ? head : Buffer.concat([head, data])
}

function encode(value: unknown): Buffer {
  if (value === null || value === undefined) return field(TAG_NULL, Buffer.alloc(0))
  if (typeof value === 'bigint') return field(TAG_INTEGER, Buffer.from(value.toString(), 'latin1'))
  if (typeof value === 'number') {
    if (Number.isInteger(value)) return field(TAG_INTEGER, Buffer.from(String(value), 'latin1'))
    return field(TAG_REAL, Buffer.from(String(value), 'latin1'))
  }
  if (typeof value === 'string') return field(TAG_TEXT, Buffer.from(value, 'utf8'))
  if (Buffer.isBuffer(value) || value instanceof Uint8Array) return field(TAG_BYTES, Buffer.from(value))
  if (typeof value === 'boolean') return field(TAG_INTEGER, Buffer.from(value ? '1' : '0', 'latin1'))
  // A driver never returns anything else for these columns; refuse rather than hash "[object]".
  throw new Error(`cannot serialise a ${typeof value} for the chain`)
}

/** The canonical bytes of one row of the stream. */
export function canonicalBytes(spec: StreamSpec, row: ChainRow): Buffer {
  const columns = [...spec.columns, ...tailColumns(spec, row)]
  return Buffer.concat(columns.map((column) => encode(row[column])))
}

/** The first link of a stream, before any row. */
export function genesisLink(stream: StreamName): string {
  return createHash('sha256').update(`shiplog chain v1 ${stream}`, 'utf8').digest('hex')
}

/**
 * One reused buffer the fast paths below lay a row's fields out in, then hash with one update: the
 * same bytes as canonicalBytes (the definition), without a buffer per field. Grown when a row needs
 * more (a UTF-8 byte count is at most three times the UTF-16 length).
 */
let scratch = Buffer.allocUnsafe(16 * 1024)

function room(at: number, bytes: number): void {
  if (at + bytes <= scratch.length) return
  const grown = Buffer.allocUnsafe(Math.max(scratch.length * 2, at + bytes))
  scratch.copy(grown, 0, 0, at)
  scratch = grown
}

/** Writes field(value) at `at` in the scratch buffer; returns the offset after it. */
function put(at: number, value: unknown): number {
  if (typeof value === 'string') {
    room(at, 5 + value.length * 3)
    const length = scratch.write(value, at + 5, 'utf8')
    scratch[at] = TAG_TEXT
    scratch.writeUInt32BE(length, at + 1)
    return at + 5 + length
  }
  if (typeof value === 'number' && Number.isInteger(value)) {
    const text = String(value)
    room(at, 5 + text.length)
    const length = scratch.write(text, at + 5, 'latin1')
    scratch[at] = TAG_INTEGER
    scratch.writeUInt32BE(length, at + 1)
    return at + 5 + length
  }
  const encoded = encode(value)
  room(at, encoded.length)
  encoded.copy(scratch, at)
  return at + encoded.length
}

/** digest(n): SHA-256 of the row's canonical bytes, hex. */
export function rowDigest(spec: StreamSpec, row: ChainRow): string {
  let at = 0
  for (const column of spec.columns) at = put(at, row[column])
  if (spec.tails.length > 0) for (const column of tailColumns(spec, row)) at = put(at, row[column])
  return hash('sha256', scratch.subarray(0, at), 'hex')
}

/** link(n) from link(n-1), digest(n) and the row's account and time (hex in, hex out). */
export function linkFrom(
  previous: string,
  digest: string,
  accountId: number | null,
  at: number | null,
): string {
  room(0, 64)
  scratch.write(previous, 0, 32, 'hex')
  scratch.write(digest, 32, 32, 'hex')
  const end = put(put(64, accountId), at)
  return hash('sha256', scratch.subarray(0, end), 'hex')
}

/** The values a link keeps of its row: its account and time, as numbers (null if absent). */
export function linkedValues(
  spec: StreamSpec,
  row: ChainRow,
): { accountId: number | null; at: number | null } {
  return { accountId: integerOrNull(row.account_id), at: integerOrNull(row[spec.timeColumn]) }
}

function integerOrNull(value: unknown): number | null {
  if (typeof value === 'number' && Number.isSafeInteger(value)) return value
  if (typeof value === 'bigint') return Number(value)
  if (typeof value === 'string' && /^-?\d{1,15}$/.test(value)) return Number(value)
  return null
}

/** The column list for a select of the stream's rows. */
export function columnList(spec: StreamSpec): string {
  return [...spec.columns, ...spec.tails.flatMap((tail) => tail.columns)].join(', ')
}
