// The operator command: serve, migrate, users create|set-password, keys create|list|revoke,
// deployments rebuild, webhooks create|list|delete.
import { readFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { loadConfig } from '../config.js'
import type { Database } from '../db/connect.js'
import {
  accountNameProblem,
  createUser,
  emailProblem,
  ensureAccount,
  findAccountByName,
  findUserInAccount,
  resetPassword,
  UserExistsError,
} from '../domain/accounts.js'
import { resolveAppSecret, secretStatus } from '../domain/app-secret.js'
import { cliActor, keyLabel, recordAudit, webhookDetails, webhookLabel } from '../domain/audit/log.js'
import { rebuildDeployments } from '../domain/deployments/store.js'
import { setPasswordLogin } from '../domain/identity/provisioning.js'
import {
  createApiKey,
  listApiKeys,
  parseScopes,
  revokeApiKeyEverywhere,
  scopesFromColumn,
} from '../domain/keys.js'
import { hashedPassword, passwordProblem } from '../domain/passwords.js'
import { counted } from '../domain/plural.js'
import {
  createWebhook,
  deleteWebhook,
  getWebhook,
  listWebhooks,
  WebhookInputError,
} from '../domain/webhooks/queries.js'
import { webhookOpens } from '../domain/webhooks/secrets.js'
import { PACKAGE_JSON } from '../paths.js'
import { serveUntilSignalled } from '../server.js'
import { isUserRole, nameProblem, printableName, USER_ROLES } from '../text-rules.js'
import { CliError, reportFailure, withDatabase } from './common.js'
import { importCommand } from './import.js'
import { migrate } from './migrate-command.js'
import { NAMES_USAGE, namesCommand } from './names.js'
import { copyCommand, dumpCommand, loadCommand } from './ops-data.js'
import { backupCommand, doctorCommand, OPS_USAGE, retentionCommand } from './ops-misc.js'
import { parseVerifyArgs, runVerify } from './verify.js'

const USAGE = `Usage: shiplog <command> [options]

Commands:
  serve [--port N] [--host ADDR]     start the server (runs migrations first)
  migrate                            bring the database schema up to date
  users create --account NAME --email EMAIL --password-stdin [--role admin|member]
                                     create a user (and the account if it is new);
                                     the password is read from standard input; an
                                     address may be in several accounts, once in each
  users set-password --account NAME --email EMAIL --password-stdin [--one-time]
                                     give an existing user a new password (read from
                                     standard input) and end their sessions; with
                                     --one-time they must choose their own at next login
  accounts password-login --account NAME on|off
                                     allow or refuse password login for the account's
                                     users (off: single sign-on only; users set-password
                                     still works, for recovery)
  keys create --account NAME --name LABEL [--scope ingest|read|ingest,read]
                                     create an API key; prints only the key on stdout;
                                     ingest (the default) records events, read reads
                                     the API (/api/v1/…, /get)
  keys list --account NAME           list the account's API keys
  keys revoke --account NAME ID-OR-KEY
                                     revoke a key by the id 'keys list' shows, or by the key
  webhooks create --account NAME --url URL --format json|slack|grafana
      [--status S]... [--outcome succeeded|failed]... [--environment E]...
      [--service S]... [--grafana-token T]
                                     add a webhook; prints its signing secret (shown once)
  webhooks list --account NAME       list the account's webhooks and their state
  webhooks delete --account NAME ID  delete a webhook and its delivery log
  deployments rebuild                derive every deployment again from the events; safe
                                     while servers run (their pages fill in as it goes)
  import FILE[.gz] --account NAME    store past events from a CSV in the export's columns
                                     (plus occurred_at, commit_time) or NDJSON; checked
                                     whole first, a re-run stores nothing twice
  dump --out FILE[.gz] [--force]     write every table to a versioned NDJSON dump
                                     (gzip when the name ends in .gz)
  load FILE                          load a dump into a new or empty database (one
                                     transaction; checksums verified before commit)
  copy --from URL --to URL           move a whole installation between databases
                                     (SQLite <-> PostgreSQL); resumable, verified
  verify [--head events:ID:HEX]... [--head audit:ID:HEX]...
                                     check the tamper-evidence chains of events and audit
                                     entries; names the first changed, missing or inserted
                                     row; --head checks a head kept from an export or log;
                                     exit 0 only when intact
${OPS_USAGE}
${NAMES_USAGE}

Configuration comes from the environment: PORT, HOST, DATABASE_URL (default
sqlite:./data/shiplog.db), SHIPLOG_SECRET, SHIPLOG_PUBLIC_URL, LOG_LEVEL, REDIS_URL,
SHIPLOG_RATE_LIMIT. See the README for the full table.

Options:
  -h, --help       show this help
  -v, --version    print the version`

function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(PACKAGE_JSON, 'utf8')) as {
    version: string
  }
  return pkg.version
}

function required(values: Record<string, unknown>, name: string, usage: string): string {
  const value = values[name]
  if (typeof value !== 'string' || value.trim() === '')
    throw new CliError(`--${name} is required (${usage})`, 2)
  return value
}

async function readStdin(): Promise<string> {
  if (process.stdin.isTTY) {
    process.stderr.write('Password (input is shown; end with Enter, then Ctrl-D): ')
  }
  const chunks: Buffer[] = []
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks).toString('utf8')
}

async function usersCreate(args: string[]): Promise<void> {
  const usage = 'shiplog users create --account NAME --email EMAIL --password-stdin [--role admin|member]'
  const { values } = parseArgs({
    args,
    options: {
      account: { type: 'string' },
      email: { type: 'string' },
      'password-stdin': { type: 'boolean' },
      role: { type: 'string', default: 'admin' },
    },
    strict: true,
  })
  const account = required(values, 'account', usage)
  const email = required(values, 'email', usage)
  if (!values['password-stdin']) throw new CliError(`--password-stdin is required (${usage})`, 2)
  const role = values.role
  if (!isUserRole(role)) throw new CliError(`--role must be ${USER_ROLES.join(' or ')}, got "${role}"`, 2)
  const accountProblem = accountNameProblem(account)
  if (accountProblem) throw new CliError(`--account ${accountProblem}`, 2)
  const badEmail = emailProblem(email)
  if (badEmail) throw new CliError(`--email ${badEmail}`, 2)

  // One trailing newline (from echo or a terminal) is not part of the password.
  const password = (await readStdin()).replace(/\r?\n$/, '')
  const badPassword = passwordProblem(password)
  if (badPassword) throw new CliError(`password ${badPassword}`)

  // Hashed before the transaction: it would otherwise hold the write lock of a new account's row
  // through the hash, and a server on the same file waits for that with its event loop stopped.
  const hashed = await hashedPassword(password)
  await withDatabase(async ({ db }) => {
    try {
      // One transaction: a refused user must not leave a new, empty account behind.
      const { user, acct } = await db.transaction().execute(async (trx) => {
        const acct = await ensureAccount(trx, account)
        const user = await createUser(trx, { accountId: acct.id, email, password: hashed, role })
        await recordAudit(trx, {
          accountId: acct.id,
          actor: cliActor(),
          address: null,
          action: 'user.added',
          target: user.email,
          details: { role: user.role, via: 'shiplog users create' },
        })
        return { user, acct }
      })
      process.stderr.write(`created ${user.role} ${user.email} in account "${acct.name}"\n`)
    } catch (err) {
      if (err instanceof UserExistsError) throw new CliError(err.message)
      throw err
    }
  })
}

async function usersSetPassword(args: string[]): Promise<void> {
  const usage = 'shiplog users set-password --account NAME --email EMAIL --password-stdin [--one-time]'
  const { values } = parseArgs({
    args,
    options: {
      account: { type: 'string' },
      email: { type: 'string' },
      'password-stdin': { type: 'boolean' },
      'one-time': { type: 'boolean', default: false },
    },
    strict: true,
  })
  const accountName = required(values, 'account', usage)
  const email = required(values, 'email', usage)
  if (!values['password-stdin']) throw new CliError(`--password-stdin is required (${usage})`, 2)
  const badEmail = emailProblem(email)
  if (badEmail) throw new CliError(`--email ${badEmail}`, 2)

  // One trailing newline (from echo or a terminal) is not part of the password.
  const password = (await readStdin()).replace(/\r?\n$/, '')
  const badPassword = passwordProblem(password)
  if (badPassword) throw new CliError(`password ${badPassword}`)

  await withDatabase(async (database) => {
    const account = await accountOrFail(database, accountName)
    const user = await findUserInAccount(database.db, account.id, email)
    const oneTime = values['one-time'] === true
    const hashed = await hashedPassword(password)
    const reset =
      user !== undefined &&
      (await database.db.transaction().execute(async (trx) => {
        if (!(await resetPassword(trx, account.id, user.id, hashed, { oneTime }))) return false
        await recordAudit(trx, {
          accountId: account.id,
          actor: cliActor(),
          address: null,
          action: 'password.changed',
          target: user.email,
          details: { how: oneTime ? 'shiplog users set-password --one-time' : 'shiplog users set-password' },
        })
        return true
      }))
    if (!user || !reset) {
      throw new CliError(
        `account "${printableName(account.name)}" has no user ${printableName(email.trim())}`,
      )
    }
    process.stderr.write(
      `set a ${oneTime ? 'one-time ' : ''}password for ${printableName(user.email)} in account "${printableName(account.name)}"; their sessions are ended\n`,
    )
  })
}

async function accountsPasswordLogin(args: string[]): Promise<void> {
  const usage = 'shiplog accounts password-login --account NAME on|off'
  const { values, positionals } = parseArgs({
    args,
    options: { account: { type: 'string' } },
    allowPositionals: true,
    strict: true,
  })
  const accountName = required(values, 'account', usage)
  const [wanted, ...extra] = positionals
  if ((wanted !== 'on' && wanted !== 'off') || extra.length > 0) {
    throw new CliError(`say on or off (${usage})`, 2)
  }
  await withDatabase(async (database) => {
    const account = await accountOrFail(database, accountName)
    const changed = await setPasswordLogin(database.db, account.id, wanted === 'on', {
      actor: cliActor(),
      address: null,
    })
    process.stderr.write(
      `password login for account "${printableName(account.name)}" ${changed ? 'is now' : 'was already'} ${wanted}\n`,
    )
  })
}

async function accountOrFail(database: Database, name: string) {
  const account = await findAccountByName(database.db, name)
  if (!account) {
    throw new CliError(
      `account "${name.trim()}" does not exist (create it with: shiplog users create --account ...)`,
    )
  }
  return account
}

async function keysCreate(args: string[]): Promise<void> {
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
    const { key } = await database.db.transaction().execute(async (trx) => {
      const created = await createApiKey(trx, { accountId: account.id, name, createdBy: 'cli', scopes })
      await recordAudit(trx, {
        accountId: account.id,
        actor: cliActor(),
        address: null,
        action: 'key.created',
        target: keyLabel(created.row),
        details: { scopes: [...scopes] },
      })
      return created
    })
    // stdout carries the key alone so scripts can capture it: KEY=$(shiplog keys create ...)
    process.stdout.write(`${key}\n`)
  })
}

function formatTime(ms: number | null): string {
  return ms === null ? '-' : new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z')
}

/** Prints rows as columns padded to their widest cell (the last column is not padded). */
function printTable(rows: readonly string[][]): void {
  const widths = rows[0]?.map((_, col) => Math.max(...rows.map((r) => [...(r[col] ?? '')].length))) ?? []
  for (const row of rows) {
    const line = row
      .map((cell, col) => (col === row.length - 1 ? cell : cell.padEnd(widths[col] ?? 0)))
      .join('  ')
    process.stdout.write(`${line}\n`)
  }
}

async function keysList(args: string[]): Promise<void> {
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

async function keysRevoke(args: string[]): Promise<void> {
  const usage = 'shiplog keys revoke --account NAME ID-OR-KEY'
  const { values, positionals } = parseArgs({
    args,
    options: { account: { type: 'string' } },
    allowPositionals: true,
    strict: true,
  })
  const accountName = required(values, 'account', usage)
  if (positionals.length !== 1 || !positionals[0])
    throw new CliError(`one key id or key is required (${usage})`, 2)
  const ref = positionals[0]
  await withDatabase(async (database) => {
    const account = await accountOrFail(database, accountName)
    const row = await revokeApiKeyEverywhere(database, account.id, ref, undefined, (trx, revoked) =>
      recordAudit(trx, {
        accountId: account.id,
        actor: cliActor(),
        address: null,
        action: 'key.revoked',
        target: keyLabel(revoked),
        details: { scopes: scopesFromColumn(revoked.scopes) },
      }),
    )
    if (!row)
      throw new CliError(
        `account "${account.name}" has no key ${/^\d+$/.test(ref) ? ref : 'matching that value'}`,
      )
    process.stderr.write(`revoked key ${row.id} (${row.name}, ${row.prefix}…)\n`)
  })
}

function listOption(values: Record<string, unknown>, name: string): string[] {
  const value = values[name]
  if (!Array.isArray(value)) return []
  return value
    .flatMap((v) => String(v).split(','))
    .map((v) => v.trim())
    .filter((v) => v !== '')
}

async function webhooksCreate(args: string[]): Promise<void> {
  const usage =
    'shiplog webhooks create --account NAME --url URL --format json|slack|grafana [--status ..] [--outcome ..]'
  const multiple = { type: 'string', multiple: true } as const
  const { values } = parseArgs({
    args,
    options: {
      account: { type: 'string' },
      url: { type: 'string' },
      format: { type: 'string' },
      status: multiple,
      outcome: multiple,
      environment: multiple,
      service: multiple,
      'grafana-token': { type: 'string' },
    },
    strict: true,
  })
  const accountName = required(values, 'account', usage)
  const url = required(values, 'url', usage)
  const format = required(values, 'format', usage)
  const config = loadConfig()
  await withDatabase(async (database) => {
    const account = await accountOrFail(database, accountName)
    const appSecret = await resolveAppSecret(config, database.db)
    try {
      const { webhook, secret } = await database.db.transaction().execute(async (trx) => {
        const created = await createWebhook(
          trx,
          appSecret,
          {
            accountId: account.id,
            url,
            format,
            statuses: listOption(values, 'status'),
            outcomes: listOption(values, 'outcome'),
            environments: listOption(values, 'environment'),
            services: listOption(values, 'service'),
            grafanaToken: values['grafana-token'] ?? null,
            createdBy: 'cli',
          },
          { allowPrivate: config.webhookAllowPrivate },
        )
        await recordAudit(trx, {
          accountId: account.id,
          actor: cliActor(),
          address: null,
          action: 'webhook.created',
          target: webhookLabel(created.webhook.url),
          details: webhookDetails(created.webhook),
        })
        return created
      })
      process.stderr.write(
        `created webhook ${webhook.id}; its signing secret follows (it is not shown again)\n`,
      )
      // stdout carries the secret alone so scripts can capture it.
      process.stdout.write(`${secret}\n`)
    } catch (err) {
      if (err instanceof WebhookInputError) throw new CliError(err.message, 2)
      throw err
    }
  })
}

function namesOf(json: string): string {
  const names = JSON.parse(json) as string[]
  return names.length === 0 ? 'all' : names.map(printableName).join(',')
}

async function webhooksList(args: string[]): Promise<void> {
  const { values } = parseArgs({ args, options: { account: { type: 'string' } }, strict: true })
  const accountName = required(values, 'account', 'shiplog webhooks list --account NAME')
  const config = loadConfig()
  await withDatabase(async (database) => {
    const account = await accountOrFail(database, accountName)
    const hooks = await listWebhooks(database.db, account.id)
    // As Settings says it: a webhook whose secret does not open with this installation's secret
    // cannot sign, whatever its last delivery did. Read only: listing creates no secret.
    const { secret } = await secretStatus(config, database.db)
    const cannotSign = (w: { secret: string; grafana_token: string | null }) =>
      secret === null || !webhookOpens(secret, w)
    const rows = [
      ['ID', 'FORMAT', 'URL', 'STATUSES', 'OUTCOMES', 'ENVIRONMENTS', 'SERVICES', 'STATE'],
      ...hooks.map((w) => [
        String(w.id),
        w.format,
        printableName(w.url),
        JSON.parse(w.statuses).length === 0 ? '-' : namesOf(w.statuses),
        JSON.parse(w.outcomes).length === 0 ? '-' : namesOf(w.outcomes),
        namesOf(w.environments),
        namesOf(w.services),
        w.enabled !== 1
          ? `disabled ${formatTime(w.disabled_at)}`
          : cannotSign(w)
            ? 'failing: cannot sign (see README "The secret")'
            : w.failing_since !== null
              ? `failing since ${formatTime(w.failing_since)}`
              : 'active',
      ]),
    ]
    printTable(rows)
  })
}

async function webhooksDelete(args: string[]): Promise<void> {
  const usage = 'shiplog webhooks delete --account NAME ID'
  const { values, positionals } = parseArgs({
    args,
    options: { account: { type: 'string' } },
    allowPositionals: true,
    strict: true,
  })
  const accountName = required(values, 'account', usage)
  const id = positionals[0]
  if (positionals.length !== 1 || !id || !/^\d{1,15}$/.test(id))
    throw new CliError(`one webhook id is required (${usage})`, 2)
  await withDatabase(async (database) => {
    const account = await accountOrFail(database, accountName)
    const deleted = await database.db.transaction().execute(async (trx) => {
      const before = await getWebhook(trx, account.id, Number(id))
      if (!before || !(await deleteWebhook(trx, account.id, Number(id)))) return false
      await recordAudit(trx, {
        accountId: account.id,
        actor: cliActor(),
        address: null,
        action: 'webhook.deleted',
        target: webhookLabel(before.url),
        details: { id: Number(id), ...webhookDetails(before) },
      })
      return true
    })
    if (!deleted) {
      throw new CliError(`account "${account.name}" has no webhook ${id}`)
    }
    process.stderr.write(`deleted webhook ${id}\n`)
  })
}

async function deploymentsRebuild(args: string[]): Promise<void> {
  parseArgs({ args, options: {}, strict: true })
  await withDatabase(async (database) => {
    const started = Date.now()
    let reported = 0
    const derived = await rebuildDeployments(database, (count) => {
      if (count - reported < 100_000) return
      reported = count
      process.stderr.write(`derived ${count} events…\n`)
    })
    const seconds = ((Date.now() - started) / 1000).toFixed(1)
    process.stderr.write(`deployments rebuilt from ${counted(derived, 'event')} in ${seconds} s\n`)
  })
}

async function verify(args: string[]): Promise<void> {
  const parsed = parseVerifyArgs(args)
  if (typeof parsed === 'string') throw new CliError(parsed, 2)
  const ok = await withDatabase((database) =>
    runVerify(database, parsed, (line) => process.stdout.write(`${line}\n`)),
  )
  if (!ok) throw new CliError('verification FAILED: the chain does not match the rows (see above)', 1)
}

async function serve(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: { port: { type: 'string' }, host: { type: 'string' } },
    strict: true,
  })
  const config = loadConfig(process.env, { port: values.port, host: values.host })
  await serveUntilSignalled(config)
}

export async function main(argv: string[]): Promise<number> {
  const [command, sub, ...rest] = argv
  if (command === undefined || command === '-h' || command === '--help' || command === 'help') {
    process.stdout.write(`${USAGE}\n`)
    return command === undefined ? 2 : 0
  }
  if (command === '-v' || command === '--version') {
    process.stdout.write(`${packageVersion()}\n`)
    return 0
  }
  const wantsHelp = argv.includes('--help') || argv.includes('-h')
  if (wantsHelp) {
    process.stdout.write(`${USAGE}\n`)
    return 0
  }
  try {
    if (command === 'serve') await serve(argv.slice(1))
    else if (command === 'migrate') await migrate(argv.slice(1))
    else if (command === 'users' && sub === 'create') await usersCreate(rest)
    else if (command === 'users' && sub === 'set-password') await usersSetPassword(rest)
    else if (command === 'accounts' && sub === 'password-login') await accountsPasswordLogin(rest)
    else if (command === 'keys' && sub === 'create') await keysCreate(rest)
    else if (command === 'keys' && sub === 'list') await keysList(rest)
    else if (command === 'keys' && sub === 'revoke') await keysRevoke(rest)
    else if (command === 'webhooks' && sub === 'create') await webhooksCreate(rest)
    else if (command === 'webhooks' && sub === 'list') await webhooksList(rest)
    else if (command === 'webhooks' && sub === 'delete') await webhooksDelete(rest)
    else if (command === 'deployments' && sub === 'rebuild') await deploymentsRebuild(rest)
    else if (command === 'import') await importCommand(argv.slice(1))
    else if (command === 'dump') await dumpCommand(argv.slice(1))
    else if (command === 'load') await loadCommand(argv.slice(1))
    else if (command === 'copy') await copyCommand(argv.slice(1))
    else if (command === 'verify') await verify(argv.slice(1))
    else if (command === 'backup') return await backupCommand(argv.slice(1))
    else if (command === 'retention') return await retentionCommand(sub, rest)
    else if (command === 'doctor') return await doctorCommand(argv.slice(1))
    else if (command === 'services' || command === 'env') return await namesCommand(command, sub, rest)
    else throw new CliError(`unknown command "${argv.slice(0, 2).join(' ')}" (see shiplog --help)`, 2)
    return 0
  } catch (err) {
    return reportFailure(err)
  }
}

// serve keeps the process alive until a signal; every other command ends with its code.
process.exitCode = await main(process.argv.slice(2))
