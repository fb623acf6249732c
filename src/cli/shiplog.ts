// The operator command: its help, and which module runs each command (users.ts, keys.ts,
// webhooks.ts, names.ts, guardrails.ts, ops-*.ts…); serve, deployments rebuild and verify are run here.
import { readFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { loadConfig } from '../config.js'
import { rebuildDeployments } from '../domain/deployments/store.js'
import { counted } from '../domain/plural.js'
import { PACKAGE_JSON } from '../paths.js'
import { serveUntilSignalled } from '../server.js'
import { CliError, reportFailure, withDatabase } from './common.js'
import { GUARDRAILS_USAGE, guardrailsCommand, guardrailsHelp, isGuardrailsCommand } from './guardrails.js'
import { importCommand } from './import.js'
import { keysCreate, keysList, keysRevoke } from './keys.js'
import { migrate } from './migrate-command.js'
import { NAMES_USAGE, namesCommand } from './names.js'
import { copyCommand, dumpCommand, loadCommand } from './ops-data.js'
import { backupCommand, doctorCommand, OPS_USAGE, retentionCommand } from './ops-misc.js'
import { accountsPasswordLogin, usersCreate, usersSetPassword } from './users.js'
import { parseVerifyArgs, runVerify } from './verify.js'
import { webhooksCreate, webhooksDelete, webhooksList } from './webhooks.js'

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
${GUARDRAILS_USAGE}

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
    process.stdout.write(`${guardrailsHelp(command, sub) ?? USAGE}\n`)
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
    else if (isGuardrailsCommand(command, sub)) return await guardrailsCommand(command, sub, rest)
    else if (command === 'services' || command === 'env') return await namesCommand(command, sub, rest)
    else throw new CliError(`unknown command "${argv.slice(0, 2).join(' ')}" (see shiplog --help)`, 2)
    return 0
  } catch (err) {
    return reportFailure(err)
  }
}

// serve keeps the process alive until a signal; every other command ends with its code.
process.exitCode = await main(process.argv.slice(2))
