// Where people look for a deployment's particulars (issue 28, point 7): the service page and the
// insights list show its commit, CI link and description; log rows link to their service page;
// the webhook delivery log names the service, environment and version. Hostile values stay text,
// and only http(s) addresses become links.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { createWebhook } from '../../src/domain/webhooks/queries.js'
import { servicePath } from '../../src/views/board-page.js'
import { escapeHtml } from '../../src/views/html.js'
import { buildTestApp, TEST_SECRET } from '../helper.js'
import { insertEvents, userSession } from '../support/ui.js'

const HOSTILE_SERVICE = `<b>bill/ing</b> 100% "q'`
const HOSTILE_DESCRIPTION = `<script>alert("x")</script> & more`
const DAY = Date.UTC(2026, 9, 2, 12)

/** The row of a table that holds the given marker text (escaped as the page escapes it). */
function rowWith(page: string, marker: string): string {
  const at = page.indexOf(escapeHtml(marker))
  assert.ok(at !== -1, `no ${marker} in the page`)
  const start = page.lastIndexOf('<tr', at)
  return page.slice(start, page.indexOf('</tr>', at))
}

async function seed(t: Parameters<typeof buildTestApp>[0]) {
  const ctx = await buildTestApp(t)
  const acct = ctx.tenant.account.id
  await insertEvents(ctx.database, acct, [
    {
      service: HOSTILE_SERVICE,
      environment: 'prod',
      version: '1.4.2',
      status: 'Deploying',
      commit_sha: '0123456789abcdef0123456789abcdef01234567',
      description: HOSTILE_DESCRIPTION,
      received_at: DAY,
    },
    {
      service: HOSTILE_SERVICE,
      environment: 'prod',
      version: '1.4.2',
      status: 'Deployed',
      url: 'https://ci.example.com/run/42?a=1&b="2"',
      received_at: DAY + 60_000,
    },
    {
      service: HOSTILE_SERVICE,
      environment: 'prod',
      version: '1.5.0',
      status: 'Failed',
      url: 'javascript:alert(1)',
      commit_sha: 'feedface',
      received_at: DAY + 120_000,
    },
  ])
  const { browser } = await userSession(ctx, acct, 'ada@example.com', 'admin')
  return { ctx, acct, browser }
}

test('the service page shows each deployment’s commit, CI link and description, escaped', async (t) => {
  const { browser } = await seed(t)
  const res = await browser.get(servicePath(HOSTILE_SERVICE))
  assert.equal(res.statusCode, 200)
  assert.match(res.payload, /<th scope="col">Commit, CI and description<\/th>/)
  const ok = rowWith(res.payload, HOSTILE_DESCRIPTION)
  // The commit from the Deploying event, the CI link from the Deployed one: both on one deployment.
  assert.match(ok, /<td class="mono">1\.4\.2<\/td>/)
  assert.match(ok, /title="commit 0123456789abcdef0123456789abcdef01234567">0123456789ab…<\/span>/)
  assert.ok(
    ok.includes(
      `<a href="${escapeHtml('https://ci.example.com/run/42?a=1&b="2"')}" rel="noopener noreferrer nofollow"`,
    ),
  )
  assert.ok(!res.payload.includes('<script>alert'), 'the description is text, not markup')
  // A javascript: address is shown as text, never a link.
  const failed = rowWith(res.payload, 'feedface')
  assert.match(failed, /1\.5\.0/)
  assert.doesNotMatch(failed, /href="javascript:/i)
  assert.match(failed, /javascript:alert\(1\)/)
})

test('the insights list of a figure shows the commit, CI link and description of each row', async (t) => {
  const { browser } = await seed(t)
  const window = 'environment=prod&range=custom&from=2026-10-01&to=2026-10-08&tz=UTC'
  const succeeded = await browser.get(`/insights/deployments?${window}&kind=succeeded`)
  assert.equal(succeeded.statusCode, 200)
  const row = rowWith(succeeded.payload, HOSTILE_DESCRIPTION)
  assert.match(row, /<td class="details">/)
  assert.match(row, /0123456789ab…/)
  assert.match(row, /href="https:\/\/ci\.example\.com\/run\/42\?a=1&amp;b=&quot;2&quot;"/)
  assert.ok(!succeeded.payload.includes('<script>alert'))
  const failed = await browser.get(`/insights/deployments?${window}&kind=failed`)
  const frow = rowWith(failed.payload, 'feedface')
  assert.doesNotMatch(frow, /href="javascript:/i)
})

test('a log row links to its service page, the name encoded as one path segment', async (t) => {
  const { browser } = await seed(t)
  const res = await browser.get('/logs/')
  assert.equal(res.statusCode, 200)
  const href = servicePath(HOSTILE_SERVICE)
  assert.equal(href, "/services/%3Cb%3Ebill%2Fing%3C%2Fb%3E%20100%25%20%22q'/")
  assert.ok(
    res.payload.includes(`<td><a href="${escapeHtml(href)}">${escapeHtml(HOSTILE_SERVICE)}</a></td>`),
    'the service cell links to its page',
  )
  const page = await browser.get(href)
  assert.equal(page.statusCode, 200)
})

test('the webhook delivery log names the service, environment and version of each delivery', async (t) => {
  const { ctx, acct, browser } = await seed(t)
  const { webhook: hook } = await createWebhook(
    ctx.database.db,
    TEST_SECRET,
    {
      accountId: acct,
      url: 'https://hooks.example.com/x',
      format: 'json',
      statuses: ['Deployed'],
      outcomes: [],
      environments: [],
      services: [],
      grafanaToken: null,
      createdBy: 'test',
    },
    { allowPrivate: true },
  )
  const events = await ctx.database.db.selectFrom('events').select(['id', 'status']).orderBy('id').execute()
  const last = events.at(-1)
  assert.ok(last)
  const base = {
    webhook_id: hook.id,
    account_id: acct,
    deployment_id: null,
    state: 'succeeded' as const,
    next_attempt_at: Date.now(),
    lease_until: null,
    last_status: 200,
    last_error: null,
    response_head: null,
    latency_ms: 12,
    remote_id: null,
    created_at: Date.now(),
    first_attempt_at: Date.now(),
    last_attempt_at: Date.now(),
    finished_at: Date.now(),
  }
  await ctx.database.db
    .insertInto('webhook_deliveries')
    .values([
      { ...base, event_id: last.id, kind: 'outcome', delivery_id: 'd-1' },
      // An event retention removed: the number stays, said plainly.
      { ...base, event_id: 999_999, kind: 'status', delivery_id: 'd-2' },
    ])
    .execute()
  const res = await browser.get(`/settings/webhooks/${hook.id}/`)
  assert.equal(res.statusCode, 200)
  assert.ok(
    res.payload.includes(
      `${escapeHtml(HOSTILE_SERVICE)} · prod · <span class="mono">1.5.0</span></span>\n    <span class="hint">#${last.id} deployment ended: Failed</span>`,
    ),
    res.payload,
  )
  assert.ok(!res.payload.includes('<b>bill'), 'the service name is text')
  assert.match(res.payload, /#999999 <span class="hint">status \(event no longer kept\)<\/span>/)
})
