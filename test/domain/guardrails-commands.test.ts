// The guardrails' audited commands and the check they feed (SPEC §11), on both databases, at fixed
// instants: a lock holds until exactly its end, an environment-wide lock against a one-service one,
// a promotion chain dev → staging → prod with waits, a bad version, every reason at once in order,
// and each refusal storing nothing and writing no audit entry. Expectations computed by hand.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { AuditSource } from '../../src/domain/audit/log.js'
import { BACKLOG_BATCH, catchUpDeployments } from '../../src/domain/deployments/store.js'
import type { Validation } from '../../src/domain/events/event.js'
import { checkDeployment } from '../../src/domain/guardrails/check.js'
import {
  addFreezeWindow,
  lockEnvironment,
  markVersionBad,
  markVersionGood,
  removeFreezeWindow,
  removePromotionRule,
  setPromotionRule,
  unlockById,
  unlockEnvironment,
} from '../../src/domain/guardrails/commands.js'
import {
  readBadVersionInput,
  readFreezeInput,
  readLockInput,
  readPromotionInput,
} from '../../src/domain/guardrails/inputs.js'
import { renameAudited } from '../../src/domain/names/audited.js'
import { checkRename } from '../../src/domain/names/rename.js'
import { buildTestApp, type TestApp } from '../helper.js'

const MIN = 60_000
const HOUR = 60 * MIN
/** Noon UTC, 1 June 2026: "now" for every command and check below. */
const T0 = Date.UTC(2026, 5, 1, 12, 0, 0)
const iso = (ms: number) => new Date(ms).toISOString()
const ADMIN: AuditSource = { actor: { kind: 'cli', id: null, name: 'cli (ops@box)' }, address: null }
const GUARDRAIL_TABLES = ['environment_locks', 'freeze_windows', 'bad_versions', 'promotion_rules'] as const

interface Setup {
  ctx: TestApp
  accountId: number
  /** Records one event through POST /deploy at its own time, then derives deployments. */
  record(fields: Record<string, string>, at: number): Promise<void>
}

/**
 * An account whose board knows api and web in dev, staging and prod (each deployed a month before
 * T0), so the commands accept those names.
 */
async function setup(t: Parameters<typeof buildTestApp>[0]): Promise<Setup> {
  const ctx = await buildTestApp(t)
  const record = async (fields: Record<string, string>, at: number) => {
    const res = await ctx.app.inject({
      method: 'POST',
      url: '/deploy',
      headers: { 'x-api-key': ctx.tenant.key, 'content-type': 'application/json' },
      payload: JSON.stringify({ status: 'Deployed', ...fields, occurred_at: iso(at) }),
    })
    assert.equal(res.statusCode, 201, res.body)
    for (;;) {
      const result = await catchUpDeployments(ctx.database, { limit: BACKLOG_BATCH })
      if (!result.more && result.events === 0) break
    }
  }
  for (const service of ['api', 'web'])
    for (const environment of ['dev', 'staging', 'prod'])
      await record({ service, environment, version: '0.1' }, T0 - 30 * 24 * HOUR)
  return { ctx, accountId: Number(ctx.tenant.account.id), record }
}

function accepted<T>(v: Validation<T>): T {
  if (!v.ok) assert.fail(`refused: ${JSON.stringify(v.errors)}`)
  return v.value
}

function refusedWith(v: Validation<unknown>, field: string, message: RegExp): void {
  assert.equal(v.ok, false, 'refused')
  if (v.ok) return
  assert.ok(
    v.errors.some((e) => e.field === field && message.test(e.message)),
    `${field} ${message}: ${JSON.stringify(v.errors)}`,
  )
}

/** Rows of the guardrail tables and audit entries: a refusal must leave both as they were. */
async function stored(s: Setup): Promise<Record<string, number>> {
  const counts: Record<string, number> = {}
  for (const table of [...GUARDRAIL_TABLES, 'audit_entries'] as const) {
    const row = await s.ctx.database.db
      .selectFrom(table)
      .select((eb) => eb.fn.countAll<number | string>().as('n'))
      .executeTakeFirstOrThrow()
    counts[table] = Number(row.n)
  }
  return counts
}

async function actions(s: Setup): Promise<string[]> {
  const rows = await s.ctx.database.db.selectFrom('audit_entries').select('action').orderBy('id').execute()
  return rows.map((r) => r.action)
}

const check = (s: Setup, service: string, environment: string, version: string, at: number) =>
  checkDeployment(s.ctx.database.db, s.accountId, { service, environment, version }, at)

test('a lock with an end applies until exactly its end, not at it; a one-service lock leaves the others free', async (t) => {
  const s = await setup(t)
  const ends = T0 + 2 * HOUR
  const lock = readLockInput({ environment: 'prod', reason: 'db migration', until: '2h' }, T0)
  assert.deepEqual(accepted(lock), {
    environment: 'prod',
    service: null,
    reason: 'db migration',
    endsAt: ends,
  })
  accepted(await lockEnvironment(s.ctx.database.db, s.accountId, accepted(lock), ADMIN, T0))
  const before = await check(s, 'api', 'prod', '1.0', ends - 1)
  assert.equal(before.allowed, false)
  assert.deepEqual(before.reasons, [
    {
      rule: 'lock',
      message: 'prod is locked by cli (ops@box) until 2026-06-01T14:00:00.000Z: db migration',
      until: ends,
    },
  ])
  assert.deepEqual(await check(s, 'api', 'prod', '1.0', ends), {
    allowed: true,
    reasons: [],
    deployment: { service: 'api', environment: 'prod', version: '1.0' },
  })

  const webOnly = accepted(readLockInput({ environment: 'staging', service: 'web', reason: 'flaky' }, T0))
  accepted(await lockEnvironment(s.ctx.database.db, s.accountId, webOnly, ADMIN, T0))
  assert.deepEqual((await check(s, 'web', 'staging', '1.0', T0 + 365 * 24 * HOUR)).reasons, [
    {
      rule: 'lock',
      message: 'web is locked in staging by cli (ops@box) until it is unlocked: flaky',
      until: null,
    },
  ])
  assert.equal((await check(s, 'api', 'staging', '1.0', T0)).allowed, true)
  // The environment-wide unlock leaves the service's lock alone; the service's unlock lifts it.
  refusedWith(
    await unlockEnvironment(
      s.ctx.database.db,
      s.accountId,
      { environment: 'staging', service: null },
      ADMIN,
      T0,
    ),
    'environment',
    /^staging is not locked$/,
  )
  accepted(
    await unlockEnvironment(
      s.ctx.database.db,
      s.accountId,
      { environment: 'staging', service: 'web' },
      ADMIN,
      T0,
    ),
  )
  assert.equal((await check(s, 'web', 'staging', '1.0', T0)).allowed, true)
  assert.deepEqual(await actions(s), ['environment.locked', 'environment.locked', 'environment.unlocked'])
})

test('a promotion chain dev → staging → prod: not yet, waiting until success + 30 min, then allowed', async (t) => {
  const s = await setup(t)
  const db = s.ctx.database.db
  for (const [environment, after, minutes] of [
    ['staging', 'dev', '15'],
    ['prod', 'staging', '30'],
  ] as const) {
    const rule = accepted(readPromotionInput({ environment, after_environment: after, min_minutes: minutes }))
    accepted(await setPromotionRule(db, s.accountId, rule, ADMIN, T0 - 2 * HOUR))
  }
  await s.record({ service: 'api', environment: 'dev', version: '2.0', status: 'Deploying' }, T0 - 70 * MIN)
  await s.record({ service: 'api', environment: 'dev', version: '2.0' }, T0 - 60 * MIN)

  // Succeeded in dev at T0 − 60 min: staging's 15 minutes have passed; prod needs staging first.
  assert.equal((await check(s, 'api', 'staging', '2.0', T0)).allowed, true)
  assert.deepEqual((await check(s, 'api', 'prod', '2.0', T0)).reasons, [
    {
      rule: 'promotion',
      message: 'api 2.0 has not succeeded in staging; it must succeed there at least 30 minutes before prod',
      until: null,
    },
  ])
  // Too early for staging: dev's success was 10 minutes before, 15 are needed (until T0 − 45 min).
  assert.deepEqual((await check(s, 'api', 'staging', '2.0', T0 - 50 * MIN)).reasons, [
    {
      rule: 'promotion',
      message:
        'api 2.0 succeeded in dev at 2026-06-01T11:00:00.000Z; staging must wait 15 minutes after that, until 2026-06-01T11:15:00.000Z',
      until: T0 - 45 * MIN,
    },
  ])

  // Succeeded in staging 10 minutes before T0: prod waits until T0 − 10 + 30 = T0 + 20 min.
  await s.record({ service: 'api', environment: 'staging', version: '2.0' }, T0 - 10 * MIN)
  const waiting = await check(s, 'api', 'prod', '2.0', T0)
  assert.deepEqual(waiting.reasons, [
    {
      rule: 'promotion',
      message:
        'api 2.0 succeeded in staging at 2026-06-01T11:50:00.000Z; prod must wait 30 minutes after that, until 2026-06-01T12:20:00.000Z',
      until: T0 + 20 * MIN,
    },
  ])
  assert.equal((await check(s, 'api', 'prod', '2.0', T0 + 20 * MIN - 1)).allowed, false)
  assert.equal((await check(s, 'api', 'prod', '2.0', T0 + 20 * MIN)).allowed, true)
  // Another service's success does not promote api.
  await s.record({ service: 'web', environment: 'staging', version: '2.0' }, T0 - 60 * MIN)
  assert.equal((await check(s, 'api', 'prod', '2.0', T0 + 20 * MIN)).allowed, true)
  assert.equal((await check(s, 'api', 'prod', '3.0', T0 + 20 * MIN)).allowed, false)
})

test('a bad version: its reason in the message; a require-good rule adds a promotion reason; marked good again, allowed', async (t) => {
  const s = await setup(t)
  const db = s.ctx.database.db
  await s.record({ service: 'api', environment: 'staging', version: '2.0' }, T0 - 2 * HOUR)
  const rule = accepted(
    readPromotionInput({
      environment: 'prod',
      after_environment: 'staging',
      min_minutes: '30',
      require_good: 'on',
    }),
  )
  accepted(await setPromotionRule(db, s.accountId, rule, ADMIN, T0))
  assert.equal((await check(s, 'api', 'prod', '2.0', T0)).allowed, true)
  const bad = accepted(readBadVersionInput({ service: 'api', version: '2.0', reason: 'leaks memory' }))
  assert.deepEqual(accepted(await markVersionBad(db, s.accountId, bad, ADMIN, T0)), { replaced: false })
  assert.deepEqual((await check(s, 'api', 'prod', '2.0', T0)).reasons, [
    { rule: 'bad_version', message: 'api 2.0 is marked bad by cli (ops@box): leaks memory', until: null },
    {
      rule: 'promotion',
      message: 'prod takes only versions not marked bad after staging, and api 2.0 is marked bad',
      until: null,
    },
  ])
  // Elsewhere, without the rule, the bad version is the only reason; another version is free.
  assert.deepEqual(
    (await check(s, 'api', 'dev', '2.0', T0)).reasons.map((r) => r.rule),
    ['bad_version'],
  )
  assert.equal((await check(s, 'api', 'dev', '2.1', T0)).allowed, true)
  // Marked again: the reason is replaced.
  const again = accepted(readBadVersionInput({ service: 'api', version: '2.0', reason: 'corrupts carts' }))
  assert.deepEqual(accepted(await markVersionBad(db, s.accountId, again, ADMIN, T0 + MIN)), {
    replaced: true,
  })
  assert.match((await check(s, 'api', 'dev', '2.0', T0)).reasons[0]?.message ?? '', /: corrupts carts$/)
  accepted(await markVersionGood(db, s.accountId, { service: 'api', version: '2.0' }, ADMIN, T0 + 2 * MIN))
  assert.equal((await check(s, 'api', 'prod', '2.0', T0)).allowed, true)
  refusedWith(
    await markVersionGood(db, s.accountId, { service: 'api', version: '2.0' }, ADMIN, T0),
    'version',
    /api 2\.0 is not marked bad/,
  )
  assert.deepEqual(await actions(s), [
    'promotion_rule.set',
    'version.marked_bad',
    'version.marked_bad',
    'version.marked_good',
  ])
})

test('locked, frozen, bad and unpromoted at once: four reasons, in the order lock, freeze, bad_version, promotion', async (t) => {
  const s = await setup(t)
  const db = s.ctx.database.db
  accepted(
    await setPromotionRule(
      db,
      s.accountId,
      accepted(readPromotionInput({ environment: 'prod', after_environment: 'staging' })),
      ADMIN,
      T0,
    ),
  )
  accepted(
    await markVersionBad(
      db,
      s.accountId,
      accepted(readBadVersionInput({ service: 'api', version: '3.0', reason: 'broken' })),
      ADMIN,
      T0,
    ),
  )
  const freeze = accepted(
    readFreezeInput(
      {
        environment: 'prod',
        reason: 'quarter close',
        from: '2026-06-01T11:00:00Z',
        to: '2026-06-01T13:00:00Z',
      },
      T0,
    ),
  )
  assert.deepEqual(freeze.schedule, { kind: 'once', startsAt: T0 - HOUR, endsAt: T0 + HOUR })
  accepted(await addFreezeWindow(db, s.accountId, freeze, ADMIN, T0))
  accepted(
    await lockEnvironment(
      db,
      s.accountId,
      accepted(readLockInput({ environment: 'prod', reason: 'incident' }, T0)),
      ADMIN,
      T0,
    ),
  )
  const answer = await check(s, 'api', 'prod', '3.0', T0)
  assert.equal(answer.allowed, false)
  assert.deepEqual(answer.reasons, [
    { rule: 'lock', message: 'prod is locked by cli (ops@box) until it is unlocked: incident', until: null },
    {
      rule: 'freeze',
      message: 'prod is in a freeze window until 2026-06-01T13:00:00.000Z: quarter close',
      until: T0 + HOUR,
    },
    { rule: 'bad_version', message: 'api 3.0 is marked bad by cli (ops@box): broken', until: null },
    {
      rule: 'promotion',
      message: 'api 3.0 has not succeeded in staging; it must succeed there before prod',
      until: null,
    },
  ])
  // The one-off window holds from its start up to, not at, its end.
  assert.deepEqual(
    (await check(s, 'web', 'staging', '1', T0)).reasons,
    [],
    'other environments are untouched',
  )
  const rulesAt = async (at: number) => (await check(s, 'api', 'prod', '3.0', at)).reasons.map((r) => r.rule)
  assert.deepEqual(await rulesAt(T0 - HOUR - 1), ['lock', 'bad_version', 'promotion'])
  assert.deepEqual(await rulesAt(T0 - HOUR), ['lock', 'freeze', 'bad_version', 'promotion'])
  assert.deepEqual(await rulesAt(T0 + HOUR), ['lock', 'bad_version', 'promotion'])
})

test('refused input stores nothing and writes no audit entry; each field is named', async (t) => {
  const s = await setup(t)
  const db = s.ctx.database.db
  for (const [environment, after] of [
    ['staging', 'dev'],
    ['prod', 'staging'],
  ] as const) {
    const rule = accepted(readPromotionInput({ environment, after_environment: after }))
    accepted(await setPromotionRule(db, s.accountId, rule, ADMIN, T0))
  }
  const window = {
    environment: 'prod',
    reason: 'release',
    from: '2026-06-02T10:00:00Z',
    to: '2026-06-02T12:00:00Z',
  }
  accepted(await addFreezeWindow(db, s.accountId, accepted(readFreezeInput(window, T0)), ADMIN, T0))
  const before = await stored(s)
  assert.deepEqual(before, {
    environment_locks: 0,
    freeze_windows: 1,
    bad_versions: 0,
    promotion_rules: 2,
    audit_entries: 3,
  })

  const lock = (fields: Record<string, string>) =>
    lockEnvironment(db, s.accountId, accepted(readLockInput({ reason: 'r', ...fields }, T0)), ADMIN, T0)
  refusedWith(
    await lock({ environment: 'qa' }),
    'environment',
    /^environment: this account has no environment "qa" \(known: dev, staging, prod\)$/,
  )
  refusedWith(await lock({ environment: 'prod', service: 'nope' }), 'service', /no service "nope"/)
  refusedWith(readLockInput({ environment: 'prod', reason: '   ' }, T0), 'reason', /^reason is required$/)
  refusedWith(
    readLockInput({ environment: 'prod', reason: 'r', until: '2026-06-01T11:59:59Z' }, T0),
    'until',
    /^until must lie in the future$/,
  )
  refusedWith(
    readFreezeInput(
      { environment: 'prod', reason: 'r', from: '2026-06-03T10:00:00Z', to: '2026-06-03T10:00:00Z' },
      T0,
    ),
    'to',
    /^to must be later than from/,
  )
  refusedWith(
    await addFreezeWindow(
      db,
      s.accountId,
      accepted(readFreezeInput({ ...window, environment: 'qa' }, T0)),
      ADMIN,
      T0,
    ),
    'environment',
    /no environment "qa"/,
  )
  const overlapping = { ...window, from: '2026-06-02T11:00:00Z', to: '2026-06-02T13:00:00Z' }
  refusedWith(
    await addFreezeWindow(db, s.accountId, accepted(readFreezeInput(overlapping, T0)), ADMIN, T0),
    'from',
    /overlaps freeze window \d+ of prod/,
  )
  refusedWith(
    readPromotionInput({ environment: 'prod', after_environment: 'prod' }),
    'after_environment',
    /must name another environment than prod itself/,
  )
  refusedWith(
    await setPromotionRule(
      db,
      s.accountId,
      accepted(readPromotionInput({ environment: 'dev', after_environment: 'prod' })),
      ADMIN,
      T0,
    ),
    'after_environment',
    /^the rule would make a cycle: dev → prod → staging → dev \(each needs the next first\)$/,
  )
  refusedWith(
    await markVersionBad(
      db,
      s.accountId,
      accepted(readBadVersionInput({ service: 'nope', version: '1', reason: 'r' })),
      ADMIN,
      T0,
    ),
    'service',
    /no service "nope"/,
  )
  refusedWith(
    readBadVersionInput({ service: 'api', version: '', reason: '' }),
    'version',
    /^version is required$/,
  )
  refusedWith(
    readBadVersionInput({ service: 'api', version: '', reason: '' }),
    'reason',
    /^reason is required$/,
  )
  assert.deepEqual(await stored(s), before)
  // A window right after the first (touching, not overlapping) is taken.
  const next = { ...window, from: '2026-06-02T12:00:00Z', to: '2026-06-02T13:00:00Z' }
  accepted(await addFreezeWindow(db, s.accountId, accepted(readFreezeInput(next, T0)), ADMIN, T0))
})

test('every successful change writes exactly one audit entry with its action', async (t) => {
  const s = await setup(t)
  const db = s.ctx.database.db
  const steps: [string, () => Promise<Validation<unknown>>][] = [
    [
      'environment.locked',
      () =>
        lockEnvironment(
          db,
          s.accountId,
          { environment: 'prod', service: null, reason: 'r', endsAt: null },
          ADMIN,
          T0,
        ),
    ],
    [
      'environment.unlocked',
      () => unlockEnvironment(db, s.accountId, { environment: 'prod', service: null }, ADMIN, T0),
    ],
    [
      'environment.locked',
      () =>
        lockEnvironment(
          db,
          s.accountId,
          { environment: 'dev', service: 'api', reason: 'r', endsAt: T0 + HOUR },
          ADMIN,
          T0,
        ),
    ],
    [
      'environment.unlocked',
      async () => {
        const lock = await db.selectFrom('environment_locks').select('id').executeTakeFirstOrThrow()
        return unlockById(db, s.accountId, Number(lock.id), ADMIN, T0)
      },
    ],
    [
      'freeze.added',
      () =>
        addFreezeWindow(
          db,
          s.accountId,
          { environment: 'prod', reason: 'r', schedule: { kind: 'once', startsAt: T0, endsAt: T0 + HOUR } },
          ADMIN,
          T0,
        ),
    ],
    [
      'freeze.removed',
      async () => {
        const window = await db.selectFrom('freeze_windows').select('id').executeTakeFirstOrThrow()
        return removeFreezeWindow(db, s.accountId, Number(window.id), ADMIN, T0)
      },
    ],
    [
      'version.marked_bad',
      () => markVersionBad(db, s.accountId, { service: 'api', version: '1', reason: 'r' }, ADMIN, T0),
    ],
    [
      'version.marked_good',
      () => markVersionGood(db, s.accountId, { service: 'api', version: '1' }, ADMIN, T0),
    ],
    [
      'promotion_rule.set',
      () =>
        setPromotionRule(
          db,
          s.accountId,
          { environment: 'prod', afterEnvironment: 'staging', minMinutes: 5, requireGood: false },
          ADMIN,
          T0,
        ),
    ],
    [
      'promotion_rule.set',
      () =>
        setPromotionRule(
          db,
          s.accountId,
          { environment: 'prod', afterEnvironment: 'staging', minMinutes: 10, requireGood: true },
          ADMIN,
          T0,
        ),
    ],
    [
      'promotion_rule.removed',
      () =>
        removePromotionRule(db, s.accountId, { environment: 'prod', afterEnvironment: 'staging' }, ADMIN, T0),
    ],
  ]
  for (const [action, step] of steps) {
    const before = await actions(s)
    accepted(await step())
    assert.deepEqual(await actions(s), [...before, action], action)
  }
  const entries = await db
    .selectFrom('audit_entries')
    .select(['actor', 'target', 'details'])
    .orderBy('id')
    .execute()
  assert.ok(entries.every((e) => e.actor === 'cli (ops@box)'))
  assert.deepEqual(
    entries.map((e) => e.target),
    [
      'environment prod',
      'environment prod',
      'api in dev',
      'api in dev',
      'environment prod',
      'environment prod',
      'api 1',
      'api 1',
      'environment prod',
      'environment prod',
      'environment prod',
    ],
  )
  assert.deepEqual(JSON.parse(entries[9]?.details ?? '{}'), {
    after: 'staging',
    min_minutes: 10,
    require_good: true,
    before: '5 min',
  })
  assert.deepEqual(await stored(s), {
    environment_locks: 0,
    freeze_windows: 0,
    bad_versions: 0,
    promotion_rules: 0,
    audit_entries: steps.length,
  })
})

test('renames and merges carry the guardrails to the new name; a merge collapses duplicates and drops rules that would name the environment itself or close a cycle', async (t) => {
  const s = await setup(t)
  const db = s.ctx.database.db
  await s.record({ service: 'API', environment: 'Staging', version: '0.1' }, T0 - 20 * 24 * HOUR)
  await s.record({ service: 'web', environment: 'qa', version: '0.1' }, T0 - 20 * 24 * HOUR)
  const lock = (environment: string, service: string | null, reason: string) =>
    lockEnvironment(db, s.accountId, { environment, service, reason, endsAt: null }, ADMIN, T0)
  accepted(await lock('Staging', null, 'old lock'))
  accepted(await lock('Staging', 'API', 'api lock'))
  accepted(await lock('prod', null, 'prod lock'))
  const once = { kind: 'once' as const, startsAt: T0, endsAt: T0 + HOUR }
  accepted(
    await addFreezeWindow(
      db,
      s.accountId,
      { environment: 'Staging', reason: 'f', schedule: once },
      ADMIN,
      T0,
    ),
  )
  for (const [service, version, reason] of [
    ['API', '1.0', 'r1'],
    ['API', '2.0', 'r2'],
    ['api', '2.0', 'own'],
  ] as const)
    accepted(await markVersionBad(db, s.accountId, { service, version, reason }, ADMIN, T0))
  for (const [environment, afterEnvironment, minMinutes] of [
    ['staging', 'dev', 15],
    ['Staging', 'dev', 5],
    ['staging', 'Staging', 0],
    ['prod', 'Staging', 30],
    ['staging', 'qa', 0],
    ['qa', 'Staging', 0],
  ] as const) {
    const rule = { environment, afterEnvironment, minMinutes, requireGood: false }
    accepted(await setPromotionRule(db, s.accountId, rule, ADMIN, T0))
  }
  const rename = async (kind: 'service' | 'environment', from: string, to: string) => {
    const checked = await checkRename(db, s.accountId, kind, from, to)
    if ('problem' in checked) assert.fail(checked.problem)
    return renameAudited(db, s.accountId, checked, ADMIN)
  }

  const env = await rename('environment', 'Staging', 'staging')
  assert.equal(env.merge, true)
  // In code-unit order: "Staging after dev" (staging has its own), "prod after Staging" (moves),
  // "qa after Staging" (with "staging after qa", a cycle), "staging after Staging" (itself).
  assert.deepEqual(env.droppedPromotionRules, [
    { environment: 'Staging', afterEnvironment: 'dev', why: 'the new name has its own' },
    { environment: 'qa', afterEnvironment: 'Staging', why: 'would make a cycle' },
    { environment: 'staging', afterEnvironment: 'Staging', why: 'would name the environment itself' },
  ])
  const svc = await rename('service', 'API', 'api')
  assert.deepEqual(svc.droppedPromotionRules, [])
  const renamed = await rename('environment', 'qa', 'quality')
  assert.equal(renamed.merge, false)

  const locks = await db
    .selectFrom('environment_locks')
    .select(['environment', 'service', 'reason'])
    .orderBy('id')
    .execute()
  assert.deepEqual(locks, [
    { environment: 'staging', service: null, reason: 'old lock' },
    { environment: 'staging', service: 'api', reason: 'api lock' },
    { environment: 'prod', service: null, reason: 'prod lock' },
  ])
  const windows = await db.selectFrom('freeze_windows').select('environment').execute()
  assert.deepEqual(windows, [{ environment: 'staging' }])
  const bad = await db
    .selectFrom('bad_versions')
    .select(['service', 'version', 'reason'])
    .orderBy('version')
    .execute()
  assert.deepEqual(bad, [
    { service: 'api', version: '1.0', reason: 'r1' },
    { service: 'api', version: '2.0', reason: 'own' },
  ])
  const rules = (
    await db
      .selectFrom('promotion_rules')
      .select(['environment', 'after_environment', 'min_minutes'])
      .execute()
  )
    .map((r) => `${r.environment} after ${r.after_environment} ${r.min_minutes}`)
    .sort()
  assert.deepEqual(rules, ['prod after staging 30', 'staging after dev 15', 'staging after quality 0'])
  const audit = await db
    .selectFrom('audit_entries')
    .select('details')
    .where('action', '=', 'environment.renamed')
    .orderBy('id')
    .execute()
  assert.deepEqual(JSON.parse(audit[0]?.details ?? '{}').dropped_promotion_rules, [
    'Staging after dev (the new name has its own)',
    'qa after Staging (would make a cycle)',
    'staging after Staging (would name the environment itself)',
  ])
  assert.equal(JSON.parse(audit[1]?.details ?? '{}').dropped_promotion_rules, undefined)
  // The check asked under the old names applies the rules that followed.
  const answer = await check(s, 'API', 'Staging', '2.0', T0)
  assert.deepEqual(answer.deployment, { service: 'api', environment: 'staging', version: '2.0' })
  assert.deepEqual(
    answer.reasons.map((r) => r.rule),
    ['lock', 'lock', 'freeze', 'bad_version', 'promotion', 'promotion'],
  )
})

test('a weekly freeze on the Berlin wall clock: Fri 16:00 to Mon 08:00 local is 14:00 to 06:00 UTC in summer', async (t) => {
  const s = await setup(t)
  const db = s.ctx.database.db
  const fields = {
    environment: 'prod',
    reason: 'weekend',
    weekly: 'Fri 16:00-Mon 08:00',
    time_zone: 'Europe/Berlin',
  }
  const input = accepted(readFreezeInput(fields, T0))
  assert.deepEqual(input.schedule, {
    kind: 'recurring',
    cron: '0 16 * * 5',
    durationMinutes: 3840,
    timeZone: 'Europe/Berlin',
  })
  accepted(await addFreezeWindow(db, s.accountId, input, ADMIN, T0))
  // Friday 5 June 2026, 16:00 CEST = 14:00 UTC; it closes Monday 8 June 08:00 CEST = 06:00 UTC.
  const opens = Date.UTC(2026, 5, 5, 14)
  const closes = Date.UTC(2026, 5, 8, 6)
  const rules = async (at: number) => (await check(s, 'api', 'prod', '1', at)).reasons
  assert.deepEqual(await rules(opens - 1), [])
  assert.deepEqual(await rules(opens), [
    {
      rule: 'freeze',
      message: 'prod is in a freeze window until 2026-06-08T06:00:00.000Z: weekend',
      until: closes,
    },
  ])
  assert.equal((await rules(closes - 1)).length, 1)
  assert.deepEqual(await rules(closes), [])
  // A one-off window over a Saturday collides with it; one on a Tuesday does not.
  const saturday = {
    environment: 'prod',
    reason: 'x',
    from: '2026-06-06T10:00:00Z',
    to: '2026-06-06T11:00:00Z',
  }
  refusedWith(
    await addFreezeWindow(db, s.accountId, accepted(readFreezeInput(saturday, T0)), ADMIN, T0),
    'from',
    /^the window overlaps freeze window 1 of prod \(cron "0 16 \* \* 5" for 3840 min \(Europe\/Berlin\)\) at 2026-06-06T10:00:00\.000Z$/,
  )
  const tuesday = { ...saturday, from: '2026-06-09T10:00:00Z', to: '2026-06-09T11:00:00Z' }
  accepted(await addFreezeWindow(db, s.accountId, accepted(readFreezeInput(tuesday, T0)), ADMIN, T0))
  refusedWith(
    readFreezeInput({ ...fields, time_zone: 'Mars/Olympus' }, T0),
    'time_zone',
    /^time_zone: "Mars\/Olympus" is not a known time zone/,
  )
  refusedWith(
    readFreezeInput(
      { environment: 'prod', reason: 'r', cron: '0 24 * * 5', duration_minutes: '60', time_zone: 'UTC' },
      T0,
    ),
    'cron',
    /^cron: hour: 24 is out of range 0–23$/,
  )
})
