// Proves a member added in Settings logs in with the one-time password (after a mistyped one, the
// cursor waits in the password field), must choose their own without typing the one-time password
// again, then reads without managing keys.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import {
  BROWSER_TEST_TIMEOUT_MS,
  browserSkip,
  createKeyInSettings,
  launchBrowser,
  logOut,
  openPage,
  pathOf,
  readLogRows,
  recordEvent,
  setUpFirstAdmin,
  startShiplog,
  submitLogin,
} from '../support/browser.js'

const MEMBER_EMAIL = 'mia@acme.example'
const MEMBER_PASSWORD = 'mias own passphrase'

test('a member added by the admin changes the one-time password, then reads the log and sees no key management', {
  timeout: BROWSER_TEST_TIMEOUT_MS,
  skip: browserSkip(),
}, async (t) => {
  const [server, browser] = await Promise.all([startShiplog(t), launchBrowser(t)])
  const base = server.url

  // The admin sets up, creates a key, records an event and adds a member.
  const admin = await openPage(browser)
  await setUpFirstAdmin(admin.page, base, {
    team: 'Acme',
    email: 'ada@acme.example',
    password: 'correct horse battery',
  })
  const key = await createKeyInSettings(admin.page, 'ci')
  const event = await recordEvent(base, key, 'deploy', {
    service: 'web',
    environment: 'Prod',
    version: '3.1.4',
    status: 'Deployed',
  })
  await admin.page.goto(`${base}/settings/`)
  await admin.page.getByLabel('Email', { exact: true }).fill(MEMBER_EMAIL)
  assert.equal(await admin.page.getByLabel('Role', { exact: true }).inputValue(), 'member')
  await admin.page.getByRole('button', { name: 'Add user' }).click()
  const shown = admin.page.locator('code#new-password')
  await shown.waitFor()
  const oneTime = ((await shown.textContent()) ?? '').trim()
  assert.match(oneTime, /^[a-z2-9]{5}(-[a-z2-9]{5}){3}$/)
  await admin.page.getByText(`One-time password for ${MEMBER_EMAIL}:`).waitFor()
  const memberRow = admin.page.locator('tr', { has: admin.page.getByRole('cell', { name: MEMBER_EMAIL }) })
  assert.equal(await memberRow.getByLabel(`Role of ${MEMBER_EMAIL}`).inputValue(), 'member')
  assert.deepEqual(admin.watch.errors, [])

  // The member, in their own browser, logs in with it and is sent to choose a password.
  const member = await openPage(browser)
  const { page } = member
  // A mistyped password first: the email stays, and the cursor waits in the password field.
  await submitLogin(page, base, MEMBER_EMAIL, 'not it')
  await page.getByText('That email and password do not match.').waitFor()
  assert.equal(await page.getByLabel('Email').inputValue(), MEMBER_EMAIL)
  assert.equal(await page.evaluate('document.activeElement && document.activeElement.id'), 'password')
  // The refused login's 401, as Chromium reports it; nothing else.
  assert.deepEqual(
    member.watch.errors.splice(0).filter((e) => !/status of 401/.test(e)),
    [],
  )
  await page.keyboard.type(oneTime)
  await page.keyboard.press('Enter')
  await page.waitForURL(`${base}/account/password`)
  await page.getByText('You signed in with a one-time password').waitFor()
  // Nothing else opens until the password is changed.
  await page.goto(`${base}/logs/`)
  assert.equal(pathOf(page), '/account/password')
  await page.goto(`${base}/settings/`)
  assert.equal(pathOf(page), '/account/password')

  // Signing in with it just now proved the one-time password: it is not asked for again, and the
  // cursor starts in the new password.
  await page.goto(`${base}/account/password`)
  assert.equal(await page.getByLabel('Current password').count(), 0)
  assert.equal(await page.evaluate('document.activeElement && document.activeElement.id'), 'password')
  await page.getByLabel('New password', { exact: true }).fill(MEMBER_PASSWORD)
  await page.getByLabel('Repeat the new password').fill(MEMBER_PASSWORD)
  await page.getByRole('button', { name: 'Change password' }).click()
  await page.waitForURL(`${base}/settings/`)
  await page.getByText('Your password is changed').waitFor()
  await page.goto(`${base}/logs/`)

  // The log of the shared account is readable.
  const rows = await readLogRows(page)
  assert.deepEqual(
    rows.map((r) => [r.datetime, r.service, r.environment, r.version, r.status]),
    [[event.received_at, 'web', 'Prod', '3.1.4', 'Deployed']],
  )
  assert.ok(await page.getByRole('link', { name: 'Download CSV' }).isVisible())

  // Settings shows the keys but offers no way to create or revoke them, nor to manage users.
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Settings' }).click()
  await page.waitForURL(`${base}/settings/`)
  await page.getByRole('heading', { name: 'API Keys' }).waitFor()
  await page.getByText('Only admins can create or revoke keys.').waitFor()
  assert.equal(await page.getByRole('cell', { name: 'ci', exact: true }).count(), 1, 'the key is listed')
  assert.equal(await page.getByLabel('Name for a new key').count(), 0)
  assert.equal(await page.getByRole('button', { name: 'Create API key' }).count(), 0)
  assert.equal(await page.locator('form[action="/settings/keys"]').count(), 0)
  assert.equal(await page.getByText('Revoke…').count(), 0)
  assert.equal(await page.getByRole('button', { name: 'Add user' }).count(), 0)
  assert.equal(await page.getByText('Remove…').count(), 0)
  assert.equal(await page.locator('form[action^="/settings/"]').count(), 0, 'no settings forms at all')

  // The one-time password no longer works; the chosen one does.
  await logOut(page, base)
  assert.deepEqual(member.watch.errors, [])
  await submitLogin(page, base, MEMBER_EMAIL, oneTime)
  await page.getByText('That email and password do not match.').waitFor()
  assert.match(pathOf(page), /^\/login/)
  // The refused login is a 401 page, which Chromium notes on its console; nothing else may be there.
  assert.deepEqual(member.watch.errors.splice(0), [
    'console error: Failed to load resource: the server responded with a status of 401 (Unauthorized)',
  ])
  await submitLogin(page, base, MEMBER_EMAIL, MEMBER_PASSWORD)
  await page.waitForURL(`${base}/logs/`)
  assert.deepEqual(member.watch.errors, [])
})
