// The event log: filters, the table (cards on a phone), paging and the two download links.
import type { EventRow } from '../db/schema.js'
import type { FieldError } from '../domain/events/event.js'
import type { EventFilter } from '../domain/events/logs-query.js'
import { readInstant } from '../domain/instants.js'
import type { SessionUser } from '../domain/sessions.js'
import { EVENT_STATUSES } from '../text-rules.js'
import { servicePath } from './board-page.js'
import { type DownloadChoice, downloadLinks } from './downloads.js'
import { html, type SafeHtml } from './html.js'
import { layout, timeTag } from './layout.js'

/** What the page lists when the filter was valid. */
export interface LogsListing {
  rows: EventRow[]
  olderHref: string | null
  newerHref: string | null
  /** Download CSV / Download JSON and the "for Excel" choice. */
  downloads: DownloadChoice
  /** True when the account has no events at all (not merely none matching). */
  accountIsEmpty: boolean
}

export interface LogsPageData {
  user: SessionUser
  csrfToken: string
  /** The filter as applied (empty when it was refused). */
  filter: EventFilter
  /** The filter as it was typed, to refill the form. */
  form: Record<string, string>
  /** Refused parameters; when there are any, nothing is listed. */
  errors: FieldError[]
  listing: LogsListing | null
  suggestions: { services: string[]; environments: string[] }
  baseUrl: string
  /** "No service is named …; did you mean …?" (views/name-hints.ts), when a name filter names nothing. */
  nameHints?: SafeHtml
}

/**
 * The page's filter as GET /api/v1/stream reads it (the same parameters as /api/v1/events; `to` is
 * exclusive there), so the live bar counts only events this page would list.
 */
export function streamFilterQuery(filter: EventFilter): string {
  const q = new URLSearchParams()
  if (filter.service) q.set('service', filter.service)
  if (filter.environment) q.set('environment', filter.environment)
  if (filter.status) q.set('status', filter.status)
  if (filter.version) q.set('version', filter.version)
  if (filter.from !== undefined) q.set('from', new Date(filter.from).toISOString())
  if (filter.to !== undefined) q.set('to', new Date(filter.to + 1).toISOString())
  return q.toString()
}

function isWebUrl(value: string): boolean {
  return /^https?:\/\//i.test(value)
}

// On a phone the table becomes one card per event; public/app.css names each cell by its position.
function eventRow(row: EventRow): SafeHtml {
  return html`<tr>
      <td>${timeTag(row.received_at)}</td>
      <td><a href="${servicePath(row.service)}">${row.service}</a></td>
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

/** `2026-11-21T22:40:00`: an instant as a datetime-local field holds it, in UTC. */
function utcLocalValue(ms: number): string {
  return new Date(ms - (ms % 1000)).toISOString().slice(0, 19)
}

/**
 * The From or To field. A value typed without a zone is shown as typed: it was read in the zone
 * the form said (the viewer's, filled in by the script, else UTC). A bound that came with a zone (the
 * links of the pager carry UTC) is shown in UTC and `data-utc` lets the script show it in the
 * viewer's zone instead, so the field and the rows always speak the same zone.
 */
function timeField(
  name: 'from' | 'to',
  label: string,
  typed: string,
  at: number | undefined,
  invalid: boolean,
) {
  // Typed without a zone (the datetime-local field's own form): shown as typed, by the one grammar.
  const zoneless = readInstant(typed)?.offsetMinutes === undefined
  const value = at === undefined || zoneless ? typed : utcLocalValue(at)
  const utc = at === undefined || zoneless ? '' : new Date(at).toISOString()
  return html`<div class="field"><label for="f-${name}">${label} <span class="zone" data-zone-label>(UTC)</span></label>
          <input id="f-${name}" name="${name}" type="datetime-local" step="1" value="${value}" ${utc ? html`data-utc="${utc}"` : ''} ${invalid ? html`aria-invalid="true"` : ''}></div>`
}

/** The summary of the collapsed filter box: the active filters, or that there are none. */
function activeFilters(d: LogsPageData): SafeHtml {
  const f = d.filter
  const parts: SafeHtml[] = []
  if (f.service) parts.push(html`<span>service <b>${f.service}</b></span>`)
  if (f.environment) parts.push(html`<span>environment <b>${f.environment}</b></span>`)
  if (f.status) parts.push(html`<span>status <b>${f.status}</b></span>`)
  if (f.version) parts.push(html`<span>version contains <b>${f.version}</b></span>`)
  if (f.from !== undefined) parts.push(html`<span>from <b>${timeTag(f.from)}</b></span>`)
  if (f.to !== undefined) parts.push(html`<span>to <b>${timeTag(f.to)}</b></span>`)
  if (d.errors.length > 0) return html`<span class="active">invalid filter</span>`
  if (parts.length === 0) return html`<span class="active">none</span>`
  return html`<span class="active">${parts}</span>`
}

export function logsPage(d: LogsPageData): SafeHtml {
  const f = d.form
  const bad = new Set(d.errors.map((e) => e.field))
  const invalid = (name: string) => (bad.has(name) ? html`aria-invalid="true"` : '')
  const statusOptions = EVENT_STATUSES.map(
    (s) =>
      html`<option value="${s}" ${f.status?.toLowerCase() === s.toLowerCase() ? html`selected` : ''}>${s}</option>`,
  )
  const filtered = Object.values(f).some((v) => v !== '')
  const listing = d.listing
  const errors =
    d.errors.length > 0
      ? html`<div class="error-box" role="alert" id="filter-errors">
          <p><strong>This filter cannot be applied, so no events are listed.</strong></p>
          <ul>${d.errors.map((e) => html`<li>${e.message}.</li>`)}</ul>
        </div>`
      : ''
  let results: SafeHtml | string = ''
  if (listing) {
    const firstPage = !filtered && listing.newerHref === null
    const table =
      listing.rows.length === 0
        ? listing.accountIsEmpty && !filtered
          ? emptyState(d.baseUrl)
          : html`<div class="panel empty"><p>No events match these filters. <a href="/logs/">Clear the filters</a></p></div>`
        : html`<div class="table-wrap"><table class="events">
          <caption class="sr-only">Deployment events, newest first</caption>
          <thead><tr>
            <th scope="col">Time</th><th scope="col">Service</th><th scope="col">Environment</th>
            <th scope="col">Version</th><th scope="col">Status</th><th scope="col">Source</th>
            <th scope="col">API key</th><th scope="col">Details</th>
          </tr></thead>
          <tbody ${firstPage ? html`data-live-prepend` : ''}>${listing.rows.map(eventRow)}</tbody>
        </table></div>`
    // Live updates (public/app.js): new events are added on the unfiltered first page, announced in
    // a bar elsewhere.
    // The stream starts after the newest event shown, so one listed here is not added again.
    const newest = firstPage && listing.rows.length > 0 ? Math.max(...listing.rows.map((r) => r.id)) : null
    results = html`<div class="live-bar" data-live-logs="${firstPage ? 'prepend' : 'notice'}" ${newest === null ? '' : html`data-live-since="${String(newest)}"`} data-live-filter="${streamFilterQuery(d.filter)}" role="status" hidden></div>
      <div class="toolbar">
        <p class="hint">${filtered ? 'Events matching the filters, newest first.' : 'All events, newest first.'}
          <span data-zone-note>Times are UTC.</span></p>
        ${downloadLinks(listing.downloads)}
      </div>
      ${table}
      <nav class="pager" aria-label="Pages">
        ${listing.newerHref ? html`<a class="button secondary" href="${listing.newerHref}" rel="prev">← Newer</a>` : ''}
        ${listing.olderHref ? html`<a class="button secondary" href="${listing.olderHref}" rel="next">Older →</a>` : ''}
      </nav>`
  }
  return layout({
    title: 'Logs',
    user: d.user,
    current: 'logs',
    csrfToken: d.csrfToken,
    body: html`<h1>Deployment log</h1>
      <details class="panel filter-box" open data-collapse-on-phone>
        <summary class="filter-summary"><span class="summary-title">Filters</span> ${activeFilters(d)}</summary>
        <form method="get" action="/logs/" class="filters" role="search" aria-label="Filter events">
          <input type="hidden" name="tz" value="" data-viewer-zone>
          <div class="field"><label for="f-service">Service</label>
            <input id="f-service" name="service" type="text" list="services" autocomplete="off" value="${f.service ?? ''}" ${invalid('service')}></div>
          <div class="field"><label for="f-environment">Environment</label>
            <input id="f-environment" name="environment" type="text" list="environments" autocomplete="off" value="${f.environment ?? ''}" ${invalid('environment')}></div>
          <div class="field"><label for="f-status">Status</label>
            <select id="f-status" name="status" ${invalid('status')}><option value="">Any</option>${statusOptions}</select></div>
          <div class="field"><label for="f-version">Version contains</label>
            <input id="f-version" name="version" type="text" value="${f.version ?? ''}" ${invalid('version')}></div>
          ${timeField('from', 'From', f.from ?? '', d.filter.from, bad.has('from') || bad.has('tz'))}
          ${timeField('to', 'To', f.to ?? '', d.filter.to, bad.has('to') || bad.has('tz'))}
          <div class="actions"><button type="submit">Filter</button>
            ${filtered ? html`<a class="button secondary" href="/logs/">Clear</a>` : ''}</div>
          <datalist id="services">${d.suggestions.services.map((s) => html`<option value="${s}">`)}</datalist>
          <datalist id="environments">${d.suggestions.environments.map((s) => html`<option value="${s}">`)}</datalist>
        </form>
      </details>
      ${errors}
      ${d.nameHints ?? ''}
      ${results}`,
  })
}
