// `shiplog env lock|unlock|show`, `freeze …`, `versions …`, `promotion …` and `check` as an operator
// runs them (SPEC §11): their output and exit codes (2 usage or refused input, 1 nothing to remove,
// 5 not allowed), each refusal naming its fields and changing nothing, every change audited as the
// command line; and `shiplog verify` over events that carry guardrails. Both databases.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { parseDatabaseUrl } from '../../src/config.js'
import { openDatabase } from '../../src/db/connect.js'
import { migrateToLatest } from '../../src/db/migrate.js'
import { ensureAccount } from '../../src/domain/accounts.js'
import { chainCaughtUp } from '../../src/domain/chain/chainer.js'
import { activeOccurrence, nextOccurrence } from '../../src/domain/guardrails/freeze-calendar.js'
import { freshDatabaseUrl } from '../helper.js'
import { processEnv, runCli } from '../support/processes.js'
import { insertEvents } from '../support/ui.js'

const MIN = 60_000
const HOUR = 60 * MIN
/** An instant as the command line prints it (formatTime: no milliseconds). */
const shown = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z')

async function installation(t: Parameters<typeof freshDatabaseUrl>[0]) {
  const databaseUrl = await freshDatabaseUrl(t)
  const database = openDatabase(parseDatabaseUrl(databaseUrl))
  t.after(() => database.close())
  await migrateToLatest(database)
  const account = await ensureAccount(database.db, 'Acme')
  const seeds = ['api', 'web'].flatMap((service) =>
    ['dev', 'staging', 'prod'].map((environment) => ({ service, environment, version: '1.0' })),
  )
  await insertEvents(database, account.id, seeds)
  const cli = (args: string[]) => runCli(t, args, { env: processEnv(databaseUrl) })
  const count = async (
    table: 'environment_locks' | 'freeze_windows' | 'bad_versions' | 'promotion_rules' | 'audit_entries',
  ) =>
    Number(
      (
        await database.db
          .selectFrom(table)
          .select((eb) => eb.fn.countAll<number | string>().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    )
  return { databaseUrl, database, account, cli, count }
}

test('env lock, unlock and show: usage errors, refusals naming each field, locks listed with who, why and until', {
  timeout: 120_000,
}, async (t) => {
  const { database, account, cli, count } = await installation(t)

  const help = await cli(['env', 'lock', '--help'])
  assert.equal(help.code, 0)
  assert.match(help.stdout, /env lock --account NAME ENVIRONMENT --reason TEXT \[--service S\]/)
  assert.doesNotMatch(help.stdout, /webhooks create/)
  const groupHelp = await cli(['freeze', '--help'])
  assert.match(groupHelp.stdout, /freeze add[\s\S]*freeze list[\s\S]*freeze remove/)
  assert.match((await cli(['--help'])).stdout, /promotion set --account NAME ENVIRONMENT --after ENVIRONMENT/)

  const noAccount = await cli(['env', 'lock', 'prod', '--reason', 'x'])
  assert.equal(noAccount.code, 2)
  assert.match(noAccount.stderr, /^shiplog: --account is required \(shiplog env lock --account NAME/)
  assert.equal((await cli(['env', 'lock', '--account', 'Acme', '--reason', 'x'])).code, 2)
  assert.equal((await cli(['env', 'lock', '--account', 'Acme', 'prod', '--colour', 'red'])).code, 2)
  assert.equal((await cli(['env', 'frobnicate', '--account', 'Acme'])).code, 2)
  const noSuchAccount = await cli(['env', 'lock', '--account', 'Nobody', 'prod', '--reason', 'x'])
  assert.equal(noSuchAccount.code, 1)
  assert.match(noSuchAccount.stderr, /account "Nobody" does not exist/)

  const unknown = await cli(['env', 'lock', '--account', 'Acme', 'qa', '--reason', 'x'])
  assert.equal(unknown.code, 2)
  assert.equal(
    unknown.stderr,
    'shiplog: environment: this account has no environment "qa" (known: dev, staging, prod)\nshiplog: refused; nothing was changed\n',
  )
  const twoFields = await cli(['env', 'lock', '--account', 'Acme', 'prod', '--until', 'someday'])
  assert.equal(twoFields.code, 2)
  assert.match(twoFields.stderr, /^shiplog: reason is required\n/)
  assert.match(
    twoFields.stderr,
    /\nshiplog: until must be an ISO 8601 date-time .*, or a time from now such as 30m, 2h or 3d\n/,
  )
  const past = await cli([
    'env',
    'lock',
    '--account',
    'Acme',
    'prod',
    '--reason',
    'x',
    '--until',
    '2020-01-01T00:00:00Z',
  ])
  assert.equal(past.code, 2)
  assert.match(past.stderr, /shiplog: until must lie in the future/)
  const badService = await cli([
    'env',
    'lock',
    '--account',
    'Acme',
    'prod',
    '--reason',
    'x',
    '--service',
    'nope',
  ])
  assert.match(badService.stderr, /service: this account has no service "nope"/)
  assert.equal(await count('environment_locks'), 0)
  assert.equal(await count('audit_entries'), 0)

  const before = Date.now()
  const locked = await cli([
    'env',
    'lock',
    '--account',
    'Acme',
    'prod',
    '--reason',
    'release train',
    '--until',
    '2h',
  ])
  const after = Date.now()
  assert.equal(locked.code, 0, locked.stderr)
  const match = /^locked prod \(every service\) until (\S+) \(lock 1\)\n$/.exec(locked.stderr)
  assert.ok(match, locked.stderr)
  const until = Date.parse(match[1] ?? '')
  assert.ok(until >= before + 2 * HOUR && until <= after + 2 * HOUR, `until ${match[1]}`)
  const web = await cli([
    'env',
    'lock',
    '--account',
    'Acme',
    'staging',
    '--service',
    'web',
    '--reason',
    'flaky',
  ])
  assert.equal(web.stderr, 'locked web in staging until unlocked (lock 2)\n')
  // A lock that has ended stays listed, marked ended, until someone unlocks it.
  await database.db
    .insertInto('environment_locks')
    .values({
      account_id: account.id,
      environment: 'dev',
      service: null,
      reason: 'over',
      ends_at: Date.UTC(2026, 0, 2),
      created_by: 'ada@example.com',
      created_at: Date.UTC(2026, 0, 1),
    })
    .execute()

  const show = await cli(['env', 'show', '--account', 'Acme'])
  assert.equal(show.code, 0, show.stderr)
  const lines = show.stdout.split('\n')
  assert.equal(lines[0], 'locks:')
  assert.match(lines[1] ?? '', /^ID +ENVIRONMENT +SERVICE +BY +SINCE +UNTIL +STATE +REASON$/)
  assert.match(
    lines[2] ?? '',
    new RegExp(`^1 +prod +\\(every service\\) +cli \\(.+\\) +\\S+Z +${shown(until)} +active +release train$`),
  )
  assert.match(lines[3] ?? '', /^2 +staging +web +cli \(.+\) +\S+Z +unlocked by hand +active +flaky$/)
  assert.match(
    lines[4] ?? '',
    /^3 +dev +\(every service\) +ada@example\.com +2026-01-01T00:00:00Z +2026-01-02T00:00:00Z +ended +over$/,
  )
  assert.deepEqual(lines.slice(5), ['', 'freeze windows:', '  none', '', 'promotion rules:', '  none', ''])
  const prodOnly = await cli(['env', 'show', '--account', 'Acme', 'prod'])
  assert.equal(prodOnly.stdout.split('\n').filter((l) => /^\d+ /.test(l)).length, 1)
  assert.equal((await cli(['env', 'show', '--account', 'Acme', 'qa'])).code, 2)

  const unlocked = await cli(['env', 'unlock', '--account', 'Acme', 'prod'])
  assert.equal(unlocked.code, 0, unlocked.stderr)
  assert.equal(unlocked.stderr, 'unlocked prod (every service) (1 lock lifted)\n')
  const again = await cli(['env', 'unlock', '--account', 'Acme', 'prod'])
  assert.equal(again.code, 1)
  assert.equal(again.stderr, 'shiplog: prod is not locked\nshiplog: refused; nothing was changed\n')
  assert.equal((await cli(['env', 'unlock', '--account', 'Acme', 'staging', '--service', 'web'])).code, 0)

  const audit = await database.db
    .selectFrom('audit_entries')
    .select(['action', 'actor', 'target'])
    .orderBy('id')
    .execute()
  assert.deepEqual(
    audit.map((a) => `${a.action} ${a.target}`),
    [
      'environment.locked environment prod',
      'environment.locked web in staging',
      'environment.unlocked environment prod',
      'environment.unlocked web in staging',
    ],
  )
  assert.ok(
    audit.every((a) => /^cli \(/.test(a.actor)),
    JSON.stringify(audit),
  )
})

test('freeze, versions and promotion commands, and check: exit 5 with every reason, 0 when allowed', {
  timeout: 120_000,
}, async (t) => {
  const { database, cli, count } = await installation(t)
  const now = Date.now()
  const from = shown(now + HOUR)
  const to = shown(now + 3 * HOUR)
  const empty = await cli([
    'freeze',
    'add',
    '--account',
    'Acme',
    'prod',
    '--reason',
    'x',
    '--from',
    from,
    '--to',
    from,
  ])
  assert.equal(empty.code, 2)
  assert.match(empty.stderr, /^shiplog: to must be later than from \(the window is empty\)\n/)
  const neither = await cli(['freeze', 'add', '--account', 'Acme', 'prod'])
  assert.equal(neither.code, 2)
  assert.match(neither.stderr, /reason is required\n.*a window needs from and to/)
  const noZone = await cli([
    'freeze',
    'add',
    '--account',
    'Acme',
    'prod',
    '--reason',
    'x',
    '--cron',
    '0 16 * * 5',
    '--duration-minutes',
    '60',
  ])
  assert.equal(noZone.code, 2)
  assert.match(noZone.stderr, /shiplog: time_zone is required \(--tz\)/)
  assert.equal(await count('freeze_windows'), 0)

  const added = await cli([
    'freeze',
    'add',
    '--account',
    'Acme',
    'prod',
    '--reason',
    'launch',
    '--from',
    from,
    '--to',
    to,
  ])
  assert.equal(added.code, 0, added.stderr)
  assert.equal(added.stderr, 'added freeze window 1 to prod\n')
  const activeFrom = shown(now - HOUR)
  const activeTo = shown(now + HOUR)
  const active = await cli([
    'freeze',
    'add',
    '--account',
    'Acme',
    'prod',
    '--reason',
    'close',
    '--from',
    activeFrom,
    '--to',
    activeTo,
  ])
  assert.equal(active.code, 0, active.stderr)
  const list = await cli(['freeze', 'list', '--account', 'Acme'])
  assert.equal(list.code, 0, list.stderr)
  const rows = list.stdout.split('\n')
  assert.equal(rows[0], 'freeze windows:')
  assert.match(rows[1] ?? '', /^ID +ENVIRONMENT +SCHEDULE +NEXT +ACTIVE NOW +REASON$/)
  assert.match(rows[2] ?? '', new RegExp(`^1 +prod +once, ${from} to ${to} +${from} to ${to} +no +launch$`))
  assert.match(
    rows[3] ?? '',
    new RegExp(`^2 +prod +once, ${activeFrom} to ${activeTo} +- +yes, until ${activeTo} +close$`),
  )
  assert.equal(
    (await cli(['freeze', 'list', '--account', 'Acme', 'dev'])).stdout,
    'freeze windows:\n  none\n',
  )

  // Recurring windows, on the wall clock of their zone: one weekly, one by cron; a zone that does not exist.
  const weekly = ['--weekly', 'Fri 16:00-Mon 08:00', '--tz', 'Europe/Berlin']
  const addedWeekly = await cli([
    'freeze',
    'add',
    '--account',
    'Acme',
    'staging',
    '--reason',
    'weekend',
    ...weekly,
  ])
  assert.equal(addedWeekly.stderr, 'added freeze window 3 to staging\n')
  const cron = ['--cron', '0 22 * * *', '--duration-minutes', '480', '--tz', 'UTC']
  assert.equal(
    (await cli(['freeze', 'add', '--account', 'Acme', 'dev', '--reason', 'nightly', ...cron])).code,
    0,
  )
  const mars = await cli([
    'freeze',
    'add',
    '--account',
    'Acme',
    'dev',
    '--reason',
    'x',
    '--weekly',
    'Sat 10:00-Sun 10:00',
    '--tz',
    'Mars/Olympus',
  ])
  assert.equal(mars.code, 2)
  assert.match(
    mars.stderr,
    /^shiplog: time_zone: "Mars\/Olympus" is not a known time zone \(e\.g\. Europe\/Berlin\) \(--tz\)\n/,
  )
  const overlapping = await cli([
    'freeze',
    'add',
    '--account',
    'Acme',
    'dev',
    '--reason',
    'x',
    '--cron',
    '0 23 * * *',
    '--duration-minutes',
    '60',
    '--tz',
    'UTC',
  ])
  assert.equal(overlapping.code, 2)
  assert.match(overlapping.stderr, /^shiplog: the window overlaps freeze window 4 of dev/)
  const listedAt = Date.now()
  const recurring = (await cli(['freeze', 'list', '--account', 'Acme', 'staging'])).stdout.split('\n')
  const berlin = { cron: '0 16 * * 5', durationMinutes: 3840, timeZone: 'Europe/Berlin' }
  const next = nextOccurrence(berlin, listedAt)
  const open = activeOccurrence(berlin, listedAt)
  assert.ok(next)
  assert.equal(
    recurring[2]?.replace(/ {2,}/g, '  '),
    `3  staging  every Fri 16:00 to Mon 08:00 (Europe/Berlin)  ${shown(next.start)} to ${shown(next.end)}  ${open ? `yes, until ${shown(open.end)}` : 'no'}  weekend`,
  )
  const nightly = (await cli(['freeze', 'list', '--account', 'Acme', 'dev'])).stdout
  assert.match(
    nightly,
    /\n4 +dev +every day 22:00 to 06:00 \(UTC\) +\S+Z to \S+Z +(no|yes, until \S+Z) +nightly\n/,
  )

  const missing = await cli(['freeze', 'remove', '--account', 'Acme', '99'])
  assert.equal(missing.code, 1)
  assert.match(missing.stderr, /^shiplog: there is no freeze window 99\n/)
  assert.equal((await cli(['freeze', 'remove', '--account', 'Acme', 'one'])).code, 2)
  const removed = await cli(['freeze', 'remove', '--account', 'Acme', '1'])
  assert.equal(removed.stderr, 'removed freeze window 1\n')

  const bad = await cli(['versions', 'bad', '--account', 'Acme', 'api', '9.9', '--reason', 'leaks memory'])
  assert.equal(bad.code, 0, bad.stderr)
  assert.equal(bad.stderr, 'marked api 9.9 bad\n')
  const rebad = await cli([
    'versions',
    'bad',
    '--account',
    'Acme',
    'api',
    '9.9',
    '--reason',
    'corrupts carts',
  ])
  assert.equal(rebad.stderr, 'marked api 9.9 bad (the earlier reason is replaced)\n')
  const unknownService = await cli(['versions', 'bad', '--account', 'Acme', 'nope', '1', '--reason', 'x'])
  assert.equal(unknownService.code, 2)
  assert.match(unknownService.stderr, /service: this account has no service "nope"/)
  assert.equal((await cli(['versions', 'bad', '--account', 'Acme', 'api'])).code, 2)
  const versions = await cli(['versions', 'list', '--account', 'Acme'])
  assert.match(
    versions.stdout,
    /^versions marked bad:\nSERVICE +VERSION +BY +MARKED +REASON\napi +9\.9 +cli \(.+\) +\S+Z +corrupts carts\n$/,
  )
  assert.equal(
    (await cli(['versions', 'list', '--account', 'Acme', 'web'])).stdout,
    'versions marked bad:\n  none\n',
  )

  const set = await cli([
    'promotion',
    'set',
    '--account',
    'Acme',
    'prod',
    '--after',
    'staging',
    '--min-minutes',
    '30',
    '--require-good',
  ])
  assert.equal(set.code, 0, set.stderr)
  assert.equal(
    set.stderr,
    'set: deploying to prod needs success in staging at least 30 min before, and not marked bad\n',
  )
  assert.equal((await cli(['promotion', 'set', '--account', 'Acme', 'staging', '--after', 'dev'])).code, 0)
  const cycle = await cli(['promotion', 'set', '--account', 'Acme', 'dev', '--after', 'prod'])
  assert.equal(cycle.code, 2)
  assert.match(
    cycle.stderr,
    /^shiplog: the rule would make a cycle: dev → prod → staging → dev \(each needs the next first\) \(--after\)\n/,
  )
  const itself = await cli([
    'promotion',
    'set',
    '--account',
    'Acme',
    'prod',
    '--after',
    'prod',
    '--min-minutes',
    'lots',
  ])
  assert.equal(itself.code, 2)
  assert.match(itself.stderr, /min_minutes must be a whole number from 0 to 525600 \(--min-minutes\)/)
  assert.match(itself.stderr, /after_environment must name another environment than prod itself \(--after\)/)
  const rules = await cli(['promotion', 'list', '--account', 'Acme'])
  assert.match(
    rules.stdout,
    /^promotion rules:\nENVIRONMENT +AFTER +WAIT +NOT BAD +BY +SET\nprod +staging +30 min +required +cli \(.+\) +\S+Z\nstaging +dev +0 min +- +cli/,
  )
  assert.equal(await count('promotion_rules'), 2)

  // prod is frozen now, 9.9 is bad, and it never ran in staging (a lock too): every reason, in order.
  assert.equal(
    (await cli(['env', 'lock', '--account', 'Acme', 'prod', '--service', 'api', '--reason', 'incident']))
      .code,
    0,
  )
  const no = await cli(['check', '--account', 'Acme', 'api', 'prod', '9.9'])
  assert.equal(no.code, 5, no.stderr)
  const reasons = no.stdout.split('\n')
  assert.equal(reasons.length, 7, no.stdout)
  assert.equal(reasons[0], 'not allowed: api 9.9 to prod')
  assert.match(
    reasons[1] ?? '',
    /^ {2}lock: api is locked in prod by cli \(.+\) until it is unlocked: incident$/,
  )
  assert.equal(
    reasons[2],
    `  freeze: prod is in a freeze window until ${new Date(Date.parse(activeTo)).toISOString()}: close`,
  )
  assert.match(reasons[3] ?? '', /^ {2}bad_version: api 9\.9 is marked bad by cli \(.+\): corrupts carts$/)
  assert.deepEqual(reasons.slice(4), [
    '  promotion: api 9.9 has not succeeded in staging; it must succeed there at least 30 minutes before prod',
    '  promotion: prod takes only versions not marked bad after staging, and api 9.9 is marked bad',
    '',
  ])
  // dev's nightly window (22:00–06:00 UTC) would make the answer depend on the hour the test runs.
  assert.equal((await cli(['freeze', 'remove', '--account', 'Acme', '4'])).code, 0)
  const yes = await cli(['check', '--account', 'Acme', 'web', 'dev', '1.0'])
  assert.equal(yes.code, 0, yes.stderr)
  assert.equal(yes.stdout, 'allowed: web 1.0 to dev\n')
  assert.equal((await cli(['check', '--account', 'Acme', 'web', 'dev'])).code, 2)
  assert.match((await cli(['check', '--help'])).stdout, /exit 0 allowed, 5 not allowed/)

  const good = await cli(['versions', 'good', '--account', 'Acme', 'api', '9.9'])
  assert.equal(good.stderr, 'api 9.9 is no longer marked bad\n')
  const notBad = await cli(['versions', 'good', '--account', 'Acme', 'api', '9.9'])
  assert.equal(notBad.code, 1)
  assert.match(notBad.stderr, /^shiplog: api 9\.9 is not marked bad\n/)
  const gone = await cli(['promotion', 'remove', '--account', 'Acme', 'staging', '--after', 'dev'])
  assert.equal(gone.stderr, 'removed the rule: staging after dev\n')
  assert.equal((await cli(['promotion', 'remove', '--account', 'Acme', 'staging', '--after', 'dev'])).code, 1)
  assert.equal((await cli(['promotion', 'remove', '--account', 'Acme', 'staging'])).code, 2)

  const audit = await database.db
    .selectFrom('audit_entries')
    .select(['action', 'actor'])
    .orderBy('id')
    .execute()
  assert.deepEqual(
    audit.map((a) => a.action),
    [
      'freeze.added',
      'freeze.added',
      'freeze.added',
      'freeze.added',
      'freeze.removed',
      'version.marked_bad',
      'version.marked_bad',
      'promotion_rule.set',
      'promotion_rule.set',
      'environment.locked',
      'freeze.removed',
      'version.marked_good',
      'promotion_rule.removed',
    ],
  )
  assert.ok(audit.every((a) => /^cli \(/.test(a.actor)))
})

test('verify passes over an event that carries guardrails and an override reason, and names it when they change', {
  timeout: 120_000,
}, async (t) => {
  const { database, account, cli } = await installation(t)
  const [id] = await insertEvents(database, account.id, [
    { service: 'api', environment: 'prod', version: '2.0' },
  ])
  await database.db
    .updateTable('events')
    .set({ guardrails: 'lock,bad_version', override_reason: 'hotfix for the outage' })
    .where('id', '=', id ?? 0)
    .execute()
  await chainCaughtUp(database, { graceMs: 0, settleMs: 0 })
  const intact = await cli(['verify'])
  assert.equal(intact.code, 0, intact.stdout + intact.stderr)
  assert.match(intact.stdout, /verify: intact/)
  await database.db
    .updateTable('events')
    .set({ guardrails: 'lock' })
    .where('id', '=', id ?? 0)
    .execute()
  const changed = await cli(['verify'])
  assert.equal(changed.code, 1, changed.stdout + changed.stderr)
  assert.match(changed.stdout, new RegExp(`\\b${id}\\b`))
})
