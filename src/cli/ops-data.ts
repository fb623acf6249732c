// The data-moving operator commands: `shiplog dump`, `shiplog load` and `shiplog copy`.
import { existsSync } from 'node:fs'
import { parseArgs } from 'node:util'
import cliProgress from 'cli-progress'
import { sql } from 'kysely'
import { type DatabaseTarget, loadConfig, parseDatabaseUrl, redactUrl } from '../config.js'
import { type Database, openDatabase } from '../db/connect.js'
import { secretStatus } from '../domain/app-secret.js'
import { type CopyProgress, copyDatabase } from '../domain/operations/copy.js'
import { dumpDatabase } from '../domain/operations/dump.js'
import { loadDump } from '../domain/operations/load.js'
import { carrySecret, keepBeside, planSecretCarry } from '../domain/operations/secret-travel.js'
import { counted } from '../domain/plural.js'
import { CliError } from './common.js'
import { copyRate, timeLeftText } from './eta.js'

function where(target: DatabaseTarget): string {
  return target.dialect === 'sqlite' ? `sqlite:${target.path}` : redactUrl(target.connectionString)
}

/** Opens a database and proves it answers, so a wrong URL fails here in one line. */
async function openChecked(target: DatabaseTarget, role: string, mustExist: boolean): Promise<Database> {
  if (target.dialect === 'sqlite' && mustExist && target.path !== ':memory:' && !existsSync(target.path)) {
    throw new CliError(`${role} ${where(target)}: no such database file`)
  }
  const database = openDatabase(target, { poolSize: 3 })
  try {
    // Through Kysely, not the pool: Kysely ends the pool on close only once it has used it.
    await sql`select 1`.execute(database.db)
    return database
  } catch (err) {
    await database.close().catch(() => {})
    throw new CliError(`${role} ${where(target)} cannot be opened: ${(err as Error).message}`)
  }
}

function parseUrl(url: string, option: string): DatabaseTarget {
  try {
    return parseDatabaseUrl(url)
  } catch (err) {
    const message = (err as Error).message.replace(/^DATABASE_URL/, option)
    throw new CliError(message, 2)
  }
}

function seconds(ms: number): string {
  return (ms / 1000).toFixed(1)
}

export async function dumpCommand(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: { out: { type: 'string' }, force: { type: 'boolean', default: false } },
    strict: true,
  })
  const out = values.out
  if (!out) throw new CliError('--out FILE is required (shiplog dump --out FILE[.gz] [--force])', 2)
  const config = loadConfig()
  const database = await openChecked(config.database, 'DATABASE_URL', true)
  const started = Date.now()
  try {
    const tables = await dumpDatabase(database, out, { force: values.force })
    const rows = Object.values(tables).reduce((n, t) => n + t.rows, 0)
    process.stderr.write(
      `dumped ${counted(rows, 'row')} from ${counted(Object.keys(tables).length, 'table')} to ${out} in ${seconds(Date.now() - started)} s\n`,
    )
    process.stderr.write(`${keepBeside(config, out)}\n`)
  } finally {
    await database.close()
  }
}

export async function loadCommand(args: string[]): Promise<void> {
  const { positionals } = parseArgs({ args, options: {}, allowPositionals: true, strict: true })
  const file = positionals[0]
  if (positionals.length !== 1 || !file)
    throw new CliError('one dump file is required (shiplog load FILE)', 2)
  if (!existsSync(file)) throw new CliError(`${file}: no such file`)
  const config = loadConfig()
  const database = await openChecked(config.database, 'DATABASE_URL', false)
  const started = Date.now()
  try {
    const { tables, header } = await loadDump(database, file)
    const rows = Object.values(tables).reduce((n, t) => n + t.rows, 0)
    process.stderr.write(
      `loaded ${counted(rows, 'row')} into ${counted(Object.keys(tables).length, 'table')} from ${file} (${header.dialect} dump of ${header.created_at}) in ${seconds(Date.now() - started)} s; checksums match\n`,
    )
    const { problem } = await secretStatus(config, database.db)
    if (problem !== null) process.stderr.write(`note: the dump holds no secret, and ${problem}\n`)
  } finally {
    await database.close()
  }
}

/**
 * A bar with rows/s and the time left on a terminal; a plain line every few seconds otherwise. The
 * rate runs from the first row copied (not from opening the databases), and neither it nor the time
 * left is shown until it rests on a few seconds of copying (eta.ts).
 */
function progressReporter(): CopyProgress & { stop(): void } {
  const tty = process.stderr.isTTY === true
  const bar = tty
    ? new cliProgress.SingleBar(
        {
          format: 'copy |{bar}| {percentage}% {value}/{total} rows | {speed} | {left} | {table}',
          stream: process.stderr,
          hideCursor: true,
        },
        cliProgress.Presets.shades_classic,
      )
    : null
  const previous = new Map<string, number>()
  let total = 0
  let done = 0
  let copiedThisRun = 0
  let started = Date.now()
  let lastLine = Date.now()
  const figures = () => {
    const elapsed = Date.now() - started
    const rate = copyRate(copiedThisRun, elapsed)
    return {
      speed: rate === null ? 'measuring speed' : `${Math.round(rate)} rows/s`,
      left: timeLeftText(total - done, copiedThisRun, elapsed) ?? 'time left: measuring',
      rate,
    }
  }
  return {
    start(totals) {
      total = totals.reduce((n, t) => n + Math.max(t.rows, t.done), 0)
      for (const t of totals) previous.set(t.table, t.done)
      done = totals.reduce((n, t) => n + t.done, 0)
      started = Date.now()
      lastLine = started
      if (bar) bar.start(total, done, { ...figures(), table: '' })
      else
        process.stderr.write(
          `copy: ${counted(total, 'row')} in ${counted(totals.length, 'table')}${done > 0 ? `, resuming after ${done}` : ''}\n`,
        )
    },
    advance(table, copied) {
      const delta = copied - (previous.get(table) ?? 0)
      previous.set(table, copied)
      done += delta
      copiedThisRun += delta
      if (bar) bar.update(done, { ...figures(), table })
      else if (Date.now() - lastLine >= 2000) {
        lastLine = Date.now()
        const { speed, left, rate } = figures()
        const percent = Math.floor((done / Math.max(1, total)) * 100)
        process.stderr.write(
          `copy: ${done}/${total} rows (${percent}%)${rate === null ? '' : `, ${speed}, ${left}`}, table ${table}\n`,
        )
      }
    },
    tableDone(table, rows) {
      if (!bar && rows > 0) process.stderr.write(`copy: table ${table} done (${counted(rows, 'row')})\n`)
    },
    indexing() {
      bar?.stop()
      process.stderr.write('copy: building indexes…\n')
    },
    verifying() {
      process.stderr.write('copy: verifying row counts and checksums…\n')
    },
    stop() {
      bar?.stop()
    },
  }
}

export async function copyCommand(args: string[]): Promise<void> {
  const usage = 'shiplog copy --from URL --to URL'
  const { values } = parseArgs({
    args,
    options: { from: { type: 'string' }, to: { type: 'string' }, 'batch-rows': { type: 'string' } },
    strict: true,
  })
  if (!values.from) throw new CliError(`--from is required (${usage})`, 2)
  if (!values.to) throw new CliError(`--to is required (${usage})`, 2)
  const from = parseUrl(values.from, '--from')
  const to = parseUrl(values.to, '--to')
  if (where(from) === where(to)) throw new CliError('--from and --to name the same database', 2)
  const batchRows = values['batch-rows'] === undefined ? undefined : Number(values['batch-rows'])
  if (batchRows !== undefined && (!Number.isInteger(batchRows) || batchRows < 1 || batchRows > 1_000_000)) {
    throw new CliError('--batch-rows must be a whole number from 1 to 1000000', 2)
  }
  const source = await openChecked(from, '--from', true)
  let target: Database
  try {
    target = await openChecked(to, '--to', false)
  } catch (err) {
    await source.close()
    throw err
  }
  const progress = progressReporter()
  const started = Date.now()
  try {
    const envSecret = process.env.SHIPLOG_SECRET ? process.env.SHIPLOG_SECRET : null
    const carry = await planSecretCarry(source, from, to, envSecret)
    const outcome = await copyDatabase(source, target, { progress, ...(batchRows ? { batchRows } : {}) })
    const rows = Object.values(outcome.tables).reduce((n, t) => n + t.rows, 0)
    const elapsed = (Date.now() - started) / 1000
    process.stderr.write(
      `copied ${counted(rows, 'row')} in ${counted(Object.keys(outcome.tables).length, 'table')}${outcome.resumed ? ' (resumed)' : ''} in ${elapsed.toFixed(1)} s (${Math.round(outcome.copiedRows / Math.max(elapsed, 0.001))} rows/s this run); row counts and checksums match\n`,
    )
    await carrySecret(target, to, carry)
    process.stderr.write(`secret: ${carry.note}\n`)
  } finally {
    progress.stop()
    await source.close()
    await target.close()
  }
}
