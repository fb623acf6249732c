// `shiplog import FILE`: a batch of past events into one account (issue 28.3). Each row goes through
// the rules of ingest (event.ts, text-rules.ts, event-time.ts); its time is occurred_at, or the
// file's received_at when it has none (an export read back). received_at is the server's clock.
//
// All or nothing for the file's content, resumable for its writing: the whole file is checked first,
// and one bad row stores nothing (every bad row is reported with its line). Then rows are written in
// transactions of IMPORT_BATCH. A row's identity is its values and its time: an event already stored
// with the same values at the same occurred_at is that row, so running the same file again (or after
// an interruption) stores only what is missing, and re-importing an export stores nothing new.
// (n identical rows in a file are n events: the k-th is stored unless k such events exist already.)
import { createHash } from 'node:crypto'
import type { Database } from '../../db/connect.js'
import type { EventSource } from '../../db/schema.js'
import { characterCount, textProblem } from '../../text-rules.js'
import { DEPLOY_NAMES, type EventInput, type FieldError, validateEventFields } from '../events/event.js'
import { checkEventTime, type EventTimeBounds } from '../events/event-time.js'
import { eventStoreFor, type PendingEvent } from '../events/store.js'
import { type ImportFormat, readSource } from './import-read.js'

/** Rows written per transaction. */
export const IMPORT_BATCH = 10_000
/** Bad rows listed at most (all are counted). */
export const MAX_REPORTED = 50

const SOURCES: ReadonlySet<string> = new Set(['put-get', 'put-post', 'deploy'])

export interface ImportRow {
  line: number
  input: EventInput & { occurredAt: number }
  source: EventSource
  apiKeyName: string | null
}

export interface BadRow {
  line: number
  errors: string[]
}

/** Checks one record by the rules of ingest; the row to store or what is wrong with it. */
export function checkRow(
  line: number,
  fields: Record<string, unknown>,
  now: number,
  bounds: EventTimeBounds,
): ImportRow | BadRow {
  const result = validateEventFields(fields, DEPLOY_NAMES, now, bounds)
  const errors: FieldError[] = result.ok ? [] : [...result.errors]
  let occurredAt = result.ok ? result.value.occurredAt : null
  const hasOccurred = fields.occurred_at !== undefined && fields.occurred_at !== null
  if (!hasOccurred) {
    // An export has no occurred_at: its received_at was the event's time.
    const received = checkEventTime(fields.received_at, now, bounds)
    if (received.error) errors.push({ field: 'received_at', message: `received_at ${received.error}` })
    else if (received.value === null) {
      errors.push({ field: 'occurred_at', message: 'occurred_at (or received_at) is required' })
    }
    occurredAt = received.value
  }
  let source: EventSource = 'deploy'
  if (fields.source !== undefined && fields.source !== null) {
    if (typeof fields.source === 'string' && SOURCES.has(fields.source.trim())) {
      source = fields.source.trim() as EventSource
    } else errors.push({ field: 'source', message: 'source must be put-get, put-post or deploy' })
  }
  let apiKeyName: string | null = null
  const name = fields.api_key_name
  if (name !== undefined && name !== null) {
    const text = typeof name === 'string' ? name.trim() : ''
    const problem = typeof name !== 'string' ? 'must be a string' : textProblem(text)
    if (problem) errors.push({ field: 'api_key_name', message: `api_key_name ${problem}` })
    else if (characterCount(text) > 200)
      errors.push({ field: 'api_key_name', message: 'api_key_name must be at most 200 characters' })
    else apiKeyName = text === '' ? null : text
  }
  if (!result.ok || errors.length > 0 || occurredAt === null) {
    return { line, errors: errors.map((e) => e.message) }
  }
  return { line, input: { ...result.value, occurredAt }, source, apiKeyName }
}

function isBad(row: ImportRow | BadRow): row is BadRow {
  return 'errors' in row
}

/** What makes two events the same: their values and their time (not the form, key or arrival). */
function identity(row: ImportRow): string {
  const i = row.input
  const parts = [
    i.service,
    i.environment,
    i.version,
    i.status,
    i.url,
    i.commit,
    i.description,
    i.deployer,
    i.occurredAt,
    i.commitTime,
  ]
  return createHash('sha1').update(JSON.stringify(parts)).digest('base64')
}

export interface ImportProgress {
  phase: 'check' | 'write'
  rows: number
  stored: number
  skipped: number
}

export interface ImportResult {
  rows: number
  stored: number
  /** Rows already stored (same values and time): a re-run, or an export of this account. */
  skipped: number
  bad: BadRow[]
  badCount: number
}

export interface ImportOptions {
  accountId: number
  format: ImportFormat
  bounds: EventTimeBounds
  now?: () => number
  onProgress?: (progress: ImportProgress) => void
}

/** Checks the whole file, then (when every row is good) stores what is not stored yet. */
export async function importEvents(
  database: Database,
  path: string,
  options: ImportOptions,
): Promise<ImportResult> {
  const now = options.now ?? Date.now
  const checkedAt = now()
  const result: ImportResult = { rows: 0, stored: 0, skipped: 0, bad: [], badCount: 0 }
  const tell = (phase: ImportProgress['phase']) =>
    options.onProgress?.({ phase, rows: result.rows, stored: result.stored, skipped: result.skipped })

  for await (const record of readSource(path, options.format)) {
    const row = 'message' in record ? { line: record.line, errors: [record.message] } : null
    const checked =
      row ??
      checkRow(record.line, (record as { fields: Record<string, unknown> }).fields, checkedAt, options.bounds)
    result.rows++
    if (isBad(checked)) {
      result.badCount++
      if (result.bad.length < MAX_REPORTED) result.bad.push(checked)
    }
    if (result.rows % 10_000 === 0) tell('check')
  }
  if (result.badCount > 0) return result

  const store = eventStoreFor(database)
  const seen = new Map<string, number>()
  let batch: ImportRow[] = []
  const flush = async () => {
    if (batch.length === 0) return
    const keys = batch.map(identity)
    const stored = await storedCounts(database, options.accountId, batch, keys)
    const receivedAt = now()
    const items: PendingEvent[] = []
    batch.forEach((row, i) => {
      const key = keys[i] as string
      const nth = (seen.get(key) ?? 0) + 1
      seen.set(key, nth)
      if (nth <= (stored.get(key) ?? 0)) {
        result.skipped++
        return
      }
      items.push({
        accountId: options.accountId,
        apiKeyId: null,
        apiKeyName: row.apiKeyName,
        source: row.source,
        input: row.input,
        idempotencyKey: null,
        receivedAt,
      })
    })
    if (items.length > 0) await store.writeBatch(items)
    result.stored += items.length
    batch = []
    tell('write')
  }
  for await (const record of readSource(path, options.format)) {
    if ('message' in record) throw new Error(`line ${record.line} changed while importing`)
    const row = checkRow(record.line, record.fields, checkedAt, options.bounds)
    if (isBad(row)) throw new Error(`line ${row.line} changed while importing: ${row.errors.join('; ')}`)
    batch.push(row)
    if (batch.length >= IMPORT_BATCH) await flush()
  }
  await flush()
  return result
}

/**
 * How many events of the account already have each batch row's values and time (by identity key),
 * found by the index on (account_id, occurred_at, id). Counted before the batch is written.
 */
async function storedCounts(
  database: Database,
  accountId: number,
  rows: readonly ImportRow[],
  keys: readonly string[],
): Promise<Map<string, number>> {
  const unique = new Map<string, ImportRow>()
  rows.forEach((row, i) => {
    unique.set(keys[i] as string, row)
  })
  const counts = new Map<string, number>()
  const entries = [...unique.entries()]
  const values = (r: ImportRow) => [
    r.input.occurredAt,
    r.input.service,
    r.input.environment,
    r.input.version,
    r.input.status,
    r.input.url,
    r.input.commit,
    r.input.description,
    r.input.deployer,
    r.input.commitTime,
  ]
  if (database.dialect === 'sqlite') {
    const found = await database.read((sql) => {
      const out: number[] = []
      const count = sql.statement(
        // The planner would pick the index by service (or status) and walk every event of it.
        'SELECT count(*) AS n FROM events INDEXED BY events_account_occurred_at_idx WHERE account_id = ? AND occurred_at = ? AND service = ? AND environment = ? ' +
          'AND version = ? AND status = ? AND url IS ? AND commit_sha IS ? AND description IS ? AND deployer IS ? ' +
          'AND commit_time IS ?',
      )
      for (const [, row] of entries) {
        const hit = count.get(accountId, ...values(row)) as { n: number } | undefined
        out.push(Number(hit?.n ?? 0))
      }
      return out
    })
    entries.forEach(([key], i) => {
      if ((found[i] ?? 0) > 0) counts.set(key, found[i] as number)
    })
    return counts
  }
  const columns = entries.map(([, row]) => values(row))
  const column = (i: number) => columns.map((v) => v[i] ?? null)
  const { rows: found } = await database.pool.query<{ ord: string; n: string }>(
    `SELECT t.ord, count(e.id) AS n
     FROM unnest($2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[],
       $10::text[], $11::bigint[]) WITH ORDINALITY AS t(occ, service, environment, version, status, url, commit_sha,
       description, deployer, commit_time, ord)
     JOIN events e ON e.account_id = $1 AND e.occurred_at = t.occ
       -- "|| ''": only (account_id, occurred_at) can lead to an index; one by service or status
       -- would walk every event of it.
       AND e.service || '' = t.service AND e.environment || '' = t.environment
       AND e.version || '' = t.version AND e.status || '' = t.status
       AND e.url IS NOT DISTINCT FROM t.url AND e.commit_sha IS NOT DISTINCT FROM t.commit_sha
       AND e.description IS NOT DISTINCT FROM t.description AND e.deployer IS NOT DISTINCT FROM t.deployer
       AND e.commit_time IS NOT DISTINCT FROM t.commit_time
     GROUP BY t.ord`,
    [accountId, ...Array.from({ length: 10 }, (_, i) => column(i))],
  )
  for (const r of found) {
    const entry = entries[Number(r.ord) - 1]
    if (entry) counts.set(entry[0], Number(r.n))
  }
  return counts
}
