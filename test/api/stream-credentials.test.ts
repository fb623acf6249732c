// A live stream lasts only as long as the credential it was opened with: a revoked key (Settings,
// the domain function, `shiplog keys revoke` from another process, another instance), a logout, a
// removed user, a reset password each end it within seconds with a `revoked` message, a reconnect
// with the dead credential gets 401, and streams of credentials still valid go on.
import assert from 'node:assert/strict'
import { type TestContext, test } from 'node:test'
import { setPasswordLogin } from '../../src/domain/identity/provisioning.js'
import { createApiKey, revokeApiKeyEverywhere } from '../../src/domain/keys.js'
import { buildTestApp, freshDatabaseUrl, type TestApp } from '../helper.js'
import { processEnv, runCli } from '../support/processes.js'
import { listen, type OpenStream, openStream } from '../support/sse.js'
import { type Browser, deploy, login, PASSWORD, userSession } from '../support/ui.js'

/** How long a revocation may take to end a stream: the re-check runs every 2 s. */
const WITHIN_MS = 5000

async function readKey(ctx: TestApp, name: string): Promise<{ key: string; id: number }> {
  const { key, row } = await createApiKey(ctx.database.db, {
    accountId: ctx.tenant.account.id,
    name,
    createdBy: 'test',
    scopes: ['read'],
  })
  return { key, id: row.id }
}

async function started(t: TestContext, databaseUrl?: string) {
  const ctx = await buildTestApp(t, databaseUrl ? { databaseUrl } : {})
  const base = await listen(ctx.app)
  return { ctx, base }
}

async function opened(t: TestContext, base: string, headers: Record<string, string>): Promise<OpenStream> {
  const stream = await openStream(base, headers)
  t.after(() => stream.close())
  assert.equal(stream.status, 200)
  return stream
}

/** Waits until the server ended the stream; its last message says why. Returns how long it took. */
async function endedWithin(stream: OpenStream, ms = WITHIN_MS): Promise<number> {
  const started = Date.now()
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), ms)
  })
  const outcome = await Promise.race([stream.ended.then(() => 'ended' as const), late])
  clearTimeout(timer)
  assert.equal(outcome, 'ended', `the stream was still open ${ms} ms later`)
  const last = stream.messages.at(-1)
  assert.equal(last?.event, 'revoked', `the last message says why: ${JSON.stringify(stream.messages)}`)
  assert.equal(last?.id, undefined, 'it moves no Last-Event-ID')
  return Date.now() - started
}

/** The stream still delivers: a new event arrives on it. */
async function stillLive(ctx: TestApp, stream: OpenStream, version: string): Promise<void> {
  const before = stream.messages.length
  const sent = await deploy(ctx.app, ctx.tenant.key, {
    service: 'api',
    environment: 'prod',
    version,
    status: 'Deployed',
  })
  assert.equal(sent.status, 201)
  const messages = await stream.waitFor(before + 2)
  assert.equal(messages[before]?.data.id, sent.body.id)
}

test('a stream whose key is revoked ends within seconds; a reconnect gets 401; another key streams on', async (t) => {
  const { ctx, base } = await started(t)
  const doomed = await readKey(ctx, 'doomed')
  const kept = await readKey(ctx, 'kept')
  const stream = await opened(t, base, { 'x-api-key': doomed.key })
  const other = await opened(t, base, { 'x-api-key': kept.key })
  await stillLive(ctx, stream, '1')

  const revoked = await revokeApiKeyEverywhere(
    ctx.database,
    ctx.tenant.account.id,
    String(doomed.id),
    ctx.app.keyVerifier,
  )
  assert.ok(revoked)
  t.diagnostic(`ended after ${await endedWithin(stream)} ms`)
  assert.equal(stream.messages.at(-1)?.data.reason, 'key_revoked')
  const again = await openStream(base, { 'x-api-key': doomed.key, 'last-event-id': '1' })
  assert.equal(again.status, 401)
  await stillLive(ctx, other, '2')
})

test('a key revoked with `shiplog keys revoke` from another process ends the stream of a running server', async (t) => {
  const databaseUrl = await freshDatabaseUrl(t)
  const { ctx, base } = await started(t, databaseUrl)
  const doomed = await readKey(ctx, 'doomed')
  const kept = await readKey(ctx, 'kept')
  const stream = await opened(t, base, { 'x-api-key': doomed.key })
  const other = await opened(t, base, { 'x-api-key': kept.key })
  const cli = await runCli(t, ['keys', 'revoke', '--account', 'Acme', String(doomed.id)], {
    env: processEnv(databaseUrl),
  })
  assert.equal(cli.code, 0, cli.stderr)
  t.diagnostic(`ended after ${await endedWithin(stream)} ms`)
  await stillLive(ctx, other, '1')
})

test('a key revoked on one instance ends its streams on another instance', async (t) => {
  const databaseUrl = await freshDatabaseUrl(t)
  const one = await buildTestApp(t, { databaseUrl })
  const { ctx: two, base } = await started(t, databaseUrl)
  const doomed = await readKey(one, 'doomed')
  const kept = await readKey(one, 'kept')
  const stream = await opened(t, base, { 'x-api-key': doomed.key })
  const other = await opened(t, base, { 'x-api-key': kept.key })
  await revokeApiKeyEverywhere(one.database, one.tenant.account.id, String(doomed.id), one.app.keyVerifier)
  t.diagnostic(`ended after ${await endedWithin(stream)} ms`)
  await stillLive(two, other, '1')
})

async function sessionStream(t: TestContext, base: string, browser: Browser): Promise<OpenStream> {
  return opened(t, base, { cookie: browser.cookieHeader() })
}

/** A member and an admin of the test account, each signed in with a stream open. */
async function memberAndAdminStreaming(t: TestContext) {
  const { ctx, base } = await started(t)
  const { browser: admin } = await userSession(ctx, ctx.tenant.account.id, 'admin@example.com')
  const { browser: member, user } = await userSession(
    ctx,
    ctx.tenant.account.id,
    'member@example.com',
    'member',
  )
  const stream = await sessionStream(t, base, member)
  const other = await sessionStream(t, base, admin)
  return { ctx, base, admin, member, user, stream, other }
}

test('logging out ends the stream of that session; another session of the same user streams on', async (t) => {
  const { ctx, base } = await started(t)
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'ada@example.com', 'member')
  const second = await login(ctx.app, 'ada@example.com')
  const stream = await sessionStream(t, base, browser)
  const other = await sessionStream(t, base, second)
  const token = /name="_csrf" value="([^"]+)"/.exec((await browser.get('/logout')).payload)?.[1] ?? ''
  assert.equal((await browser.post('/logout', { _csrf: token })).statusCode, 303)
  t.diagnostic(`ended after ${await endedWithin(stream)} ms`)
  assert.equal(stream.messages.at(-1)?.data.reason, 'session_ended')
  await stillLive(ctx, other, '1')
})

test('removing a user ends their streams; the admin who did it streams on', async (t) => {
  const { ctx, base, admin, member, user, stream, other } = await memberAndAdminStreaming(t)
  const res = await admin.submit('/settings/', `/settings/users/${user.id}/remove`, {})
  assert.equal(res.statusCode, 303, res.payload)
  t.diagnostic(`ended after ${await endedWithin(stream)} ms`)
  const again = await openStream(base, { cookie: member.cookieHeader() })
  assert.equal(again.status, 401)
  await stillLive(ctx, other, '1')
})

test("an admin resetting a user's password ends that user's streams; the admin streams on", async (t) => {
  const { ctx, admin, user, stream, other } = await memberAndAdminStreaming(t)
  const res = await admin.submit('/settings/', `/settings/users/${user.id}/password`, {})
  assert.equal(res.statusCode, 303, res.payload)
  t.diagnostic(`ended after ${await endedWithin(stream)} ms`)
  await stillLive(ctx, other, '1')
})

test('changing your own password ends the streams of your other sessions, not this one', async (t) => {
  const { ctx, base } = await started(t)
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'ada@example.com', 'member')
  const elsewhere = await login(ctx.app, 'ada@example.com')
  const stream = await sessionStream(t, base, elsewhere)
  const own = await sessionStream(t, base, browser)
  const res = await browser.submit('/account/password', '/account/password', {
    current: PASSWORD,
    password: 'another long passphrase 42',
    confirm: 'another long passphrase 42',
  })
  assert.equal(res.statusCode, 303, res.payload)
  t.diagnostic(`ended after ${await endedWithin(stream)} ms`)
  await stillLive(ctx, own, '1')
})

test('turning password login off ends the streams of password sessions', async (t) => {
  const { ctx, base } = await started(t)
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'ada@example.com', 'member')
  const stream = await sessionStream(t, base, browser)
  const kept = await readKey(ctx, 'kept')
  const other = await opened(t, base, { 'x-api-key': kept.key })
  const changed = await setPasswordLogin(ctx.database.db, ctx.tenant.account.id, false, {
    actor: { kind: 'cli', id: null, name: 'cli' },
    address: null,
  })
  assert.ok(changed)
  t.diagnostic(`ended after ${await endedWithin(stream)} ms`)
  assert.equal(stream.messages.at(-1)?.data.reason, 'session_ended')
  await stillLive(ctx, other, '1')
})

test('a session that expires ends its stream', async (t) => {
  const { ctx, base } = await started(t)
  const { browser, user } = await userSession(ctx, ctx.tenant.account.id, 'ada@example.com', 'member')
  const stream = await sessionStream(t, base, browser)
  await ctx.database.db
    .updateTable('sessions')
    .set({ expires_at: Date.now() - 1 })
    .where('user_id', '=', user.id)
    .execute()
  t.diagnostic(`ended after ${await endedWithin(stream)} ms`)
})
