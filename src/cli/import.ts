// `shiplog import FILE --account NAME`: past events from a file (issue 28.3); the rules are in
// domain/operations/import.ts. Progress on stderr; a summary line on stdout.
import { existsSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { loadConfig } from '../config.js'
import { findAccountByName } from '../domain/accounts.js'
import { boundsOfDays } from '../domain/events/event-time.js'
import { importEvents } from '../domain/operations/import.js'
import { formatOf, type ImportFormat } from '../domain/operations/import-read.js'
import { CliError, withDatabase } from './common.js'

export async function importCommand(args: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args,
    options: { account: { type: 'string' }, format: { type: 'string' } },
    allowPositionals: true,
    strict: true,
  })
  const usage = 'shiplog import FILE[.gz] --account NAME [--format csv|ndjson]'
  const [path, ...extra] = positionals
  if (!path || extra.length > 0) throw new CliError(`one FILE is required (${usage})`, 2)
  if (!values.account) throw new CliError(`--account NAME is required (${usage})`, 2)
  const format = (values.format ?? formatOf(path)) as ImportFormat | undefined
  if (format !== 'csv' && format !== 'ndjson') {
    throw new CliError(
      `cannot tell the format of ${path}: name it .csv, .ndjson or .jsonl (optionally .gz), or pass --format csv|ndjson`,
      2,
    )
  }
  if (!existsSync(path)) throw new CliError(`${path}: no such file`)
  const config = loadConfig()
  await withDatabase(async (database) => {
    const account = await findAccountByName(database.db, values.account as string)
    if (!account) throw new CliError(`no account named "${values.account}"`)
    const started = performance.now()
    let lastTold = started
    const result = await importEvents(database, path, {
      accountId: account.id,
      format,
      bounds: boundsOfDays(config.maxEventAgeDays),
      onProgress: (p) => {
        const at = performance.now()
        if (at - lastTold < 1000) return
        lastTold = at
        const rate = Math.round(
          (p.phase === 'check' ? p.rows : p.stored + p.skipped) / ((at - started) / 1000),
        )
        process.stderr.write(
          p.phase === 'check'
            ? `import: checked ${p.rows} rows (${rate}/s)\n`
            : `import: stored ${p.stored}, already there ${p.skipped} of ${p.rows} rows (${rate}/s)\n`,
        )
      },
    })
    const seconds = (performance.now() - started) / 1000
    if (result.badCount > 0) {
      for (const bad of result.bad) process.stderr.write(`${path}:${bad.line}: ${bad.errors.join('; ')}\n`)
      if (result.badCount > result.bad.length) {
        process.stderr.write(`… and ${result.badCount - result.bad.length} more bad rows\n`)
      }
      throw new CliError(
        `${result.badCount} of ${result.rows} rows are bad; nothing was imported (fix them and run again)`,
      )
    }
    process.stdout.write(
      `imported ${result.stored} events into ${account.name} (${result.skipped} already there) from ${result.rows} rows in ${seconds.toFixed(1)} s (${Math.round(result.rows / Math.max(seconds, 0.001))} rows/s)\n`,
    )
  })
}
