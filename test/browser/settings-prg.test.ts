// Proves in Chromium that Settings forms are post/redirect/get (reloading repeats nothing, secrets show once) and that Settings fits a 390 px phone.
import assert from 'node:assert/strict'
import { mkdirSync } from 'node:fs'
import { test } from 'node:test'
import type { Page } from 'playwright-core'
import {
  BROWSER_TEST_TIMEOUT_MS,
  browserSkip,
  createKeyInSettings,
  launchBrowser,
  openPage,
  pathOf,
  setUpFirstAdmin,
  startShiplog,
} from '../support/browser.js'

const PHONE = 390
/** Where screenshots go when SHIPLOG_SCREENSHOTS names a directory (to look at the layout). */
const SHOTS = process.env.SHIPLOG_SCREENSHOTS

async function shoot(page: Page, name: string): Promise<void> {
  if (!SHOTS) return
  mkdirSync(SHOTS, { recursive: true })
  await page.screenshot({ path: `${SHOTS}/${name}.png`, fullPage: true })
}

/** Rows of the API key table as the page shows them. */
function keyRows(page: Page) {
  return page.locator('table.keys-table tbody tr')
}

test('Settings forms are post/redirect/get: reloading after creating a key or adding a user repeats nothing and the secret is gone', {
  timeout: BROWSER_TEST_TIMEOUT_MS,
  skip: browserSkip(),
}, async (t) => {
  const [server, browser] = await Promise.all([startShiplog(t), launchBrowser(t)])
  const base = server.url
  const { page, watch } = await openPage(browser, { viewport: { width: 1280, height: 900 } })
  await setUpFirstAdmin(page, base, {
    team: 'Acme',
    email: 'ada@acme.example',
    password: 'correct horse battery',
  })

  const key = await createKeyInSettings(page, 'github-actions')
  assert.match(key, /^shl_/)
  assert.equal(
    pathOf(page),
    '/settings/',
    'the browser was redirected: the page is a GET with nothing in the URL',
  )
  assert.equal(await keyRows(page).count(), 1)
  await shoot(page, 'settings-1280-new-key')
  await page.reload()
  assert.equal(await page.locator('code#new-key').count(), 0, 'the key is not shown after a reload')
  assert.equal(await keyRows(page).count(), 1, 'reloading did not create a second key')
  assert.ok(!(await page.content()).includes(key))

  await page.getByLabel('Email', { exact: true }).fill('mia@acme.example')
  await page.getByRole('button', { name: 'Add user' }).click()
  const oneTime = page.locator('code#new-password')
  await oneTime.waitFor()
  assert.equal(pathOf(page), '/settings/')
  // At the top, above the key section, where it cannot be missed.
  const passwordTop = (await oneTime.boundingBox())?.y ?? Number.POSITIVE_INFINITY
  const keysTop = (await page.locator('#keys-heading').boundingBox())?.y ?? 0
  assert.ok(
    passwordTop < keysTop,
    `the one-time password (y=${passwordTop}) is above the keys (y=${keysTop})`,
  )
  await page.reload()
  assert.equal(await page.locator('code#new-password').count(), 0, 'the password is not shown after a reload')
  assert.equal(
    await page.locator('table.users-table tbody tr').count(),
    2,
    'reloading did not add the user twice',
  )

  // Revoking: a confirmation once, and a reload neither repeats it nor shows it again.
  await page.getByText('Revoke…').click()
  await page.getByRole('button', { name: 'Revoke github-actions' }).click()
  await page.getByText('The key is revoked').waitFor()
  assert.equal(pathOf(page), '/settings/')
  await page.reload()
  assert.equal(await page.getByText('The key is revoked').count(), 0)
  assert.deepEqual(watch.errors, [])
})

test("at 390 px Settings shows each key's name, Last used, Status and Revoke without sideways scrolling", {
  timeout: BROWSER_TEST_TIMEOUT_MS,
  skip: browserSkip(),
}, async (t) => {
  const [server, browser] = await Promise.all([startShiplog(t), launchBrowser(t)])
  const base = server.url
  const { page, watch } = await openPage(browser, { viewport: { width: PHONE, height: 844 }, isMobile: true })
  await setUpFirstAdmin(page, base, {
    team: 'Acme',
    email: 'ada@acme.example',
    password: 'correct horse battery',
  })
  await createKeyInSettings(page, 'a-rather-long-key-name-for-the-production-pipeline')
  await createKeyInSettings(page, 'gitlab')
  await page.getByLabel('Email', { exact: true }).fill('someone.with.a.long.address@acme.example')
  await page.getByRole('button', { name: 'Add user' }).click()
  await page.locator('code#new-password').waitFor()
  await shoot(page, 'settings-390')

  const width = (await page.evaluate('document.documentElement.scrollWidth')) as number
  assert.ok(width <= PHONE, `the page does not scroll sideways (scrollWidth ${width})`)
  const rows = keyRows(page)
  assert.equal(await rows.count(), 2)
  for (let i = 0; i < 2; i++) {
    const row = rows.nth(i)
    const cells = row.locator('td')
    // Name, Last used, Status and the Revoke control: each visible and inside the screen.
    for (const [what, cell] of [
      ['name', cells.nth(0)],
      ['last used', cells.nth(4)],
      ['status', cells.nth(5)],
      ['revoke', row.getByText('Revoke…')],
    ] as const) {
      assert.ok(await cell.isVisible(), `row ${i}: ${what} is visible`)
      const box = await cell.boundingBox()
      assert.ok(
        box && box.x >= 0 && box.x + box.width <= PHONE + 0.5,
        `row ${i}: ${what} is within 0..${PHONE}: ${JSON.stringify(box)}`,
      )
    }
    // Each value carries its label, since the column headings are not shown.
    const label = (await page.evaluate(
      `getComputedStyle(document.querySelectorAll('table.keys-table tbody tr')[${i}].children[4], '::before').content`,
    )) as string
    assert.equal(label, '"Last used"')
  }
  // The table itself no longer needs to scroll inside its wrapper.
  const scrolls = (await page.evaluate(
    `(() => { const w = document.querySelector('.table-wrap'); return w.scrollWidth > w.clientWidth })()`,
  )) as boolean
  assert.equal(scrolls, false, 'the key table fits without scrolling inside its box')
  // The Revoke confirmation opens and its button is on screen too.
  await rows.nth(1).getByText('Revoke…').click()
  const button = page.getByRole('button', { name: 'Revoke gitlab' })
  const box = await button.boundingBox()
  assert.ok(box && box.x + box.width <= PHONE + 0.5, `the Revoke button fits: ${JSON.stringify(box)}`)
  assert.deepEqual(watch.errors, [])
})
