// CSV for every spreadsheet (issue 25): every text cell quoted, whatever the locale's separator, and a UTF-8 byte-order mark for Excel on request.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { parse } from 'csv-parse/sync'
import { buildTestApp } from '../helper.js'
import { assertNoFormulaInAnyLocale, localeCells } from '../support/csv-locale.js'
import {
  type Browser,
  deploy,
  linkHref,
  parseCsv,
  textOfId,
  unescapeHtml,
  userSession,
} from '../support/ui.js'

const REVIEW_KEY_NAME = "x;=cmd|' /C calc'!A0"
const BOM = Buffer.from([0xef, 0xbb, 0xbf])

/** Creates a key through Settings, as an admin does, and returns it. */
async function createKey(browser: Browser, name: string): Promise<string> {
  const created = await browser.submit('/settings/', '/settings/keys', { name })
  assert.equal(created.statusCode, 303)
  const page = await browser.get('/settings/')
  const key = textOfId(page.payload, 'new-key')
  assert.ok(key, 'the new key is shown once')
  return unescapeHtml(key).trim()
}

test("the review's key name is one quoted cell in the events CSV and the audit CSV, in a ; locale too", async (t) => {
  const ctx = await buildTestApp(t)
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'ada@example.com', 'admin')
  const key = await createKey(browser, REVIEW_KEY_NAME)
  const recorded = await deploy(ctx.app, key, {
    service: 'web',
    environment: 'prod',
    version: '1.0',
    status: 'deployed',
  })
  assert.equal(recorded.status, 201, JSON.stringify(recorded.body))

  const csv = await browser.get('/logs/export.csv')
  assert.equal(csv.statusCode, 200)
  const line = csv.payload.split('\r\n')[1] ?? ''
  assert.ok(line.endsWith(`,"deploy","${REVIEW_KEY_NAME}"`), line)
  assert.equal(line.split(',')[0], String(recorded.body.id), 'the id, a number, stays bare')
  for (const cell of localeCells(line, ';')) assert.doesNotMatch(cell, /^[=+\-@]/, `; locale cell ${cell}`)
  assert.equal(parseCsv(csv.payload)[1]?.at(-1), REVIEW_KEY_NAME, 'a comma-locale reader reads the name back')
  assertNoFormulaInAnyLocale(csv.payload)

  const audit = await browser.get('/settings/audit/export.csv?action=key.created')
  assert.equal(audit.statusCode, 200)
  const rows = parse(audit.payload, { record_delimiter: '\r\n' }) as string[][]
  assert.deepEqual(rows[0], ['id', 'time', 'actor_kind', 'actor', 'address', 'action', 'target', 'details'])
  assert.equal(rows.length, 2)
  const auditLine = audit.payload.split('\r\n')[1] ?? ''
  // Every cell but the id between quotes, so no `;` of a value is outside quotes.
  assert.match(auditLine, /^\d+,"[^"]*","[^"]*","[^"]*",/, auditLine)
  assert.ok(auditLine.includes(REVIEW_KEY_NAME))
  for (const cell of localeCells(auditLine, ';'))
    assert.doesNotMatch(cell, /^[=+\-@]/, `; locale cell ${cell}`)
})

test('?bom=1 starts the CSV with a UTF-8 byte-order mark that csv-parse reads with bom: true; without it none', async (t) => {
  const ctx = await buildTestApp(t)
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'ada@example.com', 'admin')
  for (const version of ['1.0 é', '2.0 日本', '=3']) {
    const res = await deploy(ctx.app, ctx.tenant.key, {
      service: 'web',
      environment: 'prod',
      version,
      status: 'deployed',
    })
    assert.equal(res.status, 201)
  }
  for (const base of ['/logs/export.csv?service=web', '/settings/audit/export.csv?action=key.created']) {
    const plain = await browser.get(base)
    const marked = await browser.get(`${base}&bom=1`)
    const none = await browser.get(`${base}&bom=0`)
    for (const res of [plain, marked, none]) {
      assert.equal(res.statusCode, 200, base)
      assert.match(String(res.headers['content-type']), /^text\/csv; charset=utf-8/)
    }
    const plainBytes = Buffer.from(plain.rawPayload)
    const markedBytes = Buffer.from(marked.rawPayload)
    assert.ok(!plainBytes.subarray(0, 3).equals(BOM), `${base}: no mark unless asked`)
    assert.ok(!Buffer.from(none.rawPayload).subarray(0, 3).equals(BOM), `${base}&bom=0: no mark`)
    assert.ok(markedBytes.subarray(0, 3).equals(BOM), `${base}&bom=1 starts with EF BB BF`)
    // The rest is the same file (the audit log's own download entry aside, whose time differs).
    const strict = parse(markedBytes, { bom: true, record_delimiter: '\r\n' }) as string[][]
    const withoutMark = parse(plainBytes, { record_delimiter: '\r\n' }) as string[][]
    assert.equal(strict[0]?.[0], 'id', 'the first column is "id", not "\\ufeffid"')
    assert.equal(strict.length, withoutMark.length)
    if (base.startsWith('/logs/')) {
      assert.deepEqual(strict, withoutMark)
      assert.deepEqual(
        strict.slice(1).map((r) => r[4]),
        ["'=3", '2.0 日本', '1.0 é'],
      )
    }
  }
  // JSON never carries one (RFC 8259 §8.1): the parameter is the CSV's.
  const json = await browser.get('/logs/export.json?bom=1')
  assert.equal(json.statusCode, 200)
  assert.equal(json.payload.charAt(0), '[')
})

test('bom is checked like every parameter: another value, or twice, is the 422 that names it (page and download)', async (t) => {
  const ctx = await buildTestApp(t)
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'ada@example.com', 'admin')
  for (const path of ['/logs/export.csv', '/settings/audit/export.csv']) {
    for (const query of ['bom=yes', 'bom=2', 'bom=1&bom=1', 'bom=true']) {
      const res = await browser.get(`${path}?${query}`)
      assert.equal(res.statusCode, 422, `${path}?${query}`)
      assert.match(String(res.headers['content-type']), /^application\/problem\+json/)
      const body = res.json() as { errors: { field: string }[] }
      assert.deepEqual(
        body.errors.map((e) => e.field),
        ['bom'],
        `${path}?${query}`,
      )
      const page = await browser.get(`${path}?${query}`, { accept: 'text/html' })
      assert.equal(page.statusCode, 422)
      assert.match(page.payload, /bom must be 1|bom may be given once/)
    }
  }
  for (const path of ['/logs/', '/settings/audit/']) {
    const res = await browser.get(`${path}?bom=maybe`)
    assert.equal(res.statusCode, 422, path)
    assert.match(res.payload, /bom must be 1/)
  }
})

test('the "CSV for Excel" box works without JavaScript: a GET form back to the page, whose Download CSV then has bom=1', async (t) => {
  const ctx = await buildTestApp(t)
  const { browser } = await userSession(ctx, ctx.tenant.account.id, 'ada@example.com', 'admin')
  await deploy(ctx.app, ctx.tenant.key, {
    service: 'web',
    environment: 'prod',
    version: '1',
    status: 'deployed',
  })
  for (const [page, query] of [
    ['/logs/', 'service=web&status=Deployed'],
    ['/settings/audit/', 'action=key.created'],
  ] as const) {
    const before = await browser.get(`${page}?${query}`)
    assert.equal(before.statusCode, 200)
    const form = /<form method="get" action="([^"]*)" class="bom-choice"[^>]*>([\s\S]*?)<\/form>/.exec(
      before.payload,
    )
    assert.ok(form, `${page}: the box's form`)
    assert.equal(form[1], page, 'the form returns to the page')
    const fields = new URLSearchParams()
    for (const [, name, value] of (form[2] ?? '').matchAll(
      /<input type="hidden" name="([^"]*)" value="([^"]*)">/g,
    )) {
      fields.append(unescapeHtml(name ?? ''), unescapeHtml(value ?? ''))
    }
    assert.match(form[2] ?? '', /<input type="checkbox" id="csv-bom" name="bom" value="1"\s+data-bom-toggle>/)
    assert.match(form[2] ?? '', /<label for="csv-bom">/)
    const plainHref = linkHref(before.payload, 'Download CSV') ?? ''
    assert.equal(new URL(plainHref, 'http://x').searchParams.get('bom'), null)
    // Ticking the box and submitting, as a browser without script does.
    fields.append('bom', '1')
    const after = await browser.get(`${page}?${fields.toString()}`)
    assert.equal(after.statusCode, 200)
    assert.match(after.payload, /name="bom" value="1"\s+checked/, 'the box stays ticked')
    const href = new URL(linkHref(after.payload, 'Download CSV') ?? '', 'http://x')
    assert.equal(href.searchParams.get('bom'), '1')
    for (const [name, value] of new URLSearchParams(query)) {
      assert.equal(href.searchParams.get(name), value, `${page}: the filter ${name} is kept`)
    }
    const download = await browser.get(`${href.pathname}${href.search}`)
    assert.equal(download.statusCode, 200)
    assert.ok(Buffer.from(download.rawPayload).subarray(0, 3).equals(BOM))
    const json = new URL(linkHref(after.payload, 'Download JSON') ?? '', 'http://x')
    assert.equal(json.searchParams.get('bom'), null, 'the JSON link has no bom')
  }
})
