// `shiplog verify [--head STREAM:ID:HEX]...`: checks the tamper-evidence chains against the rows
// (src/domain/chain/verify.ts) and prints what it found; the caller exits 0 only when intact.
import { parseArgs } from 'node:util'
import type { Database } from '../db/connect.js'
import { type ExpectedHead, parseHead, verifyChains } from '../domain/chain/verify.js'

export const VERIFY_USAGE = 'shiplog verify [--head events:ID:HEX]... [--head audit:ID:HEX]...'

export interface VerifyArgs {
  heads: ExpectedHead[]
}

/** The arguments, or a one-line reason they are wrong. */
export function parseVerifyArgs(args: string[]): VerifyArgs | string {
  let values: { head?: string[] }
  let positionals: string[]
  try {
    ;({ values, positionals } = parseArgs({
      args,
      options: { head: { type: 'string', multiple: true } },
      strict: true,
      allowPositionals: true,
    }))
  } catch (err) {
    return `${(err as Error).message} (${VERIFY_USAGE})`
  }
  if (positionals.length > 0) return `unexpected argument "${positionals[0]}" (${VERIFY_USAGE})`
  const heads: ExpectedHead[] = []
  for (const text of values.head ?? []) {
    const head = parseHead(text)
    if (typeof head === 'string') return head
    heads.push(head)
  }
  return { heads }
}

/** Verifies and writes the report line by line; true when everything matches. */
export async function runVerify(
  database: Database,
  args: VerifyArgs,
  write: (line: string) => void,
): Promise<boolean> {
  const result = await verifyChains(database, { heads: args.heads })
  for (const s of result.streams) {
    const head = s.through === 0 ? 'nothing chained yet' : `head ${s.stream}:${s.through}:${s.link}`
    const pruned = s.stream === 'events' ? `, ${s.pruned} pruned by retention` : ''
    write(`${s.stream}: ${s.checked} rows checked${pruned}, ${s.pending} not chained yet; ${head}`)
    // Deletions an admin made (each with its audit entry), named so the reader can look them up.
    for (const e of s.erased)
      write(`${s.stream}: ${e.rows} deleted by an admin: ${e.reason} (see the audit log)`)
  }
  for (const head of args.heads) {
    const failed = result.problems.some(
      (p) => p.stream === head.stream && p.id === head.id && p.kind === 'head',
    )
    if (!failed && result.moreProblems === 0) write(`head ${head.stream}:${head.id} matches`)
  }
  for (const problem of result.problems) write(`PROBLEM: ${problem.message}`)
  if (result.moreProblems > 0) write(`… and ${result.moreProblems} more problems`)
  write(result.ok ? 'verify: intact' : 'verify: FAILED')
  return result.ok
}
