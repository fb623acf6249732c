// The board as rows (SPEC §6.3): board cells arranged by service and environment order, each with
// what the page must say (status, drift). Pure: the cells come from boardCells in queries.ts.
import type { BoardCell } from './deployments/queries.js'
import type { DeploymentOutcome } from './deployments/rules.js'
import type { FieldError } from './events/event.js'
import { instantOf, readInstant } from './instants.js'
import { knownZone, zonedToInstant } from './time-zones.js'

/** A deployment that draws attention: the latest one there is not a success. */
export type Alert = Exclude<DeploymentOutcome, 'succeeded'>

export interface Drift {
  /** The nearest earlier environment (board order) that runs something. */
  environment: string
  version: string
  /**
   * 'behind': the earlier environment got its version later (it waits to be promoted here);
   * 'ahead': this environment got its version later than the earlier one (e.g. a hotfix).
   */
  kind: 'behind' | 'ahead'
}

export interface BoardEntry {
  environment: string
  version: string | null
  since: number | null
  sender: string | null
  /** The latest deployment, when it is not a success (in progress, failed, stalled). */
  alert: { outcome: Alert; version: string; startedAt: number } | null
  drift: Drift | null
}

export interface BoardRow {
  service: string
  team: string | null
  /** One entry per environment in order; null where the service has never deployed. */
  entries: (BoardEntry | null)[]
}

export interface BoardFilter {
  team?: string
  /** Case-insensitive substring of the service name. */
  name?: string
}

/**
 * Drift, precisely: in one service, an environment that runs version V differs from the nearest
 * earlier environment (in board order, hidden ones left out) that runs anything, when that one
 * runs another version. Environments where nothing runs are skipped over, and the first one with
 * a version never drifts. Whether it waits to be promoted or is ahead is told by which of the two
 * running deployments finished later.
 */
export function boardRows(
  cells: readonly BoardCell[],
  environments: readonly string[],
  teams: ReadonlyMap<string, string | null>,
  filter: BoardFilter = {},
): BoardRow[] {
  const byService = new Map<string, Map<string, BoardCell>>()
  for (const cell of cells) {
    let row = byService.get(cell.service)
    if (!row) {
      row = new Map()
      byService.set(cell.service, row)
    }
    row.set(cell.environment, cell)
  }
  const needle = filter.name?.toLowerCase()
  const rows: BoardRow[] = []
  for (const [service, row] of byService) {
    const team = teams.get(service) ?? null
    if (filter.team !== undefined && team !== filter.team) continue
    if (needle !== undefined && !service.toLowerCase().includes(needle)) continue
    let previous: { environment: string; version: string; finishEventId: number } | null = null
    const entries = environments.map((environment): BoardEntry | null => {
      const cell = row.get(environment)
      if (!cell) return null
      const running = cell.running
      const latest = cell.latest
      const alert =
        latest && latest.outcome !== 'succeeded'
          ? {
              outcome: latest.outcome,
              version: latest.deployment.version,
              startedAt: latest.deployment.startedAt,
            }
          : null
      let drift: Drift | null = null
      if (running) {
        const finished = running.finishEventId ?? running.id
        if (previous && previous.version !== running.version) {
          drift = {
            environment: previous.environment,
            version: previous.version,
            kind: previous.finishEventId > finished ? 'behind' : 'ahead',
          }
        }
        previous = { environment, version: running.version, finishEventId: finished }
      }
      return {
        environment,
        version: running?.version ?? null,
        since: running?.finishedAt ?? null,
        sender: running ? (running.deployer ?? running.apiKeyName) : null,
        alert,
        drift,
      }
    })
    // A service seen only in hidden environments has nothing to show.
    if (entries.every((e) => e === null)) continue
    rows.push({ service, team, entries })
  }
  return rows.sort((a, b) => a.service.localeCompare(b.service, 'en') || (a.service < b.service ? -1 : 1))
}

/** The instant the board is asked for (`?at=`), read as the log reads From and To. */
export interface BoardInstant {
  /** The instant to show; null for now (also when the text was refused: the board shows now). */
  at: number | null
  /** The zone a time without zone was read in (the viewer's, sent as `tz`); undefined for UTC. */
  zone?: string
  /** Why the text was refused, to show beside the field. */
  error?: FieldError
}

/**
 * Reads `at` by the one grammar of instants (instants.ts). A time without zone, as the page's
 * datetime-local field sends it, is read in the viewer's zone when the form sent one (`tz`, filled in
 * by the page's script), else in UTC, which the field's label then says. The board cannot know the
 * future, so a later instant is refused rather than quietly shown as now.
 */
export function readBoardInstant(atText: string, tzText: string, now: number): BoardInstant {
  const zone = tzText === '' ? undefined : knownZone(tzText)
  const zoned = zone === undefined ? {} : { zone }
  if (tzText !== '' && zone === undefined) {
    return { at: null, error: { field: 'tz', message: 'tz must be a time zone name such as Europe/Berlin' } }
  }
  if (atText === '') return { at: null, ...zoned }
  const read = readInstant(atText)
  if (read === undefined) {
    return {
      at: null,
      ...zoned,
      error: {
        field: 'at',
        message:
          'Enter a date and time, such as 2026-11-20T14:00, or ISO 8601 with a zone, such as 2026-11-20T14:00:00Z',
      },
    }
  }
  const at = instantOf(read, (wall) => (zone === undefined ? wall : zonedToInstant(zone, wall)))
  if (at > now) {
    return {
      at: null,
      ...zoned,
      error: { field: 'at', message: 'That time is in the future: the board shows the present or the past' },
    }
  }
  return { at, ...zoned }
}
