// Settings → Webhooks: the account's webhooks with their state, a create form (admins), and one
// webhook's delivery log with a redeliver button.
import type { DeliveryRow, WebhookRow } from '../db/schema.js'
import type { Flash, SessionUser } from '../domain/sessions.js'
import { BACKLOG_COUNT_CAP } from '../domain/webhooks/cursor.js'
import type { DeliveryLogRow } from '../domain/webhooks/queries.js'
import { UNSEALABLE } from '../domain/webhooks/secrets.js'
import { html, type SafeHtml } from './html.js'
import { layout, timeTag } from './layout.js'

export interface WebhooksPageData {
  user: SessionUser
  csrfToken: string
  webhooks: WebhookRow[]
  /** Events each webhook has not queued yet, by webhook id (counted up to BACKLOG_COUNT_CAP). */
  backlogs?: ReadonlyMap<number, number>
  /** Webhooks whose sealed secrets do not open with this server's secret (they cannot sign). */
  unsealable?: ReadonlySet<number>
  secret?: Flash['secret']
  notice?: string
  errors: string[]
  /** What the create form held when it was refused, so nothing typed is lost. */
  form?: Record<string, string | string[]>
}

function names(json: string): string {
  const list = JSON.parse(json) as string[]
  return list.length === 0 ? 'all' : list.join(', ')
}

function triggers(w: WebhookRow): string {
  const statuses = JSON.parse(w.statuses) as string[]
  const outcomes = JSON.parse(w.outcomes) as string[]
  return [
    statuses.length > 0 ? `status ${statuses.join(', ')}` : '',
    outcomes.length > 0 ? `deployment ${outcomes.join(', ')}` : '',
  ]
    .filter((s) => s !== '')
    .join('; ')
}

export function webhookState(w: WebhookRow, unsealable = false): SafeHtml {
  if (unsealable)
    return html`<span><span class="webhook-state failing">failing: cannot sign</span><br><span class="hint">${UNSEALABLE}</span></span>`
  if (Number(w.enabled) !== 1)
    return html`<span class="webhook-state disabled">disabled${w.disabled_at !== null ? html` since ${timeTag(Number(w.disabled_at))}` : ''}</span>`
  if (w.failing_since !== null)
    return html`<span class="webhook-state failing">failing since ${timeTag(Number(w.failing_since))}</span>`
  return html`<span class="webhook-state active">active</span>`
}

/**
 * A webhook's cursor lagging its receiver, said plainly: these events will be sent, after the
 * deliveries already queued.
 */
export function webhookBacklog(count: number | undefined): SafeHtml | string {
  if (!count) return ''
  const n =
    count >= BACKLOG_COUNT_CAP
      ? `${BACKLOG_COUNT_CAP.toLocaleString('en-US')}+`
      : count.toLocaleString('en-US')
  return html`<br><span class="webhook-backlog hint">${n} ${count === 1 ? 'event' : 'events'} not yet queued</span>`
}

function messages(d: {
  notice?: string | undefined
  errors: string[]
  secret?: Flash['secret'] | undefined
}): SafeHtml {
  return html`${d.notice ? html`<div class="notice" role="status"><p>${d.notice}</p></div>` : ''}
    ${
      d.secret
        ? html`<div class="notice secret-notice" role="status">
            <p><strong>Signing secret of ${d.secret.label}:</strong> copy it now into your receiver: it is shown only this once.</p>
            <div class="secret"><code id="new-webhook-secret">${d.secret.value}</code>
              <button type="button" class="secondary" data-copy="new-webhook-secret" hidden>Copy</button>
              <span id="new-webhook-secret-status" role="status" aria-live="polite"></span></div>
          </div>`
        : ''
    }
    ${d.errors.length > 0 ? html`<div class="error-box" role="alert">${d.errors.join(' ')}</div>` : ''}`
}

function field(form: WebhooksPageData['form'], name: string): string {
  const v = form?.[name]
  return Array.isArray(v) ? v.join(', ') : (v ?? '')
}

function checked(form: WebhooksPageData['form'], name: string, value: string): SafeHtml | string {
  const v = form?.[name]
  const list = Array.isArray(v) ? v : v ? [v] : []
  return list.includes(value) ? html`checked` : ''
}

function createForm(d: WebhooksPageData): SafeHtml {
  const f = d.form
  const format = field(f, 'format') || 'json'
  const choice = (name: string, value: string, label: string) =>
    html`<div class="choice"><input type="checkbox" id="wh-${name}-${value}" name="${name}" value="${value}" ${checked(f, name, value)}>
      <label for="wh-${name}-${value}">${label}</label></div>`
  return html`<form method="post" action="/settings/webhooks" class="panel spaced webhook-form">
      <input type="hidden" name="_csrf" value="${d.csrfToken}">
      <h2>Add a webhook</h2>
      <label for="wh-url">Target URL</label>
      <input id="wh-url" name="url" type="url" required maxlength="2048" value="${field(f, 'url')}" placeholder="https://hooks.example.com/shiplog">
      <label for="wh-format">Format</label>
      <select id="wh-format" name="format">
        ${['json', 'slack', 'grafana'].map((v) => html`<option value="${v}" ${format === v ? html`selected` : ''}>${v === 'json' ? 'JSON (signed)' : v === 'slack' ? 'Slack incoming webhook' : 'Grafana annotations (URL of Grafana)'}</option>`)}
      </select>
      <fieldset><legend>Send for events with status</legend>
        ${choice('status', 'Deploying', 'Deploying')}${choice('status', 'Deployed', 'Deployed')}${choice('status', 'Failed', 'Failed')}
      </fieldset>
      <fieldset><legend>Send when a deployment ends</legend>
        ${choice('outcome', 'succeeded', 'succeeded')}${choice('outcome', 'failed', 'failed')}
      </fieldset>
      <label for="wh-environments">Environments (comma-separated; empty for all)</label>
      <input id="wh-environments" name="environments" type="text" maxlength="2000" value="${field(f, 'environments')}">
      <label for="wh-services">Services (comma-separated; empty for all)</label>
      <input id="wh-services" name="services" type="text" maxlength="2000" value="${field(f, 'services')}">
      <label for="wh-token">Grafana service account token (grafana only)</label>
      <input id="wh-token" name="grafana_token" type="password" maxlength="1000" autocomplete="off">
      <p class="hint">For grafana with no trigger chosen, a deployment's start is annotated and turned into a region when it ends.</p>
      <p><button type="submit">Add webhook</button></p>
    </form>`
}

export function webhooksPage(d: WebhooksPageData): SafeHtml {
  const isAdmin = d.user.role === 'admin'
  const rows = d.webhooks.map(
    (w) => html`<tr>
      <td data-label="URL"><a href="/settings/webhooks/${w.id}/">${w.url}</a></td>
      <td data-label="Format">${w.format}</td>
      <td data-label="Sends on">${triggers(w)}</td>
      <td data-label="Environments">${names(w.environments)}</td>
      <td data-label="Services">${names(w.services)}</td>
      <td data-label="State">${webhookState(w, d.unsealable?.has(Number(w.id)))}${webhookBacklog(d.backlogs?.get(Number(w.id)))}</td>
      ${
        isAdmin
          ? html`<td>${
              Number(w.enabled) !== 1
                ? html`<form method="post" action="/settings/webhooks/${w.id}/enable" class="inline">
                    <input type="hidden" name="_csrf" value="${d.csrfToken}"><button type="submit" class="secondary">Re-enable</button></form>`
                : ''
            }
            <details class="confirm"><summary>Delete…</summary>
              <form method="post" action="/settings/webhooks/${w.id}/delete">
                <input type="hidden" name="_csrf" value="${d.csrfToken}">
                <p>The webhook and its delivery log are deleted; nothing more is sent to it.</p>
                <button type="submit" class="danger">Delete webhook</button>
              </form></details></td>`
          : ''
      }
    </tr>`,
  )
  return layout({
    title: 'Webhooks',
    user: d.user,
    current: 'settings',
    csrfToken: d.csrfToken,
    body: html`<p><a href="/settings/">← Settings</a></p>
      <h1>Webhooks</h1>
      ${messages(d)}
      <p class="hint">Shiplog posts to these URLs when deployments happen, signed with each webhook's secret, and retries for up to 24 hours. ${isAdmin ? '' : 'Only admins can add or change webhooks.'}</p>
      ${
        d.webhooks.length === 0
          ? html`<p>No webhooks yet.</p>`
          : html`<div class="table-wrap"><table class="stack-on-phone webhooks-table">
              <caption class="sr-only">Webhooks of this account</caption>
              <thead><tr><th scope="col">URL</th><th scope="col">Format</th><th scope="col">Sends on</th>
                <th scope="col">Environments</th><th scope="col">Services</th><th scope="col">State</th>
                ${isAdmin ? html`<th scope="col"><span class="sr-only">Actions</span></th>` : ''}</tr></thead>
              <tbody>${rows}</tbody></table></div>`
      }
      ${isAdmin ? createForm(d) : ''}`,
  })
}

export interface DeliveryLogData {
  user: SessionUser
  csrfToken: string
  webhook: WebhookRow
  /** Events it has not queued yet (counted up to BACKLOG_COUNT_CAP). */
  backlog?: number
  /** The webhook's sealed secrets do not open with this server's secret. */
  unsealable?: boolean
  deliveries: DeliveryLogRow[]
  next: number | null
  notice?: string
}

function outcome(d: DeliveryRow): string {
  if (d.state === 'succeeded') return 'delivered'
  if (d.state === 'failed') return `gave up${d.last_error ? `: ${d.last_error}` : ''}`
  if (Number(d.attempts) === 0) return 'queued'
  return `retrying${d.last_error ? ` (${d.last_error})` : ''}`
}

/** "billing · prod · 1.5.0", then the event's number and what the delivery told. */
function deliveryEvent(x: DeliveryLogRow): SafeHtml {
  const told = x.kind === 'outcome' ? 'deployment ended' : 'status'
  if (x.event === null) {
    return html`#${x.event_id} <span class="hint">${told} (event no longer kept)</span>`
  }
  const e = x.event
  return html`<span class="delivery-what">${e.service} · ${e.environment} · <span class="mono">${e.version}</span></span>
    <span class="hint">#${x.event_id} ${told}: ${e.status}</span>`
}

export function deliveryLogPage(d: DeliveryLogData): SafeHtml {
  const isAdmin = d.user.role === 'admin'
  const rows = d.deliveries.map(
    (x) => html`<tr>
      <td data-label="Time">${timeTag(Number(x.last_attempt_at ?? x.created_at))}</td>
      <td data-label="Event">${deliveryEvent(x)}</td>
      <td data-label="Attempts">${x.attempts}</td>
      <td data-label="Outcome" class="delivery-${x.state}">${outcome(x)}</td>
      <td data-label="Response">${x.last_status ?? '–'}</td>
      <td data-label="Answer"><code class="response-head">${(x.response_head ?? '').slice(0, 200)}</code></td>
      <td data-label="Latency">${x.latency_ms === null ? '–' : `${x.latency_ms} ms`}</td>
      ${
        isAdmin
          ? html`<td><form method="post" action="/settings/webhooks/${d.webhook.id}/deliveries/${x.id}/redeliver" class="inline">
              <input type="hidden" name="_csrf" value="${d.csrfToken}"><button type="submit" class="secondary">Redeliver</button></form></td>`
          : ''
      }
    </tr>`,
  )
  return layout({
    title: 'Webhook deliveries',
    user: d.user,
    current: 'settings',
    csrfToken: d.csrfToken,
    body: html`<p><a href="/settings/webhooks/">← Webhooks</a></p>
      <h1>Deliveries</h1>
      <p class="webhook-target"><code>${d.webhook.url}</code> (${d.webhook.format}) · ${webhookState(d.webhook, d.unsealable)}${webhookBacklog(d.backlog)}</p>
      ${d.notice ? html`<div class="notice" role="status"><p>${d.notice}</p></div>` : ''}
      ${
        d.deliveries.length === 0
          ? html`<p>Nothing delivered yet.</p>`
          : html`<div class="table-wrap"><table class="stack-on-phone deliveries-table">
              <caption class="sr-only">Deliveries, newest first</caption>
              <thead><tr><th scope="col">Time</th><th scope="col">Event</th><th scope="col">Attempts</th><th scope="col">Outcome</th>
                <th scope="col">Code</th><th scope="col">Answer (first bytes)</th><th scope="col">Latency</th>
                ${isAdmin ? html`<th scope="col"><span class="sr-only">Actions</span></th>` : ''}</tr></thead>
              <tbody>${rows}</tbody></table></div>`
      }
      ${d.next !== null ? html`<p><a rel="next" href="/settings/webhooks/${d.webhook.id}/?before=${d.next}">Older deliveries</a></p>` : ''}`,
  })
}
