// Runs a PostgreSQL `COPY … TO STDOUT` on a pg client and hands over its rows as raw bytes.
import type pg from 'pg'

/**
 * pg has no COPY API of its own, but it runs any object with a `submit` method as a query and passes
 * it the protocol messages of that query. COPY TO answers with CopyOutResponse, one CopyData message
 * per row (the protocol promises exactly one row per message), CopyDone, CommandComplete and
 * ReadyForQuery; pg forwards CopyData, CommandComplete, errors and ReadyForQuery to the active query.
 * This is what the pg-copy-streams package does, without the stream: the caller wants the rows
 * synchronously, straight from pg's read buffer, because copying them once into its own output is
 * the whole cost of an export on this side.
 */
class CopyOutQuery implements pg.Submittable {
  readonly done: Promise<void>
  /**
   * pg sets this to arm its client-side query_timeout and must hear back through it: its timer holds
   * the query (and the rows it collected) until then, and fails the query when it expires.
   */
  callback?: (err: Error | null) => void
  /** Read by pg as this query's client-side timeout; when unset, the pool's query_timeout applies. */
  readonly query_timeout: number | undefined
  private resolve!: () => void
  private reject!: (err: Error) => void
  private failure: Error | null = null

  constructor(
    private readonly text: string,
    private readonly onRow: (row: Buffer) => void,
    timeoutMs?: number,
  ) {
    this.query_timeout = timeoutMs
    this.done = new Promise<void>((resolve, reject) => {
      this.resolve = resolve
      this.reject = reject
    })
  }

  submit(connection: pg.Connection): void {
    connection.query(this.text)
  }

  handleCopyData(message: { chunk: Buffer }): void {
    // A row the caller cannot take (it throws) does not stop the server from sending the rest; they
    // are drained and the error reported once the connection is ready for the next query.
    if (this.failure) return
    try {
      this.onRow(message.chunk)
    } catch (err) {
      this.failure = err instanceof Error ? err : new Error(String(err))
    }
  }

  handleReadyForQuery(): void {
    this.callback?.(this.failure)
    if (this.failure) this.reject(this.failure)
    else this.resolve()
  }

  handleError(err: Error): void {
    this.callback?.(err)
    this.reject(err)
  }

  // Messages a COPY TO does not produce, or that need no action.
  handleCommandComplete(): void {}
  handleRowDescription(): void {}
  handleDataRow(): void {}
  handleEmptyQuery(): void {}
  handlePortalSuspended(): void {}
  handleCopyInResponse(): void {
    this.failure ??= new Error('COPY FROM is not supported here')
  }
}

/**
 * Runs `text`, a `COPY (…) TO STDOUT …` statement, on `client`. `onRow` sees each row's bytes as
 * PostgreSQL sent them; they live in pg's read buffer, which is reused, so it must copy what it
 * keeps before returning. `timeoutMs` replaces the pool's client-side query_timeout for a COPY
 * meant to run long (the server's statement_timeout is the caller's to lift).
 */
export async function copyOut(
  client: pg.PoolClient,
  text: string,
  onRow: (row: Buffer) => void,
  timeoutMs?: number,
): Promise<void> {
  const query = client.query(new CopyOutQuery(text, onRow, timeoutMs))
  await query.done
}
