// Writes rows into a PostgreSQL table with `COPY … FROM STDIN` (text format), ids included.
import type pg from 'pg'
import type { Row } from './checksum.js'
import { quoteIdent, type TableInfo } from './tables.js'

/** COPY's text format: tab between fields, newline after each row, \N for NULL, backslash escapes. */
function copyField(value: unknown): string {
  if (value === null || value === undefined) return '\\N'
  if (typeof value === 'number' || typeof value === 'bigint') return String(value)
  const text = typeof value === 'string' ? value : String(value)
  // Only these four need escaping; checking first keeps the common case a plain copy.
  if (!/[\\\t\n\r]/.test(text)) return text
  return text.replace(/[\\\t\n\r]/g, (c) =>
    c === '\\' ? '\\\\' : c === '\t' ? '\\t' : c === '\n' ? '\\n' : '\\r',
  )
}

const CHUNK_BYTES = 256 * 1024

/**
 * The pool's client-side query_timeout (20 s) is meant for requests; building an index over millions
 * of rows on a busy server takes longer. The server-side statement_timeout is lifted in the same
 * transactions (`set local statement_timeout = 0`).
 */
export const LONG_QUERY_MS = 24 * 60 * 60 * 1000

/**
 * pg runs any object with `submit` as a query (see db/copy-out.ts for the other direction). The
 * server answers COPY FROM with CopyInResponse; the rows then go as CopyData messages, then
 * CopyDone, and the server replies CommandComplete and ReadyForQuery (or an error).
 */
class CopyInQuery implements pg.Submittable {
  readonly done: Promise<void>
  /** Read by pg as this query's client-side timeout (see rows.ts). */
  readonly query_timeout = LONG_QUERY_MS
  callback?: (err: Error | null) => void
  private settle!: (err: Error | null) => void
  private failure: Error | null = null
  private settled = false

  constructor(
    private readonly text: string,
    private readonly chunks: Buffer[],
    private readonly sent?: () => void,
  ) {
    this.done = new Promise<void>((resolve, reject) => {
      this.settle = (err) => (err ? reject(err) : resolve())
    })
  }

  submit(connection: pg.Connection): void {
    connection.query(this.text)
  }

  handleCopyInResponse(connection: pg.Connection): void {
    const sender = connection as pg.Connection & {
      sendCopyFromChunk(chunk: Buffer): void
      endCopyFrom(): void
    }
    for (const chunk of this.chunks) sender.sendCopyFromChunk(chunk)
    sender.endCopyFrom()
    this.sent?.()
  }

  private finish(err: Error | null): void {
    if (this.settled) return
    this.settled = true
    this.callback?.(err)
    this.settle(err)
  }

  handleError(err: Error): void {
    this.failure = err
    this.finish(err)
  }

  handleReadyForQuery(): void {
    this.finish(this.failure)
  }

  handleCommandComplete(): void {}
  handleRowDescription(): void {}
  handleDataRow(): void {}
  handleEmptyQuery(): void {}
  handlePortalSuspended(): void {}
  handleCopyData(): void {}
}

/**
 * Copies `rows` (values in the table's column order) into `table` on `client`; `sent` is called
 * when the rows have gone to the server, which is then busy storing them.
 */
export async function copyIn(
  client: pg.PoolClient,
  table: TableInfo,
  rows: Row[],
  sent?: () => void,
): Promise<void> {
  const columns = table.columns.map((c) => quoteIdent(c.name)).join(', ')
  const chunks: Buffer[] = []
  let pending: string[] = []
  let pendingLength = 0
  for (const row of rows) {
    const line = `${row.map(copyField).join('\t')}\n`
    pending.push(line)
    pendingLength += line.length
    if (pendingLength >= CHUNK_BYTES) {
      chunks.push(Buffer.from(pending.join(''), 'utf8'))
      pending = []
      pendingLength = 0
    }
  }
  if (pending.length > 0) chunks.push(Buffer.from(pending.join(''), 'utf8'))
  const query = client.query(
    new CopyInQuery(`copy ${quoteIdent(table.name)} (${columns}) from stdin`, chunks, sent),
  )
  await query.done
}
