// The operator commands for backups, retention and health: backup, retention set|show, doctor.
// Each returns its exit code and reports its own errors in one line on stderr.
import { parseArgs } from 'node:util'
import { loadConfig } from '../config.js'
import { findAccountByName } from '../domain/accounts.js'
import { cliSource } from '../domain/audit/log.js'
import { backupSqlite, pgDumpAdvice } from '../domain/operations/backup.js'
import { type CheckLine, formatCheck, runDoctor } from '../domain/operations/doctor.js'
import { describeRetention, parseRetention } from '../domain/operations/retention.js'
import { setRetentionAudited } from '../domain/operations/retention-setting.js'
import { keepBeside } from '../domain/operations/secret-travel.js'
import { counted } from '../domain/plural.js'
import { printableName } from '../text-rules.js'
import { CliError, reportFailure, withDatabase } from './common.js'

export const OPS_USAGE = `  backup --out FILE [--force]        a consistent copy of the SQLite database while the
                                     server runs (on PostgreSQL: says how to use pg_dump)
  retention set --account NAME --days N|forever
                                     keep the account's events N days (default forever)
  retention show [--account NAME]    each account's retention
  doctor                             check configuration, database, schema, disk, Redis
                                     and clock; exit 0 only when every check passes`

/** Runs a command body; a failure is reported in one line and becomes the exit code. */
async function reported(fn: () => Promise<void>): Promise<number> {
  try {
    await fn()
    return 0
  } catch (err) {
    return reportFailure(err)
  }
}

export function backupCommand(args: string[]): Promise<number> {
  return reported(async () => {
    const { values } = parseArgs({
      args,
      options: { out: { type: 'string' }, force: { type: 'boolean', default: false } },
      strict: true,
    })
    const out = values.out?.trim()
    if (!out) throw new CliError('--out FILE is required (shiplog backup --out FILE [--force])', 2)
    const config = loadConfig()
    if (config.database.dialect === 'postgres') {
      // pg_dump copies the settings row that holds a generated secret; SHIPLOG_SECRET it cannot.
      const secret = config.secret === null ? '' : `\n${keepBeside(config, out)}`
      throw new CliError(`${pgDumpAdvice(config.database.connectionString, out)}${secret}`)
    }
    if (config.database.path === ':memory:') throw new CliError('an in-memory database cannot be backed up')
    const result = await backupSqlite(config.database.path, out, { force: values.force })
    process.stderr.write(
      `backup written to ${result.path} (${(result.bytes / 1024 ** 2).toFixed(1)} MiB, ${counted(result.events, 'event')}, ${(result.ms / 1000).toFixed(1)} s)\n`,
    )
    process.stderr.write(`${keepBeside(config, result.path)}\n`)
  })
}

export function retentionCommand(sub: string | undefined, args: string[]): Promise<number> {
  return reported(async () => {
    if (sub === 'set') {
      const usage = 'shiplog retention set --account NAME --days N|forever'
      const { values } = parseArgs({
        args,
        options: { account: { type: 'string' }, days: { type: 'string' } },
        strict: true,
      })
      if (!values.account?.trim()) throw new CliError(`--account is required (${usage})`, 2)
      if (values.days === undefined || values.days.trim() === '')
        throw new CliError(`--days is required (${usage})`, 2)
      const days = parseRetention(values.days)
      if (days !== null && typeof days === 'object') throw new CliError(`--days ${days.problem}`, 2)
      const accountName = values.account
      await withDatabase(async (database) => {
        const account = await findAccountByName(database.db, accountName)
        if (!account) throw new CliError(`account "${printableName(accountName.trim())}" does not exist`)
        await setRetentionAudited(database.db, account.id, days, cliSource())
        process.stderr.write(
          `account "${printableName(account.name)}" keeps events ${days === null ? 'forever' : `for ${describeRetention(days)}; older ones are pruned by the server in the background`}\n`,
        )
      })
      return
    }
    if (sub === 'show') {
      const { values } = parseArgs({ args, options: { account: { type: 'string' } }, strict: true })
      await withDatabase(async (database) => {
        let query = database.db.selectFrom('accounts').select(['name', 'retention_days']).orderBy('name')
        if (values.account !== undefined) query = query.where('name', '=', values.account.trim())
        const rows = await query.execute()
        if (values.account !== undefined && rows.length === 0)
          throw new CliError(`account "${printableName(values.account.trim())}" does not exist`)
        const width = Math.max(7, ...rows.map((r) => [...printableName(r.name)].length))
        process.stdout.write(`${'ACCOUNT'.padEnd(width)}  KEEP EVENTS\n`)
        for (const row of rows) {
          const days = row.retention_days === null ? null : Number(row.retention_days)
          process.stdout.write(`${printableName(row.name).padEnd(width)}  ${describeRetention(days)}\n`)
        }
      })
      return
    }
    throw new CliError('usage: shiplog retention set --account NAME --days N|forever, or retention show', 2)
  })
}

export function doctorCommand(args: string[]): Promise<number> {
  return reported(async () => {
    parseArgs({ args, options: {}, strict: true })
    const lines = await runDoctor(process.env, (line: CheckLine) =>
      process.stdout.write(`${formatCheck(line)}\n`),
    )
    const failed = lines.filter((l) => l.status === 'FAIL').length
    const warned = lines.filter((l) => l.status === 'warn').length
    if (failed > 0) {
      process.stdout.write(
        `\n${failed} check${failed === 1 ? '' : 's'} failed${warned ? `, ${warned} warning${warned === 1 ? '' : 's'}` : ''}\n`,
      )
      throw new CliError(`doctor found ${failed} failing check${failed === 1 ? '' : 's'}`)
    }
    process.stdout.write(
      `\nall checks passed${warned ? ` (${warned} warning${warned === 1 ? '' : 's'})` : ''}\n`,
    )
  })
}
