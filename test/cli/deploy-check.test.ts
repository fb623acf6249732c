// The real `shiplog-deploy` process asking the guardrails first (SPEC §11): --check exits 5 with
// every reason on stderr and records nothing; --force --reason records with the override (stored
// and audited); --force alone is a usage error; SHIPLOG_CHECK and SHIPLOG_FORCE_REASON do the
// same for the container image; a key without the read scope is told so. The key is never printed.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { join } from 'node:path'
import { before, test } from 'node:test'
import { cliSource } from '../../src/domain/audit/log.js'
import { lockEnvironment, markVersionBad } from '../../src/domain/guardrails/commands.js'
import { createApiKey } from '../../src/domain/keys.js'
import { buildTestApp, type TestApp } from '../helper.js'
import { assertBuilt, fileScope, processEnv, REPO_ROOT, withTimeout } from '../support/processes.js'
import { deploy as post } from '../support/ui.js'

const DEPLOY_BIN = join(REPO_ROOT, 'bin', 'shiplog-deploy.js')
const LOCK_END = Date.UTC(2099, 5, 1, 12, 0, 0, 0)
const suite = fileScope()

interface Fixture {
  ctx: TestApp
  url: string
  /** Scopes ingest and read: what --check needs. */
  key: string
}
let fixture: Fixture | undefined
const fx = (): Fixture => {
  if (!fixture) throw new Error('the server did not start (see the before hook)')
  return fixture
}

before(
  async () => {
    assertBuilt()
    const ctx = await buildTestApp(suite, { contract: false })
    for (const environment of ['Staging', 'Prod']) {
      const res = await post(ctx.app, ctx.tenant.key, {
        service: 'App1',
        environment,
        version: '1.0.0',
        status: 'Deployed',
      })
      assert.equal(res.status, 201)
    }
    await ctx.app.deployments.current()
    const account = ctx.tenant.account.id
    const who = cliSource()
    for (const done of [
      lockEnvironment(
        ctx.database.db,
        account,
        { environment: 'Prod', service: null, reason: 'db move', endsAt: LOCK_END },
        who,
      ),
      markVersionBad(ctx.database.db, account, { service: 'App1', version: '2.0.0', reason: 'leaks' }, who),
    ]) {
      const result = await done
      assert.ok(result.ok, JSON.stringify(result))
    }
    ctx.app.guardrails.invalidate()
    const { key } = await createApiKey(ctx.database.db, {
      accountId: account,
      name: 'pipeline',
      createdBy: 'test',
      scopes: ['ingest', 'read'],
    })
    const url = await ctx.app.listen({ host: '127.0.0.1', port: 0 })
    fixture = { ctx, url, key }
  },
  { timeout: 60_000 },
)

interface Run {
  code: number | null
  stdout: string
  stderr: string
}

/** Runs `node bin/shiplog-deploy.js ARGS…` against the test server, and checks the key was not printed. */
async function run(args: string[], env: Record<string, string> = {}, key = fx().key): Promise<Run> {
  const child = spawn(process.execPath, [DEPLOY_BIN, ...args], {
    cwd: REPO_ROOT,
    env: processEnv(undefined, { SHIPLOG_URL: fx().url, SHIPLOG_TIMEOUT: '10', ...env }),
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout.setEncoding('utf8').on('data', (c: string) => {
    stdout += c
  })
  child.stderr.setEncoding('utf8').on('data', (c: string) => {
    stderr += c
  })
  const code = await withTimeout(
    new Promise<number | null>((resolve, reject) => {
      child.once('error', reject)
      child.once('close', (c) => resolve(c))
    }),
    30_000,
    'shiplog-deploy did not finish',
  )
  assert.ok(!`${stdout}${stderr}`.includes(key), 'the key is never printed')
  assert.ok(!`${stdout}${stderr}`.includes(key.slice(8, 24)), 'no part of the key is printed')
  return { code, stdout, stderr }
}

const describe = (r: Run) => `exit ${r.code}; stdout: ${r.stdout}; stderr: ${r.stderr}`

async function eventsOf(version: string) {
  return fx()
    .ctx.database.db.selectFrom('events')
    .selectAll()
    .where('service', '=', 'App1')
    .where('version', '=', version)
    .orderBy('id')
    .execute()
}

async function overridesOf(eventId: number) {
  const rows = await fx()
    .ctx.database.db.selectFrom('audit_entries')
    .selectAll()
    .where('action', '=', 'guardrail.overridden')
    .execute()
  return rows.filter((r) => JSON.parse(r.details).event_id === eventId)
}

test('--check (before the positionals) exits 5 with every reason on stderr and records nothing', async () => {
  const r = await run(['--check', fx().key, 'App1', 'Prod', '2.0.0', 'Deployed'])
  assert.equal(r.code, 5, describe(r))
  assert.equal(r.stdout, '')
  const lines = r.stderr.trim().split('\n')
  assert.equal(lines[0], 'shiplog-deploy: App1 2.0.0 may not be deployed to Prod now:')
  assert.match(
    lines[1] ?? '',
    /^shiplog-deploy: lock: Prod is locked by .+ until 2099-06-01T12:00:00\.000Z: db move \(until 2099-06-01T12:00:00\.000Z\)$/,
  )
  assert.match(
    lines[2] ?? '',
    /^shiplog-deploy: bad_version: App1 2\.0\.0 is marked bad by .+: leaks \(until lifted\)$/,
  )
  assert.match(lines[3] ?? '', /--force --reason/)
  assert.equal(lines.length, 4, describe(r))
  assert.deepEqual(await eventsOf('2.0.0'), [])
})

test('--check with nothing against it records as usual', async () => {
  const r = await run([fx().key, 'App1', 'Staging', '1.1.0', 'Deployed', '--check'])
  assert.equal(r.code, 0, describe(r))
  assert.match(r.stdout, /^recorded event \d+: App1 1\.1\.0 Deployed in Staging\n$/)
  const [event] = await eventsOf('1.1.0')
  assert.equal(event?.override_reason, null)
  assert.equal(event?.guardrails, null)
})

test('--check --force --reason records anyway, with the override stored and audited', async () => {
  const r = await run([
    '--check',
    '--force',
    '--reason',
    'hotfix INC-42',
    fx().key,
    'App1',
    'Prod',
    '2.0.0',
    'Failed',
  ])
  assert.equal(r.code, 0, describe(r))
  assert.match(r.stderr, /lock: Prod is locked/)
  assert.match(r.stderr, /recording anyway \(--force\): hotfix INC-42/)
  assert.match(r.stderr, /recorded although it broke: lock, bad_version/)
  const [event] = (await eventsOf('2.0.0')).filter((e) => e.status === 'Failed')
  assert.ok(event, describe(r))
  assert.equal(event.override_reason, 'hotfix INC-42')
  assert.equal(event.guardrails, 'lock,bad_version')
  const [entry, ...more] = await overridesOf(Number(event.id))
  assert.equal(more.length, 0)
  assert.equal(entry?.actor, 'pipeline')
  assert.equal(entry?.target, 'App1 2.0.0 in Prod')
})

test('--force --reason without --check sends the reason with the event', async () => {
  // An ingest-only key is enough: nothing is asked first.
  const r = await run(
    ['--force', '--reason', 'weekend fix', fx().ctx.tenant.key, 'App1', 'Prod', '2.1.0', 'Deployed'],
    {},
    fx().ctx.tenant.key,
  )
  assert.equal(r.code, 0, describe(r))
  const [event] = await eventsOf('2.1.0')
  assert.equal(event?.override_reason, 'weekend fix')
  assert.equal(event?.guardrails, 'lock')
  assert.equal((await overridesOf(Number(event?.id))).length, 1)
})

test('--force without a reason, or --reason without --force, is a usage error (exit 2), nothing sent', async () => {
  for (const args of [
    ['--force', fx().key, 'App1', 'Prod', '2.2.0', 'Deployed'],
    ['--check', '--force', '--reason', ' ', fx().key, 'App1', 'Prod', '2.2.0', 'Deployed'],
    ['--reason', 'why', fx().key, 'App1', 'Prod', '2.2.0', 'Deployed'],
  ]) {
    const r = await run(args)
    assert.equal(r.code, 2, describe(r))
    assert.equal(r.stdout, '')
    assert.match(r.stderr, /--force|--reason/)
    assert.match(r.stderr, /--help/)
  }
  const junk = await run([fx().key, 'App1', 'Prod', '2.2.0', 'Deployed'], { SHIPLOG_CHECK: 'maybe' })
  assert.equal(junk.code, 2, describe(junk))
  assert.match(junk.stderr, /SHIPLOG_CHECK must be 1 or 0/)
  assert.deepEqual(await eventsOf('2.2.0'), [])
})

test('the container path: SHIPLOG_CHECK=1 and SHIPLOG_FORCE_REASON with the five arguments only', async () => {
  const five = [fx().key, 'App1', 'Prod', '3.0.0', 'Deployed']
  const blocked = await run(five, { SHIPLOG_CHECK: '1' })
  assert.equal(blocked.code, 5, describe(blocked))
  assert.match(blocked.stderr, /^shiplog-deploy: lock: /m)
  assert.deepEqual(await eventsOf('3.0.0'), [])
  // Empty variables (an action input left blank) are off.
  const plain = await run(five, { SHIPLOG_CHECK: '', SHIPLOG_FORCE_REASON: '' })
  assert.equal(plain.code, 0, describe(plain))
  const forced = await run([fx().key, 'App1', 'Prod', '3.0.1', 'Deployed'], {
    SHIPLOG_CHECK: 'true',
    SHIPLOG_FORCE_REASON: 'approved by the on-call lead',
  })
  assert.equal(forced.code, 0, describe(forced))
  const [event] = await eventsOf('3.0.1')
  assert.equal(event?.override_reason, 'approved by the on-call lead')
})

test('--check with a key that lacks the read scope exits 3 and says so', async () => {
  const ingestOnly = fx().ctx.tenant.key
  const r = await run(['--check', ingestOnly, 'App1', 'Prod', '4.0.0', 'Deployed'], {}, ingestOnly)
  assert.equal(r.code, 3, describe(r))
  assert.match(r.stderr, /--check needs a key with the read scope/)
  assert.deepEqual(await eventsOf('4.0.0'), [])
})

test('--help explains --check, --force, --reason, their variables and exit code 5', async () => {
  const r = await run(['--help'])
  assert.equal(r.code, 0)
  for (const word of [
    '--check',
    '--force',
    '--reason',
    'SHIPLOG_CHECK',
    'SHIPLOG_FORCE_REASON',
    'read scope',
  ]) {
    assert.ok(r.stdout.includes(word), `--help mentions ${word}`)
  }
  assert.match(r.stdout, /\b5 not allowed by a guardrail\b/)
})
