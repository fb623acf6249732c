// What the account commands (users, accounts, keys, webhooks) share: a required option, the named
// account or a one-line failure, and how a list is printed.
import { parseArgs } from 'node:util'
import type { Database } from '../db/connect.js'
import type { Account } from '../db/schema.js'
import { findAccountByName } from '../domain/accounts.js'
import { CliError } from './common.js'

export function required(values: Record<string, unknown>, name: string, usage: string): string {
  const value = values[name]
  if (typeof value !== 'string' || value.trim() === '')
    throw new CliError(`--${name} is required (${usage})`, 2)
  return value
}

/** `--account NAME` (required) and the positional arguments, for commands shaped `--account NAME X`. */
export function accountAndPositionals(
  args: string[],
  usage: string,
): { accountName: string; positionals: string[] } {
  const { values, positionals } = parseArgs({
    args,
    options: { account: { type: 'string' } },
    allowPositionals: true,
    strict: true,
  })
  return { accountName: required(values, 'account', usage), positionals }
}

export async function accountOrFail(database: Database, name: string): Promise<Account> {
  const account = await findAccountByName(database.db, name)
  if (!account) {
    throw new CliError(
      `account "${name.trim()}" does not exist (create it with: shiplog users create --account ...)`,
    )
  }
  return account
}

export function formatTime(ms: number | null): string {
  return ms === null ? '-' : new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z')
}

/** Prints rows as columns padded to their widest cell (the last column is not padded). */
export function printTable(rows: readonly string[][]): void {
  const widths = rows[0]?.map((_, col) => Math.max(...rows.map((r) => [...(r[col] ?? '')].length))) ?? []
  for (const row of rows) {
    const line = row
      .map((cell, col) => (col === row.length - 1 ? cell : cell.padEnd(widths[col] ?? 0)))
      .join('  ')
    process.stdout.write(`${line}\n`)
  }
}
