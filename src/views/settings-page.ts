// Settings: API keys (create, shown once, list, revoke), ready-to-paste snippets, and users.
import type { ApiKeyRow, User } from '../db/schema.js'
import { scopesFromColumn } from '../domain/keys.js'
import type { Flash, SessionUser } from '../domain/sessions.js'
import { html, type SafeHtml } from './html.js'
import { layout, timeTag } from './layout.js'

export interface SettingsPageData {
  user: SessionUser
  csrfToken: string
  keys: ApiKeyRow[]
  users: User[]
  baseUrl: string
  deployImage: string
  /** A key just created or a one-time password just issued: its only appearance. */
  secret?: Flash['secret']
  notice?: string
  errors: string[]
  /** The board's sections (environments, stall time, badges): src/views/board-settings.ts. */
  board?: SafeHtml
  /** The Sign-in section (single sign-on, password login): src/views/sso-pages.ts. */
  signIn?: SafeHtml
  /** The retention section: retentionSection() below. */
  retention?: SafeHtml
}

/** The one notice pattern: the result of the last action, at the top of the page, shown once. */
function notices(d: SettingsPageData): SafeHtml {
  const secret = d.secret
  return html`${d.notice ? html`<div class="notice" role="status"><p>${d.notice}</p></div>` : ''}
    ${
      secret?.kind === 'key'
        ? secretBlock(
            'new-key',
            `New key "${secret.label}":`,
            secret.value,
            'Copy it now: it is shown only this once, and Shiplog keeps only a fingerprint of it.',
          )
        : secret?.kind === 'password'
          ? secretBlock(
              'new-password',
              `One-time password for ${secret.label}:`,
              secret.value,
              'Shown once. Give it to them privately; they choose their own password when they first log in.',
            )
          : ''
    }`
}

function secretBlock(id: string, label: string, value: string, explanation: string): SafeHtml {
  return html`<div class="notice secret-notice" role="status">
      <p><strong>${label}</strong> ${explanation}</p>
      <div class="secret">
        <code id="${id}">${value}</code>
        <button type="button" class="secondary" data-copy="${id}" hidden>Copy</button>
        <span id="${id}-status" role="status" aria-live="polite"></span>
      </div>
    </div>`
}

/** A key's scopes in words: what it may do (SPEC §7). */
function scopeLabel(column: string): string {
  const scopes = scopesFromColumn(column)
  return scopes.length === 0 ? 'none' : scopes.join(', ')
}

function keyRows(d: SettingsPageData, isAdmin: boolean): SafeHtml {
  if (d.keys.length === 0) return html`<p>No API keys yet.${isAdmin ? ' Create one below.' : ''}</p>`
  return html`<div class="table-wrap"><table class="stack-on-phone keys-table">
      <caption class="sr-only">API keys</caption>
      <thead><tr>
        <th scope="col">Name</th><th scope="col">Prefix</th><th scope="col">Created</th>
        <th scope="col">Created by</th><th scope="col">Last used</th><th scope="col">Status</th>
        <th scope="col">Scopes</th>
        ${isAdmin ? html`<th scope="col"><span class="sr-only">Actions</span></th>` : ''}
      </tr></thead>
      <tbody>${d.keys.map(
        (k) => html`<tr>
          <td>${k.name}</td>
          <td class="mono">${k.prefix}…</td>
          <td>${timeTag(k.created_at)}</td>
          <td>${k.created_by}</td>
          <td>${k.last_used_at === null ? 'never' : timeTag(k.last_used_at)}</td>
          <td>${k.revoked_at === null ? 'active' : html`<span class="badge revoked">revoked</span> ${timeTag(k.revoked_at)}`}</td>
          <td class="key-scopes">${scopeLabel(k.scopes)}</td>
          ${
            isAdmin
              ? html`<td>${
                  k.revoked_at === null
                    ? html`<details class="confirm">
                      <summary>Revoke…</summary>
                      <form method="post" action="/settings/keys/${k.id}/revoke">
                        <input type="hidden" name="_csrf" value="${d.csrfToken}">
                        <p>Pipelines using <strong>${k.name}</strong> will be refused at once. This cannot be undone.</p>
                        <button type="submit" class="danger">Revoke ${k.name}</button>
                      </form>
                    </details>`
                    : ''
                }</td>`
              : ''
          }
        </tr>`,
      )}</tbody>
    </table></div>`
}

function snippets(baseUrl: string, image: string): SafeHtml {
  return html`<h2 id="snippets">Send events from your pipelines</h2>
    <p class="hint">Keep the key in your CI system's secrets as <code>SHIPLOG_API_KEY</code>; never write it into a script.</p>
    <p class="hint" id="image-note">The GitHub Actions and GitLab CI snippets use the <code>${image}:1</code> image. It is not on a public registry: build it from this repository's <code>Dockerfile.deploy</code> and publish it to your own registry first (<code>docker build -f Dockerfile.deploy -t ${image}:1 .</code>, then <code>docker push</code>; the README section "Container images" shows the steps), or use the curl forms.</p>
    <h3>curl: newer form</h3>
    <pre class="snippet"><code>curl -X POST ${baseUrl}/deploy \\
  -H "Content-Type: application/json" -H "x-api-key: $SHIPLOG_API_KEY" \\
  -d '{"service":"App1","environment":"Prod","version":"1.0.3","status":"Deployed"}'</code></pre>
    <h3>curl: legacy JSON form</h3>
    <pre class="snippet"><code>curl -X POST -H "X-API-Key: $SHIPLOG_API_KEY" \\
  -d '{"app":"App1","env":"Prod","version":"1.0.3","status":"Deployed"}' \\
  ${baseUrl}/put</code></pre>
    <h3>curl: legacy query form</h3>
    <pre class="snippet"><code>curl -H "X-API-Key: $SHIPLOG_API_KEY" \\
  "${baseUrl}/put?app=App1&amp;env=Prod&amp;version=1.0.3&amp;status=Deployed"</code></pre>
    <h3>GitHub Actions</h3>
    <pre class="snippet"><code>- name: Record deployment
  uses: docker://${image}:1
  env:
    SHIPLOG_URL: ${baseUrl}
  with:
    args: \${{ secrets.SHIPLOG_API_KEY }} App1 Prod \${{ github.ref_name }} Deployed</code></pre>
    <h3>GitLab CI</h3>
    <pre class="snippet"><code>record-deployment:
  stage: deploy
  image: ${image}:1
  variables:
    SHIPLOG_URL: ${baseUrl}
  script:
    - shiplog-deploy "$SHIPLOG_API_KEY" "$CI_PROJECT_NAME" "$CI_ENVIRONMENT_NAME" "$CI_COMMIT_REF_NAME:\${CI_COMMIT_SHORT_SHA}" Deployed</code></pre>`
}

function usersSection(d: SettingsPageData, isAdmin: boolean): SafeHtml {
  const rows = d.users.map(
    (u) => html`<tr>
      <td>${u.email}${u.id === d.user.userId ? html` <span class="hint">(you)</span>` : ''}</td>
      <td>${
        isAdmin && u.id !== d.user.userId
          ? html`<form method="post" action="/settings/users/${u.id}/role" class="row-actions">
              <input type="hidden" name="_csrf" value="${d.csrfToken}">
              <label class="sr-only" for="role-${u.id}">Role of ${u.email}</label>
              <select id="role-${u.id}" name="role">
                <option value="admin" ${u.role === 'admin' ? html`selected` : ''}>admin</option>
                <option value="member" ${u.role === 'member' ? html`selected` : ''}>member</option>
              </select>
              <button type="submit" class="secondary">Change role</button>
            </form>`
          : u.role
      }</td>
      <td>${timeTag(u.created_at)}</td>
      ${
        isAdmin
          ? html`<td>${
              u.id === d.user.userId
                ? ''
                : html`<details class="confirm">
                  <summary>Reset password…</summary>
                  <form method="post" action="/settings/users/${u.id}/password">
                    <input type="hidden" name="_csrf" value="${d.csrfToken}">
                    <p>${u.email} gets a new one-time password, shown to you once, and is logged out everywhere.</p>
                    <button type="submit" class="secondary">Reset password of ${u.email}</button>
                  </form>
                </details>
                <details class="confirm">
                  <summary>Remove…</summary>
                  <form method="post" action="/settings/users/${u.id}/remove">
                    <input type="hidden" name="_csrf" value="${d.csrfToken}">
                    <p>${u.email} will be logged out and can no longer sign in.</p>
                    <button type="submit" class="danger">Remove ${u.email}</button>
                  </form>
                </details>`
            }</td>`
          : ''
      }
    </tr>`,
  )
  return html`<section aria-labelledby="users-heading">
      <h2 id="users-heading">Users</h2>
      <div class="table-wrap"><table class="stack-on-phone users-table">
        <caption class="sr-only">Users of this account</caption>
        <thead><tr><th scope="col">Email</th><th scope="col">Role</th><th scope="col">Added</th>
        ${isAdmin ? html`<th scope="col"><span class="sr-only">Actions</span></th>` : ''}</tr></thead>
        <tbody>${rows}</tbody>
      </table></div>
      ${
        isAdmin
          ? html`<form method="post" action="/settings/users" class="panel spaced">
              <input type="hidden" name="_csrf" value="${d.csrfToken}">
              <h3>Add a user</h3>
              <label for="new-email">Email</label>
              <input id="new-email" name="email" type="email" required autocomplete="off">
              <label for="new-role">Role</label>
              <select id="new-role" name="role"><option value="member">member: reads the log</option><option value="admin">admin: also manages keys and users</option></select>
              <p><button type="submit">Add user</button></p>
              <p class="hint">They get a one-time password, shown at the top of this page once.</p>
            </form>`
          : ''
      }
    </section>`
}

export function settingsPage(d: SettingsPageData): SafeHtml {
  const isAdmin = d.user.role === 'admin'
  return layout({
    title: 'Settings',
    user: d.user,
    current: 'settings',
    csrfToken: d.csrfToken,
    body: html`<h1>Settings</h1>
      ${notices(d)}
      ${d.errors.length > 0 ? html`<div class="error-box" role="alert">${d.errors.join(' ')}</div>` : ''}
      <section aria-labelledby="keys-heading">
        <h2 id="keys-heading">API Keys</h2>
        <p class="hint">Pipelines send events with an API key. ${isAdmin ? '' : 'Only admins can create or revoke keys.'}</p>
        ${keyRows(d, isAdmin)}
        ${
          isAdmin
            ? html`<form method="post" action="/settings/keys" class="panel spaced">
                <input type="hidden" name="_csrf" value="${d.csrfToken}">
                <label for="key-name">Name for a new key</label>
                <input id="key-name" name="name" type="text" required maxlength="100" placeholder="e.g. github-actions" aria-describedby="key-name-hint">
                <p class="hint" id="key-name-hint">Name it after where it will be used, so you know what to revoke.</p>
                <input type="hidden" name="scopes_offered" value="1">
                <fieldset aria-describedby="key-scope-hint">
                  <legend>What the key may do (at least one)</legend>
                  <div class="choice">
                    <input type="checkbox" id="key-scope-ingest" name="scope" value="ingest" checked>
                    <label for="key-scope-ingest">ingest: record events (/put, /deploy)</label>
                  </div>
                  <div class="choice">
                    <input type="checkbox" id="key-scope-read" name="scope" value="read">
                    <label for="key-scope-read">read: read the API (/api/v1/…, /get)</label>
                  </div>
                </fieldset>
                <p class="hint" id="key-scope-hint">Give a pipeline only ingest, and a dashboard or script only read. The <a href="/docs">API documentation</a> lists what each scope opens.</p>
                <p><button type="submit">Create API key</button></p>
              </form>`
            : ''
        }
      </section>
      ${snippets(d.baseUrl, d.deployImage)}
      <h2>Webhooks</h2>
      <p><a href="/settings/webhooks/">Webhooks</a>: send deployments to Slack, Grafana or your own service.</p>
      <h2>Guardrails</h2>
      <p><a href="/settings/guardrails/">Guardrails</a>: locks, freeze windows, promotion rules and bad versions, which pipelines check before they deploy.</p>
      ${
        isAdmin
          ? html`<h2>Audit log</h2>
      <p><a href="/settings/audit/">Audit log</a>: who signed in and what was changed or downloaded, from where.</p>`
          : ''
      }
      ${usersSection(d, isAdmin)}
      ${d.board ?? ''}
      ${d.signIn ?? ''}
      ${d.retention ?? ''}
      <h2>Your account</h2>
      <p><a href="/account/password">Change your password</a></p>`,
  })
}

export interface RetentionSectionData {
  user: SessionUser
  csrfToken: string
  /** null: events are kept forever. */
  days: number | null
  maxDays: number
}

/** How long the account keeps its events: a plain form for admins, the value for members. */
export function retentionSection(d: RetentionSectionData): SafeHtml {
  const kept = d.days === null ? 'forever' : d.days === 1 ? 'for 1 day' : `for ${d.days} days`
  return html`<section aria-labelledby="retention-heading">
    <h2 id="retention-heading">Retention</h2>
    <p>This account keeps its events <strong id="retention-value">${kept}</strong>.</p>
    <p class="hint">Older events are deleted in the background (within about ten minutes), together with the
      deployments they make up and their webhook deliveries. Each service and environment keeps its running and
      its latest deployment whatever their age, so the board still shows what runs now. Deleted events cannot be
      brought back except from a backup.</p>
    ${
      d.user.role === 'admin'
        ? html`<form method="post" action="/settings/retention" class="panel">
        <input type="hidden" name="_csrf" value="${d.csrfToken}">
        <label for="retention-days">Keep events for this many days (1 to ${d.maxDays})</label>
        <input id="retention-days" name="days" type="number" min="1" max="${d.maxDays}" step="1" inputmode="numeric" value="${d.days ?? ''}">
        <p><button type="submit" name="action" value="days">Save retention</button>
          <button type="submit" name="action" value="forever" class="secondary">Keep events forever</button></p>
      </form>`
        : ''
    }
  </section>`
}
