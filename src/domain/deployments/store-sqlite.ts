// One derivation run on SQLite: prepared statements in one synchronous unit of the write connection's
// queue (nothing else runs on it meanwhile), planned by derivation.ts.
import type { SqliteHandle, SqlWriter } from '../../db/connect.js'
import type { DeploymentRow } from '../../db/schema.js'
import {
  type BatchStart,
  type BatchWrites,
  type GapRow,
  type GroupId,
  groupIdKey,
  incrementalGroups,
  type LoadedGroup,
  lateGroups,
  loadedGroup,
  planBatch,
  regroupBound,
  type StoredEvent,
} from './derivation.js'
import { type AliasRow, applyNameAliases, nameAliases, rawNames } from './name-aliases.js'
import type { DerivationCache } from './state-cache.js'

/**
 * An event's columns named as StoredEvent names them: better-sqlite3 returns integers as numbers, so
 * each row is a StoredEvent as read, with no second object per event (a rebuild reads a million).
 */
const STORED_EVENT_COLUMNS =
  'id, account_id AS accountId, service, environment, version, status, occurred_at AS occurredAt, ' +
  'commit_time AS commitTime, deployer, api_key_name AS apiKeyName'

const SQL = {
  lock: 'UPDATE deployments_progress SET generation = generation + 1 WHERE id = 1 RETURNING generation',
  through: 'SELECT through FROM deployments_progress WHERE id = 1',
  eventsAfter: `SELECT ${STORED_EVENT_COLUMNS} FROM events WHERE id > ? ORDER BY id LIMIT ?`,
  gaps: 'SELECT from_id, to_id, seen_at FROM deployment_gaps ORDER BY from_id',
  eventsBetween: `SELECT ${STORED_EVENT_COLUMNS} FROM events WHERE id >= ? AND id <= ? ORDER BY id`,
  groupEvents: `SELECT ${STORED_EVENT_COLUMNS} FROM events WHERE account_id = ? AND service = ? AND environment = ? AND id <= ? ORDER BY id`,
  // A group whose names were renamed or merged into it (name_aliases): every name its events carry.
  groupEventsAliased: `SELECT ${STORED_EVENT_COLUMNS} FROM events WHERE account_id = ? AND service IN (SELECT value FROM json_each(?)) AND environment IN (SELECT value FROM json_each(?)) AND id <= ? ORDER BY id`,
  aliases: 'SELECT account_id, kind, from_name, to_name FROM name_aliases',
  head: 'SELECT running_id, latest_id FROM deployment_heads WHERE account_id = ? AND service = ? AND environment = ?',
  byId: 'SELECT * FROM deployments WHERE id = ?',
  open: 'SELECT * FROM deployments WHERE account_id = ? AND service = ? AND environment = ? AND result IS NULL',
  succeeded:
    "SELECT DISTINCT version FROM deployments WHERE account_id = ? AND service = ? AND environment = ? AND result = 'succeeded'",
  deleteGroup: 'DELETE FROM deployments WHERE account_id = ? AND service = ? AND environment = ?',
  upsertDeployment:
    'INSERT INTO deployments (id, account_id, service, environment, version, started_at, finished_at, result, instant, ' +
    'finish_event_id, rollback, rolled_back, deployer, api_key_name, commit_time, event_ids) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ' +
    'ON CONFLICT (id) DO UPDATE SET finished_at = excluded.finished_at, result = excluded.result, instant = excluded.instant, ' +
    'finish_event_id = excluded.finish_event_id, rollback = excluded.rollback, rolled_back = excluded.rolled_back, ' +
    'deployer = excluded.deployer, api_key_name = excluded.api_key_name, commit_time = excluded.commit_time, event_ids = excluded.event_ids',
  // A deployment first seen in this run: nothing stored to conflict with.
  insertDeployment:
    'INSERT INTO deployments (id, account_id, service, environment, version, started_at, finished_at, result, instant, ' +
    'finish_event_id, rollback, rolled_back, deployer, api_key_name, commit_time, event_ids) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
  // A stored open deployment that this run closed: the finishing columns change, and with them the
  // entries of the indexes over them.
  closeDeployment:
    'UPDATE deployments SET finished_at = ?, result = ?, finish_event_id = ?, rollback = ?, rolled_back = ?, ' +
    'deployer = ?, api_key_name = ?, commit_time = ?, event_ids = ? WHERE id = ?',
  // Any other change to a stored deployment (a retry folded into an open one, a finished one rolled
  // back) sets only columns no index covers, so SQLite rewrites the row alone.
  touchDeployment:
    'UPDATE deployments SET rolled_back = ?, deployer = ?, api_key_name = ?, commit_time = ?, event_ids = ? WHERE id = ?',
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
 * Derives the next batch in one unit of the write connection's queue: one transaction with the
 * write lock taken at its start, resolved once it is on disk.
 */
export async function catchUpSqlite(
  database: SqliteHandle,
  limit: number,
  now: number,
  cache: DerivationCache,
): Promise<BatchWrites> {
  try {
    return await database.write((sql) => {
      const { writes, generation } = deriveBatch(sql, limit, now, cache)
      // Remembered now, before the next unit can start a run: the commit follows synchronously. Should
      // it fail, the generation this run took is rolled back with it, the next run takes the same one
      // again, and beginRun forgets what was remembered here.
      cache.committed(generation, writes.states, writes.firsts)
      return writes
    })
  } catch (err) {
    cache.clear()
    throw err
  }
}

/** Empties the derived tables, so the next runs derive everything again. */
export function resetSqlite(database: SqliteHandle): Promise<void> {
  return database.write((sql) => {
    sql.get(SQL.lock)
    for (const table of ['deployments', 'deployment_heads', 'deployment_gaps', 'version_firsts']) {
      sql.run(`DELETE FROM ${table}`)
    }
    sql.run(SQL.setThrough, 0)
  })
}

function events(rows: unknown[]): StoredEvent[] {
  return rows as StoredEvent[]
}

function deriveBatch(
  sql: SqlWriter,
  limit: number,
  now: number,
  cache: DerivationCache,
): { writes: BatchWrites; generation: number } {
  const q = (text: string) => sql.statement(text)
  const { generation } = q(SQL.lock).get() as { generation: number }
  cache.beginRun(generation)
  const { through } = q(SQL.through).get() as { through: number }
  const batch = events(q(SQL.eventsAfter).all(through, limit))
  const gaps = q(SQL.gaps).all() as GapRow[]
  const gapEvents = gaps.flatMap((gap) => events(q(SQL.eventsBetween).all(gap.from_id, gap.to_id)))
  const aliases = nameAliases(q(SQL.aliases).all() as AliasRow[])
  applyNameAliases(batch, aliases)
  applyNameAliases(gapEvents, aliases)
  const start: BatchStart = { through, batch, gaps, gapEvents }

  const late = lateGroups(start)
  const regrouped = new Map<string, { group: GroupId; events: StoredEvent[] }>()
  const bound = regroupBound(start)
  for (const group of late) {
    const found =
      aliases === null
        ? events(q(SQL.groupEvents).all(group.accountId, group.service, group.environment, bound))
        : events(
            q(SQL.groupEventsAliased).all(
              group.accountId,
              JSON.stringify(rawNames(aliases, group.accountId, 'service', group.service)),
              JSON.stringify(rawNames(aliases, group.accountId, 'environment', group.environment)),
              bound,
            ),
          )
    applyNameAliases(found, aliases)
    regrouped.set(groupIdKey(group), { group, events: found })
  }
  const loaded = new Map<string, LoadedGroup>()
  const incremental = incrementalGroups(start, late)
  for (const { key, group } of incremental) {
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

  const writes = planBatch(start, regrouped, loaded, now, incremental)
  for (const g of writes.deleteGroups) q(SQL.deleteGroup).run(g.accountId, g.service, g.environment)
  // Which statement a row needs follows from where derivation stood: a deployment opened by an
  // event after `through` is not stored yet (unless its group was derived again, deleted above, where
  // every row is written whole); one closed by such an event was stored open.
  const regroupedKeys = writes.deleteGroups.length > 0 ? new Set(writes.deleteGroups.map(groupIdKey)) : null
  const insert = q(SQL.insertDeployment)
  const close = q(SQL.closeDeployment)
  const touch = q(SQL.touchDeployment)
  const upsert = q(SQL.upsertDeployment)
  for (const d of writes.deployments) {
    if (d.id > through) {
      insert.run(
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
        d.commit_time,
        d.event_ids,
      )
      continue
    }
    if (
      regroupedKeys === null ||
      !regroupedKeys.has(
        groupIdKey({ accountId: d.account_id, service: d.service, environment: d.environment }),
      )
    ) {
      if (d.finish_event_id !== null && d.finish_event_id > through) {
        close.run(
          d.finished_at,
          d.result,
          d.finish_event_id,
          d.rollback,
          d.rolled_back,
          d.deployer,
          d.api_key_name,
          d.commit_time,
          d.event_ids,
          d.id,
        )
      } else {
        touch.run(d.rolled_back, d.deployer, d.api_key_name, d.commit_time, d.event_ids, d.id)
      }
      continue
    }
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
      d.commit_time,
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
