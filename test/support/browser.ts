// Drives the real `shiplog serve` process with headless Chromium: launch, UI steps, HTTP ingest and downloads.
import { existsSync, mkdirSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import {
  type Browser,
  type BrowserContext,
  type BrowserContextOptions,
  chromium,
  type Page,
} from 'playwright-core'
import { freshDatabaseUrl } from '../helper.js'
import { type ServerProcess, startServer, withTimeout } from './processes.js'

type Cleanup = { after(fn: () => Promise<void> | void): void }

export const CHROMIUM_PATH = '/usr/bin/chromium'

const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
]

/** Upper bound for one browser test (server start, browser launch and every step). */
export const BROWSER_TEST_TIMEOUT_MS = 90_000

/**
 * Where browser tests leave their screenshots for a person to look at: SHIPLOG_SCREENSHOTS, or
 * test-results/screenshots in the checkout (ignored by git). Named per database, as both suites
 * run the same tests.
 */
export const SCREENSHOT_DIR =
  process.env.SHIPLOG_SCREENSHOTS ?? new URL('../../test-results/screenshots/', import.meta.url).pathname

export async function saveScreenshot(page: Page, name: string, fullPage = true): Promise<void> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true })
  const dialect = process.env.SHIPLOG_TEST_DB === 'postgres' ? 'postgres' : 'sqlite'
  await page.screenshot({ path: `${SCREENSHOT_DIR.replace(/\/$/, '')}/${name}-${dialect}.png`, fullPage })
}

const ci = process.env.CI === 'true' || process.env.CI === '1'

/**
 * The `skip` option for browser tests: false when Chromium is installed, and also under CI (where a
 * missing browser must fail, not skip: launchBrowser then throws a clear error).
 */
export function browserSkip(): string | false {
  if (existsSync(CHROMIUM_PATH) || ci) return false
  return `${CHROMIUM_PATH} is not installed, so the browser tests are skipped (they fail under CI=true)`
}

/**
 * Launches headless Chromium; closed after the test. Playwright gives each launch a fresh temporary
 * profile of its own (and deletes it on close), and every context starts with no state.
 */
export async function launchBrowser(t: Cleanup): Promise<Browser> {
  if (!existsSync(CHROMIUM_PATH)) {
    throw new Error(
      `Chromium is required at ${CHROMIUM_PATH} for the browser tests (CI=${process.env.CI ?? ''}); install the Debian package "chromium"`,
    )
  }
  const launching = chromium.launch({ executablePath: CHROMIUM_PATH, args: CHROMIUM_ARGS, timeout: 30_000 })
  // Registered before the launch finishes: if the test fails meanwhile (say the server does not
  // start), the browser is still closed, or its open pipe would keep the test process alive.
  t.after(async () => {
    const browser = await launching.catch(() => undefined)
    if (browser) await withTimeout(browser.close(), 15_000, 'Chromium did not close').catch(() => {})
  })
  return launching
}

/** Problems the page itself reported (uncaught script errors, console errors); a test asserts none. */
export interface PageWatch {
  errors: string[]
}

/** A new context and page with bounded waits; script errors and dialogs are recorded. */
export async function openPage(
  browser: Browser,
  options: BrowserContextOptions = {},
): Promise<{ context: BrowserContext; page: Page; watch: PageWatch }> {
  const context = await browser.newContext({ acceptDownloads: true, ...options })
  context.setDefaultTimeout(10_000)
  context.setDefaultNavigationTimeout(15_000)
  const page = await context.newPage()
  const watch: PageWatch = { errors: [] }
  page.on('pageerror', (err) => watch.errors.push(`page error: ${err.message}`))
  page.on('console', (message) => {
    if (message.type() === 'error') watch.errors.push(`console error: ${message.text()}`)
  })
  page.on('dialog', (dialog) => {
    watch.errors.push(`unexpected ${dialog.type()} dialog: ${dialog.message()}`)
    dialog.dismiss().catch(() => {})
  })
  return { context, page, watch }
}

/** A running `shiplog serve` on its own fresh database (SQLite file or PostgreSQL schema). */
export async function startShiplog(t: Cleanup): Promise<ServerProcess> {
  const databaseUrl = await freshDatabaseUrl(t)
  return startServer(t, { databaseUrl })
}

/** The pathname (and query) of the page's current URL. */
export function pathOf(page: Page): string {
  const url = new URL(page.url())
  return `${url.pathname}${url.search}`
}

export interface Credentials {
  team: string
  email: string
  password: string
}

/** Opens / on a server without users, fills in the set-up form and waits for Settings. */
export async function setUpFirstAdmin(page: Page, base: string, who: Credentials): Promise<void> {
  await page.goto(`${base}/`)
  await page.waitForURL(`${base}/setup`)
  await page.getByLabel('Team or organisation name').fill(who.team)
  await page.getByLabel('Your email').fill(who.email)
  await page.getByLabel('Password', { exact: true }).fill(who.password)
  await page.getByLabel('Repeat the password').fill(who.password)
  await page.getByRole('button', { name: 'Create account' }).click()
  await page.waitForURL(`${base}/settings/`)
}

/** Creates an API key on the Settings page (as an admin) and returns the key shown once. */
export async function createKeyInSettings(page: Page, name: string): Promise<string> {
  await page.getByLabel('Name for a new key').fill(name)
  await page.getByRole('button', { name: 'Create API key' }).click()
  const shown = page.locator('code#new-key')
  await shown.waitFor()
  return ((await shown.textContent()) ?? '').trim()
}

/** Fills in the login form at /login and submits it (does not wait for where it leads). */
export async function submitLogin(page: Page, base: string, email: string, password: string): Promise<void> {
  if (!pathOf(page).startsWith('/login')) await page.goto(`${base}/login`)
  await page.getByLabel('Email').fill(email)
  await page.getByLabel('Password').fill(password)
  await page.getByRole('button', { name: 'Log in' }).click()
}

export async function logOut(page: Page, base: string): Promise<void> {
  await page.getByRole('button', { name: 'Log out' }).click()
  await page.waitForURL(`${base}/login?bye=1`)
}

export type IngestForm = 'put-get' | 'put-post' | 'deploy'

export interface EventInput {
  service: string
  environment: string
  version: string
  status: string
  description?: string
  commit?: string
  url?: string
  deployer?: string
}

/** The stored event a 201 answer carries (the fields the tests look at). */
export interface StoredEvent {
  id: number
  received_at: string
  service: string
  environment: string
  version: string
  status: string
  source: string
}

function isStoredEvent(value: unknown): value is StoredEvent {
  if (typeof value !== 'object' || value === null) return false
  const v = value as Record<string, unknown>
  return (
    typeof v.id === 'number' &&
    typeof v.received_at === 'string' &&
    typeof v.service === 'string' &&
    typeof v.environment === 'string' &&
    typeof v.version === 'string' &&
    typeof v.status === 'string'
  )
}

/** Sends one event over HTTP in the given request form; returns the raw response. */
export function sendEvent(base: string, key: string, form: IngestForm, event: EventInput): Promise<Response> {
  const extras: Record<string, string> = {}
  for (const name of ['description', 'commit', 'url', 'deployer'] as const) {
    const value = event[name]
    if (value !== undefined) extras[name] = value
  }
  const signal = AbortSignal.timeout(10_000)
  if (form === 'put-get') {
    // URLSearchParams writes spaces as `+`, as the legacy clients did.
    const query = new URLSearchParams({
      app: event.service,
      env: event.environment,
      version: event.version,
      status: event.status,
      ...extras,
    })
    return fetch(`${base}/put?${query.toString()}`, { headers: { 'X-API-Key': key }, signal })
  }
  const body =
    form === 'put-post'
      ? {
          app: event.service,
          env: event.environment,
          version: event.version,
          status: event.status,
          ...extras,
        }
      : {
          service: event.service,
          environment: event.environment,
          version: event.version,
          status: event.status,
          ...extras,
        }
  return fetch(`${base}/${form === 'deploy' ? 'deploy' : 'put'}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', [form === 'deploy' ? 'x-api-key' : 'X-API-Key']: key },
    body: JSON.stringify(body),
    signal,
  })
}

/** Records one event and returns what the server stored; throws unless the answer is 201. */
export async function recordEvent(
  base: string,
  key: string,
  form: IngestForm,
  event: EventInput,
): Promise<StoredEvent> {
  const response = await sendEvent(base, key, form, event)
  const text = await response.text()
  if (response.status !== 201) throw new Error(`${form} answered ${response.status}: ${text}`)
  const body: unknown = JSON.parse(text)
  if (!isStoredEvent(body)) throw new Error(`${form} answered an unexpected body: ${text}`)
  return body
}

/** One row of the /logs/ table, cell by cell (text content, not rendered markup). */
export interface LogRow {
  time: string
  datetime: string | null
  title: string | null
  service: string
  environment: string
  version: string
  status: string
  source: string
  apiKey: string
  details: string
}

/** Reads every row of the events table on the current /logs/ page. */
export async function readLogRows(page: Page): Promise<LogRow[]> {
  const rows = page.locator('main table tbody tr')
  const out: LogRow[] = []
  const count = await rows.count()
  for (let i = 0; i < count; i++) {
    const row = rows.nth(i)
    const cells = (await row.locator(':scope > td').allTextContents()).map((c) => c.trim())
    const time = row.locator('time').first()
    out.push({
      time: cells[0] ?? '',
      datetime: await time.getAttribute('datetime'),
      title: await time.getAttribute('title'),
      service: cells[1] ?? '',
      environment: cells[2] ?? '',
      version: cells[3] ?? '',
      status: cells[4] ?? '',
      source: cells[5] ?? '',
      apiKey: cells[6] ?? '',
      details: cells[7] ?? '',
    })
  }
  return out
}

export interface DownloadedFile {
  filename: string
  text: string
}

/** Clicks the link with this exact text and reads the file the browser downloads. */
export async function downloadVia(page: Page, linkText: string): Promise<DownloadedFile> {
  const [download] = await Promise.all([
    page.waitForEvent('download', { timeout: 15_000 }),
    page.getByRole('link', { name: linkText, exact: true }).click(),
  ])
  const failure = await download.failure()
  if (failure !== null) throw new Error(`download from "${linkText}" failed: ${failure}`)
  const path = await download.path()
  return { filename: download.suggestedFilename(), text: await readFile(path, 'utf8') }
}

/** Parses RFC 4180 CSV (quoted cells, doubled quotes, CRLF or LF line ends) into rows of cells. */
export function parseCsv(text: string): string[][] {
  const rows: string[][] = []
  let row: string[] = []
  let cell = ''
  let quoted = false
  for (let i = 0; i < text.length; i++) {
    const c = text[i]
    if (quoted) {
      if (c === '"') {
        if (text[i + 1] === '"') {
          cell += '"'
          i++
        } else quoted = false
      } else cell += c
    } else if (c === '"') quoted = true
    else if (c === ',') {
      row.push(cell)
      cell = ''
    } else if (c === '\r' && text[i + 1] === '\n') {
      // The \n that follows ends the row.
    } else if (c === '\n') {
      row.push(cell)
      rows.push(row)
      row = []
      cell = ''
    } else cell += c
  }
  if (cell !== '' || row.length > 0) {
    row.push(cell)
    rows.push(row)
  }
  return rows
}

/** The value of a cookie the browser holds for the server. */
export async function cookieValue(context: BrowserContext, base: string, name: string): Promise<string> {
  const cookie = (await context.cookies(base)).find((c) => c.name === name)
  if (!cookie) throw new Error(`the browser holds no ${name} cookie for ${base}`)
  return cookie.value
}
