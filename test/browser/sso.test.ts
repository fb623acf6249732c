// Single sign-on end to end in Chromium: the real `shiplog serve` and a real OpenID Connect provider, on both databases.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { freshDatabaseUrl } from '../helper.js'
import {
  BROWSER_TEST_TIMEOUT_MS,
  browserSkip,
  launchBrowser,
  openPage,
  pathOf,
  saveScreenshot,
  setUpFirstAdmin,
} from '../support/browser.js'
import { startTestProvider } from '../support/oidc-provider.js'
import { freePort, startServer } from '../support/processes.js'

test('a person signs in with the provider in Chromium, lands on the log, and logs out at the provider too; a refused one sees why', {
  timeout: BROWSER_TEST_TIMEOUT_MS,
  skip: browserSkip(),
}, async (t) => {
  // Shiplog's address must be known before the provider registers it as the redirect URI.
  const port = await freePort()
  const base = `http://127.0.0.1:${port}`
  const provider = await startTestProvider(t, { shiplogUrl: base })
  provider.person('ada', { email: 'ada@acme.example', email_verified: true, groups: ['shiplog-admins'] })
  provider.person('eve', { email: 'eve@acme.example', email_verified: false })
  const [server, browser] = await Promise.all([
    (async () => startServer(t, { databaseUrl: await freshDatabaseUrl(t), port, env: provider.env }))(),
    launchBrowser(t),
  ])
  assert.equal(server.url, base)

  const owner = await openPage(browser)
  await setUpFirstAdmin(owner.page, base, {
    team: 'Acme',
    email: 'owner@acme.example',
    password: 'owner passphrase',
  })

  const { page } = await openPage(browser)
  // The provider's development pages load fonts from the internet: only Shiplog's own pages count.
  const shiplogErrors: string[] = []
  const watchShiplog = (p: typeof page) => {
    p.on('console', (m) => {
      if (m.type() === 'error' && m.location().url.startsWith(base)) shiplogErrors.push(m.text())
    })
    p.on('pageerror', (err) => {
      if (p.url().startsWith(base)) shiplogErrors.push(err.message)
    })
  }
  watchShiplog(page)
  await page.goto(`${base}/login?next=%2Fsettings%2F`)
  await page.getByRole('link', { name: 'Sign in with Test IdP' }).click()
  // The provider's own (development) login form.
  await page.waitForURL((url) => url.origin === provider.issuer)
  await page.locator('input[name="login"]').fill('ada')
  await page.locator('input[name="password"]').fill('anything')
  await page.getByRole('button', { name: 'Sign-in' }).click()
  await page.waitForURL(`${base}/settings/`)
  await page.getByText('ada@acme.example').first().waitFor()
  await page.getByRole('heading', { name: 'Sign-in' }).waitFor()
  await saveScreenshot(page, 'sso-signed-in')
  // An admin by the provider's group: the Sign-in section offers turning passwords off.
  await page.getByRole('button', { name: 'Turn password login off' }).click()
  await page.getByText('Password login is off: users of Acme now sign in with Test IdP.').waitFor()

  // The owner's password no longer opens Acme: refused like a wrong one (no oracle), with words
  // that say what to do.
  const other = await openPage(browser)
  await other.page.goto(`${base}/login`)
  await other.page.getByLabel('Email').fill('owner@acme.example')
  await other.page.getByLabel('Password').fill('owner passphrase')
  await other.page.getByRole('button', { name: 'Log in', exact: true }).click()
  await other.page
    .getByText('If password login is turned off for your team, use "Sign in with Test IdP" below.')
    .waitFor()
  assert.equal(pathOf(other.page), '/login')

  // Logging out ends Shiplog's session and the provider's (its confirmation page), then comes back.
  await page.getByRole('button', { name: 'Log out' }).click()
  await page.getByRole('heading', { name: 'You are logged out of Shiplog' }).waitFor()
  await page.getByRole('link', { name: 'Sign out of Test IdP too' }).click()
  await page.waitForURL((url) => url.origin === provider.issuer)
  await page.locator('button[autofocus], button[type="submit"]').first().click()
  await page.waitForURL(`${base}/login?bye=1`)
  await page.goto(`${base}/logs/`)
  await page.waitForURL(/\/login\?next=/)

  // An unverified address is refused with a page saying why, readable on a phone.
  const phone = await openPage(browser, { viewport: { width: 390, height: 800 } })
  watchShiplog(phone.page)
  await phone.page.goto(`${base}/login`)
  await phone.page.getByRole('link', { name: 'Sign in with Test IdP' }).click()
  await phone.page.waitForURL((url) => url.origin === provider.issuer)
  await phone.page.locator('input[name="login"]').fill('eve')
  await phone.page.locator('input[name="password"]').fill('anything')
  await phone.page.getByRole('button', { name: 'Sign-in' }).click()
  await phone.page.getByRole('heading', { name: 'Your email address is not verified' }).waitFor()
  await phone.page.getByText('Nobody was signed in.').waitFor()
  const overflow = await phone.page.evaluate<number>(
    'document.documentElement.scrollWidth - window.innerWidth',
  )
  assert.ok(overflow <= 0, `the refusal page fits 390 px (overflow ${overflow}px)`)
  await saveScreenshot(phone.page, 'sso-refused-phone')
  const cookies = await phone.context.cookies(base)
  assert.ok(!cookies.some((c) => c.name === 'shiplog_session'), 'no session cookie after a refusal')

  // The refusal page itself answers 403, which Chromium reports as a failed load: nothing else may.
  assert.deepEqual(
    shiplogErrors.filter((e) => !/status of 403 \(Forbidden\)/.test(e)),
    [],
  )
  assert.equal(shiplogErrors.length, 1, 'only the refusal page answered 403')
})
