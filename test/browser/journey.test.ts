// Proves a new user's whole path in a real browser: set-up, API key (copy, shown once), logs, filters, downloads, revoke, logout.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import {
  BROWSER_TEST_TIMEOUT_MS,
  browserSkip,
  cookieValue,
  createKeyInSettings,
  downloadVia,
  type EventInput,
  type IngestForm,
  launchBrowser,
  logOut,
  openPage,
  parseCsv,
  pathOf,
  readLogRows,
  recordEvent,
  type StoredEvent,
  sendEvent,
  setUpFirstAdmin,
  startShiplog,
  submitLogin,
} from '../support/browser.js'

const CSV_HEADER =
  'id,received_at,service,environment,version,status,url,commit,description,deployer,source,api_key_name'

test('a new user sets up Shiplog, records events with a key, reads, filters and downloads them, revokes the key and logs out', {
  timeout: BROWSER_TEST_TIMEOUT_MS,
  skip: browserSkip(),
}, async (t) => {
  const [server, browser] = await Promise.all([startShiplog(t), launchBrowser(t)])
  const base = server.url
  const { context, page, watch } = await openPage(browser)
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base })

  // First visit: no user yet, so / leads to the set-up form; creating the account logs in.
  await setUpFirstAdmin(page, base, {
    team: 'Acme Platform',
    email: 'ada@acme.example',
    password: 'correct horse battery',
  })
  assert.equal(await page.getByRole('heading', { level: 1 }).textContent(), 'Settings')
  await page.getByRole('button', { name: 'Log out' }).waitFor()

  // The key is shown once; its Copy button puts exactly that text on the clipboard.
  const key = await createKeyInSettings(page, 'ci')
  assert.match(key, /^shl_[0-9A-Za-z]{32,}$/)
  await page.getByRole('button', { name: 'Copy', exact: true }).click()
  await page.getByText('Copied to the clipboard.').waitFor()
  const copied = await page.evaluate('navigator.clipboard.readText()')
  assert.equal(copied, key)

  // Loaded again, Settings lists the key by its prefix only.
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Settings' }).click()
  await page.waitForURL(`${base}/settings/`)
  const settingsHtml = await page.content()
  assert.ok(!settingsHtml.includes(key), 'the full key must not appear on Settings again')
  assert.equal(await page.locator('code#new-key').count(), 0)
  const keyRow = page.locator('tr', { has: page.getByRole('cell', { name: 'ci', exact: true }) })
  const prefix = ((await keyRow.locator('td.mono').textContent()) ?? '').replace('…', '').trim()
  assert.ok(prefix.length >= 6 && key.startsWith(prefix), `prefix "${prefix}" should begin the key`)
  assert.ok(prefix.length < key.length)

  // Events arrive over HTTP through all three request forms.
  const sends: [IngestForm, EventInput][] = [
    ['put-get', { service: 'My App', environment: 'Staging', version: '1.0.0', status: 'Deploying' }],
    ['put-post', { service: 'My App', environment: 'Staging', version: '1.0.0', status: 'Deployed' }],
    ['deploy', { service: 'billing', environment: 'Prod', version: '2.3.1', status: 'Failed' }],
    [
      'deploy',
      {
        service: 'My App',
        environment: 'Prod',
        version: '1.0.0',
        status: 'deployed',
        description: 'Weekly release',
        commit: '4d0r98wa1234567890',
      },
    ],
    ['put-get', { service: 'billing', environment: 'Prod', version: '2.3.2', status: 'DEPLOYED' }],
  ]
  const stored: StoredEvent[] = []
  for (const [form, event] of sends) stored.push(await recordEvent(base, key, form, event))
  assert.deepEqual(
    stored.map((e) => e.status),
    ['Deploying', 'Deployed', 'Failed', 'Deployed', 'Deployed'],
  )
  for (let i = 1; i < stored.length; i++) {
    assert.ok((stored[i]?.id ?? 0) > (stored[i - 1]?.id ?? 0), 'ids increase in arrival order')
  }
  const newestFirst = [...stored].reverse()

  // The log, reached through the navigation, shows every event newest first.
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Logs' }).click()
  await page.waitForURL(`${base}/logs/`)
  const rows = await readLogRows(page)
  assert.deepEqual(
    rows.map((r) => [r.service, r.environment, r.version, r.status, r.source, r.apiKey]),
    newestFirst.map((e) => [e.service, e.environment, e.version, e.status, e.source, 'ci']),
  )
  assert.deepEqual(
    rows.map((r) => r.datetime),
    newestFirst.map((e) => e.received_at),
  )
  assert.deepEqual(
    rows.map((r) => r.source),
    ['put-get', 'deploy', 'deploy', 'put-post', 'put-get'],
  )
  assert.match(rows[1]?.details ?? '', /Weekly release/)
  assert.match(rows[1]?.details ?? '', /4d0r98wa1234/)

  // Filtering with the form: the query string carries the filter, the table only matching rows.
  await page.getByLabel('Service').fill('My App')
  await page.getByRole('button', { name: 'Filter' }).click()
  await page.waitForURL((url) => url.searchParams.get('service') === 'My App')
  const byService = await readLogRows(page)
  assert.deepEqual(
    byService.map((r) => r.datetime),
    newestFirst.filter((e) => e.service === 'My App').map((e) => e.received_at),
  )
  assert.equal(byService.length, 3)
  assert.equal(await page.getByLabel('Service').inputValue(), 'My App', 'the form keeps the filter')

  await page.getByLabel('Status').selectOption('Deployed')
  await page.getByRole('button', { name: 'Filter' }).click()
  await page.waitForURL((url) => url.searchParams.get('status') === 'Deployed')
  const query = new URL(page.url()).searchParams
  assert.equal(query.get('service'), 'My App')
  assert.equal(query.get('status'), 'Deployed')
  const matching = newestFirst.filter((e) => e.service === 'My App' && e.status === 'Deployed')
  const filtered = await readLogRows(page)
  assert.deepEqual(
    filtered.map((r) => [r.datetime, r.service, r.status]),
    matching.map((e) => [e.received_at, 'My App', 'Deployed']),
  )
  assert.equal(filtered.length, 2)

  // Both downloads hold exactly the filtered events.
  const csv = await downloadVia(page, 'Download CSV')
  assert.match(csv.filename, /^shiplog-events-[^/\\]+\.csv$/)
  const csvLines = csv.text.split(/\r?\n/)
  assert.equal(csvLines[0], CSV_HEADER)
  const csvRows = parseCsv(csv.text).slice(1)
  assert.deepEqual(
    csvRows.map((r) => Number(r[0])),
    matching.map((e) => e.id),
  )
  for (const r of csvRows) {
    assert.equal(r.length, 12)
    assert.equal(r[2], 'My App')
    assert.equal(r[5], 'Deployed')
    assert.equal(r[11], 'ci')
  }

  const json = await downloadVia(page, 'Download JSON')
  assert.match(json.filename, /^shiplog-events-[^/\\]+\.json$/)
  const parsed: unknown = JSON.parse(json.text)
  assert.ok(Array.isArray(parsed), 'the JSON download is an array')
  const objects = parsed as Record<string, unknown>[]
  assert.deepEqual(
    objects.map((o) => o.id),
    matching.map((e) => e.id),
  )
  for (const o of objects) assert.deepEqual(Object.keys(o), CSV_HEADER.split(','))

  // A filter on status alone works too.
  await page.goto(`${base}/logs/`)
  await page.getByLabel('Status').selectOption('Failed')
  await page.getByRole('button', { name: 'Filter' }).click()
  await page.waitForURL((url) => url.searchParams.get('status') === 'Failed')
  assert.deepEqual(
    (await readLogRows(page)).map((r) => [r.service, r.status]),
    [['billing', 'Failed']],
  )

  // Revoking the key (after confirming) refuses it at once.
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Settings' }).click()
  await page.waitForURL(`${base}/settings/`)
  await page.getByText('Revoke…', { exact: true }).click()
  await page.getByRole('button', { name: 'Revoke ci' }).click()
  await page.waitForURL(`${base}/settings/`)
  await page.getByText('The key is revoked').waitFor()
  assert.equal(await page.locator('.badge.revoked').count(), 1)
  const refused = await sendEvent(base, key, 'deploy', {
    service: 'My App',
    environment: 'Prod',
    version: '1.0.1',
    status: 'Deployed',
  })
  await refused.arrayBuffer()
  assert.equal(refused.status, 401)

  // Logging out ends the session in the browser and on the server.
  const session = await cookieValue(context, base, 'shiplog_session')
  const before = await fetch(`${base}/logs/`, {
    headers: { cookie: `shiplog_session=${session}` },
    redirect: 'manual',
  })
  await before.arrayBuffer()
  assert.equal(before.status, 200, 'the captured cookie opens /logs/ while the session lives')

  await logOut(page, base)
  await page.goto(`${base}/logs/`)
  assert.match(pathOf(page), /^\/login(\?|$)/)
  await page.getByRole('button', { name: 'Log in' }).waitFor()

  const replay = await fetch(`${base}/logs/`, {
    headers: { cookie: `shiplog_session=${session}` },
    redirect: 'manual',
  })
  await replay.arrayBuffer()
  assert.ok(replay.status >= 300 && replay.status < 400, `expected a redirect, got ${replay.status}`)
  assert.match(replay.headers.get('location') ?? '', /^\/login(\?|$)/)

  // Logging in again from there leads back to the page that asked for it, with a new session.
  await submitLogin(page, base, 'ada@acme.example', 'correct horse battery')
  await page.waitForURL(`${base}/logs/`)
  assert.notEqual(await cookieValue(context, base, 'shiplog_session'), session)

  assert.deepEqual(watch.errors, [])
})
