// The board's guardrail marks (SPEC §11): per column, the locks on a whole environment and its
// active freeze; per cell, a lock on that service alone, a running (or latest) version marked bad,
// and a running (or latest) deployment that broke a guardrail when recorded. Pure: the guardrails
// and the deployments' flags are read once per page by the caller. A board of a past instant shows
// only what could be known then: the deployments' flags, and bad marks made by then; locks and
// freezes only on the board of now.
import type { Deployment } from '../deployments/rules.js'
import {
  badMark,
  type DeploymentFlags,
  type EnvironmentGuard,
  environmentGuards,
  serviceLocks,
} from '../guardrails/marks.js'
import type { BadVersion, Guardrails, Lock } from '../guardrails/rules.js'
import type { BoardCell } from './cells.js'

export interface CellGuard {
  /** Locks on this service alone in this environment. */
  readonly locks: readonly Lock[]
  /** The running version's bad mark, and the latest deployment's when it is another version. */
  readonly bad: readonly { readonly version: string; readonly mark: BadVersion }[]
  /** The running deployment's flags, and the latest one's when it is another deployment. */
  readonly flagged: readonly {
    readonly version: string
    readonly latest: boolean
    readonly flags: DeploymentFlags
  }[]
}

export interface BoardGuards {
  /** Column marks by environment; none on the board of a past instant. */
  readonly columns: ReadonlyMap<string, EnvironmentGuard>
  /** Cell marks by cellKey(service, environment); cells without any are left out. */
  readonly cells: ReadonlyMap<string, CellGuard>
}

export const NO_BOARD_GUARDS: BoardGuards = { columns: new Map(), cells: new Map() }

export function cellKey(service: string, environment: string): string {
  return `${service}\u0000${environment}`
}

/** The deployments a board shows (running and latest of each cell), whose flags the marks need. */
export function shownDeployments(cells: readonly BoardCell[]): Deployment[] {
  const out = new Map<number, Deployment>()
  for (const c of cells) {
    if (c.running) out.set(c.running.id, c.running)
    if (c.latest) out.set(c.latest.deployment.id, c.latest.deployment)
  }
  return [...out.values()]
}

/**
 * The marks of the given cells and environments. `at` null: the board of now (`now`); otherwise
 * the instant shown.
 */
export function boardGuards(input: {
  cells: readonly BoardCell[]
  environments: readonly string[]
  guardrails: Guardrails
  flags: ReadonlyMap<number, DeploymentFlags>
  at: number | null
  now: number
}): BoardGuards {
  const { guardrails: g, flags, at } = input
  const columns = new Map<string, EnvironmentGuard>()
  if (at === null)
    for (const guard of environmentGuards(g, input.environments, input.now))
      columns.set(guard.environment, guard)
  const cells = new Map<string, CellGuard>()
  for (const cell of input.cells) {
    const locks = at === null ? serviceLocks(g, cell.service, cell.environment, input.now) : []
    const shown: { deployment: Deployment; latest: boolean }[] = []
    if (cell.running) shown.push({ deployment: cell.running, latest: false })
    const latest = cell.latest?.deployment
    if (latest && latest.id !== cell.running?.id) shown.push({ deployment: latest, latest: true })
    const bad: { version: string; mark: BadVersion }[] = []
    const flagged: { version: string; latest: boolean; flags: DeploymentFlags }[] = []
    for (const { deployment, latest } of shown) {
      const mark = badMark(g, cell.service, deployment.version, at)
      if (mark && !bad.some((b) => b.version === deployment.version))
        bad.push({ version: deployment.version, mark })
      const f = flags.get(deployment.id)
      if (f) flagged.push({ version: deployment.version, latest, flags: f })
    }
    if (locks.length + bad.length + flagged.length > 0)
      cells.set(cellKey(cell.service, cell.environment), { locks, bad, flagged })
  }
  return { columns, cells }
}
