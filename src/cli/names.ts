// Tidying names from the command line (issue 28): `shiplog services rename|delete` and
// `shiplog env rename`, the same operations as the admin pages, audited as the command line.
import { parseArgs } from 'node:util'
import type { Database } from '../db/connect.js'
import { findAccountByName } from '../domain/accounts.js'
import { cliActor } from '../domain/audit/log.js'
import { BACKLOG_BATCH, catchUpDeployments } from '../domain/deployments/store.js'
import { deleteServiceAudited, renameAudited } from '../domain/names/audited.js'
import { checkRename, type NameKind } from '../domain/names/rename.js'
import { printableName } from '../text-rules.js'
import { CliError, reportFailure, withDatabase } from './common.js'

export const NAMES_USAGE = `  services rename --account NAME FROM TO
                                     rename a service, or merge it into TO when TO exists;
                                     events keep the name they were sent with
  services delete --account NAME SERVICE --confirm SERVICE
                                     delete a service's events and deployments for good
                                     (audited; shiplog verify names the deletion)
  env rename --account NAME FROM TO  rename or merge an environment (Dev into dev)`

/** Derives what waits, so the names checked are those the board shows. */
async function current(database: Database): Promise<void> {
  for (;;) {
    const result = await catchUpDeployments(database, { limit: BACKLOG_BATCH })
    if (!result.more && result.events === 0) return
  }
}

async function accountId(database: Database, name: string): Promise<number> {
  const account = await findAccountByName(database.db, name)
  if (!account) throw new CliError(`no account named "${printableName(name)}"`)
  return Number(account.id)
}

function parse(args: string[], usage: string, extra: Record<string, { type: 'string' }> = {}) {
  const { values, positionals } = parseArgs({
    args,
    options: { account: { type: 'string' }, ...extra },
    allowPositionals: true,
    strict: true,
  })
  if (typeof values.account !== 'string' || values.account.trim() === '')
    throw new CliError(`--account is required (${usage})`, 2)
  return { account: values.account, values: values as Record<string, string | undefined>, positionals }
}

async function rename(kind: NameKind, args: string[]): Promise<void> {
  const usage = `shiplog ${kind === 'service' ? 'services' : 'env'} rename --account NAME FROM TO`
  const { account, positionals } = parse(args, usage)
  const [from, to] = positionals
  if (from === undefined || to === undefined || positionals.length !== 2)
    throw new CliError(`give the current and the new name (${usage})`, 2)
  await withDatabase(async (database) => {
    const id = await accountId(database, account)
    await current(database)
    const checked = await checkRename(database.db, id, kind, from, to)
    if ('problem' in checked)
      throw new CliError(`${checked.field === 'from' ? 'FROM' : 'TO'}: ${checked.problem}`, 2)
    const result = await renameAudited(database.db, id, checked, { actor: cliActor(), address: null })
    process.stderr.write(
      `${kind} ${printableName(result.from)} ${result.merge ? 'merged into' : 'renamed to'} ${printableName(result.to)} (${result.events} events, ${result.deployments} deployments)\n`,
    )
  })
}

async function deleteService(args: string[]): Promise<void> {
  const usage = 'shiplog services delete --account NAME SERVICE --confirm SERVICE'
  const { account, values, positionals } = parse(args, usage, { confirm: { type: 'string' } })
  const [service] = positionals
  if (service === undefined || positionals.length !== 1) throw new CliError(`give the service (${usage})`, 2)
  if (values.confirm !== service)
    throw new CliError(`--confirm must repeat the service name exactly; nothing was deleted (${usage})`, 2)
  await withDatabase(async (database) => {
    const id = await accountId(database, account)
    await current(database)
    const known = await database.db
      .selectFrom('deployment_heads')
      .select('service')
      .where('account_id', '=', id)
      .where('service', '=', service)
      .executeTakeFirst()
    if (!known) throw new CliError(`this account has no service named "${printableName(service)}"`, 2)
    const result = await deleteServiceAudited(database.db, id, service, { actor: cliActor(), address: null })
    process.stderr.write(
      `history of ${printableName(service)} deleted: ${result.events} events, ${result.deployments} deployments\n`,
    )
  })
}

/** `shiplog services …` and `shiplog env …`; the exit code. */
export async function namesCommand(
  command: string,
  sub: string | undefined,
  args: string[],
): Promise<number> {
  try {
    if (command === 'services' && sub === 'rename') await rename('service', args)
    else if (command === 'services' && sub === 'delete') await deleteService(args)
    else if (command === 'env' && sub === 'rename') await rename('environment', args)
    else throw new CliError(`unknown command "${[command, sub].join(' ')}" (see shiplog --help)`, 2)
    return 0
  } catch (err) {
    return reportFailure(err)
  }
}
