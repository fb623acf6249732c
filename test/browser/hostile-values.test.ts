// Proves hostile event values (markup, attribute breakers, spreadsheet formulas, unicode) show as literal text and export formula-safe.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import {
  BROWSER_TEST_TIMEOUT_MS,
  browserSkip,
  createKeyInSettings,
  downloadVia,
  launchBrowser,
  openPage,
  parseCsv,
  readLogRows,
  recordEvent,
  type StoredEvent,
  setUpFirstAdmin,
  startShiplog,
} from '../support/browser.js'

const SCRIPT = '<script>window.__xss=1</script>'
const ATTRIBUTE = '"><img src=x onerror="window.__xss=1">'
const FORMULA = '=HYPERLINK("http://evil.example","x")'
const UNICODE = 'Déploiement ✓ 部署 🚀'
const HOSTILE = [SCRIPT, ATTRIBUTE, FORMULA, UNICODE]

test('hostile values are shown literally, run no script, and the CSV neutralises formulas', {
  timeout: BROWSER_TEST_TIMEOUT_MS,
  skip: browserSkip(),
}, async (t) => {
  const [server, browser] = await Promise.all([startShiplog(t), launchBrowser(t)])
  const base = server.url
  const { page, watch } = await openPage(browser)
  const dialogs: string[] = []
  page.on('dialog', (dialog) => dialogs.push(dialog.message()))

  await setUpFirstAdmin(page, base, {
    team: 'Hostile Inc',
    email: 'eve@hostile.example',
    password: 'correct horse battery',
  })
  const key = await createKeyInSettings(page, 'ci')

  // Each value takes each of the four text fields once, through all three request forms.
  const stored: StoredEvent[] = []
  const forms = ['deploy', 'put-post', 'put-get', 'deploy'] as const
  for (let i = 0; i < HOSTILE.length; i++) {
    const pick = (shift: number) => HOSTILE[(i + shift) % HOSTILE.length] ?? ''
    stored.push(
      await recordEvent(base, key, forms[i] ?? 'deploy', {
        service: pick(0),
        environment: pick(1),
        version: pick(2),
        status: 'Deployed',
        description: pick(3),
      }),
    )
  }
  for (let i = 0; i < HOSTILE.length; i++) {
    assert.equal(stored[i]?.service, HOSTILE[i], 'stored verbatim')
  }

  await page.goto(`${base}/logs/`)
  await page.waitForLoadState('load')
  const rows = await readLogRows(page)
  assert.equal(rows.length, HOSTILE.length)
  const newestFirst = [...stored].reverse()
  for (let r = 0; r < rows.length; r++) {
    const i = HOSTILE.length - 1 - r
    const pick = (shift: number) => HOSTILE[(i + shift) % HOSTILE.length] ?? ''
    const row = rows[r]
    assert.equal(row?.datetime, newestFirst[r]?.received_at)
    assert.equal(row?.service, pick(0))
    assert.equal(row?.environment, pick(1))
    assert.equal(row?.version, pick(2))
    assert.equal(row?.details, pick(3))
  }

  // No markup from the values became elements, and nothing ran.
  assert.equal(await page.locator('main img').count(), 0, 'no <img> from an event value')
  assert.equal(await page.locator('main script').count(), 0, 'no <script> from an event value')
  assert.equal(await page.locator('[onerror]').count(), 0)
  assert.equal(await page.evaluate('typeof window.__xss'), 'undefined')
  for (const value of HOSTILE) {
    assert.equal(await page.getByRole('cell', { name: value, exact: true }).count(), 4, value)
  }

  // The filter form puts a hostile value back into its input as plain text, also without effect.
  await page.getByLabel('Service').fill(ATTRIBUTE)
  await page.getByRole('button', { name: 'Filter' }).click()
  await page.waitForURL((url) => url.searchParams.get('service') === ATTRIBUTE)
  assert.equal(await page.getByLabel('Service').inputValue(), ATTRIBUTE)
  assert.deepEqual(
    (await readLogRows(page)).map((r) => r.service),
    [ATTRIBUTE],
  )
  assert.equal(await page.locator('main img').count(), 0)
  assert.equal(await page.evaluate('typeof window.__xss'), 'undefined')

  // The CSV keeps every value, with the formula cells made text by a leading quote.
  await page.goto(`${base}/logs/`)
  const csv = await downloadVia(page, 'Download CSV')
  const records = parseCsv(csv.text).slice(1)
  assert.equal(records.length, HOSTILE.length)
  const byId = new Map(records.map((r) => [Number(r[0]), r]))
  for (let i = 0; i < stored.length; i++) {
    const pick = (shift: number) => HOSTILE[(i + shift) % HOSTILE.length] ?? ''
    const expectCell = (value: string) => (value === FORMULA ? `'${FORMULA}` : value)
    const record = byId.get(stored[i]?.id ?? -1)
    assert.ok(record, `event ${stored[i]?.id} is in the CSV`)
    assert.equal(record[2], expectCell(pick(0)), 'service')
    assert.equal(record[3], expectCell(pick(1)), 'environment')
    assert.equal(record[4], expectCell(pick(2)), 'version')
    assert.equal(record[8], expectCell(pick(3)), 'description')
  }
  assert.ok(csv.text.includes(`"'=HYPERLINK(""http://evil.example"",""x"")"`), 'RFC 4180 quoting')
  assert.ok(!/(^|,)=HYPERLINK/m.test(csv.text), 'no cell starts with =')

  // The JSON keeps the raw values (it is data, not a spreadsheet).
  const json = await downloadVia(page, 'Download JSON')
  const parsed = JSON.parse(json.text) as Record<string, unknown>[]
  assert.deepEqual(parsed.map((o) => o.service).sort(), [...HOSTILE].sort())

  assert.deepEqual(dialogs, [], 'no dialog opened')
  assert.deepEqual(watch.errors, [])
})
