// One derivation run on SQLite: prepared statements, one synchronous transaction (nothing else can
// run on the connection meanwhile), planned by derivation.ts.
import type { SqliteHandle } from '../../db/connect.js'
import type { DeploymentRow } from '../../db/schema.js'
import {
  type BatchStart,
  type BatchWrites,
  EVENT_COLUMN_LIST,
  type EventColumns,
  type GapRow,
  type GroupId,
  groupIdKey,
  incrementalGroups,
  type LoadedGroup,
  lateGroups,
  loadedGroup,
  planBatch,
  type StoredEvent,
  toStoredEvent,
} from './derivation.js'
import type { DerivationCache } from './state-cache.js'

const SQL = {
  lock: 'UPDATE deployments_progress SET generation = generation + 1 WHERE id = 1 RETURNING generation',
  through: 'SELECT through FROM deployments_progress WHERE id = 1',
  eventsAfter: `SELECT ${EVENT_COLUMN_LIST} FROM events WHERE id > ? ORDER BY id LIMIT ?`,
  gaps: 'SELECT from_id, to_id, seen_at FROM deployment_gaps ORDER BY from_id',
  eventsBetween: `SELECT ${EVENT_COLUMN_LIST} FROM events WHERE id >= ? AND id <= ? ORDER BY id`,
  groupEvents: `SELECT ${EVENT_COLUMN_LIST} FROM events WHERE account_id = ? AND service = ? AND environment = ? ORDER BY id`,
  head: 'SELECT running_id, latest_id FROM deployment_heads WHERE account_id = ? AND service = ? AND environment = ?',
  byId: 'SELECT * FROM deployments WHERE id = ?',
  open: 'SELECT * FROM deployments WHERE account_id = ? AND service = ? AND environment = ? AND result IS NULL',
  succeeded:
    "SELECT DISTINCT version FROM deployments WHERE account_id = ? AND service = ? AND environment = ? AND result = 'succeeded'",
  deleteGroup: 'DELETE FROM deployments WHERE account_id = ? AND service = ? AND environment = ?',
  upsertDeployment:
    'INSERT INTO deployments (id, account_id, service, environment, version, started_at, finished_at, result, instant, ' +
    'finish_event_id, rollback, rolled_back, deployer, api_key_name, event_ids) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ' +
    'ON CONFLICT (id) DO UPDATE SET finished_at = excluded.finished_at, result = excluded.result, instant = excluded.instant, ' +
    'finish_event_id = excluded.finish_event_id, rollback = excluded.rollback, rolled_back = excluded.rolled_back, ' +
    'deployer = excluded.deployer, api_key_name = excluded.api_key_name, event_ids = excluded.event_ids',
  upsertFirst:
    'INSERT INTO version_firsts (account_id, service, version, deployment_id, started_at) VALUES (?, ?, ?, ?, ?) ' +
    'ON CONFLICT (account_id, service, version) DO UPDATE SET deployment_id = excluded.deployment_id, ' +
    'started_at = excluded.started_at WHERE excluded.deployment_id < version_firsts.deployment_id',
  upsertHead:
    'INSERT INTO deployment_heads (account_id, service, environment, running_id, latest_id) VALUES (?, ?, ?, ?, ?) ' +
    'ON CONFLICT (account_id, service, environment) DO UPDATE SET running_id = excluded.running_id, latest_id = excluded.latest_id',
  clearGaps: 'DELETE FROM deployment_gaps',
  insertGap: 'INSERT INTO deployment_gaps (from_id, to_id, seen_at) VALUES (?, ?, ?)',
  setThrough: 'UPDATE deployments_progress SET through = ? WHERE id = 1',
} as const

/**
 * Derives the next batch in one immediate transaction. Like the version index, it commits with
 * synchronous=NORMAL: a derivation lost to a power cut is lost whole, `through` with it, and done
 * again; an fsync here would block the event loop.
 */
export function catchUpSqlite(
  database: SqliteHandle,
  limit: number,
  now: number,
  cache: DerivationCache,
): BatchWrites {
  const { synchronous } = database.prepare('pragma synchronous').get() as { synchronous: number }
  database.prepare('pragma synchronous = normal').run()
  try {
    database.prepare('begin immediate').run()
    try {
      const { writes, generation } = deriveBatch(database, limit, now, cache)
      database.prepare('commit').run()
      cache.committed(generation, writes.states, writes.firsts)
      return writes
    } catch (err) {
      cache.clear()
      if (database.sqlite.inTransaction) database.prepare('rollback').run()
      throw err
    }
  } finally {
    database.prepare(`pragma synchronous = ${Number(synchronous)}`).run()
  }
}

/** Empties the derived tables, so the next runs derive everything again. */
export function resetSqlite(database: SqliteHandle): void {
  database.prepare('begin immediate').run()
  try {
    database.prepare(SQL.lock).get()
    for (const table of ['deployments', 'deployment_heads', 'deployment_gaps', 'version_firsts']) {
      database.prepare(`DELETE FROM ${table}`).run()
    }
    database.prepare(SQL.setThrough).run(0)
    database.prepare('commit').run()
  } catch (err) {
    if (database.sqlite.inTransaction) database.prepare('rollback').run()
    throw err
  }
}

function events(rows: unknown[]): StoredEvent[] {
  return (rows as EventColumns[]).map(toStoredEvent)
}

function deriveBatch(
  database: SqliteHandle,
  limit: number,
  now: number,
  cache: DerivationCache,
): { writes: BatchWrites; generation: number } {
  const q = (sql: string) => database.prepare(sql)
  const { generation } = q(SQL.lock).get() as { generation: number }
  cache.beginRun(generation)
  const { through } = q(SQL.through).get() as { through: number }
  const batch = events(q(SQL.eventsAfter).all(through, limit))
  const gaps = q(SQL.gaps).all() as GapRow[]
  const gapEvents = gaps.flatMap((gap) => events(q(SQL.eventsBetween).all(gap.from_id, gap.to_id)))
  const start: BatchStart = { through, batch, gaps, gapEvents }

  const late = lateGroups(start)
  const regrouped = new Map<string, { group: GroupId; events: StoredEvent[] }>()
  for (const group of late) {
    regrouped.set(groupIdKey(group), {
      group,
      events: events(q(SQL.groupEvents).all(group.accountId, group.service, group.environment)),
    })
  }
  const loaded = new Map<string, LoadedGroup>()
  for (const { group } of incrementalGroups(start, late)) {
    const key = groupIdKey(group)
    const cached = cache.group(key)
    if (cached) {
      loaded.set(key, cached)
      continue
    }
    const where = [group.accountId, group.service, group.environment] as const
    const head = q(SQL.head).get(...where) as { running_id: number | null; latest_id: number } | undefined
    const running =
      head?.running_id === null || head === undefined
        ? undefined
        : (q(SQL.byId).get(head.running_id) as DeploymentRow | undefined)
    const open = q(SQL.open).all(...where) as DeploymentRow[]
    const succeeded = (q(SQL.succeeded).all(...where) as { version: string }[]).map((r) => r.version)
    loaded.set(key, loadedGroup(head, running, open, succeeded))
  }

  const writes = planBatch(start, regrouped, loaded, now)
  for (const g of writes.deleteGroups) q(SQL.deleteGroup).run(g.accountId, g.service, g.environment)
  const upsert = q(SQL.upsertDeployment)
  for (const d of writes.deployments) {
    upsert.run(
      d.id,
      d.account_id,
      d.service,
      d.environment,
      d.version,
      d.started_at,
      d.finished_at,
      d.result,
      d.instant,
      d.finish_event_id,
      d.rollback,
      d.rolled_back,
      d.deployer,
      d.api_key_name,
      d.event_ids,
    )
  }
  const first = q(SQL.upsertFirst)
  for (const f of writes.firsts) {
    if (!cache.knowsFirst(f)) first.run(f.account_id, f.service, f.version, f.deployment_id, f.started_at)
  }
  const head = q(SQL.upsertHead)
  for (const h of writes.heads) head.run(h.account_id, h.service, h.environment, h.running_id, h.latest_id)
  if (gaps.length > 0 || writes.gaps.length > 0) {
    q(SQL.clearGaps).run()
    const insert = q(SQL.insertGap)
    for (const g of writes.gaps) insert.run(g.from_id, g.to_id, g.seen_at)
  }
  if (writes.through !== null) q(SQL.setThrough).run(writes.through)
  // Webhooks are not derivation's business: each webhook's sender queues its deliveries from a
  // cursor bounded by `through` and the gaps written here (webhooks/cursor.ts).
  return { writes, generation }
}
