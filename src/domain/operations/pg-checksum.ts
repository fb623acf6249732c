// A PostgreSQL table's count and checksum read with binary COPY: the same SHA-256 as TableChecksum
// over each row's canonical line (rowLine: JSON of its values), but each line is built straight from
// the wire bytes rather than through pg's parsing of every field into a row array first. `copy`
// checksums its target this way while the indexes build. The plain way, reading batches through a
// snapshot (`checksums` in copy.ts), is the definition; test/domain/operations-checksum.test.ts
// compares the two over hostile values.
import { createHash } from 'node:crypto'
import type pg from 'pg'
import { BinaryCopyReader } from '../../db/copy-binary.js'
import { copyOut } from '../../db/copy-out.js'
import type { TableSummary } from './checksum.js'
import { LONG_QUERY_MS } from './pg-copy-in.js'
import { quoteIdent, type TableInfo } from './tables.js'

/** How a column's binary bytes become its part of the line. */
type FieldType = 'int2' | 'int4' | 'int8' | 'text'

const FIELD_TYPES: Readonly<Record<string, FieldType>> = {
  int2: 'int2',
  int4: 'int4',
  int8: 'int8',
  text: 'text',
  varchar: 'text',
}

/** Lines are laid out in one reused buffer of this size and hashed a buffer at a time. */
const BUFFER_BYTES = 1 << 20

const QUOTE = 0x22
const BACKSLASH = 0x5c

/** Where lineInto stopped writing (a module variable: no object per row). */
let lineEnd = 0

/** Writes a whole number's decimal digits at `at`, as String(n) gives them; returns the end. */
function digitsInto(n: number, out: Buffer, at: number): number {
  if (!Number.isSafeInteger(n)) return at + out.write(String(n), at, 'latin1')
  let pos = at
  let rest = n
  if (rest < 0) {
    out[pos++] = 0x2d
    rest = -rest
  }
  if (rest === 0) {
    out[pos] = 0x30
    return pos + 1
  }
  let end = pos
  for (let r = rest; r > 0; r = Math.floor(r / 10)) end++
  for (let i = end - 1; i >= pos; i--) {
    out[i] = 0x30 + (rest % 10)
    rest = Math.floor(rest / 10)
  }
  return end
}

/**
 * Writes the current row's canonical line (JSON of its values, then a newline) into `out` at `at`,
 * sets lineEnd and returns true; returns false, having written part of it, when a text value needs
 * an escape in JSON (a quote, a backslash or a control character): the caller builds that row as
 * text instead. Text that needs no escape is its UTF-8 bytes between quotes, exactly what
 * JSON.stringify gives (PostgreSQL's UTF-8 holds no lone surrogates).
 */
function lineInto(reader: BinaryCopyReader, types: readonly FieldType[], out: Buffer, at: number): boolean {
  let pos = at
  out[pos++] = 0x5b
  for (let i = 0; i < types.length; i++) {
    if (i > 0) out[pos++] = 0x2c
    const length = reader.field()
    if (length < 0) {
      pos += out.write('null', pos, 'latin1')
      continue
    }
    const bytes = reader.message
    const from = reader.start
    switch (types[i]) {
      case 'text': {
        out[pos++] = QUOTE
        for (let j = from; j < from + length; j++) {
          const b = bytes[j] as number
          if (b < 0x20 || b === QUOTE || b === BACKSLASH) return false
          out[pos++] = b
        }
        out[pos++] = QUOTE
        break
      }
      default:
        pos = digitsInto(wholeNumber(types[i] as FieldType, bytes, from, length), out, pos)
    }
  }
  out[pos++] = 0x5d
  out[pos++] = 0x0a
  lineEnd = pos
  return true
}

function wholeNumber(type: FieldType, bytes: Buffer, at: number, length: number): number {
  const expected = type === 'int8' ? 8 : type === 'int4' ? 4 : 2
  if (length !== expected) throw new Error(`binary COPY: a ${type} field of ${length} bytes`)
  if (type === 'int8') return bytes.readInt32BE(at) * 0x1_0000_0000 + bytes.readUInt32BE(at + 4)
  return type === 'int4' ? bytes.readInt32BE(at) : bytes.readInt16BE(at)
}

/** The current row's canonical line as text, its fields read again: rows that need escapes. */
function lineText(reader: BinaryCopyReader, types: readonly FieldType[]): string {
  reader.rewind()
  const values: Array<string | number | null> = []
  for (const type of types) {
    const length = reader.field()
    if (length < 0) values.push(null)
    else if (type === 'text')
      values.push(reader.message.toString('utf8', reader.start, reader.start + length))
    else values.push(wholeNumber(type, reader.message, reader.start, length))
  }
  return `${JSON.stringify(values)}\n`
}

/**
 * The table's row count and checksum, or null when a column has a type this reader does not
 * decode (the caller then reads the plain way). Runs on `client` inside the caller's transaction,
 * so it sees that transaction's snapshot.
 */
export async function postgresTableChecksum(
  client: pg.PoolClient,
  table: TableInfo,
): Promise<TableSummary | null> {
  const { rows: declared } = await client.query<{ name: string; type: string }>(
    `select a.attname as name, t.typname as type
       from pg_attribute a join pg_type t on t.oid = a.atttypid
      where a.attrelid = $1::regclass and a.attnum > 0 and not a.attisdropped`,
    [quoteIdent(table.name)],
  )
  const typeOf = new Map(declared.map((c) => [c.name, FIELD_TYPES[c.type]]))
  const types: FieldType[] = []
  for (const column of table.columns) {
    const type = typeOf.get(column.name)
    if (!type) return null
    types.push(type)
  }
  const columns = table.columns.map((c) => quoteIdent(c.name)).join(', ')
  const order = table.primaryKey.map(quoteIdent).join(', ')
  const hash = createHash('sha256')
  const reader = new BinaryCopyReader()
  const out = Buffer.allocUnsafe(BUFFER_BYTES)
  let used = 0
  let rows = 0
  const flush = () => {
    if (used > 0) hash.update(out.subarray(0, used))
    used = 0
  }
  await copyOut(
    client,
    `copy (select ${columns} from ${quoteIdent(table.name)} order by ${order}) to stdout (format binary)`,
    (message) => {
      const fields = reader.row(message)
      if (fields < 0) return
      if (fields !== types.length) {
        throw new Error(`binary COPY: ${fields} fields where ${types.length} were asked for`)
      }
      rows++
      // The most a row's line can take unescaped: its bytes, quotes, commas and up to 20 digits for
      // each 8-byte whole number. A row that may need more (escapes), or a huge one, is built as text.
      if (BUFFER_BYTES - used < 3 * message.length + 64) flush()
      const start = used
      if (3 * message.length + 64 > BUFFER_BYTES || !lineInto(reader, types, out, used)) {
        used = start
        flush()
        hash.update(lineText(reader, types))
        return
      }
      used = lineEnd
    },
    LONG_QUERY_MS,
  )
  flush()
  return { rows, sha256: hash.digest('hex') }
}
