// Every registered route, called as another account's admin, a member, anonymously and with another
// account's API key: refused or confined to the caller's own account, and account A left unchanged.
import assert from 'node:assert/strict'
import { subscribe, unsubscribe } from 'node:diagnostics_channel'
import { readFileSync } from 'node:fs'
import { test } from 'node:test'
import type { FastifyInstance, HTTPMethods } from 'fastify'
import type { User } from '../../src/db/schema.js'
import { createApiKey } from '../../src/domain/keys.js'
import { buildTestApp, type Tenant, type TestApp } from '../helper.js'
import {
  assertRedirect,
  Browser,
  createUserIn,
  deploy,
  insertEvents,
  login,
  PASSWORD,
  parseCsv,
  type Response,
  setCookies,
  sharedFixture,
  shownVersions,
  userRow,
} from '../support/ui.js'

// A's users get their own password, so "B's password with A's email" is a real wrong guess.
const A_PASSWORD = 'acme staple battery horse'
const B_NEW_PASSWORD = 'beta changed its own words'
// In A's event details only, and never in any request this file sends: finding it in a response
// means A's data leaked. Long enough that no random token contains it by chance.
const HIDDEN = 'acme-hidden-zq81'

type Method = 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'OPTIONS'
const METHODS: readonly Method[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']

/**
 * Who calls: B's admin (and a second B admin whose session may be ended), A's member, nobody, and
 * B's API key (sent alone, without cookies).
 */
type Principal = 'anonymous' | 'bAdmin' | 'bOther' | 'aMember' | 'bKey'
type SessionPrincipal = Exclude<Principal, 'bKey'>

/** What a response must be; gets the world to look into the database. */
type Check = (res: Response, w: World) => void | Promise<void>

interface Case {
  as: Principal
  url: string
  /** Sent form-encoded; callers with a session get their own valid CSRF token added. */
  form?: Record<string, string>
  json?: Record<string, unknown>
  headers?: Record<string, string>
  expect: Check
}

interface Entry {
  /** What isolation means for this route. */
  why: string
  cases(w: World): Case[]
}

interface Session {
  browser: Browser
  csrf: string
}

interface World {
  ctx: TestApp
  a: Tenant
  aSecond: Tenant
  b: Tenant
  aAdmin: User
  aMember: User
  bAdmin: User
  bOther: User
  sessions: Record<SessionPrincipal, Session>
  /** A's events, fixed before the matrix runs. */
  aEventIds: Set<number>
  /** Idempotency-Key values A has used: B reusing one must not get A's event back. */
  aIdempotencyKeys: string[]
  /** Strings of A that no response to anyone else may contain (unless the caller sent them). */
  markers: { text: string; pattern: RegExp }[]
  /** A's rows as they must still be; taken after the fixture, moved on after each route. */
  baseline: unknown
  /** B's key with the read scope (B's own `b.key` only ingests). */
  bReadKey: string
  /** A's badge token: B must not be able to use it or learn it. */
  aBadgeToken: string
  /** B's badge token as it stands (B's admin rotates it in the matrix, before the badge cases). */
  bBadgeToken: string
  /** --- webhooks: A's webhook and one of its deliveries (B must not see, change or resend them) --- */
  aWebhookId: number
  aDeliveryId: number
  /** --- guardrails: A's lock and freeze window (B must not see or remove them) --- */
  aLockId: number
  aFreezeId: number
}

/** A registered method + URL, as the onRoute hook saw it. */
interface RegisteredRoute {
  method: Method
  url: string
  methodNotAllowed: boolean
  /** Set by @fastify/static for each file it serves. */
  staticFile: string | undefined
}

// ---- checks ---------------------------------------------------------------------------------------

const status =
  (...codes: number[]): Check =>
  (res) =>
    assert.ok(
      codes.includes(res.statusCode),
      `expected ${codes.join(' or ')}, got ${res.statusCode}: ${res.payload.slice(0, 300)}`,
    )

const redirect =
  (path: string, code = 303): Check =>
  (res) =>
    assertRedirect(res, path, code)

/** Not logged in: the UI sends the visitor to the login form. */
const toLogin = redirect('/login')

/** No CSRF secret cookie (an API key is no browser): the form is refused before any handler runs. */
const formRefused = status(403)

const allOf =
  (...checks: Check[]): Check =>
  async (res, w) => {
    for (const check of checks) await check(res, w)
  }

const contains =
  (...texts: string[]): Check =>
  (res) => {
    for (const text of texts) assert.ok(res.payload.includes(text), `the page shows ${text}`)
  }

/** B's own log page: only B's events, and at least one when unfiltered (so the check is not vacuous). */
const onlyBEvents =
  (nonEmpty: boolean): Check =>
  (res) => {
    assert.equal(res.statusCode, 200, res.payload.slice(0, 300))
    const shown = shownVersions(res.payload)
    assert.ok(
      shown.every((v) => v.startsWith('beta-')),
      `only B's events are shown: ${shown.join(', ')}`,
    )
    if (nonEmpty) assert.ok(shown.length > 0, "B's own events are shown")
  }

const csvOnlyB =
  (nonEmpty: boolean): Check =>
  (res, w) => {
    assert.equal(res.statusCode, 200, res.payload.slice(0, 300))
    assert.match(String(res.headers['content-disposition']), /^attachment; filename="shiplog-events-/)
    const [header, ...rows] = parseCsv(res.payload)
    assert.equal(header?.[0], 'id')
    for (const row of rows) assert.ok(!w.aEventIds.has(Number(row[0])), `CSV row ${row[0]} is one of A's`)
    if (nonEmpty) assert.ok(rows.length > 0, "B's own events are exported")
  }

const jsonOnlyB =
  (nonEmpty: boolean): Check =>
  (res, w) => {
    assert.equal(res.statusCode, 200, res.payload.slice(0, 300))
    const events = res.json() as { id: number }[]
    assert.ok(Array.isArray(events))
    for (const e of events) assert.ok(!w.aEventIds.has(e.id), `JSON event ${e.id} is one of A's`)
    if (nonEmpty) assert.ok(events.length > 0, "B's own events are exported")
  }

/** An event recorded with B's key lands in B, under B's key, whatever the body claims. */
const recordedInB: Check = async (res, w) => {
  assert.equal(res.statusCode, 201, `B's key records in B (not a replay of A's): ${res.payload}`)
  assert.equal(res.headers['idempotent-replayed'], undefined)
  const body = res.json() as { id: number; api_key_name: string }
  assert.equal(body.api_key_name, 'beta-ci')
  const row = await w.ctx.database.db
    .selectFrom('events')
    .select(['account_id', 'api_key_id'])
    .where('id', '=', body.id)
    .executeTakeFirstOrThrow()
  assert.equal(row.account_id, w.b.account.id)
  assert.equal(row.api_key_id, w.b.keyId)
}

/** Pages carry a fresh CSRF token each time; everything else must be byte for byte the same. */
function withoutTokens(html: string): string {
  return html.replace(/name="_csrf" value="[^"]*"/g, 'name="_csrf" value=""')
}

/**
 * 404, and the very page a made-up id gets: B cannot even tell that A's id exists.
 */
const notFoundLikeMissing =
  (missingUrl: string, form: Record<string, string>): Check =>
  async (res, w) => {
    status(404)(res, w)
    const reference = await send(w, 'POST', { as: 'bAdmin', url: missingUrl, form, expect: () => {} })
    assert.equal(reference.statusCode, 404)
    assert.equal(withoutTokens(res.payload), withoutTokens(reference.payload), 'same answer as a missing id')
  }

// ---- sending --------------------------------------------------------------------------------------

async function send(w: World, method: Method, c: Case): Promise<Response> {
  const headers: Record<string, string> = { ...c.headers }
  let payload: string | undefined
  if (c.as === 'bKey') headers['x-api-key'] = w.b.key
  else {
    const cookie = w.sessions[c.as].browser.cookieHeader()
    if (cookie) headers.cookie = cookie
  }
  if (c.json) {
    headers['content-type'] = 'application/json'
    payload = JSON.stringify(c.json)
  } else if (c.form) {
    // A browser caller's form carries its own valid token, so what refuses it is authorisation,
    // not the CSRF check (test/ui/csrf.test.ts covers that one).
    const form = { ...c.form }
    if (c.as !== 'bKey') form._csrf = w.sessions[c.as].csrf
    headers['content-type'] = 'application/x-www-form-urlencoded'
    payload = new URLSearchParams(form).toString()
  }
  // Cookies the responses set are not kept: each caller keeps the credentials it started with.
  return w.ctx.app.inject({
    method: method as HTTPMethods,
    url: c.url,
    headers,
    ...(payload === undefined ? {} : { payload }),
  })
}

/** What the caller itself sent, to tell an echo of its own input from a leak. */
function requestText(c: Case): string {
  return [c.url, JSON.stringify(c.form ?? {}), JSON.stringify(c.json ?? {}), JSON.stringify(c.headers ?? {})]
    .join(' ')
    .toLowerCase()
}

/**
 * Checks every response makes, whatever the route: nothing of A shown to anyone outside A, and no
 * session handed out.
 */
function assertNothingOfA(w: World, c: Case, res: Response): void {
  const sent = requestText(c)
  const text = `${res.payload}\n${JSON.stringify(res.headers)}`
  // A's own member may of course see A's data; what is checked for them is the status.
  if (c.as !== 'aMember') {
    for (const marker of w.markers) {
      if (sent.includes(marker.text.toLowerCase())) continue
      const found = marker.pattern.exec(text)
      assert.ok(
        !found,
        `the response shows A's ${marker.text}: …${text.slice(Math.max(0, (found?.index ?? 0) - 80), (found?.index ?? 0) + 80)}…`,
      )
    }
  }
  for (const cookie of setCookies(res)) {
    if (cookie.name === 'shiplog_session') assert.equal(cookie.value, '', 'no case may log anyone in')
  }
}

// ---- the fixture ----------------------------------------------------------------------------------

async function snapshotOfA(w: Pick<World, 'ctx' | 'a'>): Promise<unknown> {
  const { db } = w.ctx.database
  const accountId = w.a.account.id
  return {
    // All of them (set-up must not be able to add an account either), and A's whole row: its stall
    // time and badge token too. (B may change its own settings.)
    accounts: await db.selectFrom('accounts').select(['id', 'name']).orderBy('id').execute(),
    account: await db.selectFrom('accounts').selectAll().where('id', '=', accountId).execute(),
    environmentSettings: await db
      .selectFrom('environment_settings')
      .selectAll()
      .where('account_id', '=', accountId)
      .orderBy('name')
      .execute(),
    services: await db
      .selectFrom('services')
      .selectAll()
      .where('account_id', '=', accountId)
      .orderBy('name')
      .execute(),
    badVersions: await db
      .selectFrom('bad_versions')
      .selectAll()
      .where('account_id', '=', accountId)
      .orderBy('service')
      .orderBy('version')
      .execute(),
    users: await db
      .selectFrom('users')
      .selectAll()
      .where('account_id', '=', accountId)
      .orderBy('id')
      .execute(),
    // last_used_at is left out: A's own requests in the fixture are recorded a few seconds later.
    keys: await db
      .selectFrom('api_keys')
      .select(['id', 'account_id', 'name', 'prefix', 'digest', 'created_at', 'created_by', 'revoked_at'])
      .where('account_id', '=', accountId)
      .orderBy('id')
      .execute(),
    events: await db
      .selectFrom('events')
      .selectAll()
      .where('account_id', '=', accountId)
      .orderBy('id')
      .execute(),
    idempotency: await db
      .selectFrom('idempotency_keys')
      .selectAll()
      .where('account_id', '=', accountId)
      .orderBy('idem_key')
      .execute(),
    // --- webhooks ---
    // queued_through is left out: the sender moves every webhook's cursor past the events derived,
    // whoever sent them (it reads only its own account's).
    webhooks: (
      await db.selectFrom('webhooks').selectAll().where('account_id', '=', accountId).orderBy('id').execute()
    ).map(({ queued_through: _cursor, ...webhook }) => webhook),
    deliveries: await db
      .selectFrom('webhook_deliveries')
      .selectAll()
      .where('account_id', '=', accountId)
      .orderBy('id')
      .execute(),
    // --- end webhooks ---
    incidents: await db
      .selectFrom('deployment_incidents')
      .selectAll()
      .where('account_id', '=', accountId)
      .orderBy('deployment_id')
      .execute(),
    // --- guardrails ---
    locks: await db.selectFrom('environment_locks').selectAll().where('account_id', '=', accountId).execute(),
    freezes: await db.selectFrom('freeze_windows').selectAll().where('account_id', '=', accountId).execute(),
    promotionRules: await db
      .selectFrom('promotion_rules')
      .selectAll()
      .where('account_id', '=', accountId)
      .execute(),
    // (bad_versions are in the snapshot above, with the service page's routes.)
    // --- end guardrails ---
    sessions: await db
      .selectFrom('sessions')
      .innerJoin('users', 'users.id', 'sessions.user_id')
      .select(['sessions.id', 'sessions.user_id', 'sessions.expires_at'])
      .where('users.account_id', '=', accountId)
      .orderBy('sessions.id')
      .execute(),
  }
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}

const world = sharedFixture(async (cleanup) => {
  // Listen for routes from the moment the Fastify instance exists, before any plugin registers one.
  const routes: RegisteredRoute[] = []
  const onInit = (message: unknown) => {
    const { fastify } = message as { fastify: FastifyInstance }
    fastify.addHook('onRoute', (options) => {
      // Copied at once: Fastify reuses the options object for the HEAD twin of a GET route.
      const config = (options.config ?? {}) as { methodNotAllowed?: boolean; file?: string }
      const methods = Array.isArray(options.method) ? options.method : [options.method]
      for (const method of methods) {
        routes.push({
          method: method as Method,
          url: options.url,
          methodNotAllowed: config.methodNotAllowed === true,
          staticFile: config.file,
        })
      }
    })
  }
  subscribe('fastify.initialization', onInit)
  let ctx: TestApp
  try {
    ctx = await buildTestApp(cleanup)
  } finally {
    unsubscribe('fastify.initialization', onInit)
  }
  const db = ctx.database.db

  const a = ctx.tenant
  const aSecond = await ctx.addTenant('Acme', 'acme-secret-pipeline')
  const b = await ctx.addTenant('Beta Corp', 'beta-ci')
  const aAdmin = await createUserIn(ctx.database, a.account.id, 'alice@acme.example', {
    password: A_PASSWORD,
  })
  const aMember = await createUserIn(ctx.database, a.account.id, 'arnold@acme.example', {
    role: 'member',
    password: A_PASSWORD,
  })
  const bAdmin = await createUserIn(ctx.database, b.account.id, 'bob@beta.example')
  const bOther = await createUserIn(ctx.database, b.account.id, 'bea@beta.example')

  await insertEvents(
    ctx.database,
    a.account.id,
    Array.from({ length: 30 }, (_, i) => ({
      // Same service name in both accounts, so a filter cannot tell them apart by name alone.
      service: i % 2 ? 'shared-name' : 'acme-only',
      version: `acme-${i}`,
      url: `https://ci.example/${HIDDEN}/${i}`,
      commit_sha: `${HIDDEN}-commit`,
      description: `release notes ${HIDDEN}`,
      deployer: `${HIDDEN}-deployer`,
      api_key_name: 'acme-secret-pipeline',
    })),
  )
  await insertEvents(
    ctx.database,
    b.account.id,
    Array.from({ length: 5 }, (_, i) => ({
      service: 'shared-name',
      version: `beta-${i}`,
      api_key_name: 'beta-ci',
    })),
  )
  const aIdempotencyKeys = ['acme-release-1', 'acme-release-2', 'acme-release-3']
  for (const [i, key] of aIdempotencyKeys.entries()) {
    const res = await ctx.app.inject({
      method: 'POST',
      url: '/deploy',
      headers: { 'x-api-key': a.key, 'content-type': 'application/json', 'idempotency-key': key },
      payload: JSON.stringify({
        service: 'acme-only',
        environment: 'prod',
        version: `acme-idem-${i}`,
        status: 'Deployed',
        description: `idempotent ${HIDDEN}`,
      }),
    })
    assert.equal(res.statusCode, 201)
  }

  const sessionOf = async (browser: Browser, page: string): Promise<Session> => ({
    browser,
    csrf: await browser.csrf(page),
  })
  const sessions: Record<SessionPrincipal, Session> = {
    anonymous: await sessionOf(new Browser(ctx.app), '/login'),
    bAdmin: await sessionOf(await login(ctx.app, bAdmin.email), '/settings/'),
    bOther: await sessionOf(await login(ctx.app, bOther.email), '/settings/'),
    aMember: await sessionOf(await login(ctx.app, aMember.email, A_PASSWORD), '/settings/'),
  }

  const aKeys = await db.selectFrom('api_keys').selectAll().where('account_id', '=', a.account.id).execute()
  const aEventRows = await db
    .selectFrom('events')
    .select('id')
    .where('account_id', '=', a.account.id)
    .execute()
  const markers: World['markers'] = [
    ...[HIDDEN, 'acme-secret-pipeline', 'acme-only', aAdmin.email, aMember.email].map((text) => ({
      text,
      pattern: new RegExp(escapeRegExp(text), 'i'),
    })),
    // Short, so matched by case and as a word, lest a random token contain it.
    { text: 'Acme', pattern: /\bAcme\b/ },
    ...[a.key, aSecond.key, aAdmin.password_hash, aMember.password_hash].map((text) => ({
      text,
      pattern: new RegExp(escapeRegExp(text)),
    })),
    ...aKeys
      .flatMap((k) => [k.prefix, k.digest])
      .map((text) => ({ text, pattern: new RegExp(escapeRegExp(text)) })),
  ]
  const bReadKey = (
    await createApiKey(db, {
      accountId: b.account.id,
      name: 'beta-reader',
      createdBy: 'test',
      scopes: ['read'],
    })
  ).key
  const aBadgeToken = 'acmebadgetoken-0123456789q7'
  await db.updateTable('accounts').set({ badge_token: aBadgeToken }).where('id', '=', a.account.id).execute()
  await db
    .updateTable('accounts')
    .set({ badge_token: 'betabadgetoken-0123456789k3' })
    .where('id', '=', b.account.id)
    .execute()
  await db
    .insertInto('services')
    .values({ account_id: a.account.id, name: 'shared-name', team: 'acme-team-q2', updated_at: Date.now() })
    .execute()
  for (const text of [aBadgeToken, 'acme-team-q2'])
    markers.push({ text, pattern: new RegExp(escapeRegExp(text)) })
  // --- webhooks: A's webhook (its URL holds the acme-only marker) and a delivery of it ---
  const aWebhook = await db
    .insertInto('webhooks')
    .values({
      account_id: a.account.id,
      url: 'https://acme-only.example.com/hook',
      format: 'json',
      statuses: '["Deployed"]',
      outcomes: '[]',
      environments: '[]',
      services: '[]',
      secret: 'v1.sealed',
      grafana_token: null,
      since_event_id: 0,
      // Its cursor past A's events, as for a webhook created now: the sender queues nothing of them.
      queued_through: Math.max(...aEventRows.map((r) => Number(r.id))),
      created_by: 'test',
      created_at: Date.now(),
    })
    .returning('id')
    .executeTakeFirstOrThrow()
  const aDelivery = await db
    .insertInto('webhook_deliveries')
    .values({
      webhook_id: Number(aWebhook.id),
      account_id: a.account.id,
      event_id: [...aEventRows][0]?.id ?? 1,
      deployment_id: null,
      kind: 'status',
      delivery_id: 'acme-delivery-7f3c',
      state: 'failed',
      next_attempt_at: 0,
      response_head: 'acme-only answer',
      created_at: Date.now(),
    })
    .returning('id')
    .executeTakeFirstOrThrow()
  await db
    .insertInto('webhooks')
    .values({
      account_id: b.account.id,
      url: 'https://beta-hook.example.com/in',
      format: 'slack',
      statuses: '[]',
      outcomes: '["failed"]',
      environments: '[]',
      services: '[]',
      secret: 'v1.sealed',
      grafana_token: null,
      since_event_id: 0,
      created_by: 'test',
      created_at: Date.now(),
    })
    .execute()
  markers.push({ text: 'acme-delivery-7f3c', pattern: /acme-delivery-7f3c/ })
  // --- end webhooks ---
  // --- guardrails: one of each of A's, each reason a marker ---
  const guardedBy = { created_by: aAdmin.email, created_at: Date.now() }
  const aLock = await db
    .insertInto('environment_locks')
    .values({
      account_id: a.account.id,
      environment: 'prod',
      service: null,
      reason: 'acme-lock-r4',
      ends_at: null,
      ...guardedBy,
    })
    .returning('id')
    .executeTakeFirstOrThrow()
  const aFreeze = await db
    .insertInto('freeze_windows')
    .values({
      account_id: a.account.id,
      environment: 'prod',
      reason: 'acme-freeze-f6',
      cron: null,
      duration_minutes: null,
      time_zone: null,
      starts_at: Date.UTC(2099, 0, 1),
      ends_at: Date.UTC(2099, 0, 2),
      ...guardedBy,
    })
    .returning('id')
    .executeTakeFirstOrThrow()
  await db
    .insertInto('promotion_rules')
    .values({
      account_id: a.account.id,
      environment: 'prod',
      after_environment: 'acme-stage-p8',
      min_minutes: 5,
      require_good: 1,
      ...guardedBy,
    })
    .execute()
  await db
    .insertInto('bad_versions')
    .values({
      account_id: a.account.id,
      service: 'acme-only',
      version: 'acme-3',
      reason: 'acme-bad-b2',
      ...guardedBy,
    })
    .execute()
  for (const text of ['acme-lock-r4', 'acme-freeze-f6', 'acme-stage-p8', 'acme-bad-b2'])
    markers.push({ text, pattern: new RegExp(escapeRegExp(text)) })
  // --- end guardrails ---
  const w: World = {
    ctx,
    aWebhookId: Number(aWebhook.id),
    aDeliveryId: Number(aDelivery.id),
    aLockId: Number(aLock.id),
    aFreezeId: Number(aFreeze.id),
    bReadKey,
    aBadgeToken,
    bBadgeToken: 'betabadgetoken-0123456789k3',
    a,
    aSecond,
    b,
    aAdmin,
    aMember,
    bAdmin,
    bOther,
    sessions,
    aEventIds: new Set(aEventRows.map((r) => r.id)),
    aIdempotencyKeys,
    markers,
    baseline: await snapshotOfA({ ctx, a }),
  }
  return { w, routes }
})

// ---- the matrix -----------------------------------------------------------------------------------

/** The same request from each of several callers, with one expectation each. */
function from(expectations: Partial<Record<Principal, Check>>, request: Omit<Case, 'as' | 'expect'>): Case[] {
  const pairs = Object.entries(expectations) as [Principal, Check | undefined][]
  return pairs.flatMap(([as, expect]) => (expect ? [{ ...request, as, expect }] : []))
}

/** Callers with no session at all: the UI refuses them before looking at anything. */
const outsiders = (form: boolean) => ({ anonymous: toLogin, bKey: form ? formRefused : toLogin })

/**
 * B's audit log records what B's own people typed in earlier cases: a download filtered by
 * service=acme-only keeps that filter, a user B added under A's address is named by it, a filter on
 * an actor keeps the name. That is B's own input, not A's data, so it is sent along and the leak check
 * counts those words as the caller's; onlyActorsOfB then checks every entry was made by B's people.
 */
const echoesOfB = (w: World) => ({
  'x-typed-by-b-earlier': ['acme-only', w.aAdmin.email, w.aMember.email].join(' '),
})

/** Every entry on B's audit page or in its JSON download was made by one of B's users. */
const onlyActorsOfB: Check = (res, w) => {
  const ours = new Set([w.bAdmin.email, w.bOther.email])
  const actors = res.headers['content-type']?.toString().startsWith('application/json')
    ? (res.json() as { actor: string }[]).map((e) => e.actor)
    : [...res.payload.matchAll(/<td data-label="Actor">([^<]*) <span/g)].map((m) => m[1] ?? '')
  assert.ok(actors.length > 0, "B's log is not empty")
  for (const actor of actors) assert.ok(ours.has(actor), `an entry of B's log by ${actor}`)
}

const logQueries = (w: World) => [
  '/logs/',
  '/logs/?service=shared-name',
  '/logs/?service=acme-only',
  '/logs/?version=acme',
  '/logs/?status=Deployed&environment=prod',
  `/logs/?account=${w.a.account.id}&account_id=${w.a.account.id}&accountId=${w.a.account.id}`,
  `/logs/?before=${Math.max(...w.aEventIds) + 1}`,
  `/logs/?after=${Math.min(...w.aEventIds) - 1}`,
  '/logs/?after=0&limit=500',
  '/logs/?from=2000-01-01&to=2100-01-01',
]

const exportEntry = (format: 'csv' | 'json'): Entry => ({
  why: "B's download holds B's events only, whatever the filter; nobody else gets one",
  cases: (w) =>
    [
      '',
      '?service=shared-name',
      '?service=acme-only',
      '?version=acme',
      `?account_id=${w.a.account.id}&accountId=${w.a.account.id}`,
      '?from=2000-01-01&to=2100-01-01',
    ].flatMap((query) => {
      const onlyB = format === 'csv' ? csvOnlyB : jsonOnlyB
      const nonEmpty = query === '' || query.includes('shared-name') || query.includes('account')
      return from({ ...outsiders(false), bAdmin: onlyB(nonEmpty) }, { url: `/logs/export.${format}${query}` })
    }),
})

/** A's first event, which opened one of A's deployments (its id is the deployment's). */
const aDeployment = (w: World) => Math.min(...w.aEventIds)

const PUBLIC_REASON = 'public: the same fixed answer for everyone, holding no account data'

/** /api/v1/events and /deployments: 401 without a key, 403 for an ingest-only key, B's rows only. */
function readApiEntry(list: 'events' | 'deployments'): Entry {
  const onlyB =
    (nonEmpty: boolean): Check =>
    (res) => {
      assert.equal(res.statusCode, 200, res.payload.slice(0, 300))
      const rows = (res.json() as Record<string, { version: string }[]>)[list] ?? []
      assert.ok(
        rows.every((r) => r.version.startsWith('beta-')),
        `only B's ${list}: ${rows.map((r) => r.version).join(', ')}`,
      )
      if (nonEmpty) assert.ok(rows.length > 0, `B's own ${list} are listed`)
    }
  return {
    why: `B's session or read key lists B's ${list} only, whatever the filter; B's ingest key lacks the read scope`,
    cases: (w) =>
      [
        ['', true],
        ['?service=shared-name', true],
        ['?service=acme-only', false],
        [`?account_id=${w.a.account.id}&limit=1000`, true],
      ].flatMap(([query, nonEmpty]) => [
        ...from(
          { anonymous: status(401), bKey: status(403), bAdmin: onlyB(nonEmpty as boolean) },
          { url: `/api/v1/${list}${query}` },
        ),
        ...from(
          { anonymous: onlyB(nonEmpty as boolean) },
          { url: `/api/v1/${list}${query}`, headers: { 'x-api-key': w.bReadKey } },
        ),
      ]),
  }
}

/** The original interface's reads: a read key only (a session is no key), confined to its account. */
function legacyReadEntry(path: '/get' | '/get/logs', method: 'GET' | 'POST'): Entry {
  const fields = path === '/get/logs' ? { app: 'acme-only', env: 'prod' } : {}
  const url = method === 'GET' && path === '/get/logs' ? '/get/logs?app=acme-only&env=prod' : path
  const body = method === 'POST' ? { json: fields } : {}
  return {
    why: "a read key only, and it reads its own account: A's app is empty for B; B's ingest key is refused",
    cases: (w) => [
      ...from({ anonymous: status(401), bKey: status(403), bAdmin: status(401) }, { url, ...body }),
      ...from({ anonymous: status(200) }, { url, ...body, headers: { 'x-api-key': w.bReadKey } }),
    ],
  }
}

const MATRIX: Record<string, Entry> = {
  'GET /healthz': {
    why: `${PUBLIC_REASON} (liveness probe)`,
    cases: () =>
      from({ anonymous: status(200), bKey: status(200), bAdmin: status(200) }, { url: '/healthz' }),
  },
  'GET /readyz': {
    why: `${PUBLIC_REASON} (readiness probe: the database dialect only)`,
    cases: () => from({ anonymous: status(200), bKey: status(200), bAdmin: status(200) }, { url: '/readyz' }),
  },

  'GET /put': {
    why: 'only an API key records, into its own account; a session cookie is no key',
    cases: (w) =>
      from(
        { anonymous: status(401), bAdmin: status(401), aMember: status(401), bKey: recordedInB },
        {
          url: '/put?app=shared-name&env=prod&version=beta-put-get&status=Deployed&account_id=1&account=Acme',
          headers: { 'idempotency-key': w.aIdempotencyKeys[0] ?? '' },
        },
      ),
  },
  'POST /put': {
    why: "B's key records into B even when the body names A and reuses A's Idempotency-Key",
    cases: (w) =>
      from(
        { anonymous: status(401), bAdmin: status(401), aMember: status(401), bKey: recordedInB },
        {
          url: '/put',
          headers: { 'idempotency-key': w.aIdempotencyKeys[1] ?? '' },
          json: {
            app: 'shared-name',
            env: 'prod',
            version: 'beta-put-post',
            status: 'Deployed',
            account_id: w.a.account.id,
            account: 'Acme',
            api_key_id: w.a.keyId,
          },
        },
      ),
  },
  'POST /deploy': {
    why: "B's key records into B even when the body names A's key and reuses A's Idempotency-Key",
    cases: (w) =>
      from(
        { anonymous: status(401), bAdmin: status(401), aMember: status(401), bKey: recordedInB },
        {
          url: '/deploy',
          headers: { 'idempotency-key': w.aIdempotencyKeys[2] ?? '' },
          json: {
            service: 'shared-name',
            environment: 'prod',
            version: 'beta-deploy',
            status: 'Deployed',
            accountId: w.a.account.id,
            api_key_name: 'acme-secret-pipeline',
            api_key_id: w.aSecond.keyId,
          },
        },
      ),
  },

  'GET /': {
    why: 'a redirect only',
    cases: () =>
      from(
        { anonymous: redirect('/services/'), bKey: redirect('/services/'), bAdmin: redirect('/services/') },
        { url: '/' },
      ),
  },
  'GET /setup': {
    why: 'closed once any user exists; shows nothing',
    cases: () => from({ ...outsiders(false), bAdmin: redirect('/logs/') }, { url: '/setup' }),
  },
  'POST /setup': {
    why: 'closed once any user exists: nobody can add an account, an admin, or join A',
    cases: (w) =>
      from(
        {
          anonymous: toLogin,
          bKey: formRefused,
          bAdmin: toLogin,
          aMember: toLogin,
        },
        {
          url: '/setup',
          form: {
            account: 'Acme',
            email: 'mallory@beta.example',
            password: B_NEW_PASSWORD,
            confirm: B_NEW_PASSWORD,
          },
        },
      ).map((c) => ({
        ...c,
        expect: allOf(c.expect, async () => {
          const row = await w.ctx.database.db
            .selectFrom('users')
            .select('id')
            .where('email', '=', 'mallory@beta.example')
            .executeTakeFirst()
          assert.equal(row, undefined, 'set-up created no user')
        }),
      })),
  },
  'GET /login': {
    why: 'the public login form, the same for everyone; logged-in users move on to their own log',
    cases: () => [
      ...from({ anonymous: status(200), bKey: status(200), bAdmin: redirect('/logs/') }, { url: '/login' }),
      ...from({ anonymous: status(200) }, { url: '/login?next=%2Fsettings%2F' }),
    ],
  },
  'POST /login': {
    why: "B's password does not open A's users, with or without B's session",
    cases: (w) => [
      ...from(
        { anonymous: status(401), bAdmin: status(401), bKey: formRefused },
        { url: '/login', form: { email: w.aAdmin.email, password: PASSWORD } },
      ),
      ...from(
        { anonymous: status(401) },
        { url: '/login', form: { email: ` ${w.aMember.email.toUpperCase()} `, password: PASSWORD } },
      ),
      ...from({ bAdmin: status(401) }, { url: '/login', form: { email: w.aMember.email, password: '' } }),
    ],
  },
  'GET /logout': {
    why: "the logout button for one's own session",
    cases: () =>
      from(
        { ...outsiders(false), bAdmin: allOf(status(200), contains('bob@beta.example')) },
        { url: '/logout' },
      ),
  },
  'POST /logout': {
    why: "ends the caller's own session only, whatever the form names",
    cases: (w) =>
      from(
        {
          anonymous: redirect('/login'),
          bKey: formRefused,
          bOther: allOf(redirect('/login'), async () => {
            const left = await w.ctx.database.db
              .selectFrom('sessions')
              .select('id')
              .where('user_id', '=', w.bOther.id)
              .execute()
            assert.deepEqual(left, [], "B's other admin is logged out")
          }),
        },
        { url: '/logout', form: { user: String(w.aMember.id), userId: String(w.aMember.id) } },
      ),
  },
  'GET /account/password': {
    why: "the caller's own password form, whatever the query names",
    cases: (w) =>
      from({ ...outsiders(false), bAdmin: status(200) }, { url: `/account/password?user=${w.aAdmin.id}` }),
  },
  'POST /account/password': {
    why: "changes the caller's own password only, even when the form names one of A's users",
    cases: (w) => {
      const smuggled = { user: String(w.aAdmin.id), userId: String(w.aAdmin.id), id: String(w.aAdmin.id) }
      const wrong = { ...smuggled, current: A_PASSWORD, password: B_NEW_PASSWORD, confirm: B_NEW_PASSWORD }
      const right = { ...smuggled, current: PASSWORD, password: B_NEW_PASSWORD, confirm: B_NEW_PASSWORD }
      return [
        ...from({ ...outsiders(true) }, { url: '/account/password', form: right }),
        // A's password is not B's current password, even with A's user named.
        ...from({ bAdmin: status(422) }, { url: '/account/password', form: wrong }),
        ...from(
          {
            bAdmin: allOf(redirect('/settings/'), async () => {
              const bob = await userRow(w.ctx.database, w.bAdmin.id)
              assert.notEqual(bob?.password_hash, w.bAdmin.password_hash, "B's own password changed")
            }),
          },
          { url: '/account/password', form: right },
        ),
      ]
    },
  },

  'GET /logs': {
    why: 'a redirect to /logs/ keeping the query; reads nothing',
    cases: () =>
      from(
        {
          anonymous: redirect('/logs/', 301),
          bKey: redirect('/logs/', 301),
          bAdmin: redirect('/logs/', 301),
        },
        { url: '/logs?service=acme-only' },
      ),
  },
  'GET /logs/': {
    why: "B's log shows B's events only, whatever the filter or cursor; nobody else sees one",
    cases: (w) =>
      logQueries(w).flatMap((url) =>
        from(
          {
            ...outsiders(false),
            bAdmin: onlyBEvents(url === '/logs/' || url.includes('shared-name') || url.includes('account')),
          },
          { url },
        ),
      ),
  },
  'GET /logs/export.csv': exportEntry('csv'),
  'GET /logs/export.json': exportEntry('json'),

  'GET /insights': {
    why: 'a redirect to /insights/ keeping the query; reads nothing',
    cases: () =>
      from(
        {
          anonymous: redirect('/insights/', 301),
          bKey: redirect('/insights/', 301),
          bAdmin: redirect('/insights/', 301),
        },
        { url: '/insights?service=acme-only' },
      ),
  },
  'GET /insights/': {
    why: "B's insights count B's deployments only; A's service names are unknown to B",
    cases: () => {
      const window = 'environment=prod&range=custom&from=2025-12-01&to=2026-02-01&tz=UTC'
      return [
        ...[`/insights/?${window}`, `/insights/?${window}&service=shared-name`].flatMap((url) =>
          from({ ...outsiders(false), bAdmin: allOf(status(200), contains('5 succeeded')) }, { url }),
        ),
        ...from(
          { ...outsiders(false), bAdmin: status(404) },
          { url: `/insights/?${window}&service=acme-only` },
        ),
      ]
    },
  },
  'GET /insights/deployments': {
    why: "the deployments behind B's figures are B's only, whatever the filter",
    cases: () => {
      const window = 'environment=prod&range=custom&from=2025-12-01&to=2026-02-01&tz=UTC'
      return [
        ...['succeeded', 'finished', 'lead_time'].flatMap((kind) =>
          from(
            { ...outsiders(false), bAdmin: onlyBEvents(true) },
            { url: `/insights/deployments?${window}&service=shared-name&kind=${kind}` },
          ),
        ),
        ...from(
          { ...outsiders(false), bAdmin: status(404) },
          { url: `/insights/deployments?${window}&service=acme-only&kind=failed` },
        ),
      ]
    },
  },

  'GET /deployments/:id': {
    why: 'a redirect to /deployments/<id>/; reads nothing',
    cases: (w) =>
      from(
        {
          anonymous: redirect(`/deployments/${aDeployment(w)}/`, 301),
          bAdmin: redirect(`/deployments/${aDeployment(w)}/`, 301),
        },
        { url: `/deployments/${aDeployment(w)}` },
      ),
  },
  'GET /deployments/:id/': {
    why: "a deployment's page shows the caller's own account's deployments only: A's is unknown to B",
    cases: (w) =>
      from({ ...outsiders(false), bAdmin: status(404) }, { url: `/deployments/${aDeployment(w)}/` }),
  },
  'POST /deployments/:id/incident': {
    why: "admins only, and only their own account's deployments: A's is unknown to B",
    cases: (w) =>
      from(
        { ...outsiders(true), aMember: status(403), bAdmin: status(404) },
        { url: `/deployments/${aDeployment(w)}/incident`, form: { note: 'beta-took-it' } },
      ),
  },
  'POST /deployments/:id/incident/remove': {
    why: "admins only, and only their own account's deployments: A's is unknown to B",
    cases: (w) =>
      from(
        { ...outsiders(true), aMember: status(403), bAdmin: status(404) },
        { url: `/deployments/${aDeployment(w)}/incident/remove`, form: {} },
      ),
  },
  'POST /deployments/:id/fixed': {
    why: "admins only, and only their own account's deployments: A's is unknown to B",
    cases: (w) =>
      from(
        { ...outsiders(true), aMember: status(403), bAdmin: status(404) },
        { url: `/deployments/${aDeployment(w)}/fixed`, form: { incident: String(aDeployment(w)) } },
      ),
  },

  'GET /services': {
    why: 'a redirect to /services/ keeping the query; reads nothing',
    cases: () =>
      from(
        {
          anonymous: redirect('/services/', 301),
          bKey: redirect('/services/', 301),
          bAdmin: redirect('/services/', 301),
        },
        { url: '/services?name=acme-only' },
      ),
  },
  'GET /services/': {
    why: "B's board shows B's services only, whatever the filter or instant",
    cases: (w) =>
      [
        '/services/',
        '/services/?name=shared',
        '/services/?team=acme-team-q2',
        '/services/?at=2026-01-01T00:03:00Z',
        `/services/?account_id=${w.a.account.id}`,
      ].flatMap((url) =>
        from(
          {
            ...outsiders(false),
            bAdmin: allOf(status(200), (res) => {
              const names = [...res.payload.matchAll(/<tr data-service="([^"]*)"/g)].map((m) => m[1])
              assert.ok(
                names.every((n) => n === 'shared-name'),
                `only B's services: ${names.join(', ')}`,
              )
            }),
          },
          { url },
        ),
      ),
  },
  'GET /services/:service': {
    why: 'a redirect to the page with a slash; reads nothing',
    cases: () =>
      from(
        {
          anonymous: redirect('/services/acme-only/', 301),
          bKey: redirect('/services/acme-only/', 301),
          bAdmin: redirect('/services/acme-only/', 301),
        },
        { url: '/services/acme-only' },
      ),
  },
  'GET /services/:service/': {
    why: "B's service page lists B's deployments only; A's service names are unknown to B",
    cases: () => [
      ...from(
        { ...outsiders(false), bAdmin: allOf(status(200), contains('beta-4')) },
        { url: '/services/shared-name/' },
      ),
      ...from({ ...outsiders(false), bAdmin: status(404) }, { url: '/services/acme-only/' }),
    ],
  },
  'GET /board/row': {
    why: "the live board's row: B's deployments and team only; A's service names are unknown to B",
    cases: () => [
      ...from(
        {
          ...outsiders(false),
          bAdmin: allOf(status(200), contains('<tr data-service="shared-name">', 'beta-')),
        },
        { url: '/board/row?service=shared-name' },
      ),
      ...from({ ...outsiders(false), bAdmin: status(404) }, { url: '/board/row?service=acme-only' }),
    ],
  },
  'GET /services/:service/rename': {
    why: "admins only; A's service names are unknown to B",
    cases: () =>
      from(
        { ...outsiders(false), aMember: status(403), bAdmin: status(404) },
        { url: '/services/acme-only/rename' },
      ),
  },
  'POST /services/:service/rename': {
    why: "admins only, and only their own account's services: A's service is unknown to B",
    cases: () =>
      from(
        { ...outsiders(true), aMember: status(403), bAdmin: status(404) },
        { url: '/services/acme-only/rename', form: { to: 'beta-took-it' } },
      ),
  },
  'GET /services/:service/delete': {
    why: "admins only; A's service names are unknown to B",
    cases: () =>
      from(
        { ...outsiders(false), aMember: status(403), bAdmin: status(404) },
        { url: '/services/acme-only/delete' },
      ),
  },
  'POST /services/:service/delete': {
    why: "admins only, and only their own account's services: A's history cannot be deleted by B",
    cases: () =>
      from(
        { ...outsiders(true), aMember: status(403), bAdmin: status(404) },
        { url: '/services/acme-only/delete', form: { confirm: 'acme-only' } },
      ),
  },
  'GET /settings/environments/rename': {
    why: "admins only; B's form lists B's environments only",
    cases: () =>
      from(
        { ...outsiders(false), aMember: status(403), bAdmin: status(200) },
        { url: '/settings/environments/rename' },
      ),
  },
  'POST /settings/environments/rename': {
    why: "admins only; an environment only A has is unknown to B (422 naming the field), A's names stay",
    cases: () =>
      from(
        { ...outsiders(true), aMember: status(403), bAdmin: status(422) },
        { url: '/settings/environments/rename', form: { from: 'acme-only', to: 'prod' } },
      ),
  },
  'POST /services/:service/meta': {
    why: "admins only, and only for their own account's services: A's service is unknown to B",
    cases: () => [
      ...from(
        { ...outsiders(true), bAdmin: status(404) },
        { url: '/services/acme-only/meta', form: { team: 'beta-took-it' } },
      ),
      ...from({ aMember: status(403) }, { url: '/services/shared-name/meta', form: { team: 'member-try' } }),
      // B's own service of the same name: B's row changes, A's stays (the snapshot checks it).
      ...from(
        { bAdmin: status(303) },
        { url: '/services/shared-name/meta', form: { team: 'beta-team', description: 'beta made' } },
      ),
    ],
  },
  'POST /services/:service/versions/bad': {
    why: "admins only, and only for their own account's services: A's service is unknown to B",
    cases: () => [
      ...from(
        { ...outsiders(true), bAdmin: status(404) },
        { url: '/services/acme-only/versions/bad', form: { version: '1.0', reason: 'beta says' } },
      ),
      ...from(
        { aMember: status(403) },
        { url: '/services/shared-name/versions/bad', form: { version: '1.0', reason: 'member says' } },
      ),
      // B's own service of the same name: B's mark is made, A's versions stay unmarked (snapshot).
      ...from(
        { bAdmin: status(303) },
        { url: '/services/shared-name/versions/bad', form: { version: '1.0', reason: 'beta made' } },
      ),
    ],
  },
  'POST /services/:service/versions/good': {
    why: "admins only, and only for their own account's services: A's service is unknown to B",
    cases: () => [
      ...from(
        { ...outsiders(true), bAdmin: status(404) },
        { url: '/services/acme-only/versions/good', form: { version: '1.0' } },
      ),
      ...from(
        { aMember: status(403) },
        { url: '/services/shared-name/versions/good', form: { version: '1.0' } },
      ),
      // B's own service: a version B never marked is refused by name, A's marks are not consulted.
      ...from(
        { bAdmin: status(422) },
        { url: '/services/shared-name/versions/good', form: { version: 'never-marked' } },
      ),
    ],
  },
  'POST /settings/environments': {
    why: "admins only; reorders and hides the caller's own account's environments only",
    cases: () => [
      ...from(
        { ...outsiders(true), aMember: status(403), bAdmin: status(303) },
        { url: '/settings/environments', form: { environment: 'prod', action: 'hide' } },
      ),
      ...from(
        { bAdmin: status(303) },
        { url: '/settings/environments', form: { environment: 'prod', action: 'show' } },
      ),
    ],
  },
  'POST /settings/stall-time': {
    why: "admins only; sets the caller's own account's stall time only",
    cases: () =>
      from(
        { ...outsiders(true), aMember: status(403), bAdmin: status(303) },
        { url: '/settings/stall-time', form: { minutes: '7' } },
      ),
  },
  'POST /settings/retention': {
    why: "admins only; sets the caller's own account's retention only",
    cases: () =>
      from(
        { ...outsiders(true), aMember: status(403), bAdmin: status(303) },
        { url: '/settings/retention', form: { days: '90', action: 'days' } },
      ),
  },
  'POST /settings/badge-token': {
    why: "admins only; rotates the caller's own account's badge token only",
    cases: () =>
      from(
        {
          ...outsiders(true),
          aMember: status(403),
          bAdmin: allOf(status(303), async (_res, w) => {
            const row = await w.ctx.database.db
              .selectFrom('accounts')
              .select('badge_token')
              .where('id', '=', w.b.account.id)
              .executeTakeFirstOrThrow()
            assert.notEqual(row.badge_token, w.bBadgeToken, "B's token is a new one")
            w.bBadgeToken = String(row.badge_token)
          }),
        },
        { url: '/settings/badge-token', form: {} },
      ),
  },
  'GET /badge/:token/:service/:file': {
    why: "public by token: B's token shows B's versions only; a wrong token gets the one refusal",
    cases: (w) => [
      // A's token is not B's to use: the same 404 for everyone, whatever the service.
      ...from(
        { anonymous: status(404), bKey: status(404), bAdmin: status(404) },
        { url: '/badge/not-a-token/acme-only/prod.svg' },
      ),
      ...from(
        {
          anonymous: allOf(status(200), contains('beta-')),
          bAdmin: allOf(status(200), contains('beta-')),
        },
        { url: `/badge/${w.bBadgeToken}/shared-name/prod.json` },
      ),
      // B's token with A's service: nothing of A (the same grey badge as an unknown service).
      ...from(
        { anonymous: allOf(status(200), contains('no deployment')) },
        { url: `/badge/${w.bBadgeToken}/acme-only/prod.svg` },
      ),
      ...from({ anonymous: status(404) }, { url: `/badge/${w.aBadgeToken}x/acme-only/prod.svg` }),
    ],
  },

  'GET /openapi.json': {
    why: `${PUBLIC_REASON} (the API description)`,
    cases: () =>
      from({ anonymous: status(200), bKey: status(200), bAdmin: status(200) }, { url: '/openapi.json' }),
  },
  ...Object.fromEntries(
    [
      ['GET /docs', '/docs', 200],
      ['HEAD /docs/', '/docs/', 200],
      ['GET /docs/static/index.html', '/docs/static/index.html', 302],
      ['GET /docs/static/swagger-initializer.js', '/docs/static/swagger-initializer.js', 200],
      ['GET /docs/json', '/docs/json', 200],
      ['GET /docs/yaml', '/docs/yaml', 200],
      ['GET /docs/static/*', '/docs/static/swagger-ui.css', 200],
    ].map(([key, url, code]) => [
      key as string,
      {
        why: `${PUBLIC_REASON} (the API reference, served from the installed package)`,
        cases: () =>
          from(
            {
              anonymous: status(code as number),
              bKey: status(code as number),
              bAdmin: status(code as number),
            },
            { url: url as string },
          ),
      } satisfies Entry,
    ]),
  ),

  // ---- /metrics (issue 12, metrics part) --------------------------------------------------------
  // Open here (no SHIPLOG_METRICS_TOKEN in this world; the token is tested in test/api/metrics.test.ts):
  // process-wide counters by route pattern, form, status and outcome, never an account's names.
  'GET /metrics': {
    why: `${PUBLIC_REASON} (Prometheus metrics: counts by route pattern and status, no account's names)`,
    cases: () =>
      from(
        {
          anonymous: allOf(status(200), contains('shiplog_http_requests_total')),
          bKey: status(200),
          bAdmin: status(200),
          aMember: status(200),
        },
        { url: '/metrics' },
      ),
  },
  // ---- end of /metrics ----------------------------------------------------------------------------

  'GET /api/v1/events': readApiEntry('events'),
  'GET /api/v1/deployments': readApiEntry('deployments'),
  'GET /api/v1/services': {
    why: "B's board as data: B's services only; B's ingest key lacks the read scope",
    cases: (w) =>
      ['/api/v1/services', '/api/v1/services?at=2026-01-01T00:03:00Z'].flatMap((url) => [
        ...from(
          {
            anonymous: status(401),
            bKey: status(403),
            bAdmin: allOf(status(200), (res) => {
              const names = (res.json() as { services: { service: string }[] }).services.map((s) => s.service)
              assert.deepEqual(names, ['shared-name'])
            }),
          },
          { url },
        ),
        ...from({ anonymous: status(200) }, { url, headers: { 'x-api-key': w.bReadKey } }),
      ]),
  },
  'GET /api/v1/metrics': {
    why: "B's metrics count B's deployments only; A's service names are unknown to B",
    cases: (w) => {
      const window = 'environment=prod&from=2025-12-01T00:00:00Z&to=2026-02-01T00:00:00Z'
      return [
        ...from(
          {
            anonymous: status(401),
            bKey: status(403),
            bAdmin: allOf(status(200), (res) =>
              assert.equal((res.json() as { deployments_succeeded: number }).deployments_succeeded, 5),
            ),
          },
          { url: `/api/v1/metrics?${window}` },
        ),
        ...from({ bAdmin: status(404) }, { url: `/api/v1/metrics?${window}&service=acme-only` }),
        ...from(
          { anonymous: status(404) },
          { url: `/api/v1/metrics?${window}&service=acme-only`, headers: { 'x-api-key': w.bReadKey } },
        ),
      ]
    },
  },
  // ---- incident marks (issue 27): A's deployments are unknown to B, whoever asks ----
  'POST /api/v1/deployments/:id/incident': {
    why: "an ingest key or an admin's JSON session of the account; A's deployment is unknown to B; A's member is no admin",
    cases: (w) =>
      from(
        { anonymous: status(401), bKey: status(404), bAdmin: status(404), aMember: status(403) },
        { url: `/api/v1/deployments/${aDeployment(w)}/incident`, json: { note: 'beta-took-it' } },
      ),
  },
  'DELETE /api/v1/deployments/:id/incident': {
    why: "as marking: A's deployment is unknown to B; A's member is no admin",
    cases: (w) =>
      from(
        { anonymous: status(401), bKey: status(404), bAdmin: status(404), aMember: status(403) },
        { url: `/api/v1/deployments/${aDeployment(w)}/incident` },
      ),
  },
  'GET /api/v1/bad-versions': {
    why: "B lists B's bad versions only (none): A's acme-3 is not B's",
    cases: (w) => {
      const none = allOf(status(200), (res) => assert.deepEqual(res.json(), { bad_versions: [] }))
      return [
        ...from({ anonymous: status(401), bKey: status(403), bAdmin: none }, { url: '/api/v1/bad-versions' }),
        ...from({ anonymous: none }, { url: '/api/v1/bad-versions', headers: { 'x-api-key': w.bReadKey } }),
      ]
    },
  },
  'POST /api/v1/bad-versions': {
    why: "an ingest key or an admin's JSON session of the account; A's service is unknown to B (422, nothing stored); A's member is no admin",
    cases: () =>
      from(
        { anonymous: status(401), bKey: status(422), bAdmin: status(422), aMember: status(403) },
        {
          url: '/api/v1/bad-versions',
          json: { service: 'acme-only', version: 'acme-3', reason: 'beta-took-it' },
        },
      ),
  },
  'DELETE /api/v1/bad-versions': {
    why: "as marking: A's bad version is not B's to take off (404); A's member is no admin",
    cases: () =>
      from(
        { anonymous: status(401), bKey: status(404), bAdmin: status(404), aMember: status(403) },
        { url: '/api/v1/bad-versions?service=acme-only&version=acme-3' },
      ),
  },
  'GET /api/v1/check': {
    why: "B's check applies B's guardrails only: A's lock on prod and A's bad version acme-3 do not exist for B",
    cases: (w) => {
      const url = '/api/v1/check?service=acme-only&environment=prod&version=acme-3'
      const allowed = allOf(status(200), (res) =>
        assert.deepEqual(res.json(), {
          allowed: true,
          reasons: [],
          service: 'acme-only',
          environment: 'prod',
          version: 'acme-3',
        }),
      )
      return [
        ...from({ anonymous: status(401), bKey: status(403), bAdmin: allowed }, { url }),
        ...from({ anonymous: allowed }, { url, headers: { 'x-api-key': w.bReadKey } }),
      ]
    },
  },
  // ---- live updates (issue 12): GET /api/v1/stream ----
  // A stream that opens never ends, and inject waits for the end: a reader is shown to pass the
  // authorisation by the 422 a bad Last-Event-ID gets after it (nothing streamed). Which events a
  // stream carries (only its account's) is shown over a socket in test/api/stream.test.ts.
  'GET /api/v1/stream': {
    why: "a session or read key of the account; B's ingest key lacks the read scope; the stream is confined to the reader's account (test/api/stream.test.ts)",
    cases: (w) => [
      ...from({ anonymous: status(401), bKey: status(403) }, { url: '/api/v1/stream' }),
      ...from(
        { anonymous: status(401), bKey: status(403), bAdmin: status(422), aMember: status(422) },
        { url: '/api/v1/stream?lastEventId=not-an-id' },
      ),
      ...from(
        { anonymous: status(422) },
        { url: '/api/v1/stream', headers: { 'x-api-key': w.bReadKey, 'last-event-id': 'x' } },
      ),
    ],
  },
  // ---- end live updates ----
  'GET /get': legacyReadEntry('/get', 'GET'),
  'POST /get': legacyReadEntry('/get', 'POST'),
  'GET /get/logs': legacyReadEntry('/get/logs', 'GET'),
  'POST /get/logs': legacyReadEntry('/get/logs', 'POST'),

  // --- webhooks (Settings → Webhooks) ---------------------------------------------------------------
  'GET /settings/webhooks': {
    why: 'a redirect only',
    cases: () =>
      from(
        {
          anonymous: redirect('/settings/webhooks/', 301),
          bKey: redirect('/settings/webhooks/', 301),
          bAdmin: redirect('/settings/webhooks/', 301),
        },
        { url: '/settings/webhooks' },
      ),
  },
  'GET /settings/webhooks/': {
    why: "B's webhooks only; members read",
    cases: (w) =>
      ['/settings/webhooks/', `/settings/webhooks/?account=${w.a.account.id}`].flatMap((url) =>
        from(
          {
            ...outsiders(false),
            bAdmin: allOf(status(200), contains('beta-hook.example.com', 'Add webhook')),
            bOther: status(200),
          },
          { url },
        ),
      ),
  },
  'POST /settings/webhooks': {
    why: "admins only; the webhook belongs to the creator's account whatever the form names",
    cases: (w) => [
      ...from(
        { ...outsiders(true), aMember: status(403) },
        {
          url: '/settings/webhooks',
          form: { url: 'https://member.example.com/', format: 'json', status: 'Deployed' },
        },
      ),
      ...from(
        {
          bAdmin: allOf(redirect('/settings/webhooks/'), async () => {
            const row = await w.ctx.database.db
              .selectFrom('webhooks')
              .select(['account_id'])
              .where('url', '=', 'https://beta-made.example.com/')
              .executeTakeFirstOrThrow()
            assert.equal(Number(row.account_id), w.b.account.id)
          }),
        },
        {
          url: '/settings/webhooks',
          form: {
            url: 'https://beta-made.example.com/',
            format: 'json',
            status: 'Deployed',
            account_id: String(w.a.account.id),
          },
        },
      ),
    ],
  },
  'GET /settings/webhooks/:id/': {
    why: "A's delivery log is unknown to B (404) and hidden from outsiders",
    cases: (w) => [
      ...from({ ...outsiders(false), bAdmin: status(404) }, { url: `/settings/webhooks/${w.aWebhookId}/` }),
      ...from(
        { aMember: allOf(status(200), contains('acme-only answer')) },
        { url: `/settings/webhooks/${w.aWebhookId}/` },
      ),
    ],
  },
  'POST /settings/webhooks/:id/delete': {
    why: "A's webhook cannot be deleted by B (404, like a missing id) nor by A's member (403)",
    cases: (w) => [
      ...from(
        { ...outsiders(true), aMember: status(403) },
        { url: `/settings/webhooks/${w.aWebhookId}/delete`, form: {} },
      ),
      ...from(
        { bAdmin: notFoundLikeMissing('/settings/webhooks/999999999/delete', {}) },
        { url: `/settings/webhooks/${w.aWebhookId}/delete`, form: {} },
      ),
    ],
  },
  'POST /settings/webhooks/:id/enable': {
    why: "A's webhook cannot be re-enabled by B (404, like a missing id) nor by A's member (403)",
    cases: (w) => [
      ...from(
        { ...outsiders(true), aMember: status(403) },
        { url: `/settings/webhooks/${w.aWebhookId}/enable`, form: {} },
      ),
      ...from(
        { bAdmin: notFoundLikeMissing('/settings/webhooks/999999999/enable', {}) },
        { url: `/settings/webhooks/${w.aWebhookId}/enable`, form: {} },
      ),
    ],
  },
  'POST /settings/webhooks/:id/deliveries/:delivery/redeliver': {
    why: "A's deliveries cannot be resent by B (404, like a missing id) nor by A's member (403)",
    cases: (w) => {
      const url = `/settings/webhooks/${w.aWebhookId}/deliveries/${w.aDeliveryId}/redeliver`
      return [
        ...from({ ...outsiders(true), aMember: status(403) }, { url, form: {} }),
        ...from(
          { bAdmin: notFoundLikeMissing('/settings/webhooks/999999999/deliveries/1/redeliver', {}) },
          { url, form: {} },
        ),
      ]
    },
  },
  // --- end webhooks ----------------------------------------------------------------------------------
  // --- guardrails (Settings → Guardrails: members read, admins change) -----------------------------
  'GET /settings/guardrails': {
    why: 'a redirect only',
    cases: () =>
      from(
        {
          anonymous: redirect('/settings/guardrails/', 301),
          bKey: redirect('/settings/guardrails/', 301),
          bAdmin: redirect('/settings/guardrails/', 301),
        },
        { url: '/settings/guardrails' },
      ),
  },
  'GET /settings/guardrails/': {
    why: "B's guardrails only (none); A's member reads A's",
    cases: (w) =>
      ['/settings/guardrails/', `/settings/guardrails/?account=${w.a.account.id}`].flatMap((url) =>
        from(
          {
            ...outsiders(false),
            bAdmin: allOf(status(200), contains('No locks.', 'No freeze windows.', 'Lock an environment')),
            bOther: status(200),
            aMember: allOf(
              status(200),
              contains('acme-lock-r4', 'acme-freeze-f6', 'acme-stage-p8', 'acme-bad-b2'),
            ),
          },
          { url },
        ),
      ),
  },
  'POST /settings/guardrails/locks': {
    why: "admins only; a lock names the caller's own environments and services only",
    cases: () =>
      from(
        {
          ...outsiders(true),
          aMember: status(403),
          bAdmin: allOf(status(422), contains('no service &quot;acme-only&quot;')),
        },
        {
          url: '/settings/guardrails/locks',
          form: { environment: 'prod', service: 'acme-only', reason: 'x' },
        },
      ),
  },
  'POST /settings/guardrails/locks/:id/unlock': {
    why: "A's lock cannot be lifted by B (404, like a missing id) nor by A's member (403)",
    cases: (w) => [
      ...from(
        { ...outsiders(true), aMember: status(403) },
        { url: `/settings/guardrails/locks/${w.aLockId}/unlock`, form: {} },
      ),
      ...from(
        { bAdmin: notFoundLikeMissing('/settings/guardrails/locks/999999999/unlock', {}) },
        { url: `/settings/guardrails/locks/${w.aLockId}/unlock`, form: {} },
      ),
    ],
  },
  'POST /settings/guardrails/freezes': {
    why: "admins only; a window names the caller's own environments only",
    cases: () =>
      from(
        {
          ...outsiders(true),
          aMember: status(403),
          bAdmin: allOf(status(422), contains('no environment &quot;acme-stage-p8&quot;')),
        },
        {
          url: '/settings/guardrails/freezes',
          form: {
            environment: 'acme-stage-p8',
            kind: 'once',
            from: '2099-01-01T00:00',
            to: '2099-01-02T00:00',
            reason: 'x',
          },
        },
      ),
  },
  'POST /settings/guardrails/freezes/:id/remove': {
    why: "A's freeze window cannot be removed by B (404, like a missing id) nor by A's member (403)",
    cases: (w) => [
      ...from(
        { ...outsiders(true), aMember: status(403) },
        { url: `/settings/guardrails/freezes/${w.aFreezeId}/remove`, form: {} },
      ),
      ...from(
        { bAdmin: notFoundLikeMissing('/settings/guardrails/freezes/999999999/remove', {}) },
        { url: `/settings/guardrails/freezes/${w.aFreezeId}/remove`, form: {} },
      ),
    ],
  },
  'POST /settings/guardrails/promotions': {
    why: "admins only; a rule names the caller's own environments only",
    cases: () =>
      from(
        {
          ...outsiders(true),
          aMember: status(403),
          bAdmin: allOf(status(422), contains('no environment &quot;acme-stage-p8&quot;')),
        },
        {
          url: '/settings/guardrails/promotions',
          form: { environment: 'prod', after_environment: 'acme-stage-p8' },
        },
      ),
  },
  'POST /settings/guardrails/promotions/remove': {
    why: "A's rule cannot be removed by B (404, like one that does not exist) nor by A's member (403)",
    cases: () => {
      const form = { environment: 'prod', after_environment: 'acme-stage-p8' }
      return [
        ...from(
          { ...outsiders(true), aMember: status(403) },
          { url: '/settings/guardrails/promotions/remove', form },
        ),
        ...from(
          {
            bAdmin: notFoundLikeMissing('/settings/guardrails/promotions/remove', {
              environment: 'prod',
              after_environment: 'no-such-stage',
            }),
          },
          { url: '/settings/guardrails/promotions/remove', form },
        ),
      ]
    },
  },
  'POST /settings/guardrails/bad-versions': {
    why: "admins only; a version is marked bad in the caller's own services only",
    cases: () =>
      from(
        {
          ...outsiders(true),
          aMember: status(403),
          bAdmin: allOf(status(422), contains('no service &quot;acme-only&quot;')),
        },
        {
          url: '/settings/guardrails/bad-versions',
          form: { service: 'acme-only', version: 'acme-3', reason: 'x' },
        },
      ),
  },
  'POST /settings/guardrails/bad-versions/good': {
    why: "A's bad version cannot be marked good by B (404, like one not marked) nor by A's member (403)",
    cases: () => {
      const form = { service: 'acme-only', version: 'acme-3' }
      return [
        ...from(
          { ...outsiders(true), aMember: status(403) },
          { url: '/settings/guardrails/bad-versions/good', form },
        ),
        ...from(
          {
            bAdmin: notFoundLikeMissing('/settings/guardrails/bad-versions/good', {
              service: 'acme-only',
              version: 'nothing-marked',
            }),
          },
          { url: '/settings/guardrails/bad-versions/good', form },
        ),
      ]
    },
  },
  // --- end guardrails ---------------------------------------------------------------------------------
  // --- audit log (Settings → Audit log, admins only) --------------------------------------------------
  'GET /settings/audit': {
    why: 'a redirect only',
    cases: () =>
      from(
        {
          anonymous: redirect('/settings/audit/', 301),
          bKey: redirect('/settings/audit/', 301),
          bAdmin: redirect('/settings/audit/', 301),
        },
        { url: '/settings/audit' },
      ),
  },
  'GET /settings/audit/': {
    why: "B's admin reads B's entries only, whatever the filter; members get 403",
    cases: (w) =>
      [
        '/settings/audit/',
        `/settings/audit/?account=${w.a.account.id}&account_id=${w.a.account.id}`,
        `/settings/audit/?actor=${encodeURIComponent(w.aMember.email)}`,
        '/settings/audit/?before=999999999&from=2000-01-01&to=2100-01-01',
      ].flatMap((url, i) =>
        from(
          {
            ...outsiders(false),
            aMember: status(403),
            bOther: status(200),
            bAdmin:
              i === 0
                ? allOf(status(200), contains(w.bAdmin.email, 'login.succeeded'), onlyActorsOfB)
                : status(200),
          },
          { url, headers: echoesOfB(w) },
        ),
      ),
  },
  ...Object.fromEntries(
    (['csv', 'json'] as const).map((format) => [
      `GET /settings/audit/export.${format}`,
      {
        why: "B's admin downloads B's entries only, whatever the filter; members get 403",
        cases: (w: World) =>
          ['', `?account_id=${w.a.account.id}`, `?actor=${encodeURIComponent(w.aAdmin.email)}`].flatMap(
            (query) =>
              from(
                {
                  ...outsiders(false),
                  aMember: status(403),
                  bOther: status(200),
                  bAdmin: allOf(status(200), (res) =>
                    assert.ok(!res.payload.includes(w.a.account.name), "no entry of A's"),
                  ),
                },
                { url: `/settings/audit/export.${format}${query}`, headers: echoesOfB(w) },
              ),
          ),
      } satisfies Entry,
    ]),
  ),
  // --- end audit log ---------------------------------------------------------------------------------
  'GET /settings': {
    why: 'a redirect only',
    cases: () =>
      from(
        {
          anonymous: redirect('/settings/', 301),
          bKey: redirect('/settings/', 301),
          bAdmin: redirect('/settings/', 301),
        },
        { url: '/settings' },
      ),
  },
  'GET /settings/': {
    why: "B's settings list B's keys and users only, whatever the query",
    cases: (w) =>
      [
        '/settings/',
        `/settings/?account=${w.a.account.id}&account_id=${w.a.account.id}`,
        '/settings/?done=revoked',
      ].flatMap((url) =>
        from(
          {
            ...outsiders(false),
            bAdmin: allOf(status(200), contains('<td>beta-ci</td>', 'bob@beta.example')),
          },
          { url },
        ),
      ),
  },
  'POST /settings/keys': {
    why: "admins only; the new key belongs to the creator's account whatever the form names",
    cases: (w) => [
      ...from(
        { ...outsiders(true), aMember: status(403) },
        { url: '/settings/keys', form: { name: 'member-made' } },
      ),
      ...from(
        {
          bAdmin: allOf(redirect('/settings/'), async () => {
            const row = await w.ctx.database.db
              .selectFrom('api_keys')
              .select(['account_id', 'created_by'])
              .where('name', '=', 'beta-made')
              .executeTakeFirstOrThrow()
            assert.equal(row.account_id, w.b.account.id)
            assert.equal(row.created_by, 'bob@beta.example')
          }),
        },
        {
          url: '/settings/keys',
          form: {
            name: 'beta-made',
            account: String(w.a.account.id),
            account_id: String(w.a.account.id),
            accountId: String(w.a.account.id),
          },
        },
      ),
    ],
  },
  'POST /settings/keys/:id/revoke': {
    why: "A's keys cannot be revoked by B (404, like a missing id) nor by A's member (403)",
    cases: (w) => {
      const missing = '/settings/keys/999999999/revoke'
      return [
        ...[w.a.keyId, w.aSecond.keyId].flatMap((id) =>
          from(
            { ...outsiders(true), aMember: status(403) },
            { url: `/settings/keys/${id}/revoke`, form: {} },
          ),
        ),
        ...[`${w.a.keyId}`, `${w.aSecond.keyId}`, `000${w.a.keyId}`].flatMap((id) =>
          from(
            { bAdmin: notFoundLikeMissing(missing, {}) },
            { url: `/settings/keys/${id}/revoke`, form: {} },
          ),
        ),
      ]
    },
  },
  'POST /settings/users': {
    why: "admins only; B cannot take over, reset or move A's users by adding their address",
    cases: (w) => [
      ...from(
        { ...outsiders(true), aMember: status(403) },
        { url: '/settings/users', form: { email: 'member-made@acme.example', role: 'admin' } },
      ),
      // The same address twice in one account is still refused.
      ...from(
        { bAdmin: status(409) },
        { url: '/settings/users', form: { email: w.bOther.email, role: 'admin' } },
      ),
      // Emails are unique per account: B adding an address A uses succeeds like any other (so B
      // learns nothing about A) and makes a separate user in B; A's user stays exactly as it was
      // (the baseline check) and nobody can reserve an address for another account.
      ...[w.aAdmin.email, ` ${w.aMember.email.toUpperCase()} `].flatMap((email) =>
        from(
          {
            bAdmin: allOf(redirect('/settings/'), async () => {
              const rows = await w.ctx.database.db
                .selectFrom('users')
                .select(['account_id', 'must_change_password'])
                .where('email', '=', email.trim().toLowerCase())
                .where('account_id', '=', w.b.account.id)
                .execute()
              assert.deepEqual(rows, [{ account_id: w.b.account.id, must_change_password: 1 }])
              // B's copy goes again, so A's address on B's later pages is not taken for a leak.
              await w.ctx.database.db
                .deleteFrom('users')
                .where('email', '=', email.trim().toLowerCase())
                .where('account_id', '=', w.b.account.id)
                .execute()
            }),
          },
          { url: '/settings/users', form: { email, role: 'admin' } },
        ),
      ),
      ...from(
        {
          bAdmin: allOf(redirect('/settings/'), async () => {
            const row = await w.ctx.database.db
              .selectFrom('users')
              .select('account_id')
              .where('email', '=', 'newbie@beta.example')
              .executeTakeFirstOrThrow()
            assert.equal(row.account_id, w.b.account.id)
          }),
        },
        {
          url: '/settings/users',
          form: { email: 'newbie@beta.example', role: 'member', account_id: String(w.a.account.id) },
        },
      ),
    ],
  },
  'POST /settings/users/:id/role': {
    why: "A's users' roles cannot be changed by B (404, like a missing id) nor by A's member (403)",
    cases: (w) => {
      const missing = '/settings/users/999999999/role'
      return [
        ...from(
          { ...outsiders(true), aMember: status(403) },
          { url: `/settings/users/${w.aMember.id}/role`, form: { role: 'admin' } },
        ),
        ...from(
          { aMember: status(403) },
          { url: `/settings/users/${w.aAdmin.id}/role`, form: { role: 'member' } },
        ),
        ...(
          [
            [w.aMember.id, 'admin'],
            [w.aAdmin.id, 'member'],
          ] as const
        ).flatMap(([id, role]) =>
          from(
            { bAdmin: notFoundLikeMissing(missing, { role }) },
            { url: `/settings/users/${id}/role`, form: { role } },
          ),
        ),
      ]
    },
  },
  'POST /settings/users/:id/password': {
    why: "A's users' passwords cannot be reset by B (404, like a missing id) nor by A's member (403)",
    cases: (w) => {
      const missing = '/settings/users/999999999/password'
      return [
        ...from(
          { ...outsiders(true), aMember: status(403) },
          { url: `/settings/users/${w.aAdmin.id}/password`, form: {} },
        ),
        ...[w.aMember.id, w.aAdmin.id].flatMap((id) =>
          from(
            { bAdmin: notFoundLikeMissing(missing, {}) },
            { url: `/settings/users/${id}/password`, form: {} },
          ),
        ),
      ]
    },
  },
  'POST /settings/users/:id/remove': {
    why: "A's users cannot be removed by B (404, like a missing id) nor by A's member (403)",
    cases: (w) => {
      const missing = '/settings/users/999999999/remove'
      return [
        ...from(
          { ...outsiders(true), aMember: status(403) },
          { url: `/settings/users/${w.aAdmin.id}/remove`, form: {} },
        ),
        ...[w.aMember.id, w.aAdmin.id].flatMap((id) =>
          from(
            { bAdmin: notFoundLikeMissing(missing, {}) },
            { url: `/settings/users/${id}/remove`, form: {} },
          ),
        ),
      ]
    },
  },
}

// ---- rules for the routes Fastify and plugins add ------------------------------------------------

const STATIC_REASON = 'public: @fastify/static files, the same bytes for everyone'

type Plan = { kind: 'explicit' | 'head-twin' | 'method-not-allowed' | 'static'; why: string; cases: Case[] }

const routeKey = (r: { method: string; url: string }) => `${r.method} ${r.url}`

/** The cases for one registered route, or why it has none (then the coverage test fails). */
function planFor(w: World, route: RegisteredRoute, explicitPaths: Set<string>): Plan | string {
  const key = routeKey(route)
  const entry = MATRIX[key]
  if (entry) return { kind: 'explicit', why: entry.why, cases: entry.cases(w) }
  if (route.methodNotAllowed) {
    // The shared 405 answer (src/http/problem.ts); it must belong to a path the matrix knows, and
    // is called here, so a real handler flagged this way would fail the 405 expectation.
    if (!explicitPaths.has(route.url)) return `${key}: 405 route of a path with no matrix entry`
    const expect = route.method === 'OPTIONS' ? status(204) : status(405)
    return {
      kind: 'method-not-allowed',
      why: 'wrong method: 405 (or 204 for OPTIONS) before any authentication, for everyone',
      cases: from({ anonymous: expect, bKey: expect, bAdmin: expect, aMember: expect }, { url: route.url }),
    }
  }
  if (route.staticFile !== undefined && route.url.startsWith('/static/')) {
    return {
      kind: 'static',
      why: STATIC_REASON,
      cases: from({ anonymous: status(200), bKey: status(200), bAdmin: status(200) }, { url: route.url }),
    }
  }
  const get = MATRIX[`GET ${route.url}`]
  if (route.method === 'HEAD' && get) {
    return {
      kind: 'head-twin',
      why: `HEAD twin of GET ${route.url}: same status, no body`,
      cases: get.cases(w),
    }
  }
  return `${key}: no isolation case in the matrix`
}

test('every registered method and URL has an isolation case, and every case a route', async (t) => {
  const { w, routes } = await world()
  assert.ok(routes.length > 20, `the onRoute hook saw the routes (${routes.length})`)
  const registered = new Set(routes.map(routeKey))
  const explicitPaths = new Set(Object.keys(MATRIX).map((k) => k.slice(k.indexOf(' ') + 1)))
  const missing = routes.map((r) => planFor(w, r, explicitPaths)).filter((p) => typeof p === 'string')
  assert.deepEqual(missing, [], 'add an entry to MATRIX in test/ui/isolation-matrix.test.ts')
  const stale = Object.keys(MATRIX).filter((k) => !registered.has(k))
  assert.deepEqual(stale, [], 'matrix entries for routes that no longer exist')
  for (const r of routes) assert.ok(METHODS.includes(r.method), `known method ${r.method}`)
  t.diagnostic(
    `${registered.size} registered method+URL pairs, ${Object.keys(MATRIX).length} explicit entries`,
  )
})

test("every route as B's admin, A's member, anonymous and B's key: refused or confined to B", async (t) => {
  const { w, routes } = await world()
  const explicitPaths = new Set(Object.keys(MATRIX).map((k) => k.slice(k.indexOf(' ') + 1)))
  // Session-ending cases last, so no other case runs with a session that has just ended.
  const ordered = [...routes].sort(
    (x, y) =>
      Number(x.url === '/logout' && x.method === 'POST') - Number(y.url === '/logout' && y.method === 'POST'),
  )
  let caseCount = 0
  const kinds = new Map<string, number>()
  for (const route of ordered) {
    const plan = planFor(w, route, explicitPaths)
    if (typeof plan === 'string') continue // reported by the coverage test
    kinds.set(plan.kind, (kinds.get(plan.kind) ?? 0) + 1)
    await t.test(`${routeKey(route)} — ${plan.why}`, async () => {
      for (const c of plan.cases) {
        const label = `${route.method} ${c.url} as ${c.as}`
        assert.ok(!requestText(c).includes(HIDDEN), `${label}: the request itself holds no hidden marker`)
        if (plan.kind === 'head-twin') {
          const get = await send(w, 'GET', c)
          const head = await send(w, 'HEAD', c)
          assert.equal(head.statusCode, get.statusCode, `${label}: same status as GET`)
          // (Only a GET's address is kept as ?next= for after the login, hence the path alone.)
          const path = (r: Response) => String(r.headers.location ?? '').split('?')[0]
          assert.equal(path(head), path(get), `${label}: same redirect as GET`)
          assert.equal(head.payload, '', `${label}: no body`)
          assertNothingOfA(w, c, head)
          caseCount++
          continue
        }
        const res = await send(w, route.method, c)
        try {
          await c.expect(res, w)
          assertNothingOfA(w, c, res)
          if (plan.kind === 'method-not-allowed') assert.ok(res.headers.allow, 'names the allowed methods')
          if (plan.kind === 'static' && route.method === 'GET' && route.staticFile !== undefined) {
            const file = readFileSync(new URL(`../../public${route.staticFile}`, import.meta.url))
            assert.deepEqual(res.rawPayload, file, 'the file itself, nothing else')
          }
        } catch (err) {
          ;(err as Error).message = `${label}: ${(err as Error).message}`
          throw err
        }
        caseCount++
      }
      assert.deepEqual(
        await snapshotOfA(w),
        w.baseline,
        "A's accounts, users, keys, events and sessions unchanged",
      )
    })
  }
  t.diagnostic(
    `routes: ${routes.length} method+URL pairs (${[...kinds].map(([k, n]) => `${n} ${k}`).join(', ')})`,
  )
  t.diagnostic(`cases: ${caseCount} requests`)
})

test("afterwards A's keys still record, A's users still log in with their password and read A's log", async () => {
  const { w } = await world()
  for (const key of [w.a.key, w.aSecond.key]) {
    const res = await deploy(w.ctx.app, key, {
      service: 'acme-after',
      environment: 'prod',
      version: '1',
      status: 'Deployed',
    })
    assert.equal(res.status, 201, "A's key is still valid")
  }
  const member = w.sessions.aMember.browser
  const log = await member.get('/logs/?service=acme-only')
  assert.equal(log.statusCode, 200, "A's member is still logged in")
  assert.ok(
    shownVersions(log.payload).some((v) => v.startsWith('acme-')),
    "A's member sees A's events",
  )
  const alice = await login(w.ctx.app, w.aAdmin.email, A_PASSWORD)
  const settings = await alice.get('/settings/')
  assert.equal(settings.statusCode, 200)
  assert.match(settings.payload, /acme-secret-pipeline/)
  assert.doesNotMatch(settings.payload, /beta-made|newbie@beta/, "B's own changes stayed in B")
})
