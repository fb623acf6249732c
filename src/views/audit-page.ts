// Settings → Audit log (admins): who did what, when and from where, newest first, with filters and
// the filtered log as CSV or JSON. Every value is escaped by the html tag; details are data, shown
// as "name: value" lines.
import { AUDIT_ACTIONS } from '../domain/audit/log.js'
import type { AuditEntry } from '../domain/audit/query.js'
import type { SessionUser } from '../domain/sessions.js'
import { type DownloadChoice, downloadLinks } from './downloads.js'
import { html, type SafeHtml } from './html.js'
import { layout, timeTag } from './layout.js'

export interface AuditPageData {
  user: SessionUser
  csrfToken: string
  /** The filter as typed, to refill the form. */
  form: Record<'action' | 'actor' | 'from' | 'to', string>
  errors: { field: string; message: string }[]
  actors: string[]
  /** Null when the filter was refused: nothing is listed then. */
  listing: {
    entries: AuditEntry[]
    filtered: boolean
    olderHref: string | null
    firstHref: string | null
    /** Download CSV / Download JSON and the "for Excel" choice. */
    downloads: DownloadChoice
  } | null
}

/** `user.role_changed` → "user role changed": the action as words, the code kept for filters. */
export function actionWords(action: string): string {
  return action.replace(/[._]/g, ' ')
}

/** `repositoryUrl` → "repository url". */
function detailName(name: string): string {
  return name.replace(/([a-z])([A-Z])/g, '$1 $2').toLowerCase()
}

function detailValue(value: unknown): string {
  if (Array.isArray(value)) return value.length === 0 ? '(none)' : value.map(String).join(', ')
  if (value === null || value === undefined) return '(none)'
  if (typeof value === 'boolean') return value ? 'yes' : 'no'
  return String(value)
}

function details(entry: AuditEntry): SafeHtml | string {
  const d = entry.details
  const names = Object.keys(d)
  if (names.length === 0) return ''
  const lines: SafeHtml[] = []
  // "from" and "to" read best as one change.
  if ('from' in d && 'to' in d) {
    lines.push(html`<li>${detailValue(d.from)} → ${detailValue(d.to)}</li>`)
  }
  for (const name of names) {
    if ((name === 'from' || name === 'to') && 'from' in d && 'to' in d) continue
    lines.push(html`<li><span class="hint">${detailName(name)}:</span> ${detailValue(d[name])}</li>`)
  }
  return html`<ul class="audit-details">${lines}</ul>`
}

function entryRow(entry: AuditEntry): SafeHtml {
  return html`<tr>
      <td data-label="Time">${timeTag(entry.at)}</td>
      <td data-label="Actor">${entry.actor} <span class="hint">(${entry.actorKind})</span></td>
      <td data-label="Address">${entry.address ?? '–'}</td>
      <td data-label="Action"><code>${entry.action}</code></td>
      <td data-label="Target">${entry.target ?? '–'}</td>
      <td data-label="Details">${details(entry)}</td>
    </tr>`
}

function timeField(name: 'from' | 'to', label: string, value: string, invalid: boolean): SafeHtml {
  return html`<div class="field"><label for="a-${name}">${label} <span class="zone" data-zone-label>(UTC)</span></label>
    <input id="a-${name}" name="${name}" type="datetime-local" step="1" value="${value}" ${invalid ? html`aria-invalid="true" aria-describedby="filter-errors"` : ''}></div>`
}

export function auditPage(d: AuditPageData): SafeHtml {
  const bad = new Set(d.errors.map((e) => e.field))
  const invalid = (name: string) =>
    bad.has(name) ? html`aria-invalid="true" aria-describedby="filter-errors"` : ''
  const options = AUDIT_ACTIONS.map(
    (a) => html`<option value="${a}" ${d.form.action === a ? html`selected` : ''}>${actionWords(a)}</option>`,
  )
  const errors =
    d.errors.length > 0
      ? html`<div class="error-box" role="alert" id="filter-errors">
          <p><strong>This filter cannot be applied, so no entries are listed.</strong></p>
          <ul>${d.errors.map((e) => html`<li>${e.message}.</li>`)}</ul>
        </div>`
      : ''
  let results: SafeHtml | string = ''
  const l = d.listing
  if (l) {
    const table =
      l.entries.length === 0
        ? html`<div class="panel empty"><p>${l.filtered ? html`No entries match these filters. <a href="/settings/audit/">Clear the filters</a>` : 'Nothing recorded yet.'}</p></div>`
        : html`<div class="table-wrap"><table class="stack-on-phone audit-table">
            <caption class="sr-only">Audit log entries, newest first</caption>
            <thead><tr><th scope="col">Time</th><th scope="col">Actor</th><th scope="col">Address</th>
              <th scope="col">Action</th><th scope="col">Target</th><th scope="col">Details</th></tr></thead>
            <tbody>${l.entries.map(entryRow)}</tbody></table></div>`
    results = html`<div class="toolbar">
        <p class="hint">${l.filtered ? 'Entries matching the filters, newest first.' : 'All entries, newest first.'}
          <span data-zone-note>Times are UTC.</span></p>
        ${downloadLinks(l.downloads)}
      </div>
      ${table}
      <nav class="pager" aria-label="Pages">
        ${l.firstHref ? html`<a class="button secondary" href="${l.firstHref}">← Newest</a>` : ''}
        ${l.olderHref ? html`<a class="button secondary" href="${l.olderHref}" rel="next">Older →</a>` : ''}
      </nav>`
  }
  const filtered = Object.values(d.form).some((v) => v !== '')
  return layout({
    title: 'Audit log',
    user: d.user,
    current: 'settings',
    csrfToken: d.csrfToken,
    body: html`<p><a href="/settings/">← Settings</a></p>
      <h1>Audit log</h1>
      <p class="hint">Who signed in, changed keys, users, settings or webhooks, and downloaded data, from which address.
        Entries are never edited or deleted.</p>
      <details class="panel filter-box" open data-collapse-on-phone>
        <summary class="filter-summary"><span class="summary-title">Filters</span></summary>
        <form method="get" action="/settings/audit/" class="filters" role="search" aria-label="Filter the audit log">
          <input type="hidden" name="tz" value="" data-viewer-zone>
          <div class="field"><label for="a-action">Action</label>
            <select id="a-action" name="action" ${invalid('action')}><option value="">Any</option>${options}</select></div>
          <div class="field"><label for="a-actor">Actor contains</label>
            <input id="a-actor" name="actor" type="text" list="audit-actors" autocomplete="off" maxlength="200" value="${d.form.actor}" ${invalid('actor')}></div>
          ${timeField('from', 'From', d.form.from, bad.has('from') || bad.has('tz'))}
          ${timeField('to', 'To', d.form.to, bad.has('to') || bad.has('tz'))}
          <div class="actions"><button type="submit">Filter</button>
            ${filtered ? html`<a class="button secondary" href="/settings/audit/">Clear</a>` : ''}</div>
          <datalist id="audit-actors">${d.actors.map((a) => html`<option value="${a}">`)}</datalist>
        </form>
      </details>
      ${errors}
      ${results}`,
  })
}
