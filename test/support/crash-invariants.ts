// What must hold of a database that servers were SIGKILLed on, read in one snapshot so it can be
// checked while other servers keep writing: the rows the crash harness compares against its clients.
import { isDeepStrictEqual } from 'node:util'
import type { Kysely } from 'kysely'
import { parseDatabaseUrl } from '../../src/config.js'
import { openDatabase } from '../../src/db/connect.js'
import type { DB, EventRow } from '../../src/db/schema.js'
import type { Deployment } from '../../src/domain/deployments/rules.js'
import { rowToDeployment } from '../../src/domain/deployments/store.js'

export interface IdempotencyRecord {
  idem_key: string
  event_id: number | null
}

export interface DeliveryRecord {
  webhook_id: number
  event_id: number
  kind: string
  delivery_id: string
  state: string
}

/** One consistent view of what the harness checks. */
export interface Snapshot {
  events: EventRow[]
  idempotency: IdempotencyRecord[]
  deliveries: DeliveryRecord[]
  /** Deployments as derived and stored by the servers, per account, by id. */
  deployments: Map<number, Deployment[]>
  /** Every event up to this id is derived, except those in `gaps` (PostgreSQL's uncommitted ids). */
  through: number
  gaps: Array<{ from: number; to: number }>
}

async function readAll(db: Kysely<DB>): Promise<Snapshot> {
  const events = await db.selectFrom('events').selectAll().orderBy('id').execute()
  const idempotency = await db.selectFrom('idempotency_keys').select(['idem_key', 'event_id']).execute()
  const deliveries = await db
    .selectFrom('webhook_deliveries')
    .select(['webhook_id', 'event_id', 'kind', 'delivery_id', 'state'])
    .execute()
  const rows = await db.selectFrom('deployments').selectAll().orderBy('id').execute()
  const progress = await db
    .selectFrom('deployments_progress')
    .select('through')
    .where('id', '=', 1)
    .executeTakeFirst()
  const gaps = await db.selectFrom('deployment_gaps').select(['from_id', 'to_id']).execute()
  const deployments = new Map<number, Deployment[]>()
  for (const row of rows) {
    const account = Number(row.account_id)
    const list = deployments.get(account) ?? []
    list.push(rowToDeployment(row))
    deployments.set(account, list)
  }
  return {
    events: events.map((e) => ({ ...e, id: Number(e.id), received_at: Number(e.received_at) })),
    idempotency: idempotency.map((k) => ({
      idem_key: k.idem_key,
      event_id: k.event_id === null ? null : Number(k.event_id),
    })),
    deliveries: deliveries.map((d) => ({
      webhook_id: Number(d.webhook_id),
      event_id: Number(d.event_id),
      kind: String(d.kind),
      delivery_id: d.delivery_id,
      state: String(d.state),
    })),
    deployments,
    through: Number(progress?.through ?? 0),
    gaps: gaps.map((g) => ({ from: Number(g.from_id), to: Number(g.to_id) })),
  }
}

/**
 * Reads the snapshot in one transaction: REPEATABLE READ on PostgreSQL; on SQLite a read
 * transaction sees one state of the file from its first statement on, beside a writing server
 * (WAL). Servers may run meanwhile: nothing here writes.
 */
export async function readSnapshot(databaseUrl: string): Promise<Snapshot> {
  const database = openDatabase(parseDatabaseUrl(databaseUrl))
  try {
    const transaction =
      database.dialect === 'postgres'
        ? database.db.transaction().setIsolationLevel('repeatable read').setAccessMode('read only')
        : database.db.transaction()
    return await transaction.execute((trx) => readAll(trx))
  } finally {
    await database.close()
  }
}

/**
 * The events the servers have derived as of the snapshot: those up to `through` outside the gaps.
 * The stored deployments must be exactly the plain rules over these, whenever one looks: a
 * derivation run commits its deployments together with `through`, and a crash in between must lose
 * both or neither. Not more either: the next run takes the events after `through` (and those that
 * filled a gap) and applies them to what is stored, so one already in a deployment would count twice.
 */
export function derivedEvents(snapshot: Snapshot): EventRow[] {
  return snapshot.events.filter(
    (e) => e.id <= snapshot.through && !snapshot.gaps.some((g) => e.id >= g.from && e.id <= g.to),
  )
}

/** Where the snapshot's derivation stands for each event id: to read a difference by. */
export function derivationOf(snapshot: Snapshot, ids: readonly number[]): string {
  const present = new Set(snapshot.events.map((e) => e.id))
  const gaps = snapshot.gaps.map((g) => `${g.from}–${g.to}`).join(', ') || 'none'
  const each = ids.map((id) => {
    const gap = snapshot.gaps.some((g) => id >= g.from && id <= g.to)
    return `${id} ${present.has(id) ? 'stored' : 'absent'}, ${id <= snapshot.through ? '≤' : '>'} through${gap ? ', in a gap' : ''}`
  })
  return `through ${snapshot.through}, gaps ${gaps}; events ${each.join('; ')}`
}

/**
 * How the stored deployments differ from the expected ones, one line per deployment (at most
 * `limit`); empty when they are equal. With `snapshot`, each line says where its events stand.
 */
export function deploymentDifferences(
  stored: Map<number, Deployment[]>,
  expected: Map<number, Deployment[]>,
  limit = 10,
  snapshot?: Snapshot,
): string[] {
  const lines: string[] = []
  const accounts = new Set([...stored.keys(), ...expected.keys()])
  for (const account of accounts) {
    const have = new Map((stored.get(account) ?? []).map((d) => [d.id, d]))
    const want = new Map((expected.get(account) ?? []).map((d) => [d.id, d]))
    for (const id of new Set([...have.keys(), ...want.keys()])) {
      const a = have.get(id)
      const b = want.get(id)
      if (isDeepStrictEqual(a, b)) continue
      const ids = [...new Set([...(a?.eventIds ?? []), ...(b?.eventIds ?? [])])]
      lines.push(
        `account ${account} deployment ${id}: stored ${a ? JSON.stringify(a) : 'none'}, rules ${b ? JSON.stringify(b) : 'none'}` +
          (snapshot ? ` (${derivationOf(snapshot, ids)})` : ''),
      )
      if (lines.length >= limit) return lines
    }
  }
  return lines
}
