// One behaviour for the service and environment filters (issue 28 point 6): whole names, letter case
// ignored, on /logs/, its exports and /api/v1/events alike; a name that matches nothing gets a
// "did you mean" hint on the page, with links, instead of a bare empty list.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { suggestNames } from '../../src/domain/events/name-hints.js'
import { buildTestApp } from '../helper.js'
import { insertEvents, parseCsv, unescapeHtml, userSession } from '../support/ui.js'

function hintLinks(page: string): string[] {
  const block = /<div class="panel name-hints"[^>]*>([\s\S]*?)<\/div>/.exec(page)?.[1] ?? ''
  return [...block.matchAll(/<a href="([^"]*)">([^<]*)<\/a>/g)].map(
    (m) => `${unescapeHtml(m[2] ?? '')} ${unescapeHtml(m[1] ?? '')}`,
  )
}

test('a service filter matches whole names everywhere, and a name that matches nothing gets suggestions', async (t) => {
  const ctx = await buildTestApp(t)
  const acct = ctx.tenant.account.id
  await insertEvents(ctx.database, acct, [
    { service: 'billing', environment: 'prod', version: '1' },
    { service: 'billing-api', environment: 'prod', version: '2' },
    { service: 'api', environment: 'prod', version: '3' },
    { service: 'Billing', environment: 'staging', version: '4' },
  ])
  const { browser } = await userSession(ctx, acct, 'a@example.com', 'admin')

  const bill = await browser.get('/logs/?service=bill')
  assert.equal(bill.statusCode, 200)
  assert.match(bill.payload, /No service is named <b>bill<\/b>/)
  assert.deepEqual(hintLinks(bill.payload), [
    'billing /logs/?service=billing',
    'billing-api /logs/?service=billing-api',
  ])
  // A slip of a key: the near name is offered.
  assert.deepEqual(hintLinks((await browser.get('/logs/?service=biling&status=Deployed')).payload), [
    'billing /logs/?service=billing&status=Deployed',
  ])
  assert.deepEqual(hintLinks((await browser.get('/logs/?environment=prd')).payload), [
    'prod /logs/?environment=prod',
  ])

  // A name that exists: exactly it (any letter case), no hint; the export and the API agree.
  const exact = await browser.get('/logs/?service=BILLING')
  assert.doesNotMatch(exact.payload, /name-hints/)
  const csv = parseCsv((await browser.get('/logs/export.csv?service=BILLING')).payload)
  assert.deepEqual(
    csv
      .slice(1)
      .map((r) => r[2])
      .sort(),
    ['Billing', 'billing'],
  )
  const api = (await browser.get('/api/v1/events?service=BILLING')).json().events as { service: string }[]
  assert.deepEqual(api.map((e) => e.service).sort(), ['Billing', 'billing'])
  // The name that matches nothing lists nothing in all three.
  assert.equal(parseCsv((await browser.get('/logs/export.csv?service=bill')).payload).length, 1)
  assert.deepEqual((await browser.get('/api/v1/events?service=bill')).json().events, [])
})

test('suggestions: names containing the text first, then near misses, at most five', () => {
  const names = ['billing', 'billing-api', 'api', 'web', 'bil', 'payments']
  assert.deepEqual(suggestNames('bill', names), ['billing', 'billing-api', 'bil'])
  assert.deepEqual(suggestNames('paymnets', names), ['payments'])
  assert.deepEqual(suggestNames('zzz', names), [])
  assert.equal(suggestNames('a', ['a1', 'a2', 'a3', 'a4', 'a5', 'a6']).length, 5)
})
