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

/** Lines hashed at once: one hash update per this many characters, as addRows does per batch. */
const FLUSH_CHARS = 1 << 20

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
  let rows = 0
  let text = ''
  await copyOut(
    client,
    `copy (select ${columns} from ${quoteIdent(table.name)} order by ${order}) to stdout (format binary)`,
    (message) => {
      const fields = reader.row(message)
      if (fields < 0) return
      if (fields !== types.length)
        throw new Error(`binary COPY: ${fields} fields where ${types.length} were asked for`)
      let line = '['
      for (let i = 0; i < fields; i++) {
        if (i > 0) line += ','
        const length = reader.field()
        if (length < 0) {
          line += 'null'
          continue
        }
        const { message: bytes, start } = reader
        switch (types[i]) {
          case 'text':
            line += JSON.stringify(bytes.toString('utf8', start, start + length))
            break
          case 'int8':
            if (length !== 8) throw new Error('binary COPY: a bigint field of unexpected length')
            line += String(bytes.readInt32BE(start) * 0x1_0000_0000 + bytes.readUInt32BE(start + 4))
            break
          case 'int4':
            if (length !== 4) throw new Error('binary COPY: an integer field of unexpected length')
            line += String(bytes.readInt32BE(start))
            break
          default:
            if (length !== 2) throw new Error('binary COPY: a smallint field of unexpected length')
            line += String(bytes.readInt16BE(start))
        }
      }
      text += `${line}]\n`
      rows++
      if (text.length >= FLUSH_CHARS) {
        hash.update(text)
        text = ''
      }
    },
    LONG_QUERY_MS,
  )
  if (text !== '') hash.update(text)
  return { rows, sha256: hash.digest('hex') }
}
