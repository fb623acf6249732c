// Settings sections of the board: environment order and visibility, stall time, badge token. Every
// change is a plain form (no script needed); members see the values without the buttons.
import { counted } from '../domain/plural.js'
import type { SessionUser } from '../domain/sessions.js'
import { html, type SafeHtml } from './html.js'

export interface BoardSettingsData {
  user: SessionUser
  csrfToken: string
  environments: { name: string; hidden: boolean }[]
  stallMinutes: number
  /** Shown to admins only (null for members). */
  badgeToken: string | null
  baseUrl: string
}

function csrf(token: string): SafeHtml {
  return html`<input type="hidden" name="_csrf" value="${token}">`
}

function environmentsSection(d: BoardSettingsData, isAdmin: boolean): SafeHtml {
  const list = d.environments
  return html`<section aria-labelledby="environments-heading">
    <h2 id="environments-heading">Environments</h2>
    <p class="hint">The board's columns, left to right. Hidden environments are left off the board; their history stays.</p>
    ${
      list.length === 0
        ? html`<p>No environments yet: they appear once events arrive.</p>`
        : html`<ol class="env-order">${list.map(
            (e, i) => html`<li class="${e.hidden ? 'hidden-env' : ''}">
          <span class="env-name">${e.name}</span>${e.hidden ? html` <span class="badge revoked">hidden</span>` : ''}
          ${
            isAdmin
              ? html`<form method="post" action="/settings/environments" class="row-actions">
            ${csrf(d.csrfToken)}
            <input type="hidden" name="environment" value="${e.name}">
            <button type="submit" name="action" value="up" class="secondary" ${i === 0 ? html`disabled` : ''} aria-label="Move ${e.name} up">Up</button>
            <button type="submit" name="action" value="down" class="secondary" ${i === list.length - 1 ? html`disabled` : ''} aria-label="Move ${e.name} down">Down</button>
            ${
              e.hidden
                ? html`<button type="submit" name="action" value="show" class="secondary" aria-label="Show ${e.name}">Show</button>`
                : html`<button type="submit" name="action" value="hide" class="secondary" aria-label="Hide ${e.name}">Hide</button>`
            }
          </form>`
              : ''
          }
        </li>`,
          )}</ol>`
    }
    ${isAdmin && list.length > 0 ? html`<p><a href="/settings/environments/rename">Rename or merge an environment…</a> (e.g. <code>Dev</code> into <code>dev</code>)</p>` : ''}
  </section>`
}

function stallSection(d: BoardSettingsData, isAdmin: boolean): SafeHtml {
  return html`<section aria-labelledby="stall-heading">
    <h2 id="stall-heading">Stall time</h2>
    <p class="hint">A deployment still open after this long shows as <strong>Stalled</strong> on the board.</p>
    ${
      isAdmin
        ? html`<form method="post" action="/settings/stall-time" class="panel">
        ${csrf(d.csrfToken)}
        <label for="stall-minutes">Stall time in minutes (1 to 10080)</label>
        <input id="stall-minutes" name="minutes" type="number" min="1" max="10080" step="1" required value="${d.stallMinutes}">
        <p><button type="submit">Save stall time</button></p>
      </form>`
        : html`<p>${counted(d.stallMinutes, 'minute')}.</p>`
    }
  </section>`
}

function badgeSection(d: BoardSettingsData): SafeHtml {
  if (d.badgeToken === null) return html``
  const pattern = `${d.baseUrl}/badge/${d.badgeToken}/<service>/<environment>.svg`
  const example = `![prod](${d.baseUrl}/badge/${d.badgeToken}/App1/prod.svg)`
  return html`<section aria-labelledby="badges-heading">
    <h2 id="badges-heading">Badges</h2>
    <p class="hint">Show the version running in an environment in a README. Anyone with the link sees that
      version (and nothing else), so rotate the token if a link leaks: old links stop working at once.</p>
    <p>Image address (encode the service and environment names, e.g. <code>/</code> as <code>%2F</code>):</p>
    <pre class="snippet"><code id="badge-pattern">${pattern}</code></pre>
    <p>Markdown example; <code>.json</code> instead of <code>.svg</code> gives a shields.io endpoint document:</p>
    <pre class="snippet"><code id="badge-example">${example}</code></pre>
    <details class="confirm">
      <summary>Rotate the badge token…</summary>
      <form method="post" action="/settings/badge-token">
        ${csrf(d.csrfToken)}
        <p>Every badge link in use stops working at once; you paste the new ones.</p>
        <button type="submit" class="danger">Rotate badge token</button>
      </form>
    </details>
  </section>`
}

export function boardSettingsSections(d: BoardSettingsData): SafeHtml {
  const isAdmin = d.user.role === 'admin'
  return html`${environmentsSection(d, isAdmin)}${stallSection(d, isAdmin)}${isAdmin ? badgeSection(d) : ''}`
}
