// The board and a service page in real Chromium at 1280 and 390 px: versions, status labels, the
// drift mark and the ?at= notice are shown; at 390 px nothing needs sideways scrolling.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { Page } from 'playwright-core'
import {
  BROWSER_TEST_TIMEOUT_MS,
  browserSkip,
  createKeyInSettings,
  launchBrowser,
  openPage,
  recordEvent,
  saveScreenshot,
  setUpFirstAdmin,
  startShiplog,
} from '../support/browser.js'

const HOSTILE = 'a/b 100% <i>x</i> ✓'

async function noSidewaysScroll(page: Page, what: string): Promise<void> {
  // A string, so the test needs no DOM types: it runs in the page.
  const { scroll, client } = (await page.evaluate(
    '({ scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth })',
  )) as { scroll: number; client: number }
  assert.ok(scroll <= client, `${what}: page is ${scroll}px wide in a ${client}px window`)
}

test('the board and a service page at 1280 and 390 px', {
  timeout: BROWSER_TEST_TIMEOUT_MS,
  skip: browserSkip(),
}, async (t) => {
  const [server, browser] = await Promise.all([startShiplog(t), launchBrowser(t)])
  const base = server.url
  const { page, watch } = await openPage(browser, { viewport: { width: 1280, height: 900 } })
  await setUpFirstAdmin(page, base, {
    team: 'Board Inc',
    email: 'ada@board.example',
    password: 'correct horse battery',
  })
  const key = await createKeyInSettings(page, 'ci')
  const send = (service: string, environment: string, version: string, status: string) =>
    recordEvent(base, key, 'deploy', { service, environment, version, status, deployer: 'ada' })
  const first = await send('api', 'staging', '1.0.0', 'Deployed')
  await send('api', 'prod', '1.0.0', 'Deployed')
  await send('api', 'dev', '1.1.0', 'Deployed')
  await send('api', 'prod', '1.1.0', 'Deploying')
  await send('web', 'prod', '2.0.0', 'Deployed')
  await send('web', 'prod', '2.1.0-very-long-version-name-to-wrap', 'Failed')
  await send(HOSTILE, 'prod', '9.9.9', 'Deployed')

  await page.goto(`${base}/`)
  await page.waitForURL(`${base}/services/`)
  const board = page.locator('table.board')
  await board.waitFor()
  assert.deepEqual(await board.locator('thead th').allTextContents(), ['Service', 'dev', 'staging', 'prod'])
  const apiRow = board.locator('tbody tr', { has: page.getByRole('link', { name: 'api', exact: true }) })
  assert.match(
    (await apiRow.locator('td[data-environment="prod"]').textContent()) ?? '',
    /1\.0\.0[\s\S]*In progress[\s\S]*1\.1\.0/,
  )
  const staging = apiRow.locator('td[data-environment="staging"]')
  assert.match((await staging.textContent()) ?? '', /≠ dev/)
  assert.equal(
    await staging.locator('.drift').getAttribute('title'),
    'Differs from dev, which runs 1.1.0: waiting to be promoted',
  )
  const webProd = board.locator('tbody tr', { has: page.getByRole('link', { name: 'web', exact: true }) })
  assert.match((await webProd.textContent()) ?? '', /Failed/)
  // Relative times with the exact time on hover.
  const since = apiRow.locator('td[data-environment="dev"] time[data-relative]')
  assert.match((await since.textContent()) ?? '', /ago|just now/)
  assert.match((await since.getAttribute('title')) ?? '', /UTC\)$/)
  await saveScreenshot(page, 'board-1280')

  // ?at= the first event: the notice, and only what ran then.
  await page.goto(`${base}/services/?at=${encodeURIComponent(first.received_at)}`)
  await page.getByText('Showing the board as it was at').waitFor()
  assert.equal(await page.locator('table.board tbody tr').count(), 1)
  await page.getByRole('link', { name: 'Back to now' }).click()
  await page.waitForURL(`${base}/services/`)

  // The hostile name links to its page.
  await page.getByRole('link', { name: HOSTILE }).first().click()
  await page.locator('h1.service-name').waitFor()
  assert.equal(await page.locator('h1.service-name').textContent(), HOSTILE)
  await page.goto(`${base}/services/api/`)
  await page.locator('h1.service-name').waitFor()
  assert.match((await page.locator('table.deployments').first().textContent()) ?? '', /1\.1\.0/)
  await saveScreenshot(page, 'service-1280')

  // A phone: cards, no sideways scrolling, filters folded with the active ones named.
  const phone = await openPage(browser, {
    viewport: { width: 390, height: 844 },
    isMobile: true,
    hasTouch: true,
  })
  await phone.context.addCookies(await page.context().cookies())
  await phone.page.goto(`${base}/services/?name=a`)
  await phone.page.locator('table.board').waitFor()
  // The table shows as one card per service: the header row is off screen, cells stack.
  const head = await phone.page.locator('table.board thead').boundingBox()
  assert.ok(head && head.height <= 1, `the header row is only for screen readers: ${JSON.stringify(head)}`)
  const cards = phone.page.locator('table.board tbody tr')
  assert.equal(await cards.count(), 2)
  const box = await cards.first().boundingBox()
  assert.ok(box && box.x >= 0 && box.x + box.width <= 390, `a card fits the width: ${JSON.stringify(box)}`)
  const apiCard = cards.filter({ hasText: 'api' }).first()
  const prodLine = apiCard.locator('td[data-environment="prod"]')
  assert.match((await prodLine.textContent()) ?? '', /1\.0\.0[\s\S]*In progress/)
  // The environment names its line (drawn from data-environment by the stylesheet).
  type Styles = { getComputedStyle(el: unknown, pseudo: string): { content: string } }
  const label = await prodLine.evaluate(
    (el) => (globalThis as unknown as Styles).getComputedStyle(el, '::before').content,
  )
  assert.equal(label, '"prod"')
  assert.equal(await phone.page.locator('details.filter-box').getAttribute('open'), null)
  assert.match((await phone.page.locator('.filter-summary').textContent()) ?? '', /name contains “a”/)
  await noSidewaysScroll(phone.page, 'board at 390 px')
  await saveScreenshot(phone.page, 'board-390')
  await phone.page.goto(`${base}/services/api/`)
  await phone.page.locator('h1.service-name').waitFor()
  await noSidewaysScroll(phone.page, 'service page at 390 px')
  await saveScreenshot(phone.page, 'service-390')
  await phone.page.goto(`${base}/services/`)
  await noSidewaysScroll(phone.page, 'whole board at 390 px')
  await saveScreenshot(phone.page, 'board-390-all')
  assert.deepEqual([...watch.errors, ...phone.watch.errors], [])
})
