// Single sign-on pages: a refused sign-in, the provider's logout offer, and the Sign-in section of Settings.
import type { SessionUser } from '../domain/sessions.js'
import { html, type SafeHtml } from './html.js'
import { layout } from './layout.js'

export function ssoRefusedPage(p: { title: string; detail: string }): SafeHtml {
  return layout({
    title: p.title,
    body: html`<div class="panel narrow">
      <h1>${p.title}</h1>
      <div class="error-box" role="alert">${p.detail}</div>
      <p>Nobody was signed in.</p>
      <p><a class="button" href="/login">Back to the login page</a></p>
    </div>`,
  })
}

/**
 * After logging out of a session opened by single sign-on: Shiplog's session has ended, and the
 * provider's own is offered (a link: the logout form's CSP does not let it redirect off-site).
 */
export function providerLogoutPage(p: { providerName: string; url: string }): SafeHtml {
  return layout({
    title: 'Logged out',
    body: html`<div class="panel narrow">
      <h1>You are logged out of Shiplog</h1>
      <p>You are still signed in at ${p.providerName}, so the next "Sign in with ${p.providerName}" needs no password. On a shared computer, sign out there too.</p>
      <p><a class="button" href="${p.url}" id="provider-logout">Sign out of ${p.providerName} too</a></p>
      <p><a href="/login">Back to the login page</a></p>
    </div>`,
  })
}

/** The Sign-in section of Settings: password login on or off for the account (admins change it). */
export function signInSection(p: {
  user: SessionUser
  csrfToken: string
  providerName: string
  passwordLogin: boolean
  /** Whether this admin has signed in with the provider at least once (needed to turn passwords off). */
  linked: boolean
}): SafeHtml {
  const isAdmin = p.user.role === 'admin'
  const state = p.passwordLogin
    ? html`Users of this account can sign in with <strong>${p.providerName}</strong> or with their Shiplog password.`
    : html`Users of this account can sign in only with <strong>${p.providerName}</strong>; password login is off.`
  let form: SafeHtml | string = ''
  if (isAdmin && p.passwordLogin) {
    form = p.linked
      ? html`<form method="post" action="/settings/sign-in" class="panel spaced">
          <input type="hidden" name="_csrf" value="${p.csrfToken}">
          <input type="hidden" name="password_login" value="off">
          <p class="hint" id="password-off-hint">Everyone then signs in with ${p.providerName}. An operator can still set a password with <code>shiplog users set-password</code> and turn password login back on here.</p>
          <p><button type="submit" class="danger" aria-describedby="password-off-hint">Turn password login off</button></p>
        </form>`
      : html`<p class="hint">To turn password login off, first sign in once with ${p.providerName} yourself, so you know it works for you.</p>`
  } else if (isAdmin) {
    form = html`<form method="post" action="/settings/sign-in" class="panel spaced">
        <input type="hidden" name="_csrf" value="${p.csrfToken}">
        <input type="hidden" name="password_login" value="on">
        <p><button type="submit" class="secondary">Turn password login on</button></p>
      </form>`
  }
  return html`<section aria-labelledby="sign-in-heading">
      <h2 id="sign-in-heading">Sign-in</h2>
      <p>${state}</p>
      ${form}
    </section>`
}
