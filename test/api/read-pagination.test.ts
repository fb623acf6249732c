// /api/v1/events pages through 10,000 events with no loss and no duplicate, by the Link header and
// by next_cursor, with and without a time window (the two orders of the listing), and the Link
// carries the filters along.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { LightMyRequestResponse } from 'fastify'
import { createApiKey } from '../../src/domain/keys.js'
import { buildTestApp, type TestApp } from '../helper.js'
import { insertEvents, SEED_EPOCH, sharedFixture } from '../support/ui.js'

const TOTAL = 10_000

const seeded = sharedFixture(async (cleanup) => {
  const ctx = await buildTestApp(cleanup)
  const other = await ctx.addTenant('Other')
  // Three events share each second, so the (received_at, id) keyset must break ties by id.
  const seeds = Array.from({ length: TOTAL }, (_, i) => ({
    service: i % 2 === 0 ? 'even' : 'odd',
    environment: 'prod',
    version: `v${i}`,
    received_at: SEED_EPOCH + Math.floor(i / 3) * 1000,
  }))
  const ids = await insertEvents(ctx.database, ctx.tenant.account.id, seeds)
  // Another account's events interleave in id order; none may show.
  await insertEvents(ctx.database, other.account.id, seeds.slice(0, 500))
  const { key } = await createApiKey(ctx.database.db, {
    accountId: ctx.tenant.account.id,
    name: 'reader',
    createdBy: 'test',
    scopes: ['read'],
  })
  return { ctx, ids, key }
})

type Page = { events: { id: number; service: string; received_at: string }[]; next_cursor: string | null }

async function walk(ctx: TestApp, key: string, first: string, by: 'link' | 'cursor') {
  const seen: number[] = []
  let url: string | null = first
  let pages = 0
  while (url !== null) {
    const res: LightMyRequestResponse = await ctx.app.inject({
      url,
      headers: { 'x-api-key': key },
    })
    assert.equal(res.statusCode, 200, `${url}: ${res.payload}`)
    const page = res.json() as Page
    pages++
    seen.push(...page.events.map((e) => e.id))
    const link = res.headers.link
    if (page.next_cursor === null) {
      assert.equal(link, undefined, 'no Link on the last page')
      url = null
    } else {
      const match = /^<([^>]+)>; rel="next"$/.exec(String(link))
      assert.ok(match?.[1], `a Link rel="next" while more remain: ${link}`)
      const next = new URL(match[1], 'http://localhost')
      assert.equal(next.searchParams.get('cursor'), page.next_cursor)
      if (by === 'link') url = match[1]
      else {
        const again = new URL(first, 'http://localhost')
        again.searchParams.set('cursor', page.next_cursor)
        url = `${again.pathname}${again.search}`
      }
    }
    assert.ok(pages <= TOTAL, 'the walk ends')
  }
  return { seen, pages }
}

test('10,000 events by Link headers, 1000 a page: every one once, newest first', async () => {
  const { ctx, ids, key } = await seeded()
  const { seen, pages } = await walk(ctx, key, '/api/v1/events?limit=1000', 'link')
  assert.equal(pages, 10)
  assert.equal(seen.length, TOTAL)
  assert.equal(new Set(seen).size, TOTAL, 'no duplicate')
  assert.deepEqual(seen, [...ids].reverse(), 'no loss, newest first')
})

test('by next_cursor, 100 a page (the default), within a time window ordered by time', async () => {
  const { ctx, ids, key } = await seeded()
  // Every event but the first 300 and the last 300 (100 seconds at three a second each).
  const from = new Date(SEED_EPOCH + 100 * 1000).toISOString()
  const to = new Date(SEED_EPOCH + Math.floor((TOTAL - 1) / 3) * 1000 - 99 * 1000).toISOString()
  const { seen, pages } = await walk(ctx, key, `/api/v1/events?from=${from}&to=${to}`, 'cursor')
  const expected = ids.filter((_, i) => i >= 300 && Math.floor(i / 3) < Math.floor((TOTAL - 1) / 3) - 99)
  assert.equal(seen.length, expected.length)
  assert.equal(new Set(seen).size, seen.length, 'no duplicate')
  assert.deepEqual(seen, [...expected].reverse())
  assert.equal(pages, Math.ceil(expected.length / 100))
})

test('the Link carries the filters: a filtered walk stays filtered', async () => {
  const { ctx, ids, key } = await seeded()
  const { seen } = await walk(ctx, key, '/api/v1/events?service=odd&limit=700&unknown=kept', 'link')
  assert.deepEqual(seen, ids.filter((_, i) => i % 2 === 1).reverse())
  const res = await ctx.app.inject({
    url: '/api/v1/events?service=odd&limit=700&status=Deployed',
    headers: { 'x-api-key': key },
  })
  const link = String(res.headers.link)
  assert.match(link, /service=odd/)
  assert.match(link, /limit=700/)
  assert.match(link, /status=Deployed/)
})
