// `shiplog env lock|unlock|show`, `shiplog freeze …`, `shiplog versions …`, `shiplog promotion …`
// and `shiplog check` (SPEC §11): thin callers of the guardrails' input readers and audited commands,
// so a refusal here is the one Settings and the API give, field by field, and nothing is stored.
import { parseArgs } from 'node:util'
import type { Database } from '../db/connect.js'
import { cliSource } from '../domain/audit/log.js'
import { BACKLOG_BATCH, catchUpDeployments } from '../domain/deployments/store.js'
import type { FieldError, Validation } from '../domain/events/event.js'
import { checkDeployment } from '../domain/guardrails/check.js'
import {
  addFreezeWindow,
  lockEnvironment,
  markVersionBad,
  markVersionGood,
  removeFreezeWindow,
  removePromotionRule,
  setPromotionRule,
  unlockEnvironment,
} from '../domain/guardrails/commands.js'
import {
  readBadVersionInput,
  readFreezeInput,
  readLockInput,
  readPromotionInput,
} from '../domain/guardrails/inputs.js'
import { printableName } from '../text-rules.js'
import { CliError, reportFailure, withDatabase } from './common.js'
import { printGuardrails, printVersions, type Section } from './guardrails-lists.js'
import { accountOrFail, required } from './options.js'

/** One command's usage lines as `shiplog --help` shows them (and `shiplog COMMAND --help`). */
const HELP: readonly (readonly [command: string, text: string])[] = [
  [
    'env lock',
    `  env lock --account NAME ENVIRONMENT --reason TEXT [--service S]
      [--until ISO|30m|2h|3d]        lock an environment (or one service in it) until it
                                     is unlocked or until the time given; the check says
                                     no, and events recorded meanwhile are flagged`,
  ],
  [
    'env unlock',
    `  env unlock --account NAME ENVIRONMENT [--service S]
                                     lift the environment's own locks (or the service's)`,
  ],
  [
    'env show',
    `  env show --account NAME [ENVIRONMENT]
                                     locks (ended ones marked ended), freeze windows with
                                     their next occurrence, promotion rules`,
  ],
  [
    'freeze add',
    `  freeze add --account NAME ENVIRONMENT --reason TEXT
      [--from ISO --to ISO|2h]
      [--weekly "Fri 16:00-Mon 08:00" --tz ZONE]
      [--cron "0 16 * * 5" --duration-minutes N --tz ZONE]
                                     add a freeze window: one-off (from, to), or recurring
                                     on the wall clock of a time zone`,
  ],
  [
    'freeze list',
    `  freeze list --account NAME [ENVIRONMENT]
                                     freeze windows: schedule, next occurrence, active now`,
  ],
  [
    'freeze remove',
    `  freeze remove --account NAME ID    remove a freeze window by the id 'freeze list' shows`,
  ],
  [
    'versions bad',
    `  versions bad --account NAME SERVICE VERSION --reason TEXT
                                     mark a version bad (again: a new reason); the check
                                     says no to deploying it anywhere`,
  ],
  [
    'versions good',
    `  versions good --account NAME SERVICE VERSION
                                     take the mark off a version marked bad`,
  ],
  [
    'versions list',
    `  versions list --account NAME [SERVICE]
                                     the versions marked bad, with who marked them and why`,
  ],
  [
    'promotion set',
    `  promotion set --account NAME ENVIRONMENT --after ENVIRONMENT
      [--min-minutes N] [--require-good]
                                     deploying to ENVIRONMENT needs the version to have
                                     succeeded in the --after one at least N minutes
                                     before (and, with --require-good, not marked bad)`,
  ],
  [
    'promotion remove',
    `  promotion remove --account NAME ENVIRONMENT --after ENVIRONMENT
                                     remove a promotion rule`,
  ],
  ['promotion list', `  promotion list --account NAME      the promotion rules`],
  [
    'check',
    `  check --account NAME SERVICE ENVIRONMENT VERSION
                                     may this version be deployed there now? prints every
                                     reason against it; exit 0 allowed, 5 not allowed`,
  ],
]

export const GUARDRAILS_USAGE = HELP.map(([, text]) => text).join('\n')

/** `shiplog COMMAND [SUB] --help` for a guardrail command (or a group of them); null for others. */
export function guardrailsHelp(command: string, sub: string | undefined): string | null {
  const exact = HELP.filter(([name]) => name === command || name === `${command} ${sub}`)
  const chosen = exact.length > 0 ? exact : HELP.filter(([name]) => name.startsWith(`${command} `))
  if (chosen.length === 0 || (command === 'env' && exact.length === 0)) return null
  return `Usage: shiplog <command> [options]\n\n${chosen.map(([, text]) => text).join('\n')}`
}

const GROUPS: Readonly<Record<string, readonly string[]>> = {
  env: ['lock', 'unlock', 'show'],
  freeze: ['add', 'list', 'remove'],
  versions: ['bad', 'good', 'list'],
  promotion: ['set', 'remove', 'list'],
}

/** Whether `shiplog COMMAND SUB` is one of these (`env rename` is names.ts'). */
export function isGuardrailsCommand(command: string, sub: string | undefined): boolean {
  if (command === 'check') return true
  const subs = GROUPS[command]
  return subs !== undefined && (command !== 'env' || (sub !== undefined && subs.includes(sub)))
}

const usageOf = (name: string) =>
  `shiplog ${
    HELP.find(([n]) => n === name)?.[1]
      .trim()
      .split('\n')[0] ?? name
  }`

type Options = Record<string, { type: 'string' } | { type: 'boolean' }>

/** `--account NAME`, the command's options and between `min` and `max` positionals (named `what`). */
function parse(
  name: string,
  args: string[],
  options: Options,
  count: [min: number, max: number],
  what: string,
) {
  const usage = usageOf(name).replace(/ {2,}.*$/, '')
  const { values, positionals } = parseArgs({
    args,
    options: { account: { type: 'string' }, ...options },
    allowPositionals: true,
    strict: true,
  })
  const accountName = required(values, 'account', usage)
  if (positionals.length < count[0] || positionals.length > count[1] || positionals.some((p) => p === ''))
    throw new CliError(`give ${what} (${usage})`, 2)
  const text = (option: string) => {
    const value = (values as Record<string, unknown>)[option]
    return typeof value === 'string' ? value : undefined
  }
  return { accountName, values: values as Record<string, unknown>, text, positionals }
}

/** The option a field of the readers is given with, where its name differs. */
const OPTION_OF: Readonly<Record<string, string>> = {
  time_zone: '--tz',
  duration_minutes: '--duration-minutes',
  after_environment: '--after',
  min_minutes: '--min-minutes',
}

/** The value of an accepted change, or each field's message on stderr and a failure (2: bad input). */
function settled<T>(result: Validation<T>, exitCode = 2): T {
  if (result.ok) return result.value
  for (const e of result.errors as FieldError[]) {
    const option = OPTION_OF[e.field]
    process.stderr.write(`shiplog: ${e.message}${option ? ` (${option})` : ''}\n`)
  }
  throw new CliError('refused; nothing was changed', exitCode)
}

/** Derives the events that wait, so the names the commands know are those the board shows. */
async function deriveAll(database: Database): Promise<void> {
  for (;;) {
    const result = await catchUpDeployments(database, { limit: BACKLOG_BATCH })
    if (!result.more && result.events === 0) return
  }
}

function inAccount<T>(
  accountName: string,
  run: (database: Database, accountId: number, now: number) => Promise<T>,
): Promise<T> {
  return withDatabase(async (database) => {
    const account = await accountOrFail(database, accountName)
    await deriveAll(database)
    return run(database, Number(account.id), Date.now())
  })
}

const str = { type: 'string' } as const
const p = printableName
const lockTarget = (environment: string, service: string | null | undefined) =>
  service ? `${p(service)} in ${p(environment)}` : `${p(environment)} (every service)`
const iso = (ms: number) => new Date(ms).toISOString().replace(/\.000Z$/, 'Z')

async function envLock(args: string[]): Promise<void> {
  const o = parse('env lock', args, { reason: str, service: str, until: str }, [1, 1], 'one environment')
  const [environment] = o.positionals
  await inAccount(o.accountName, async ({ db }, accountId, now) => {
    const fields = {
      environment,
      service: o.text('service'),
      reason: o.text('reason'),
      until: o.text('until'),
    }
    const input = settled(readLockInput(fields, now))
    const { id } = settled(await lockEnvironment(db, accountId, input, cliSource(), now))
    const until = input.endsAt === null ? 'until unlocked' : `until ${iso(input.endsAt)}`
    process.stderr.write(`locked ${lockTarget(input.environment, input.service)} ${until} (lock ${id})\n`)
  })
}

async function envUnlock(args: string[]): Promise<void> {
  const o = parse('env unlock', args, { service: str }, [1, 1], 'one environment')
  const environment = (o.positionals[0] ?? '').trim()
  const service = o.text('service')?.trim() || null
  await inAccount(o.accountName, async ({ db }, accountId, now) => {
    const { lifted } = settled(
      await unlockEnvironment(db, accountId, { environment, service }, cliSource(), now),
      1,
    )
    process.stderr.write(
      `unlocked ${lockTarget(environment, service)} (${lifted === 1 ? '1 lock' : `${lifted} locks`} lifted)\n`,
    )
  })
}

async function show(
  name: 'env show' | 'freeze list' | 'promotion list',
  args: string[],
  sections: Section[],
) {
  const max = name === 'promotion list' ? 0 : 1
  const o = parse(name, args, {}, [0, max], max === 0 ? 'no names' : 'at most one environment')
  await inAccount(o.accountName, ({ db }, accountId, now) =>
    printGuardrails(db, accountId, { environment: o.positionals[0]?.trim(), sections, now }),
  )
}

async function freezeAdd(args: string[]): Promise<void> {
  const options = {
    reason: str,
    from: str,
    to: str,
    weekly: str,
    cron: str,
    'duration-minutes': str,
    tz: str,
  }
  const o = parse('freeze add', args, options, [1, 1], 'one environment')
  await inAccount(o.accountName, async ({ db }, accountId, now) => {
    const fields = {
      environment: o.positionals[0],
      reason: o.text('reason'),
      from: o.text('from'),
      to: o.text('to'),
      weekly: o.text('weekly'),
      cron: o.text('cron'),
      duration_minutes: o.text('duration-minutes'),
      time_zone: o.text('tz'),
    }
    const input = settled(readFreezeInput(fields, now))
    const { id } = settled(await addFreezeWindow(db, accountId, input, cliSource(), now))
    process.stderr.write(`added freeze window ${id} to ${p(input.environment)}\n`)
  })
}

async function freezeRemove(args: string[]): Promise<void> {
  const o = parse('freeze remove', args, {}, [1, 1], 'one freeze window id')
  const id = o.positionals[0] ?? ''
  if (!/^\d{1,15}$/.test(id)) throw new CliError(`give one freeze window id (${usageOf('freeze remove')})`, 2)
  await inAccount(o.accountName, async ({ db }, accountId, now) => {
    settled(await removeFreezeWindow(db, accountId, Number(id), cliSource(), now), 1)
    process.stderr.write(`removed freeze window ${id}\n`)
  })
}

async function versionsBad(args: string[]): Promise<void> {
  const o = parse('versions bad', args, { reason: str }, [2, 2], 'the service and the version')
  const [service, version] = o.positionals
  await inAccount(o.accountName, async ({ db }, accountId, now) => {
    const input = settled(readBadVersionInput({ service, version, reason: o.text('reason') }))
    const { replaced } = settled(await markVersionBad(db, accountId, input, cliSource(), now))
    const what = `${p(input.service)} ${p(input.version)}`
    process.stderr.write(`marked ${what} bad${replaced ? ' (the earlier reason is replaced)' : ''}\n`)
  })
}

async function versionsGood(args: string[]): Promise<void> {
  const o = parse('versions good', args, {}, [2, 2], 'the service and the version')
  const [service = '', version = ''] = o.positionals.map((n) => n.trim())
  await inAccount(o.accountName, async ({ db }, accountId, now) => {
    settled(await markVersionGood(db, accountId, { service, version }, cliSource(), now), 1)
    process.stderr.write(`${p(service)} ${p(version)} is no longer marked bad\n`)
  })
}

async function versionsList(args: string[]): Promise<void> {
  const o = parse('versions list', args, {}, [0, 1], 'at most one service')
  await inAccount(o.accountName, ({ db }, accountId) =>
    printVersions(db, accountId, o.positionals[0]?.trim()),
  )
}

async function promotionSet(args: string[]): Promise<void> {
  const options = { after: str, 'min-minutes': str, 'require-good': { type: 'boolean' } } as const
  const o = parse('promotion set', args, options, [1, 1], 'one environment')
  await inAccount(o.accountName, async ({ db }, accountId, now) => {
    const fields = {
      environment: o.positionals[0],
      after_environment: o.text('after'),
      min_minutes: o.text('min-minutes'),
      require_good: o.values['require-good'] === true,
    }
    const input = settled(readPromotionInput(fields))
    const { replaced } = settled(await setPromotionRule(db, accountId, input, cliSource(), now))
    const wait = input.minMinutes > 0 ? ` at least ${input.minMinutes} min before` : ' before'
    process.stderr.write(
      `${replaced ? 'replaced' : 'set'}: deploying to ${p(input.environment)} needs success in ${p(input.afterEnvironment)}${wait}${input.requireGood ? ', and not marked bad' : ''}\n`,
    )
  })
}

async function promotionRemove(args: string[]): Promise<void> {
  const o = parse('promotion remove', args, { after: str }, [1, 1], 'one environment')
  const environment = (o.positionals[0] ?? '').trim()
  const afterEnvironment = required(o.values, 'after', usageOf('promotion remove')).trim()
  await inAccount(o.accountName, async ({ db }, accountId, now) => {
    settled(await removePromotionRule(db, accountId, { environment, afterEnvironment }, cliSource(), now), 1)
    process.stderr.write(`removed the rule: ${p(environment)} after ${p(afterEnvironment)}\n`)
  })
}

/** Exit 0 when allowed, 5 when not (as `shiplog-deploy --check`). */
async function check(args: string[]): Promise<number> {
  const o = parse('check', args, {}, [3, 3], 'the service, the environment and the version')
  const [service = '', environment = '', version = ''] = o.positionals.map((n) => n.trim())
  return inAccount(o.accountName, async ({ db }, accountId, now) => {
    const answer = await checkDeployment(db, accountId, { service, environment, version }, now)
    const d = answer.deployment
    const renamed =
      d.service !== service || d.environment !== environment
        ? ` (checked as ${p(d.service)} in ${p(d.environment)}: renamed)`
        : ''
    const what = `${p(service)} ${p(version)} to ${p(environment)}`
    process.stdout.write(`${answer.allowed ? 'allowed' : 'not allowed'}: ${what}${renamed}\n`)
    for (const r of answer.reasons) process.stdout.write(`  ${r.rule}: ${p(r.message)}\n`)
    return answer.allowed ? 0 : 5
  })
}

/** `shiplog env lock|unlock|show`, `freeze …`, `versions …`, `promotion …`, `check …`; the exit code. */
export async function guardrailsCommand(
  command: string,
  sub: string | undefined,
  args: string[],
): Promise<number> {
  try {
    const name = `${command} ${sub}`
    if (command === 'check') return await check(sub === undefined ? args : [sub, ...args])
    if (name === 'env lock') await envLock(args)
    else if (name === 'env unlock') await envUnlock(args)
    else if (name === 'env show') await show(name, args, ['locks', 'freezes', 'promotions'])
    else if (name === 'freeze add') await freezeAdd(args)
    else if (name === 'freeze list') await show(name, args, ['freezes'])
    else if (name === 'freeze remove') await freezeRemove(args)
    else if (name === 'versions bad') await versionsBad(args)
    else if (name === 'versions good') await versionsGood(args)
    else if (name === 'versions list') await versionsList(args)
    else if (name === 'promotion set') await promotionSet(args)
    else if (name === 'promotion remove') await promotionRemove(args)
    else if (name === 'promotion list') await show(name, args, ['promotions'])
    else
      throw new CliError(
        `unknown command "${[command, sub].join(' ').trim()}" (see shiplog ${command} --help)`,
        2,
      )
    return 0
  } catch (err) {
    return reportFailure(err)
  }
}
