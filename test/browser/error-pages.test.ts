// Proves a logged-in person can log out from the UI's error pages (expired form, invalid export filter) too.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { Page } from 'playwright-core'
import {
  BROWSER_TEST_TIMEOUT_MS,
  browserSkip,
  launchBrowser,
  openPage,
  pathOf,
  setUpFirstAdmin,
  startShiplog,
  submitLogin,
} from '../support/browser.js'

const ADMIN = { team: 'Oops Ltd', email: 'ops@oops.example', password: 'correct horse battery' }

/** Clicks Log out on the current page and checks the session really ended. */
async function logOutHere(page: Page, base: string, where: string): Promise<void> {
  const token = await page.locator('form[action="/logout"] input[name="_csrf"]').getAttribute('value')
  assert.ok(token, `${where}: the Log out form carries a CSRF token`)
  await page.getByRole('button', { name: 'Log out' }).click()
  await page.waitForLoadState('load')
  assert.equal(pathOf(page), '/login?bye=1', `${where}: Log out leads to the login page`)
  await page.goto(`${base}/logs/`)
  assert.match(pathOf(page), /^\/login(\?|$)/, `${where}: the session is over`)
}

test('Log out works from the error pages a logged-in person can meet', {
  timeout: BROWSER_TEST_TIMEOUT_MS,
  skip: browserSkip(),
}, async (t) => {
  const [server, browser] = await Promise.all([startShiplog(t), launchBrowser(t)])
  const base = server.url
  const { context, page } = await openPage(browser)
  await setUpFirstAdmin(page, base, ADMIN)

  // A form whose CSRF secret is gone (e.g. the browser was restarted) is refused with a page…
  await context.clearCookies({ name: 'shiplog_csrf' })
  await page.getByLabel('Name for a new key').fill('ci')
  await page.getByRole('button', { name: 'Create API key' }).click()
  await page.getByRole('heading', { name: 'This form has expired' }).waitFor()
  // …which still offers the navigation and Log out, and logging out from it works.
  await logOutHere(page, base, 'the expired-form page')

  // An export link with a broken filter (typed or edited by hand) shows an error page.
  await submitLogin(page, base, ADMIN.email, ADMIN.password)
  await page.waitForURL(`${base}/logs/`)
  const response = await page.goto(`${base}/logs/export.csv?from=not-a-time`)
  assert.equal(response?.status(), 422)
  await page.getByRole('heading', { name: 'Invalid filter' }).waitFor()
  await logOutHere(page, base, 'the invalid-filter page')
})
