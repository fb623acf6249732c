// Single sign-on tests' world: a real OpenID Connect provider, an app configured for it, and the
// round trip of a sign-in through it (test/ui/sso.test.ts and the other single sign-on tests).
import assert from 'node:assert/strict'
import { buildTestApp, type TestApp } from '../helper.js'
import { type PersonClaims, startTestProvider, type TestProvider } from './oidc-provider.js'
import { type Browser, createUserIn, type Response } from './ui.js'

export const SHIPLOG = 'http://shiplog.test'

export interface SsoWorld {
  provider: TestProvider
  ctx: TestApp
}

/** A provider, an app that signs in with it, and owner@acme.example (admin of Acme, with a password). */
export async function ssoWorld(
  t: { after(fn: () => Promise<void> | void): void },
  env: Record<string, string> = {},
): Promise<SsoWorld> {
  const provider = await startTestProvider(t, { shiplogUrl: SHIPLOG, env })
  const ctx = await buildTestApp(t, { env: provider.env })
  // Someone exists already, so /login shows the form rather than first-run set-up.
  await createUserIn(ctx.database, ctx.tenant.account.id, 'owner@acme.example')
  return { provider, ctx }
}

/** Clicks "Sign in with …" on /login (with `next` when given): the answer is the redirect to the provider. */
export async function ssoStart(browser: Browser, next?: string): Promise<string> {
  const page = await browser.get(next ? `/login?next=${encodeURIComponent(next)}` : '/login')
  const href = /<a class="button secondary" href="([^"]+)">Sign in with Test IdP<\/a>/.exec(page.payload)?.[1]
  assert.ok(href, 'the login page offers single sign-on')
  const res = await browser.get(href.replace(/&amp;/g, '&'))
  assert.equal(res.statusCode, 303, res.payload.slice(0, 300))
  return String(res.headers.location)
}

/** The whole round trip as `login` at the provider; returns Shiplog's answer to the callback. */
export async function ssoSignIn(
  w: SsoWorld,
  browser: Browser,
  login: string,
  claims?: PersonClaims,
): Promise<Response> {
  if (claims) w.provider.person(login, claims)
  const callback = await w.provider.authorize(await ssoStart(browser), login)
  return browser.get(`${callback.pathname}${callback.search}`)
}
