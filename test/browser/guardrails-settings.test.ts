// Settings → Guardrails in Chromium: an admin in Berlin fills in every form (times read in their
// zone), the page lists what was set, and at 390 px nothing scrolls sideways; without JavaScript the
// forms still work (times then read in UTC, as the labels say).
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
  recordEvent,
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

async function notice(page: Page): Promise<string> {
  return ((await page.locator('.notice').textContent()) ?? '').trim()
}

async function noSidewaysScroll(page: Page, what: string): Promise<void> {
  const width = (await page.evaluate('document.documentElement.scrollWidth')) as number
  assert.ok(width <= PHONE, `${what}: the page does not scroll sideways (scrollWidth ${width})`)
  const wide = (await page.evaluate(
    `[...document.querySelectorAll('.table-wrap')].filter((w) => w.scrollWidth > w.clientWidth).length`,
  )) as number
  assert.equal(wide, 0, `${what}: no table scrolls inside its box`)
}

test('an admin sets every kind of guardrail in the browser; the page lists them, and fits a 390 px phone', {
  timeout: BROWSER_TEST_TIMEOUT_MS,
  skip: browserSkip(),
}, async (t) => {
  const [server, browser] = await Promise.all([startShiplog(t), launchBrowser(t)])
  const base = server.url
  const { page, watch } = await openPage(browser, {
    viewport: { width: 1280, height: 900 },
    timezoneId: 'Europe/Berlin',
  })
  await setUpFirstAdmin(page, base, {
    team: 'Acme',
    email: 'ada@acme.example',
    password: 'correct horse battery',
  })
  const key = await createKeyInSettings(page, 'ci')
  const deployments: [service: string, environment: string, version: string][] = [
    ['shop', 'dev', '1.4.0'],
    ['shop', 'staging', '1.4.0'],
    ['shop', 'prod', '1.3.2'],
    ['billing-reconciliation-worker', 'staging', '2026.04.17-1f3a9c2'],
    ['billing-reconciliation-worker', 'prod', '2026.04.10-77b01de'],
    ['api', 'prod', '5.0.1'],
  ]
  for (const [service, environment, version] of deployments) {
    await recordEvent(base, key, 'deploy', { service, environment, version, status: 'Deployed' })
  }

  await page.goto(`${base}/settings/`)
  await page.getByRole('link', { name: 'Guardrails', exact: true }).click()
  await page.waitForURL(`${base}/settings/guardrails/`)
  // The page's script names the viewer's zone beside the time fields.
  assert.equal(await page.locator('#lock-form [data-zone-label]').textContent(), '(Europe/Berlin)')

  // A lock of all of prod, for two hours.
  await page.locator('#gl-environment').selectOption('prod')
  await page.locator('#gl-reason').fill('Database migration: wait for #ops')
  await page.locator('#gl-until').fill('2h')
  await page.getByRole('button', { name: 'Lock', exact: true }).click()
  await page.waitForURL(/\/settings\/guardrails\/#locks-heading$/)
  assert.match(await notice(page), /^prod is locked for all services until \d{4}-\d\d-\d\d \d\d:\d\d UTC\.$/)
  // One service in staging, until a wall time typed in Berlin: stored as 17:00 UTC.
  await page.locator('#gl-environment').selectOption('staging')
  await page.locator('#gl-service').selectOption('billing-reconciliation-worker')
  await page.locator('#gl-reason').fill('Reconciliation is re-running the March invoices; do not deploy it')
  await page.locator('#gl-until').fill('2099-12-24T18:00')
  await page.getByRole('button', { name: 'Lock', exact: true }).click()
  assert.equal(
    await notice(page),
    'staging is locked for billing-reconciliation-worker until 2099-12-24 17:00 UTC.',
  )

  // A weekly window in Berlin, a nightly one by cron in the viewer's zone, and a one-off one.
  await page.locator('#gf-environment').selectOption('prod')
  await page.locator('#gf-kind-weekly').check()
  await page.locator('#gf-weekly').fill('Fri 16:00-Mon 08:00')
  await page.locator('#gf-time-zone').selectOption('Europe/Berlin')
  await page.locator('#gf-reason').fill('No deploys over the weekend')
  await page.getByRole('button', { name: 'Add freeze window' }).click()
  assert.equal(
    await notice(page),
    'A freeze window is added to prod: every Fri 16:00 to Mon 08:00 (Europe/Berlin).',
  )
  await page.locator('#gf-environment').selectOption('dev')
  await page.locator('#gf-kind-cron').check()
  await page.locator('#gf-cron').fill('0 22 * * 1-5')
  await page.locator('#gf-duration').fill('600')
  await page.locator('#gf-reason').fill('Nightly batch jobs')
  await page.getByRole('button', { name: 'Add freeze window' }).click()
  assert.equal(
    await notice(page),
    'A freeze window is added to dev: every Mon–Fri 22:00 to 08:00 (Europe/Berlin).',
  )
  await page.locator('#gf-environment').selectOption('staging')
  await page.locator('#gf-kind-once').check()
  await page.locator('#gf-from').fill('2099-12-24T00:00')
  await page.locator('#gf-to').fill('2099-12-27T08:00')
  await page.locator('#gf-reason').fill('Holidays')
  await page.getByRole('button', { name: 'Add freeze window' }).click()
  assert.equal(
    await notice(page),
    'A freeze window is added to staging: from 2099-12-23 23:00 UTC to 2099-12-27 07:00 UTC.',
  )

  // A chain dev → staging → prod.
  await page.locator('#gp-environment').selectOption('staging')
  await page.locator('#gp-after').selectOption('dev')
  await page.getByRole('button', { name: 'Set rule' }).click()
  await page.locator('#gp-environment').selectOption('prod')
  await page.locator('#gp-after').selectOption('staging')
  await page.locator('#gp-min').fill('30')
  await page.getByRole('button', { name: 'Set rule' }).click()
  assert.equal(
    await notice(page),
    'Rule set: prod needs success in staging at least 30 minutes before; not bad.',
  )

  await page.locator('#gb-service').selectOption('shop')
  await page.locator('#gb-version').fill('1.3.2')
  await page.locator('#gb-reason').fill('Corrupts invoices with a zero total (INC-42)')
  await page.getByRole('button', { name: 'Mark bad' }).click()
  assert.equal(await notice(page), 'shop 1.3.2 is marked bad.')

  await page.reload()
  assert.equal(await page.locator('.notice').count(), 0, 'the notice shows once')
  assert.equal(await page.locator('table.locks-table tbody tr').count(), 2)
  assert.equal(await page.locator('table.freezes-table tbody tr').count(), 3)
  assert.equal(await page.locator('table.promotions-table tbody tr').count(), 2)
  assert.equal(await page.locator('table.bad-versions-table tbody tr').count(), 1)
  assert.match(
    (await page.locator('table.freezes-table').textContent()) ?? '',
    /every Fri 16:00 to Mon 08:00/,
  )
  await shoot(page, 'guardrails-1280')

  // A refused form: the message beside the field, and the error summary at the top.
  await page.locator('#gl-environment').selectOption('prod')
  await page.locator('#gl-reason').fill('Too late')
  await page.locator('#gl-until').fill('2020-01-01T00:00')
  await page.getByRole('button', { name: 'Lock', exact: true }).click()
  await page.locator('#guardrail-errors').waitFor()
  assert.match((await page.locator('#gl-until-error').textContent()) ?? '', /until must lie in the future/)
  assert.equal(await page.locator('#gl-reason').inputValue(), 'Too late')
  await shoot(page, 'guardrails-1280-refused')

  await page.setViewportSize({ width: PHONE, height: 844 })
  await page.goto(`${base}/settings/guardrails/`)
  await noSidewaysScroll(page, 'guardrails at 390 px')
  const label = (await page.evaluate(
    `getComputedStyle(document.querySelector('table.locks-table tbody tr').children[2], '::before').content`,
  )) as string
  assert.equal(label, '"Reason"', 'each cell says what it is')
  await shoot(page, 'guardrails-390')
  if (SHOTS) {
    // Each section on its own, to look at closely.
    for (const section of ['locks', 'freezes', 'promotions', 'bad-versions']) {
      await page
        .locator(`section[aria-labelledby="${section}-heading"]`)
        .screenshot({ path: `${SHOTS}/guardrails-390-${section}.png` })
    }
  }
  await page.locator('#gb-version').fill('')
  await page.locator('#gb-service').selectOption('api')
  await page.locator('#gb-reason').fill('x')
  await page.locator('#gb-version').fill('   ')
  await page.getByRole('button', { name: 'Mark bad' }).click()
  await page.locator('#guardrail-errors').waitFor()
  await noSidewaysScroll(page, 'a refused form at 390 px')
  await shoot(page, 'guardrails-390-refused')

  // Unlock from the phone layout.
  await page.goto(`${base}/settings/guardrails/`)
  await page.locator('table.locks-table tbody tr').first().getByRole('button', { name: 'Unlock' }).click()
  assert.equal(await notice(page), 'The lock on prod (all services) is lifted.')
  assert.equal(pathOf(page), '/settings/guardrails/')
  // The two refused forms answered 422 on purpose; nothing else went wrong on the page.
  assert.deepEqual(
    watch.errors.filter((e) => !e.includes('status of 422')),
    [],
  )
})

test('without JavaScript the forms still work, and a time typed without zone is read in UTC as the label says', {
  timeout: BROWSER_TEST_TIMEOUT_MS,
  skip: browserSkip(),
}, async (t) => {
  const [server, browser] = await Promise.all([startShiplog(t), launchBrowser(t)])
  const base = server.url
  const setup = await openPage(browser, { viewport: { width: 1280, height: 900 } })
  await setUpFirstAdmin(setup.page, base, {
    team: 'Acme',
    email: 'ada@acme.example',
    password: 'correct horse battery',
  })
  const key = await createKeyInSettings(setup.page, 'ci')
  await recordEvent(base, key, 'deploy', {
    service: 'shop',
    environment: 'prod',
    version: '1',
    status: 'Deployed',
  })
  const cookies = await setup.context.cookies()
  const { context, page } = await openPage(browser, {
    viewport: { width: 1280, height: 900 },
    javaScriptEnabled: false,
  })
  await context.addCookies(cookies)
  await page.goto(`${base}/settings/guardrails/`)
  assert.equal(await page.locator('#lock-form [data-zone-label]').textContent(), '(UTC)')
  await page.locator('#gl-environment').selectOption('prod')
  await page.locator('#gl-reason').fill('No scripts here')
  await page.locator('#gl-until').fill('2099-12-24T18:00')
  await page.getByRole('button', { name: 'Lock', exact: true }).click()
  assert.equal(await notice(page), 'prod is locked for all services until 2099-12-24 18:00 UTC.')
})
