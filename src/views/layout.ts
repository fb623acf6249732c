// The one page layout: header, navigation, main content; shared by every page.
import type { SessionUser } from '../domain/sessions.js'
import { assetUrl } from './assets.js'
import { html, type SafeHtml } from './html.js'

export interface LayoutOptions {
  title: string
  user?: SessionUser | null
  /** Which navigation entry is the current page. */
  current?: 'board' | 'logs' | 'insights' | 'settings' | null
  csrfToken?: string
  body: SafeHtml
}

export function layout(options: LayoutOptions): SafeHtml {
  const { user, current, title } = options
  const nav = user
    ? html`<nav aria-label="Main">
          <a href="/services/" ${current === 'board' ? html`aria-current="page"` : ''}>Board</a>
          <a href="/logs/" ${current === 'logs' ? html`aria-current="page"` : ''}>Logs</a>
          <a href="/insights/" ${current === 'insights' ? html`aria-current="page"` : ''}>Insights</a>
          <a href="/settings/" ${current === 'settings' ? html`aria-current="page"` : ''}>Settings</a>
        </nav>
        <div class="who">
          <span><span class="sr-only">Account: </span>${user.accountName}</span>
          <span><span class="sr-only">Signed in as </span>${user.email}</span>
          <form method="post" action="/logout" class="inline">
            <input type="hidden" name="_csrf" value="${options.csrfToken ?? ''}">
            <button type="submit">Log out</button>
          </form>
        </div>`
    : ''
  return html`<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>${title} · Shiplog</title>
  <link rel="stylesheet" href="${assetUrl('app.css')}">
  <link rel="icon" href="${assetUrl('favicon.svg')}" type="image/svg+xml">
  <script src="${assetUrl('app.js')}" defer></script>
</head>
<body>
  <a class="skip" href="#main">Skip to content</a>
  <header class="top">
    <a class="brand" href="/">Shiplog</a>
    ${nav}
  </header>
  <main id="main" tabindex="-1">
${options.body}
  </main>
</body>
</html>
`
}

/** A `<time>` showing UTC until the script turns it into the viewer's local time. */
export function timeTag(ms: number): SafeHtml {
  const iso = new Date(ms).toISOString()
  const utc = `${iso.slice(0, 19).replace('T', ' ')} UTC`
  return html`<time datetime="${iso}" title="${utc}" data-local>${utc}</time>`
}
