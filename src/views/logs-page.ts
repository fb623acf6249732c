// The event log: filters, the table, paging and the two download links.
import type { EventRow } from '../db/schema.js'
import type { EventFilter } from '../domain/events/queries.js'
import type { SessionUser } from '../domain/sessions.js'
import { EVENT_STATUSES } from '../domain/text-rules.js'
import { html, type SafeHtml } from './html.js'
import { layout, timeTag } from './layout.js'

export interface LogsPageData {
  user: SessionUser
  csrfToken: string
  filter: EventFilter
  /** The filter as it was typed, to refill the form. */
  form: Record<string, string>
  errors: string[]
  rows: EventRow[]
  olderHref: string | null
  newerHref: string | null
  csvHref: string
  jsonHref: string
  suggestions: { services: string[]; environments: string[] }
  /** True when the account has no events at all (not merely none matching). */
  accountIsEmpty: boolean
  baseUrl: string
}

function isWebUrl(value: string): boolean {
  return /^https?:\/\//i.test(value)
}

function eventRow(row: EventRow): SafeHtml {
  return html`<tr>
      <td>${timeTag(row.received_at)}</td>
      <td>${row.service}</td>
      <td>${row.environment}</td>
      <td class="mono">${row.version}</td>
      <td><span class="badge ${row.status}">${row.status}</span></td>
      <td>${row.source}</td>
      <td>${row.api_key_name ?? '—'}</td>
      <td>${row.url && isWebUrl(row.url) ? html`<a href="${row.url}" rel="noopener noreferrer nofollow">link</a>` : ''}${
        row.commit_sha ? html` <span class="mono" title="commit">${row.commit_sha.slice(0, 12)}</span>` : ''
      }${row.description ? html`<div class="hint">${row.description}</div>` : ''}${
        row.deployer ? html`<div class="hint">by ${row.deployer}</div>` : ''
      }</td>
    </tr>`
}

function emptyState(baseUrl: string): SafeHtml {
  return html`<div class="panel empty">
      <h2>No deployments recorded yet</h2>
      <p>Create an API key in <a href="/settings/">Settings</a>, then send your first event:</p>
      <pre class="snippet"><code>curl -X POST ${baseUrl}/deploy \\
  -H "Content-Type: application/json" -H "x-api-key: $SHIPLOG_API_KEY" \\
  -d '{"service":"App1","environment":"Prod","version":"1.0.3","status":"Deployed"}'</code></pre>
    </div>`
}

export function logsPage(d: LogsPageData): SafeHtml {
  const f = d.form
  const statusOptions = EVENT_STATUSES.map(
    (s) =>
      html`<option value="${s}" ${f.status?.toLowerCase() === s.toLowerCase() ? html`selected` : ''}>${s}</option>`,
  )
  const filtered = Object.values(f).some((v) => v !== '')
  const table =
    d.rows.length === 0
      ? d.accountIsEmpty && !filtered
        ? emptyState(d.baseUrl)
        : html`<div class="panel empty"><p>No events match these filters. <a href="/logs/">Clear the filters</a></p></div>`
      : html`<div class="table-wrap"><table>
          <caption class="sr-only">Deployment events, newest first</caption>
          <thead><tr>
            <th scope="col">Time</th><th scope="col">Service</th><th scope="col">Environment</th>
            <th scope="col">Version</th><th scope="col">Status</th><th scope="col">Source</th>
            <th scope="col">API key</th><th scope="col">Details</th>
          </tr></thead>
          <tbody>${d.rows.map(eventRow)}</tbody>
        </table></div>`
  return layout({
    title: 'Logs',
    user: d.user,
    current: 'logs',
    csrfToken: d.csrfToken,
    body: html`<h1>Deployment log</h1>
      <form method="get" action="/logs/" class="panel filters" role="search" aria-label="Filter events">
        <div><label for="f-service">Service</label>
          <input id="f-service" name="service" type="text" list="services" value="${f.service ?? ''}"></div>
        <div><label for="f-environment">Environment</label>
          <input id="f-environment" name="environment" type="text" list="environments" value="${f.environment ?? ''}"></div>
        <div><label for="f-status">Status</label>
          <select id="f-status" name="status"><option value="">Any</option>${statusOptions}</select></div>
        <div><label for="f-version">Version contains</label>
          <input id="f-version" name="version" type="text" value="${f.version ?? ''}"></div>
        <div><label for="f-from">From (UTC)</label>
          <input id="f-from" name="from" type="datetime-local" step="1" value="${f.from ?? ''}"></div>
        <div><label for="f-to">To (UTC)</label>
          <input id="f-to" name="to" type="datetime-local" step="1" value="${f.to ?? ''}"></div>
        <div class="actions"><button type="submit">Filter</button>
          ${filtered ? html`<a class="button secondary" href="/logs/">Clear</a>` : ''}</div>
        <datalist id="services">${d.suggestions.services.map((s) => html`<option value="${s}">`)}</datalist>
        <datalist id="environments">${d.suggestions.environments.map((s) => html`<option value="${s}">`)}</datalist>
      </form>
      ${d.errors.length > 0 ? html`<div class="error-box" role="alert">${d.errors.join(' ')}</div>` : ''}
      <div class="toolbar">
        <p class="hint">${filtered ? 'Events matching the filters, newest first.' : 'All events, newest first.'}</p>
        <div class="downloads">
          <a class="button secondary" href="${d.csvHref}" download>Download CSV</a>
          <a class="button secondary" href="${d.jsonHref}" download>Download JSON</a>
        </div>
      </div>
      ${table}
      <nav class="pager" aria-label="Pages">
        ${d.newerHref ? html`<a class="button secondary" href="${d.newerHref}" rel="prev">← Newer</a>` : ''}
        ${d.olderHref ? html`<a class="button secondary" href="${d.olderHref}" rel="next">Older →</a>` : ''}
      </nav>`,
  })
}
