// Insights over a window the data covers only part of (issue 28, point 11): on the first days of
// use, or when retention keeps 3 days, deployment frequency divides by the days that hold data, and
// the page and /api/v1/metrics say how many of the window's days that is.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { DAY_MS } from '../../src/domain/deployments/metrics.js'
import { buildTestApp } from '../helper.js'
import { type EventSeed, insertEvents, unescapeHtml, userSession } from '../support/ui.js'

/** Six deployments that succeeded, one an hour from `start`. */
function sixFrom(start: number): EventSeed[] {
  return Array.from({ length: 6 }, (_, i) => ({
    service: 'api',
    environment: 'prod',
    version: `1.${i}`,
    status: 'Deployed' as const,
    received_at: start + i * 3_600_000,
  }))
}

function textOfId(page: string, id: string): string {
  const start = page.indexOf(`id="${id}"`)
  assert.ok(start !== -1, `the page has #${id}`)
  const tag = /^<(\w+)/.exec(page.slice(page.lastIndexOf('<', start)))?.[1] ?? 'p'
  const body = page.slice(start, page.indexOf(`</${tag}>`, start)).replace(/^[^>]*>/, '')
  return unescapeHtml(body.replace(/<[^>]+>/g, ' '))
    .replace(/\s+/g, ' ')
    .trim()
}

test('three days of data in a 30-day window: frequency over 3 days, and the page says so', async (t) => {
  const ctx = await buildTestApp(t)
  const acct = ctx.tenant.account.id
  // The first event early on the day before yesterday (UTC): the page's calendar days are today and
  // the two before it. The API's days are 24-hour slices back from now, so the event must also lie
  // more than two days before now: an hour into that day, or less when the test runs in the first
  // hour after midnight (when an hour in fell into the API's last two slices and it counted 2).
  const now = Date.now()
  const today = Math.floor(now / DAY_MS) * DAY_MS
  const first = today - 2 * DAY_MS + Math.min(3_600_000, Math.floor((now - today) / 2))
  await insertEvents(ctx.database, acct, sixFrom(first))
  const { browser } = await userSession(ctx, acct, 'ada@example.com', 'member')
  const res = await browser.get('/insights/?environment=prod&range=30&tz=UTC')
  assert.equal(res.statusCode, 200)
  assert.match(
    textOfId(res.payload, 'coverage'),
    /^Data covers 3 of 30 days \(since .+\): deployment frequency divides by the 3 days with data/,
  )
  assert.equal(
    textOfId(res.payload, 'figure-frequency'),
    'Deployment frequency 2.00 / day 6 succeeded ÷ 3 days with data = 2.00 / day Over the whole window: 6 ÷ 30 days = 0.20 / day',
  )

  // The API: the same division, with the span it covers.
  const api = await browser.get('/api/v1/metrics?environment=prod')
  assert.equal(api.statusCode, 200)
  const body = api.json()
  assert.equal(body.deployments_succeeded, 6)
  assert.equal(body.days_in_window, 30)
  assert.equal(body.days_covered, 3)
  // SPEC §6.2's figure stays the contract's (÷ the window's days); the covered-day one sits beside it.
  assert.equal(body.deployment_frequency_per_day, 6 / 30)
  assert.equal(body.deployment_frequency_per_covered_day, 2)
  assert.equal(body.covered_from, new Date(first).toISOString())
  assert.equal(body.covered_to, body.to)
})

test('retention keeping 3 days: the data starts at its cut-off, not at an older kept event', async (t) => {
  const ctx = await buildTestApp(t)
  const acct = ctx.tenant.account.id
  const now = Date.now()
  // An old event retention kept (the running deployment of a cell), then six in the last day.
  await insertEvents(ctx.database, acct, [
    {
      service: 'web',
      environment: 'prod',
      version: '0.1',
      status: 'Deployed',
      received_at: now - 20 * DAY_MS,
    },
    ...sixFrom(now - DAY_MS + 60_000),
  ])
  await ctx.database.db.updateTable('accounts').set({ retention_days: 3 }).where('id', '=', acct).execute()
  const { browser } = await userSession(ctx, acct, 'ada@example.com', 'member')
  const body = (await browser.get('/api/v1/metrics?environment=prod')).json()
  assert.equal(body.deployments_succeeded, 7)
  assert.equal(body.days_covered, 3)
  assert.equal(body.deployment_frequency_per_day, 7 / 30)
  assert.equal(body.deployment_frequency_per_covered_day, 7 / 3)
  const page = await browser.get('/insights/?environment=prod&range=30&tz=UTC')
  assert.match(textOfId(page.payload, 'coverage'), /^Data covers [34] of 30 days/)
})

test('a window the data covers whole says nothing more, and divides by all its days', async (t) => {
  const ctx = await buildTestApp(t)
  const acct = ctx.tenant.account.id
  await insertEvents(ctx.database, acct, sixFrom(Date.UTC(2026, 9, 1, 10)))
  await insertEvents(ctx.database, acct, [
    {
      service: 'api',
      environment: 'prod',
      version: 'x',
      status: 'Deployed',
      received_at: Date.UTC(2026, 8, 1),
    },
  ])
  const { browser } = await userSession(ctx, acct, 'ada@example.com', 'member')
  const page = await browser.get(
    '/insights/?environment=prod&range=custom&from=2026-10-01&to=2026-10-08&tz=UTC',
  )
  assert.equal(page.statusCode, 200)
  assert.ok(!page.payload.includes('id="coverage"'))
  assert.equal(
    textOfId(page.payload, 'figure-frequency'),
    'Deployment frequency 0.86 / day 6 succeeded ÷ 7 days = 0.86 / day',
  )
  const body = (await browser.get('/api/v1/metrics?environment=prod&from=2026-10-01&to=2026-10-08')).json()
  assert.equal(body.days_covered, 7)
  assert.equal(body.days_in_window, 7)
  assert.equal(body.deployment_frequency_per_day, 6 / 7)
  assert.equal(body.deployment_frequency_per_covered_day, 6 / 7)

  // A window before any data: nothing covered, frequency 0, and the page says why.
  const before = (await browser.get('/api/v1/metrics?environment=prod&from=2026-01-01&to=2026-01-08')).json()
  assert.equal(before.days_covered, 0)
  assert.equal(before.covered_from, null)
  assert.equal(before.deployment_frequency_per_day, 0)
  assert.equal(before.deployment_frequency_per_covered_day, 0)
})
