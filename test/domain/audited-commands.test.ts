// The audited domain commands (ARCHITECTURE "Commands, not scripts"): each one makes its change
// and writes its audit entry in one transaction, the same for a signed-in user (Settings) and the
// operator's command line; and when anything inside fails, neither the change nor the entry stays.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { Kysely } from 'kysely'
import type { AuditActorKind, DB } from '../../src/db/schema.js'
import { createUser, findAccountByName } from '../../src/domain/accounts.js'
import { resolveAppSecret } from '../../src/domain/app-secret.js'
import { type AuditSource, cliSource, keyLabel } from '../../src/domain/audit/log.js'
import {
  changeEnvironmentAudited,
  rotateBadgeTokenAudited,
  saveServiceMetaAudited,
  setStallMinutesAudited,
} from '../../src/domain/board/commands.js'
import { boardSettings } from '../../src/domain/board/settings.js'
import { setPasswordLogin } from '../../src/domain/identity/provisioning.js'
import { createApiKeyAudited, revokeApiKeyAudited } from '../../src/domain/keys/commands.js'
import { getRetention } from '../../src/domain/operations/retention.js'
import { setRetentionAudited } from '../../src/domain/operations/retention-setting.js'
import { hashedPassword } from '../../src/domain/passwords.js'
import { serviceMeta } from '../../src/domain/services.js'
import {
  changeRoleAudited,
  createUserAudited,
  removeUserAudited,
  resetPasswordAudited,
} from '../../src/domain/users/commands.js'
import {
  createWebhookAudited,
  deleteWebhookAudited,
  enableWebhookAudited,
  redeliverAudited,
} from '../../src/domain/webhooks/commands.js'
import { buildTestApp, type TestApp } from '../helper.js'
import { insertEvents } from '../support/ui.js'

interface Entry {
  actor_kind: string
  actor_id: number | null
  actor: string
  address: string | null
  action: string
  target: string | null
  details: Record<string, unknown>
}

/** The account's entries, oldest first, as a reader sees them. */
async function entries(db: Kysely<DB>, accountId: number): Promise<Entry[]> {
  const rows = await db
    .selectFrom('audit_entries')
    .select(['actor_kind', 'actor_id', 'actor', 'address', 'action', 'target', 'details'])
    .where('account_id', '=', accountId)
    .orderBy('id')
    .execute()
  return rows.map((r) => ({
    ...r,
    actor_id: r.actor_id === null ? null : Number(r.actor_id),
    details: JSON.parse(r.details) as Record<string, unknown>,
  }))
}

/** Runs `change` and gives the one entry it wrote (and checks it wrote exactly one). */
async function onlyEntry(ctx: TestApp, accountId: number, change: () => Promise<unknown>): Promise<Entry> {
  const before = (await entries(ctx.database.db, accountId)).length
  await change()
  const after = await entries(ctx.database.db, accountId)
  assert.equal(after.length, before + 1, 'exactly one entry')
  return after[after.length - 1] as Entry
}

/** The entry's who and from where, as the source gave them. */
function whoOf(source: AuditSource) {
  return {
    actor_kind: source.actor.kind,
    actor_id: source.actor.id,
    actor: source.actor.name,
    address: source.address,
  }
}

async function setup(t: Parameters<typeof buildTestApp>[0]) {
  const ctx = await buildTestApp(t)
  const accountId = ctx.tenant.account.id
  const admin = await createUser(ctx.database.db, {
    accountId,
    email: 'ada@example.com',
    password: await hashedPassword('correct horse battery'),
    role: 'admin',
  })
  const actors: [label: string, source: AuditSource][] = [
    ['a Settings user', { actor: { kind: 'user', id: admin.id, name: admin.email }, address: '203.0.113.7' }],
    ['the command line', cliSource()],
  ]
  return { ctx, accountId, actors }
}

test('keys: created and revoked with their entries, credited to the actor', async (t) => {
  const { ctx, accountId, actors } = await setup(t)
  const { db } = ctx.database
  for (const [label, who] of actors) {
    let created: Awaited<ReturnType<typeof createApiKeyAudited>> | undefined
    const made = await onlyEntry(ctx, accountId, async () => {
      created = await createApiKeyAudited(
        db,
        accountId,
        { name: `deploy ${label}`, scopes: ['ingest', 'read'] },
        who,
      )
    })
    assert.ok(created)
    const row = created.row
    assert.equal(row.created_by, who.actor.kind === 'user' ? who.actor.name : 'cli', label)
    assert.equal(row.created_by_user_id === null ? null : Number(row.created_by_user_id), who.actor.id, label)
    assert.equal(row.scopes, 'ingest,read')
    assert.deepEqual(made, {
      ...whoOf(who),
      action: 'key.created',
      target: keyLabel(row),
      details: { scopes: ['ingest', 'read'] },
    })

    const revoked = await onlyEntry(ctx, accountId, async () => {
      assert.ok(await revokeApiKeyAudited(ctx.database, accountId, String(row.id), who))
    })
    const after = await db
      .selectFrom('api_keys')
      .select('revoked_at')
      .where('id', '=', row.id)
      .executeTakeFirst()
    assert.notEqual(after?.revoked_at, null, label)
    assert.deepEqual(revoked, {
      ...whoOf(who),
      action: 'key.revoked',
      target: keyLabel(row),
      details: { scopes: ['ingest', 'read'] },
    })
    // A key the account does not have: nothing changes and nothing is written.
    const count = (await entries(db, accountId)).length
    assert.equal(await revokeApiKeyAudited(ctx.database, accountId, '999999', who), undefined)
    assert.equal((await entries(db, accountId)).length, count)
  }
})

test('users: added, role changed, password reset and removed, each with its entry', async (t) => {
  const { ctx, accountId, actors } = await setup(t)
  const { db } = ctx.database
  const password = await hashedPassword('a new password 1')
  for (const [label, who] of actors) {
    const email = `${who.actor.kind}@example.com`
    let userId = 0
    const added = await onlyEntry(ctx, accountId, async () => {
      const user = await createUserAudited(
        db,
        { id: accountId },
        { email, password, role: 'member', oneTimePassword: true, via: `via ${label}` },
        who,
      )
      userId = user.id
      assert.equal(user.must_change_password, 1)
    })
    assert.deepEqual(added, {
      ...whoOf(who),
      action: 'user.added',
      target: email,
      details: { role: 'member', via: `via ${label}` },
    })

    const promoted = await onlyEntry(ctx, accountId, async () => {
      assert.equal(await changeRoleAudited(db, accountId, userId, 'admin', who), true)
    })
    assert.deepEqual(promoted, {
      ...whoOf(who),
      action: 'user.role_changed',
      target: email,
      details: { from: 'member', to: 'admin' },
    })
    // The role it already has: done, and nothing to log.
    const count = (await entries(db, accountId)).length
    assert.equal(await changeRoleAudited(db, accountId, userId, 'admin', who), true)
    assert.equal((await entries(db, accountId)).length, count)

    const reset = await onlyEntry(ctx, accountId, async () => {
      const how = `reset by ${label}`
      assert.equal(
        await resetPasswordAudited(db, accountId, userId, password, { oneTime: false, how }, who),
        email,
      )
    })
    assert.deepEqual(reset, {
      ...whoOf(who),
      action: 'password.changed',
      target: email,
      details: { how: `reset by ${label}` },
    })
    const row = await db.selectFrom('users').selectAll().where('id', '=', userId).executeTakeFirstOrThrow()
    assert.equal(Number(row.must_change_password), 0)

    const removed = await onlyEntry(ctx, accountId, async () => {
      assert.equal(await removeUserAudited(db, accountId, userId, who), true)
    })
    assert.deepEqual(removed, {
      ...whoOf(who),
      action: 'user.removed',
      target: email,
      details: { role: 'admin' },
    })
    assert.equal(
      await db.selectFrom('users').select('id').where('id', '=', userId).executeTakeFirst(),
      undefined,
    )
    // No such user any more: false, undefined, and no entry.
    assert.equal(await removeUserAudited(db, accountId, userId, who), false)
    assert.equal(await changeRoleAudited(db, accountId, userId, 'member', who), false)
    assert.equal(
      await resetPasswordAudited(db, accountId, userId, password, { oneTime: true, how: 'x' }, who),
      undefined,
    )
    assert.equal((await entries(db, accountId)).length, count + 2)
  }
})

test('users: adding to an account by name creates the account with the user', async (t) => {
  const { ctx, actors } = await setup(t)
  const { db } = ctx.database
  for (const [label, who] of actors) {
    const name = `New ${who.actor.kind}`
    const user = await createUserAudited(
      db,
      { name },
      {
        email: 'first@example.com',
        password: await hashedPassword('first password'),
        role: 'admin',
        via: label,
      },
      who,
    )
    const account = await findAccountByName(db, name)
    assert.equal(account?.id, user.account_id)
    assert.deepEqual(await entries(db, user.account_id), [
      {
        ...whoOf(who),
        action: 'user.added',
        target: 'first@example.com',
        details: { role: 'admin', via: label },
      },
    ])
  }
})

test('webhooks: created, enabled, redelivered and deleted, each with its entry', async (t) => {
  const { ctx, accountId, actors } = await setup(t)
  const { db } = ctx.database
  const [eventId] = await insertEvents(ctx.database, accountId, [{}])
  assert.ok(eventId)
  await ctx.app.deployments.current()
  const expectedDetails = {
    format: 'slack',
    statuses: ['Deployed'],
    outcomes: [],
    environments: ['prod'],
    services: [],
  }
  for (const [label, who] of actors) {
    let webhookId = 0
    const created = await onlyEntry(ctx, accountId, async () => {
      const { webhook, secret } = await createWebhookAudited(
        db,
        await resolveAppSecret(ctx.config, db),
        {
          accountId,
          url: 'https://hooks.example.com/services/T0/B0/not-in-the-log',
          format: 'slack',
          statuses: ['Deployed'],
          outcomes: [],
          environments: ['prod'],
          services: [],
          grafanaToken: null,
        },
        { allowPrivate: false },
        who,
      )
      assert.ok(secret)
      assert.equal(webhook.created_by, who.actor.kind === 'user' ? who.actor.name : 'cli', label)
      webhookId = Number(webhook.id)
    })
    assert.deepEqual(created, {
      ...whoOf(who),
      action: 'webhook.created',
      target: 'https://hooks.example.com',
      details: expectedDetails,
    })

    await db
      .updateTable('webhooks')
      .set({ enabled: 0, disabled_at: Date.now() })
      .where('id', '=', webhookId)
      .execute()
    const enabled = await onlyEntry(ctx, accountId, async () => {
      assert.equal(await enableWebhookAudited(db, accountId, webhookId, who), true)
    })
    assert.deepEqual(enabled, {
      ...whoOf(who),
      action: 'webhook.enabled',
      target: 'https://hooks.example.com',
      details: { id: webhookId, wasEnabled: false },
    })
    const on = await db
      .selectFrom('webhooks')
      .select('enabled')
      .where('id', '=', webhookId)
      .executeTakeFirst()
    assert.equal(Number(on?.enabled), 1)

    const delivery = await failedDelivery(db, accountId, webhookId, eventId)
    const redelivered = await onlyEntry(ctx, accountId, async () => {
      assert.equal(await redeliverAudited(db, accountId, webhookId, delivery, who), true)
    })
    assert.deepEqual(redelivered, {
      ...whoOf(who),
      action: 'webhook.redelivered',
      target: 'https://hooks.example.com',
      details: { id: webhookId, delivery },
    })
    const queued = await db
      .selectFrom('webhook_deliveries')
      .select('state')
      .where('id', '=', delivery)
      .executeTakeFirst()
    assert.equal(queued?.state, 'pending')
    // A delivery of another webhook is "no such delivery" for this one.
    assert.equal(await redeliverAudited(db, accountId, webhookId + 1000, delivery, who), false)

    const deleted = await onlyEntry(ctx, accountId, async () => {
      assert.equal(await deleteWebhookAudited(db, accountId, webhookId, who), true)
    })
    assert.deepEqual(deleted, {
      ...whoOf(who),
      action: 'webhook.deleted',
      target: 'https://hooks.example.com',
      details: { id: webhookId, ...expectedDetails },
    })
    assert.equal(
      await db.selectFrom('webhooks').select('id').where('id', '=', webhookId).executeTakeFirst(),
      undefined,
    )
    const count = (await entries(db, accountId)).length
    assert.equal(await deleteWebhookAudited(db, accountId, webhookId, who), false)
    assert.equal(await enableWebhookAudited(db, accountId, webhookId, who), false)
    assert.equal((await entries(db, accountId)).length, count)
  }
})

test('settings: retention and password login, each with its entry, none when nothing changed', async (t) => {
  const { ctx, accountId, actors } = await setup(t)
  const { db } = ctx.database
  let days = 30
  for (const [, who] of actors) {
    const from = await getRetention(db, accountId)
    const retention = await onlyEntry(ctx, accountId, async () => {
      assert.equal(await setRetentionAudited(db, accountId, days, who), true)
    })
    assert.deepEqual(retention, {
      ...whoOf(who),
      action: 'settings.changed',
      target: 'retention',
      details: { from_days: from, to_days: days },
    })
    assert.equal(await getRetention(db, accountId), days)
    const count = (await entries(db, accountId)).length
    assert.equal(await setRetentionAudited(db, accountId, days, who), false)
    assert.equal((await entries(db, accountId)).length, count)
    days += 30

    const off = await onlyEntry(ctx, accountId, async () => {
      assert.equal(await setPasswordLogin(db, accountId, false, who), true)
    })
    assert.deepEqual(off, {
      ...whoOf(who),
      action: 'settings.changed',
      target: 'password login',
      details: { setting: 'password_login', value: 'off', signed_out: 0 },
    })
    assert.equal(await setPasswordLogin(db, accountId, true, who), true)
  }
})

/** A failed delivery of the webhook, to be redelivered. */
async function failedDelivery(db: Kysely<DB>, accountId: number, webhookId: number, eventId: number) {
  const row = await db
    .insertInto('webhook_deliveries')
    .values({
      webhook_id: webhookId,
      account_id: accountId,
      event_id: eventId,
      deployment_id: null,
      kind: 'status',
      delivery_id: `d-${webhookId}`,
      state: 'failed',
      next_attempt_at: Date.now(),
      lease_until: null,
      last_status: 500,
      last_error: null,
      response_head: null,
      latency_ms: null,
      remote_id: null,
      created_at: Date.now(),
      first_attempt_at: null,
      last_attempt_at: null,
      finished_at: Date.now(),
    })
    .returning('id')
    .executeTakeFirstOrThrow()
  return Number(row.id)
}

test('board settings: service details, environments, stall time and badge token, each with its entry', async (t) => {
  const { ctx, accountId, actors } = await setup(t)
  const { db } = ctx.database
  await insertEvents(ctx.database, accountId, [
    { service: 'api', environment: 'prod' },
    { service: 'api', environment: 'staging' },
  ])
  await ctx.app.deployments.current()
  const meta = {
    team: 'payments',
    description: null,
    repositoryUrl: 'https://git.example.com/api',
    runbookUrl: null,
    dashboardUrl: null,
  }
  for (const [label, who] of actors) {
    const team = `payments ${label}`
    const before = await serviceMeta(db, accountId, 'api')
    const saved = await onlyEntry(ctx, accountId, () =>
      saveServiceMetaAudited(db, accountId, 'api', { ...meta, team }, who),
    )
    assert.equal((await serviceMeta(db, accountId, 'api')).team, team)
    assert.equal(saved.action, 'settings.changed')
    assert.equal(saved.target, 'service api')
    assert.equal(saved.details.team, `${before.team ?? '(none)'} → ${team}`)
    assert.deepEqual(
      { ...saved, details: {} },
      { ...whoOf(who), action: 'settings.changed', target: 'service api', details: {} },
    )
    // Saving the same details again changes nothing and writes nothing.
    const count = (await entries(db, accountId)).length
    await saveServiceMetaAudited(db, accountId, 'api', { ...meta, team }, who)
    assert.equal((await entries(db, accountId)).length, count)

    const hidden = await onlyEntry(ctx, accountId, async () => {
      assert.equal(await changeEnvironmentAudited(db, accountId, 'staging', 'hide', who), true)
    })
    assert.deepEqual(hidden, {
      ...whoOf(who),
      action: 'settings.changed',
      target: 'environments',
      details: {
        environment: 'staging',
        change: 'hide',
        from: ['staging', 'prod'],
        to: ['staging (hidden)', 'prod'],
      },
    })
    await changeEnvironmentAudited(db, accountId, 'staging', 'show', who)
    const none = (await entries(db, accountId)).length
    assert.equal(await changeEnvironmentAudited(db, accountId, 'nowhere', 'up', who), false)
    assert.equal((await entries(db, accountId)).length, none, 'no such environment: no entry')

    const stallBefore = (await boardSettings(db, accountId)).stallMinutes
    const stall = await onlyEntry(ctx, accountId, () =>
      setStallMinutesAudited(db, accountId, stallBefore + 5, who),
    )
    assert.equal((await boardSettings(db, accountId)).stallMinutes, stallBefore + 5)
    assert.deepEqual(stall, {
      ...whoOf(who),
      action: 'settings.changed',
      target: 'stall minutes',
      details: { from: stallBefore, to: stallBefore + 5 },
    })

    const tokenBefore = (await boardSettings(db, accountId)).badgeToken
    const rotated = await onlyEntry(ctx, accountId, () => rotateBadgeTokenAudited(db, accountId, who))
    const tokenAfter = (await boardSettings(db, accountId)).badgeToken
    assert.ok(tokenAfter && tokenAfter !== tokenBefore, label)
    assert.deepEqual(rotated, {
      ...whoOf(who),
      action: 'settings.changed',
      target: 'badge link',
      details: { change: 'rotated: old badge links stop working' },
    })
    assert.ok(!JSON.stringify(rotated).includes(tokenAfter), 'the entry never holds the token')
  }
})

test('a failure inside a command leaves neither the change nor its entry', async (t) => {
  const { ctx, accountId } = await setup(t)
  const { db } = ctx.database
  // An actor the table refuses (its kind is not one it knows): the entry fails after the change
  // was made in the same transaction, which must take the change back with it.
  const refused: AuditSource = {
    actor: { kind: 'nobody' as AuditActorKind, id: null, name: 'nobody' },
    address: null,
  }
  const table = async (name: 'api_keys' | 'users' | 'webhooks' | 'accounts') =>
    JSON.stringify(await db.selectFrom(name).selectAll().orderBy('id').execute())
  const snapshot = async () => ({
    keys: await table('api_keys'),
    users: await table('users'),
    webhooks: await table('webhooks'),
    accounts: await table('accounts'),
    services: JSON.stringify(await db.selectFrom('services').selectAll().orderBy('name').execute()),
    environments: JSON.stringify(
      await db.selectFrom('environment_settings').selectAll().orderBy('name').execute(),
    ),
    deliveries: JSON.stringify(await db.selectFrom('webhook_deliveries').selectAll().orderBy('id').execute()),
    entries: (await db.selectFrom('audit_entries').select('id').execute()).length,
  })

  // Something to change: a key, a member, a disabled webhook with a failed delivery.
  const who = cliSource()
  const key = await createApiKeyAudited(db, accountId, { name: 'to revoke', scopes: ['ingest'] }, who)
  const member = await createUserAudited(
    db,
    { id: accountId },
    {
      email: 'member@example.com',
      password: await hashedPassword('member password'),
      role: 'member',
      via: 'x',
    },
    who,
  )
  const hook = await createWebhookAudited(
    db,
    await resolveAppSecret(ctx.config, db),
    {
      accountId,
      url: 'https://hooks.example.com/x',
      format: 'json',
      statuses: ['Deployed'],
      outcomes: [],
      environments: [],
      services: [],
      grafanaToken: null,
    },
    { allowPrivate: false },
    who,
  )
  const webhookId = Number(hook.webhook.id)
  await db
    .updateTable('webhooks')
    .set({ enabled: 0, disabled_at: Date.now() })
    .where('id', '=', webhookId)
    .execute()
  const [eventId] = await insertEvents(ctx.database, accountId, [{}])
  assert.ok(eventId)
  await ctx.app.deployments.current()
  const delivery = await failedDelivery(db, accountId, webhookId, eventId)
  const password = await hashedPassword('another password')
  const appSecret = await resolveAppSecret(ctx.config, db)

  const commands: [string, () => Promise<unknown>][] = [
    ['create key', () => createApiKeyAudited(db, accountId, { name: 'never', scopes: ['read'] }, refused)],
    ['revoke key', () => revokeApiKeyAudited(ctx.database, accountId, String(key.row.id), refused)],
    [
      'add user',
      () =>
        createUserAudited(
          db,
          { id: accountId },
          { email: 'never@example.com', password, role: 'member', via: 'x' },
          refused,
        ),
    ],
    [
      'add user and account',
      () =>
        createUserAudited(
          db,
          { name: 'Never Inc' },
          { email: 'never@example.com', password, role: 'admin', via: 'x' },
          refused,
        ),
    ],
    ['change role', () => changeRoleAudited(db, accountId, member.id, 'admin', refused)],
    [
      'reset password',
      () => resetPasswordAudited(db, accountId, member.id, password, { oneTime: true, how: 'x' }, refused),
    ],
    ['remove user', () => removeUserAudited(db, accountId, member.id, refused)],
    [
      'create webhook',
      () =>
        createWebhookAudited(
          db,
          appSecret,
          {
            accountId,
            url: 'https://never.example.com/',
            format: 'json',
            statuses: ['Deployed'],
            outcomes: [],
            environments: [],
            services: [],
            grafanaToken: null,
          },
          { allowPrivate: false },
          refused,
        ),
    ],
    ['enable webhook', () => enableWebhookAudited(db, accountId, webhookId, refused)],
    ['redeliver', () => redeliverAudited(db, accountId, webhookId, delivery, refused)],
    ['delete webhook', () => deleteWebhookAudited(db, accountId, webhookId, refused)],
    ['set retention', () => setRetentionAudited(db, accountId, 7, refused)],
    ['password login off', () => setPasswordLogin(db, accountId, false, refused)],
    [
      'service details',
      () =>
        saveServiceMetaAudited(
          db,
          accountId,
          'svc',
          { team: 'never', description: null, repositoryUrl: null, runbookUrl: null, dashboardUrl: null },
          refused,
        ),
    ],
    ['hide environment', () => changeEnvironmentAudited(db, accountId, 'prod', 'hide', refused)],
    ['stall time', () => setStallMinutesAudited(db, accountId, 99, refused)],
    ['badge token', () => rotateBadgeTokenAudited(db, accountId, refused)],
  ]
  for (const [name, command] of commands) {
    const before = await snapshot()
    await assert.rejects(command(), /check constraint/i, `${name} fails at its entry`)
    assert.deepEqual(await snapshot(), before, `${name}: nothing changed, nothing logged`)
  }
})
