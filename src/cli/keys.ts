// shiplog keys create|list|revoke: thin callers of the audited domain commands, which write the
// change and its audit entry together.
import { parseArgs } from 'node:util'
import { cliSource } from '../domain/audit/log.js'
import { createApiKeyAudited, revokeApiKeyAudited } from '../domain/keys/commands.js'
import { listApiKeys, parseScopes, scopesFromColumn } from '../domain/keys.js'
import { nameProblem, printableName } from '../text-rules.js'
import { CliError, withDatabase } from './common.js'
import { accountAndPositionals, accountOrFail, formatTime, printTable, required } from './options.js'

export async function keysCreate(args: string[]): Promise<void> {
  const usage = 'shiplog keys create --account NAME --name LABEL [--scope ingest|read|ingest,read]'
  const { values } = parseArgs({
    args,
    options: { account: { type: 'string' }, name: { type: 'string' }, scope: { type: 'string' } },
    strict: true,
  })
  const accountName = required(values, 'account', usage)
  const name = required(values, 'name', usage).trim()
  const badName = nameProblem(name)
  if (badName) throw new CliError(`--name ${badName}`, 2)
  // Checked before the database is opened: a bad scope creates nothing.
  const scopes = values.scope === undefined ? (['ingest'] as const) : parseScopes(values.scope)
  if (!scopes) {
    throw new CliError(
      `--scope must be ingest, read or ingest,read (got "${printableName(values.scope ?? '')}")`,
      2,
    )
  }
  await withDatabase(async (database) => {
    const account = await accountOrFail(database, accountName)
    const { key } = await createApiKeyAudited(database.db, account.id, { name, scopes }, cliSource())
    // stdout carries the key alone so scripts can capture it: KEY=$(shiplog keys create ...)
    process.stdout.write(`${key}\n`)
  })
}

export async function keysList(args: string[]): Promise<void> {
  const { values } = parseArgs({ args, options: { account: { type: 'string' } }, strict: true })
  const accountName = required(values, 'account', 'shiplog keys list --account NAME')
  await withDatabase(async (database) => {
    const account = await accountOrFail(database, accountName)
    const keys = await listApiKeys(database.db, account.id)
    const rows = [
      ['ID', 'NAME', 'PREFIX', 'SCOPES', 'CREATED', 'CREATED BY', 'LAST USED', 'STATUS'],
      ...keys.map((k) => [
        String(k.id),
        printableName(k.name),
        `${k.prefix}…`,
        scopesFromColumn(k.scopes).join(',') || '-',
        formatTime(k.created_at),
        printableName(k.created_by),
        formatTime(k.last_used_at),
        k.revoked_at === null ? 'active' : `revoked ${formatTime(k.revoked_at)}`,
      ]),
    ]
    printTable(rows)
  })
}

export async function keysRevoke(args: string[]): Promise<void> {
  const usage = 'shiplog keys revoke --account NAME ID-OR-KEY'
  const { accountName, positionals } = accountAndPositionals(args, usage)
  if (positionals.length !== 1 || !positionals[0])
    throw new CliError(`one key id or key is required (${usage})`, 2)
  const ref = positionals[0]
  await withDatabase(async (database) => {
    const account = await accountOrFail(database, accountName)
    const row = await revokeApiKeyAudited(database, account.id, ref, cliSource())
    if (!row)
      throw new CliError(
        `account "${account.name}" has no key ${/^\d+$/.test(ref) ? ref : 'matching that value'}`,
      )
    process.stderr.write(`revoked key ${row.id} (${row.name}, ${row.prefix}…)\n`)
  })
}
