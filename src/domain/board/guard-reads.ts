// What the board's guardrail marks read (guard-marks.ts draws them): the account's guardrails and
// the flags of the deployments shown, each read once per page or live row.
import type { Kysely } from 'kysely'
import type { DB } from '../../db/schema.js'
import { deploymentFlags } from '../guardrails/marks.js'
import { loadGuardrails } from '../guardrails/store.js'
import type { BoardCell } from './cells.js'
import { type BoardGuards, boardGuards, shownDeployments } from './guard-marks.js'
import type { BoardRow } from './rows.js'

/**
 * The marks of the board's shown rows and environments: `at` null for the board of now. Cells of
 * rows filtered out or of hidden environments are not read.
 */
export async function readBoardGuards(
  db: Kysely<DB>,
  accountId: number,
  shown: {
    rows: readonly BoardRow[]
    cells: readonly BoardCell[]
    environments: readonly string[]
    at: number | null
    now: number
  },
): Promise<BoardGuards> {
  const services = new Set(shown.rows.map((r) => r.service))
  const environments = new Set(shown.environments)
  const cells = shown.cells.filter((c) => services.has(c.service) && environments.has(c.environment))
  const [guardrails, flags] = await Promise.all([
    loadGuardrails(db, accountId),
    deploymentFlags(db, accountId, shownDeployments(cells)),
  ])
  return boardGuards({
    cells,
    environments: shown.environments,
    guardrails,
    flags,
    at: shown.at,
    now: shown.now,
  })
}
