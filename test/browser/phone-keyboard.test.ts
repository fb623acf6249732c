// Proves /logs/ and Settings are usable on a 390 px phone (/logs/ as cards with the key facts in view, filters folded;
// Settings' tables and snippets scroll on their own) and /logs/ by keyboard (skip link, then the nav).
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
  setUpFirstAdmin,
  startShiplog,
} from '../support/browser.js'

const WIDTH = 390
const HEIGHT = 800

interface Overflow {
  viewport: number
  documentScrollWidth: number
  bodyScrollWidth: number
  /** Elements outside any .table-wrap whose right edge passes the viewport. */
  outside: string[]
  /** Whether the table inside its wrapper is wider than the wrapper (it should scroll there). */
  tableScrolls: boolean
  wrapperRight: number
}

/**
 * Measures sideways overflow in the page (plain JavaScript: the test's TypeScript has no DOM types).
 * Elements inside `scrollers` (boxes meant to scroll sideways on their own) are not counted.
 */
async function measureOverflow(page: Page, scrollers: string): Promise<Overflow> {
  const script = `(() => {
    const scrollers = ${JSON.stringify(scrollers)}
    const viewport = document.documentElement.clientWidth
    const outside = []
    for (const el of document.body.querySelectorAll('*')) {
      const scroller = el.closest(scrollers)
      if (scroller && scroller !== el) continue
      const box = el.getBoundingClientRect()
      if (box.width === 0 || box.height === 0) continue
      if (box.right > viewport + 0.5) {
        outside.push(el.tagName.toLowerCase() + (el.className ? '.' + String(el.className).split(' ').join('.') : '') +
          ' right=' + Math.round(box.right))
      }
    }
    const wrap = document.querySelector('.table-wrap')
    return {
      viewport,
      documentScrollWidth: document.documentElement.scrollWidth,
      bodyScrollWidth: document.body.scrollWidth,
      outside,
      tableScrolls: wrap ? wrap.scrollWidth > wrap.clientWidth : false,
      wrapperRight: wrap ? wrap.getBoundingClientRect().right : -1,
    }
  })()`
  return (await page.evaluate(script)) as Overflow
}

/** The document itself does not scroll sideways, and nothing outside `scrollers` passes the right edge. */
function assertNoSidewaysScroll(overflow: Overflow, where: string): void {
  assert.equal(overflow.viewport, WIDTH, `${where}: the layout viewport is the phone's width`)
  assert.deepEqual(
    overflow.outside,
    [],
    `${where}: nothing outside the scrolling boxes passes the right edge`,
  )
  assert.ok(
    overflow.documentScrollWidth <= WIDTH,
    `${where}: the document does not scroll sideways (scrollWidth ${overflow.documentScrollWidth} > ${WIDTH})`,
  )
  assert.ok(overflow.bodyScrollWidth <= WIDTH, `${where}: body scrollWidth ${overflow.bodyScrollWidth}`)
}

const FOCUSED = `(() => {
  const el = document.activeElement
  if (!el || el === document.body) return '(body)'
  return el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + ' ' + (el.textContent || '').trim().replace(/\\s+/g, ' ')
})()`

async function focused(page: Page): Promise<string> {
  return String(await page.evaluate(FOCUSED))
}

async function fullyInViewport(page: Page, name: string, within: 'nav' | 'main'): Promise<void> {
  const scope =
    within === 'nav' ? page.getByRole('navigation', { name: 'Main' }) : page.locator('main .downloads')
  const link = scope.getByRole('link', { name, exact: true })
  assert.ok(await link.isVisible(), `${name} is visible`)
  const box = await link.boundingBox()
  assert.ok(box, `${name} has a box`)
  assert.ok(box.x >= 0 && box.x + box.width <= WIDTH, `${name} fits the width: ${JSON.stringify(box)}`)
  assert.ok(box.width >= 24 && box.height >= 20, `${name} is big enough to tap: ${JSON.stringify(box)}`)
}

/** Where the screenshots go when SHIPLOG_SCREENSHOTS names a directory (to look at them), else nowhere. */
async function screenshot(page: Page, name: string): Promise<void> {
  const dir = process.env.SHIPLOG_SCREENSHOTS
  if (dir) await page.screenshot({ path: `${dir}/${name}.png`, fullPage: true })
}

/** The key facts of each event card: every one shown, inside the screen's width. */
async function assertKeyFactsInView(page: Page): Promise<number> {
  const rows = page.locator('main table tbody tr')
  const count = await rows.count()
  for (let i = 0; i < count; i++) {
    // Time, service, environment, version, status: the first five cells.
    for (let cell = 0; cell < 5; cell++) {
      const td = rows.nth(i).locator(':scope > td').nth(cell)
      assert.ok(await td.isVisible(), `row ${i} cell ${cell} is shown`)
      const box = await td.boundingBox()
      assert.ok(
        box && box.x >= 0 && box.x + box.width <= WIDTH,
        `row ${i} cell ${cell} fits: ${JSON.stringify(box)}`,
      )
    }
    const status = rows.nth(i).locator('.badge')
    const box = await status.boundingBox()
    assert.ok(box && box.x + box.width <= WIDTH, `row ${i}: the status label is in view`)
  }
  return count
}

test('on a 390 px phone /logs/ shows each event as a card with status, service, environment, version and time in view, filters folded, and the keyboard order starts with the skip link', {
  timeout: BROWSER_TEST_TIMEOUT_MS,
  skip: browserSkip(),
}, async (t) => {
  const [server, browser] = await Promise.all([startShiplog(t), launchBrowser(t)])
  const base = server.url
  const { page, watch } = await openPage(browser, {
    viewport: { width: WIDTH, height: HEIGHT },
    isMobile: true,
    hasTouch: true,
    deviceScaleFactor: 2,
  })
  await setUpFirstAdmin(page, base, {
    team: 'Phone Team',
    email: 'phone@example.com',
    password: 'correct horse battery',
  })
  const key = await createKeyInSettings(page, 'ci')
  // Wide content: a long unbroken version and a long description make the table wider than a phone.
  for (let i = 0; i < 3; i++) {
    await recordEvent(base, key, 'deploy', {
      service: `payments-gateway-service-${i}`,
      environment: 'production-eu-west-1',
      version: `release-2026.11.21-build.${'9'.repeat(40)}-${i}`,
      status: i === 1 ? 'Failed' : 'Deployed',
      description: 'A fairly long description of what this deployment changed, to take some room',
      commit: 'abcdef0123456789abcdef0123456789abcdef01',
      url: 'https://ci.example.com/builds/12345',
    })
  }

  await page.goto(`${base}/logs/`)
  const overflow = await measureOverflow(page, 'pre')
  assertNoSidewaysScroll(overflow, '/logs/')
  assert.equal(overflow.tableScrolls, false, 'nothing in the log scrolls sideways: no column is hidden')
  assert.equal(await assertKeyFactsInView(page), 3)
  // The filters are folded behind their summary, and the first event is on the first screen.
  const filters = page.locator('details.filter-box')
  assert.equal(await filters.getAttribute('open'), null, 'the filter box starts folded on a phone')
  assert.equal(await page.locator('#f-service').isVisible(), false)
  const firstRow = await page.locator('main table tbody tr').first().boundingBox()
  assert.ok(
    firstRow && firstRow.y < HEIGHT,
    `the first event starts on the first screen: ${JSON.stringify(firstRow)}`,
  )
  await screenshot(page, 'logs-390')

  await fullyInViewport(page, 'Logs', 'nav')
  await fullyInViewport(page, 'Settings', 'nav')
  await page.getByRole('link', { name: 'Download CSV' }).scrollIntoViewIfNeeded()
  await fullyInViewport(page, 'Download CSV', 'main')
  await fullyInViewport(page, 'Download JSON', 'main')

  // A filter in use: the folded summary names it; opening it shows the fields.
  await page.goto(`${base}/logs/?status=failed&service=PAYMENTS-gateway-service-1`)
  const summary = page.locator('details.filter-box > summary')
  const said = ((await summary.textContent()) ?? '').replace(/\s+/g, ' ')
  assert.match(said, /service payments-gateway-service-1/i)
  assert.match(said, /status Failed/)
  assert.equal(await assertKeyFactsInView(page), 1)
  await summary.click()
  assert.ok(await page.locator('#f-service').isVisible(), 'the summary opens the filters')
  assertNoSidewaysScroll(await measureOverflow(page, 'pre'), '/logs/ with the filters open')
  await screenshot(page, 'logs-390-filters-open')

  // Keyboard: from the top of a fresh load, Tab reaches the skip link first, then the header in order.
  await page.goto(`${base}/logs/`)
  assert.equal(await focused(page), '(body)')
  const order: string[] = []
  for (let i = 0; i < 7; i++) {
    await page.keyboard.press('Tab')
    order.push(await focused(page))
  }
  assert.deepEqual(order, [
    'a Skip to content',
    'a Shiplog',
    'a Board',
    'a Logs',
    'a Insights',
    'a Settings',
    'button Log out',
  ])
  const skip = page.getByRole('link', { name: 'Skip to content' })
  // Focused, the skip link is shown on screen (it hides off-screen otherwise).
  await page.goto(`${base}/logs/`)
  await page.keyboard.press('Tab')
  const skipBox = await skip.boundingBox()
  assert.ok(
    skipBox && skipBox.x >= 0 && skipBox.x + skipBox.width <= WIDTH,
    'the focused skip link is on screen',
  )
  // Following it moves focus to the main content; the next Tab reaches the folded filters, Enter
  // opens them and the next Tab reaches the first filter field.
  await page.keyboard.press('Enter')
  await page.waitForURL(`${base}/logs/#main`)
  assert.match(await focused(page), /^main#main /)
  await page.keyboard.press('Tab')
  assert.match(await focused(page), /^summary Filters/)
  await page.keyboard.press('Enter')
  await page.keyboard.press('Tab')
  assert.match(await focused(page), /^input#f-service/)
  assert.deepEqual(watch.errors, [])

  // An invalid filter keeps the box open with the error, and lists nothing (the browser reports the
  // 422 in its console, so this comes last).
  await page.goto(`${base}/logs/?status=exploded`)
  assert.equal(await filters.getAttribute('open'), '', 'an error keeps the filters open')
  assert.ok(await page.getByRole('alert').isVisible())
  assert.equal(await page.locator('main table').count(), 0)
})

test('on a 390 px phone Settings does not scroll sideways outside its tables and code snippets', {
  timeout: BROWSER_TEST_TIMEOUT_MS,
  skip: browserSkip(),
}, async (t) => {
  const [server, browser] = await Promise.all([startShiplog(t), launchBrowser(t)])
  const base = server.url
  const { page, watch } = await openPage(browser, {
    viewport: { width: WIDTH, height: HEIGHT },
    isMobile: true,
    hasTouch: true,
    deviceScaleFactor: 2,
  })
  await setUpFirstAdmin(page, base, {
    team: 'Phone Team',
    email: 'phone@example.com',
    password: 'correct horse battery',
  })
  // Before any key: the users table (with its actions column) and the snippets.
  assertNoSidewaysScroll(await measureOverflow(page, '.table-wrap, pre'), 'Settings without keys')
  // With a key shown once, listed with its revoke action, and a second user.
  await createKeyInSettings(page, 'github-actions-production')
  assertNoSidewaysScroll(await measureOverflow(page, '.table-wrap, pre'), 'Settings showing a new key')
  await page.getByLabel('Email', { exact: true }).fill('colleague@example.com')
  await page.getByRole('button', { name: 'Add user' }).click()
  await page.locator('code#new-password').waitFor()
  await page.goto(`${base}/settings/`)
  assertNoSidewaysScroll(await measureOverflow(page, '.table-wrap, pre'), 'Settings with a key and two users')
  await fullyInViewport(page, 'Logs', 'nav')
  await fullyInViewport(page, 'Settings', 'nav')
  assert.deepEqual(watch.errors, [])
})
