// Issue 25 §17 and §19 over HTTP: every whole-number parameter refuses the same hostile texts with a
// 422 naming it (forms: refused, nothing changed); POST /get/logs refuses non-string fields; and
// one instant text is accepted or refused alike by the board page, the read API and the log page.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { createApiKey } from '../../src/domain/keys.js'
import { getRetention } from '../../src/domain/operations/retention.js'
import { buildTestApp, type TestApp } from '../helper.js'
import { ACCEPTED_INSTANTS, HOSTILE_WHOLE_NUMBERS, REFUSED_INSTANTS } from '../support/parsing-tables.js'
import {
  type Browser,
  insertEvents,
  linkHref,
  type Response,
  sharedFixture,
  userSession,
} from '../support/ui.js'
import { addWebhook } from '../support/webhooks.js'

const seeded = sharedFixture(async (cleanup) => {
  const ctx = await buildTestApp(cleanup)
  const accountId = ctx.tenant.account.id
  await insertEvents(ctx.database, accountId, [
    {
      service: 'api',
      environment: 'prod',
      version: '1.0',
      status: 'Deploying',
      received_at: Date.UTC(2026, 0, 1),
    },
    {
      service: 'api',
      environment: 'prod',
      version: '1.0',
      status: 'Deployed',
      received_at: Date.UTC(2026, 0, 2),
    },
  ])
  const { key } = await createApiKey(ctx.database.db, {
    accountId,
    name: 'reader',
    createdBy: 'test',
    scopes: ['read'],
  })
  const { browser } = await userSession(ctx, accountId, 'admin@example.com', 'admin')
  const { webhook } = await addWebhook(ctx, { url: 'http://127.0.0.1:9/hook', statuses: ['Deployed'] })
  return { ctx, key, browser, webhookId: Number(webhook.id) }
})

type Check = (value: string) => Promise<Response>

/** Every whole-number query parameter: how to send a value, and how its answer names the field. */
function surfaces(ctx: TestApp, key: string, browser: Browser, webhookId: number) {
  const api = (url: string) => ctx.app.inject({ url, headers: { 'x-api-key': key } })
  const post = (payload: string, type?: string) =>
    ctx.app.inject({
      method: 'POST',
      url: '/get/logs',
      headers: { 'x-api-key': key, ...(type ? { 'content-type': type } : {}) },
      payload,
    })
  const q = encodeURIComponent
  const json: [string, string, Check][] = [
    ['GET /api/v1/events limit', 'limit', (v) => api(`/api/v1/events?limit=${q(v)}`)],
    ['GET /api/v1/deployments limit', 'limit', (v) => api(`/api/v1/deployments?limit=${q(v)}`)],
    ['GET /get/logs limit', 'limit', (v) => api(`/get/logs?app=api&env=prod&limit=${q(v)}`)],
    [
      'POST /get/logs limit (form)',
      'limit',
      (v) => post(`app=api&env=prod&limit=${q(v)}`, 'application/x-www-form-urlencoded'),
    ],
    [
      'POST /get/logs limit (JSON string)',
      'limit',
      (v) => post(JSON.stringify({ app: 'api', env: 'prod', limit: v })),
    ],
    ['GET /api/v1/stream lastEventId', 'lastEventId', (v) => api(`/api/v1/stream?lastEventId=${q(v)}`)],
  ]
  const pages: [string, string, Check][] = [
    ['GET /logs/ limit', 'limit must be', (v) => browser.get(`/logs/?limit=${q(v)}`)],
    ['GET /logs/ before', 'before must be', (v) => browser.get(`/logs/?before=${q(v)}`)],
    ['GET /logs/ after', 'after must be', (v) => browser.get(`/logs/?after=${q(v)}`)],
    ['GET /settings/audit/ before', 'before must be', (v) => browser.get(`/settings/audit/?before=${q(v)}`)],
    [
      'GET /settings/audit/export.csv before',
      'before must be',
      (v) => browser.get(`/settings/audit/export.csv?before=${q(v)}`),
    ],
    [
      'GET /services/api/ before',
      'must be a deployment id',
      (v) => browser.get(`/services/api/?environment=prod&before=${q(v)}`),
    ],
  ]
  // The delivery log's refusal is the 400 "Bad page" it always was; the id in a path is a 404.
  const other: [string, number, Check][] = [
    [
      'GET /settings/webhooks/<id>/ before',
      400,
      (v) => browser.get(`/settings/webhooks/${webhookId}/?before=${q(v)}`),
    ],
    ['GET /settings/webhooks/<id>/', 404, (v) => browser.get(`/settings/webhooks/${q(v)}/`)],
  ]
  return { json, pages, other }
}

test('every whole-number parameter refuses 0x10, 1e1, +5, " 5", 05, 5.0, -0, huge… with a 422 naming it; a plain number is taken', async () => {
  const { ctx, key, browser, webhookId } = await seeded()
  const { json, pages, other } = surfaces(ctx, key, browser, webhookId)
  for (const [what, field, send] of json) {
    for (const value of HOSTILE_WHOLE_NUMBERS) {
      const res = await send(value)
      assert.equal(res.statusCode, 422, `${what} = ${JSON.stringify(value)}: ${res.payload}`)
      const fields = (res.json() as { errors: { field: string }[] }).errors.map((e) => e.field)
      assert.deepEqual(fields, [field], `${what} = ${JSON.stringify(value)}`)
    }
    // The stream would stay open: its good value is covered by the stream's own tests.
    if (field !== 'lastEventId') assert.equal((await send('5')).statusCode, 200, `${what} = 5`)
  }
  for (const [what, message, send] of pages) {
    for (const value of HOSTILE_WHOLE_NUMBERS) {
      const res = await send(value)
      assert.equal(res.statusCode, 422, `${what} = ${JSON.stringify(value)}`)
      assert.ok(res.payload.includes(message), `${what} = ${JSON.stringify(value)} names the parameter`)
    }
    assert.equal((await send('1')).statusCode, 200, `${what} = 1`)
  }
  for (const [what, status, send] of other) {
    for (const value of HOSTILE_WHOLE_NUMBERS) {
      assert.equal((await send(value)).statusCode, status, `${what} = ${JSON.stringify(value)}`)
    }
  }
  assert.equal((await browser.get(`/settings/webhooks/${webhookId}/?before=1`)).statusCode, 200)
  assert.equal((await browser.get(`/settings/webhooks/${webhookId}/`)).statusCode, 200)
})

test('POST /get/logs: a JSON limit must be an integer in range; app and env must be JSON strings, as for /deploy', async () => {
  const { ctx, key } = await seeded()
  const post = (body: Record<string, unknown>) =>
    ctx.app.inject({
      method: 'POST',
      url: '/get/logs',
      headers: { 'x-api-key': key, 'content-type': 'application/json' },
      payload: JSON.stringify(body),
    })
  const fields = async (body: Record<string, unknown>) => {
    const res = await post(body)
    assert.equal(res.statusCode, 422, `${JSON.stringify(body)}: ${res.payload}`)
    return (res.json() as { errors: { field: string; message: string }[] }).errors
  }
  for (const limit of [1.5, 0, -1, 1001, 1e300, true, [5], { n: 5 }]) {
    assert.deepEqual(
      (await fields({ app: 'api', env: 'prod', limit })).map((e) => e.field),
      ['limit'],
      JSON.stringify(limit),
    )
  }
  const ok = await post({ app: 'api', env: 'prod', limit: 1 })
  assert.equal(ok.statusCode, 200, ok.payload)
  assert.equal((ok.json() as { logs: unknown[] }).logs.length, 1)
  for (const bad of [['api'], 123, true, { name: 'api' }]) {
    const errors = await fields({ app: bad, env: bad })
    assert.deepEqual(
      errors.map((e) => e.field),
      ['app', 'env'],
      JSON.stringify(bad),
    )
    for (const e of errors) assert.match(e.message, /must be a (single )?string|must be given once/)
  }
})

test('Settings forms: a stall time or retention written 0x10, 1e1, +5, 05, 5.0… is refused and nothing changes', async () => {
  const { ctx, browser } = await seeded()
  const accountId = ctx.tenant.account.id
  const stall = async () =>
    Number(
      (
        await ctx.database.db
          .selectFrom('accounts')
          .select('stall_minutes')
          .where('id', '=', accountId)
          .executeTakeFirstOrThrow()
      ).stall_minutes,
    )
  const before = { stall: await stall(), retention: await getRetention(ctx.database.db, accountId) }
  // A form's field is trimmed first, like every form field: " 5" is 5 there.
  for (const value of HOSTILE_WHOLE_NUMBERS.filter((v) => v.trim() === v)) {
    const a = await browser.submit('/settings/', '/settings/stall-time', { minutes: value })
    assert.equal(a.statusCode, 422, `stall ${JSON.stringify(value)}`)
    assert.match(a.payload, /whole number/)
    const b = await browser.submit('/settings/', '/settings/retention', { days: value, action: 'days' })
    assert.equal(b.statusCode, 422, `retention ${JSON.stringify(value)}`)
    assert.match(b.payload, /whole number/)
  }
  assert.deepEqual(
    { stall: await stall(), retention: await getRetention(ctx.database.db, accountId) },
    before,
  )
  assert.equal(
    (await browser.submit('/settings/', '/settings/stall-time', { minutes: '16' })).statusCode,
    303,
  )
  assert.equal(await stall(), 16)
})

/** Whether each surface took `text` as an instant, and which instant where the answer shows it. */
async function instantEverywhere(ctx: TestApp, key: string, browser: Browser, text: string) {
  const q = encodeURIComponent(text)
  const api = (url: string) => ctx.app.inject({ url, headers: { 'x-api-key': key } })
  const services = await api(`/api/v1/services?at=${q}`)
  const events = await api(`/api/v1/events?from=${q}`)
  const board = await browser.get(`/services/?at=${q}`)
  const logs = await browser.get(`/logs/?from=${q}`)
  const audit = await browser.get(`/settings/audit/?from=${q}`)
  for (const res of [services, events, board, logs, audit])
    assert.ok([200, 422].includes(res.statusCode), res.payload)
  const csv = linkHref(logs.payload, 'Download CSV')
  return {
    accepted: {
      'api services at': services.statusCode === 200,
      'api events from': events.statusCode === 200,
      'board at': board.statusCode === 200,
      'logs from': logs.statusCode === 200,
      'audit from': audit.statusCode === 200,
    },
    named: {
      'api services at': services.statusCode === 200 ? (services.json() as { at: string }).at : null,
      'board at': /<span>as at <time datetime="([^"]+)"/.exec(board.payload)?.[1] ?? null,
      'logs from': csv === undefined ? null : new URL(csv, 'http://x').searchParams.get('from'),
    },
  }
}

test('one instant grammar: the board, /api/v1/services, /api/v1/events, /logs/ and the audit log accept and refuse the same texts, as the same instant', async () => {
  const { ctx, key, browser } = await seeded()
  const now = Date.now()
  for (const [text, iso] of ACCEPTED_INSTANTS) {
    // The board refuses the future on purpose; every table instant but one is in the past.
    if (Date.parse(iso) > now) continue
    const seen = await instantEverywhere(ctx, key, browser, text)
    assert.deepEqual(
      seen.accepted,
      {
        'api services at': true,
        'api events from': true,
        'board at': true,
        'logs from': true,
        'audit from': true,
      },
      text,
    )
    assert.deepEqual(seen.named, { 'api services at': iso, 'board at': iso, 'logs from': iso }, text)
  }
  // An empty value means "not given" everywhere, and spaces around one are dropped everywhere.
  for (const text of REFUSED_INSTANTS.filter((t) => t !== '' && t.trim() === t)) {
    const seen = await instantEverywhere(ctx, key, browser, text)
    assert.deepEqual(
      seen.accepted,
      {
        'api services at': false,
        'api events from': false,
        'board at': false,
        'logs from': false,
        'audit from': false,
      },
      text,
    )
  }
})
