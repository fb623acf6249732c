// The board's "As it was at" picker in real Chromium (issue 28, point 8): a date-time field read in
// the viewer's zone (Asia/Tokyo here, UTC+9 all year), a refused time said beside the field with the
// board still shown, a time before any data said plainly, and without scripts a time read as UTC,
// as the label says. At 1280 and 390 px, with nothing to scroll sideways on a phone.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
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
  submitLogin,
} from '../support/browser.js'

const ADMIN = { team: 'Picker Inc', email: 'ada@picker.example', password: 'correct horse battery' }

/** `2026-11-27T21:05:09`: an instant's wall-clock time at a fixed offset, as a datetime-local holds it. */
function wallAt(ms: number, offsetHours: number): string {
  return new Date(ms + offsetHours * 3_600_000).toISOString().slice(0, 19)
}

/** The versions the board shows for api, by environment. */
async function apiProd(page: Page): Promise<string | null> {
  return page.locator('table.board tr[data-service="api"] td[data-environment="prod"] .version').textContent()
}

async function noSidewaysScroll(page: Page, what: string): Promise<void> {
  const { scroll, client } = (await page.evaluate(
    '({ scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth })',
  )) as { scroll: number; client: number }
  assert.ok(scroll <= client, `${what}: page is ${scroll}px wide in a ${client}px window`)
}

test('"As it was at" is a date-time picker in the viewer\'s zone; errors beside it, the board still shown', {
  timeout: BROWSER_TEST_TIMEOUT_MS,
  skip: browserSkip(),
}, async (t) => {
  const [server, browser] = await Promise.all([startShiplog(t), launchBrowser(t)])
  const base = server.url
  const tokyo = await openPage(browser, {
    timezoneId: 'Asia/Tokyo',
    locale: 'en-GB',
    viewport: { width: 1280, height: 900 },
  })
  const { page } = tokyo
  await setUpFirstAdmin(page, base, ADMIN)
  const key = await createKeyInSettings(page, 'ci')
  const send = (version: string) =>
    recordEvent(base, key, 'deploy', { service: 'api', environment: 'prod', version, status: 'Deployed' })
  const first = await send('1.0')
  await sleep(1200)
  // A whole second between 1.0 and 1.1: the board then showed 1.0.
  const then = Math.ceil(Date.parse(first.received_at) / 1000) * 1000 + 1000
  while (Date.now() < then + 1100) await sleep(100)
  await send('1.1')

  await page.goto(`${base}/services/`)
  const field = page.getByLabel(/As it was at/)
  assert.equal(await field.getAttribute('type'), 'datetime-local')
  assert.equal(await page.locator('label[for="f-at"] [data-zone-label]').textContent(), '(Asia/Tokyo)')
  assert.equal(await apiProd(page), '1.1')

  // Tokyo's wall-clock time of that second, picked as a person there would: the board then.
  await field.fill(wallAt(then, 9))
  await page.getByRole('button', { name: 'Filter' }).click()
  await page.getByText('Showing the board as it was at').waitFor()
  assert.match(new URL(page.url()).search, /tz=Asia%2FTokyo/)
  assert.equal(await apiProd(page), '1.0')
  // The field keeps the time as picked; the cells count back from it ("1 s ago", not minutes).
  assert.equal(await page.getByLabel(/As it was at/).inputValue(), wallAt(then, 9))
  assert.match(
    (await page.locator('tr[data-service="api"] td[data-environment="prod"] time').textContent()) ?? '',
    /^\d s ago$/,
  )
  await saveScreenshot(page, 'small-board-1280')

  // A time in the future: said beside the field, and the board as it is now is still there.
  await page.getByLabel(/As it was at/).fill(wallAt(Date.now() + 86_400_000, 9))
  await page.getByRole('button', { name: 'Filter' }).click()
  await page.locator('#f-at-error').waitFor()
  assert.match((await page.locator('#f-at-error').textContent()) ?? '', /in the future/)
  assert.equal(await page.getByLabel(/As it was at/).getAttribute('aria-invalid'), 'true')
  assert.equal(await apiProd(page), '1.1')
  await saveScreenshot(page, 'small-board-error-1280')

  // A day before anything was recorded: said plainly, with when the first deployment started.
  await page.getByLabel(/As it was at/).fill(wallAt(Date.now() - 86_400_000, 9))
  await page.getByRole('button', { name: 'Filter' }).click()
  await page.getByText('Nothing had been deployed yet at that time.').waitFor()
  await page.getByRole('link', { name: 'Show the board as it was then' }).click()
  await page.getByText('Showing the board as it was at').waitFor()
  assert.equal(await apiProd(page), '1.0')
  // The refused time's page came with its 422, which Chromium reports; nothing else went wrong.
  assert.deepEqual(
    tokyo.watch.errors.filter((e) => !/status of 422/.test(e)),
    [],
  )

  // A phone: the picker (the filter box opened) fits, nothing scrolls sideways.
  const phone = await openPage(browser, {
    timezoneId: 'Asia/Tokyo',
    viewport: { width: 390, height: 844 },
    isMobile: true,
    hasTouch: true,
  })
  await phone.context.addCookies(await page.context().cookies())
  await phone.page.goto(`${base}/services/?at=${encodeURIComponent(wallAt(then, 9))}&tz=Asia%2FTokyo`)
  await phone.page.locator('.filter-summary').click()
  await phone.page.getByLabel(/As it was at/).waitFor()
  const box = await phone.page.getByLabel(/As it was at/).boundingBox()
  assert.ok(box && box.x >= 0 && box.x + box.width <= 390, `the picker fits: ${JSON.stringify(box)}`)
  await noSidewaysScroll(phone.page, 'board with the picker at 390 px')
  await saveScreenshot(phone.page, 'small-board-390')
  assert.deepEqual(phone.watch.errors, [])

  // Without scripts the server cannot know the zone: the label says UTC, and so it is read.
  const plain = await openPage(browser, { timezoneId: 'Asia/Tokyo', javaScriptEnabled: false })
  await submitLogin(plain.page, base, ADMIN.email, ADMIN.password)
  await plain.page.waitForURL(`${base}/logs/`)
  await plain.page.goto(`${base}/services/`)
  assert.equal(await plain.page.locator('label[for="f-at"] [data-zone-label]').textContent(), '(UTC)')
  await plain.page.getByLabel(/As it was at/).fill(wallAt(then, 0))
  await plain.page.getByRole('button', { name: 'Filter' }).click()
  await plain.page.getByText('Showing the board as it was at').waitFor()
  assert.equal(await apiProd(plain.page), '1.0')
})
