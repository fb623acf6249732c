// First-run set-up, login and password pages.
import type { SessionUser } from '../domain/sessions.js'
import { html, type SafeHtml } from './html.js'
import { layout } from './layout.js'

function errorBox(errors: string[]): SafeHtml {
  if (errors.length === 0) return html``
  return html`<div class="error-box" role="alert">
      ${errors.length === 1 ? errors[0] : html`<ul>${errors.map((e) => html`<li>${e}</li>`)}</ul>`}
    </div>`
}

export function setupPage(p: {
  csrfToken: string
  errors: string[]
  values: { account?: string; email?: string }
}) {
  return layout({
    title: 'Set up Shiplog',
    body: html`<div class="panel narrow">
      <h1>Set up Shiplog</h1>
      <p class="hint">Create your team's account and its first administrator. You can add colleagues later in Settings.</p>
      ${errorBox(p.errors)}
      <form method="post" action="/setup">
        <input type="hidden" name="_csrf" value="${p.csrfToken}">
        <label for="account">Team or organisation name</label>
        <input id="account" name="account" type="text" class="wide" required maxlength="100" value="${p.values.account ?? ''}" autocomplete="organization">
        <label for="email">Your email</label>
        <input id="email" name="email" type="email" required value="${p.values.email ?? ''}" autocomplete="email">
        <label for="password">Password</label>
        <input id="password" name="password" type="password" required minlength="8" autocomplete="new-password" aria-describedby="password-hint">
        <p class="hint" id="password-hint">At least 8 characters.</p>
        <label for="confirm">Repeat the password</label>
        <input id="confirm" name="confirm" type="password" required minlength="8" autocomplete="new-password">
        <p><button type="submit">Create account</button></p>
      </form>
    </div>`,
  })
}

export function loginPage(p: {
  csrfToken: string
  errors: string[]
  email?: string
  next?: string
  notice?: string
  /** When the address belongs to several accounts: the ones this password opens, to choose from. */
  accounts?: { id: number; name: string }[]
  /** Single sign-on: the provider's name for the "Sign in with …" button, when configured. */
  sso?: { name: string }
}) {
  // After a refused password (the email kept) or the choice of an account, what is left to type is
  // the password: the cursor starts there.
  const passwordFirst = p.accounts !== undefined || (p.errors.length > 0 && (p.email ?? '') !== '')
  return layout({
    title: 'Log in',
    body: html`<div class="panel narrow">
      <h1>Log in to Shiplog</h1>
      ${p.notice ? html`<div class="notice" role="status">${p.notice}</div>` : ''}
      ${errorBox(p.errors)}
      <form method="post" action="/login">
        <input type="hidden" name="_csrf" value="${p.csrfToken}">
        ${p.next ? html`<input type="hidden" name="next" value="${p.next}">` : ''}
        <label for="email">Email</label>
        <input id="email" name="email" type="email" required value="${p.email ?? ''}" autocomplete="username" ${passwordFirst ? '' : html`autofocus`}>
        ${
          p.accounts
            ? html`<fieldset>
              <legend>Account</legend>
              ${p.accounts.map(
                (a, i) => html`<div class="choice">
                  <input type="radio" id="account-${a.id}" name="account" value="${a.id}" ${i === 0 ? html`checked` : ''}>
                  <label for="account-${a.id}">${a.name}</label>
                </div>`,
              )}
            </fieldset>`
            : ''
        }
        <label for="password">Password</label>
        <input id="password" name="password" type="password" required autocomplete="current-password" ${passwordFirst ? html`autofocus` : ''}>
        <p><button type="submit">Log in</button></p>
      </form>
      ${
        // A link, not a form: the page's Content-Security-Policy (form-action 'self') would stop a
        // form's redirect to the provider, and starting a sign-in changes nothing worth a token.
        p.sso
          ? html`<p class="sso"><a class="button secondary" href="/login/oidc${p.next ? `?next=${encodeURIComponent(p.next)}` : ''}">Sign in with ${p.sso.name}</a></p>`
          : ''
      }
    </div>`,
  })
}

/**
 * The password change. `forced`: the user signed in with a one-time password and must choose their
 * own. `askCurrent`: false when that sign-in, moments ago, proved the one-time password, so it is
 * not asked for again.
 */
export function passwordPage(p: {
  user: SessionUser
  csrfToken: string
  errors: string[]
  forced: boolean
  askCurrent: boolean
}) {
  return layout({
    title: 'Change password',
    user: p.user,
    csrfToken: p.csrfToken,
    body: html`<div class="panel narrow">
      <h1>Change your password</h1>
      ${p.forced ? html`<p class="notice" role="status">You signed in with a one-time password. Choose your own to continue.</p>` : ''}
      ${errorBox(p.errors)}
      <form method="post" action="/account/password">
        <input type="hidden" name="_csrf" value="${p.csrfToken}">
        ${
          p.askCurrent
            ? html`<label for="current">${p.forced ? 'The one-time password you signed in with' : 'Current password'}</label>
        <input id="current" name="current" type="password" required autocomplete="current-password">`
            : ''
        }
        <label for="password">New password</label>
        <input id="password" name="password" type="password" required minlength="8" autocomplete="new-password" ${p.askCurrent ? '' : html`autofocus`}>
        <label for="confirm">Repeat the new password</label>
        <input id="confirm" name="confirm" type="password" required minlength="8" autocomplete="new-password">
        <p><button type="submit">Change password</button></p>
      </form>
    </div>`,
  })
}

export function errorPage(p: {
  status: number
  title: string
  detail: string
  user?: SessionUser | null
  csrfToken?: string
}) {
  return layout({
    title: p.title,
    user: p.user ?? null,
    ...(p.csrfToken ? { csrfToken: p.csrfToken } : {}),
    body: html`<div class="panel narrow">
      <h1>${p.title}</h1>
      <p>${p.detail}</p>
      <p><a href="/">Back to Shiplog</a></p>
    </div>`,
  })
}

export function logoutPage(p: { user: SessionUser; csrfToken: string }) {
  return layout({
    title: 'Log out',
    user: p.user,
    csrfToken: p.csrfToken,
    body: html`<div class="panel narrow">
      <h1>Log out of Shiplog?</h1>
      <form method="post" action="/logout">
        <input type="hidden" name="_csrf" value="${p.csrfToken}">
        <p><button type="submit">Log out</button> <a href="/logs/">Stay</a></p>
      </form>
    </div>`,
  })
}
