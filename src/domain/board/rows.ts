// The board as rows (SPEC §6.3): board cells arranged by service and environment order, each with
// what the page must say (status, drift). Pure: the cells come from boardCells in cells.ts.
import type { DeploymentOutcome } from '../deployments/rules.js'
import type { BoardCell } from './cells.js'

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
