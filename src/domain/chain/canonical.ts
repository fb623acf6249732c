// The bytes each link of the tamper-evidence chain covers: one documented serialisation of a row,
// the same whichever database holds it (docs/SECURITY.md, "Tamper evidence", describes it too).
//
//   link(0)   = SHA-256(UTF-8 "shiplog chain v1 " + stream)          the stream's genesis
//   digest(n) = SHA-256(canonical(row n))
//   link(n)   = SHA-256(link(n-1) || digest(n) || field(account_id) || field(time))
//               (links and digests as 32 raw bytes; n = each chained row, in id order)
//   canonical(row) = field(column 1) || field(column 2) || …        every column, in STREAMS order
// The row's account and time (events: received_at; audit entries: at) are in canonical(row) and
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
import { createHash } from 'node:crypto'

export type StreamName = 'events' | 'audit'

export interface StreamSpec {
  readonly name: StreamName
  /** The table chained. */
  readonly table: 'events' | 'audit_entries'
  /** Every column, in the order the canonical bytes list them: a new column is a new version. */
  readonly columns: readonly string[]
  /** The row's time, kept in the link so verify can tell a pruned row (events: received_at). */
  readonly timeColumn: string
  /** How verify names a row of it: "event 12", "audit entry 3". */
  readonly noun: string
}

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
    timeColumn: 'received_at',
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
    timeColumn: 'at',
    noun: 'audit entry',
  },
]

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
  return Buffer.concat(spec.columns.map((column) => encode(row[column])))
}

/** The first link of a stream, before any row. */
export function genesisLink(stream: StreamName): string {
  return createHash('sha256').update(`shiplog chain v1 ${stream}`, 'utf8').digest('hex')
}

/** digest(n): SHA-256 of the row's canonical bytes, hex. */
export function rowDigest(spec: StreamSpec, row: ChainRow): string {
  // The same bytes as canonicalBytes, fed to the hash field by field without building them whole
  // (the chain's cost per event is mostly here).
  const hash = createHash('sha256')
  const head = Buffer.allocUnsafe(5)
  for (const column of spec.columns) {
    const value = row[column]
    if (typeof value === 'string') {
      head[0] = TAG_TEXT
      head.writeUInt32BE(Buffer.byteLength(value, 'utf8'), 1)
      hash.update(head)
      hash.update(value, 'utf8')
    } else if (typeof value === 'number' && Number.isInteger(value)) {
      const text = String(value)
      head[0] = TAG_INTEGER
      head.writeUInt32BE(text.length, 1)
      hash.update(head)
      hash.update(text, 'latin1')
    } else hash.update(encode(value))
  }
  return hash.digest('hex')
}

/** link(n) from link(n-1), digest(n) and the row's account and time (hex in, hex out). */
export function linkFrom(
  previous: string,
  digest: string,
  accountId: number | null,
  at: number | null,
): string {
  return createHash('sha256')
    .update(Buffer.from(previous, 'hex'))
    .update(Buffer.from(digest, 'hex'))
    .update(encode(accountId))
    .update(encode(at))
    .digest('hex')
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
  return spec.columns.join(', ')
}
