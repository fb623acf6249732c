// The board /services/: services × environments, what runs where, what needs attention, drift;
// a table on a desktop and a card per service on a phone.
import { type BoardGuards, type CellGuard, cellKey, NO_BOARD_GUARDS } from '../domain/board/guard-marks.js'
import type { Alert, BoardEntry, BoardRow, Drift } from '../domain/board/rows.js'
import type { FieldError } from '../domain/events/event.js'
import { readInstant } from '../domain/instants.js'
import { counted } from '../domain/plural.js'
import type { SessionUser } from '../domain/sessions.js'
import { badMarkHtml, environmentMarks, flagMark, guardNotice, lockMark } from './guard-marks.js'
import { html, type SafeHtml } from './html.js'
import { layout, timeTag } from './layout.js'

export interface BoardPageData {
  user: SessionUser
  csrfToken: string
  environments: string[]
  rows: BoardRow[]
  /** Guardrail marks of the columns and cells shown (locks and freezes only on the board of now). */
  guards: BoardGuards
  /** The instant shown when it is not now. */
  at: number | null
  /** The "As it was at" field: the text as typed, the zone it was read in (else UTC), why it was refused. */
  atForm: { text: string; zone?: string; error: FieldError | null }
  /** When the account's first deployment started, when `at` is before it (nothing to show then). */
  firstDeployment: number | null
  /** The account's retention, when the page says why it holds nothing from a time. */
  retentionDays?: number | null
  now: number
  filter: { team: string; name: string }
  teams: string[]
  /** True when the account has no deployments at all (not merely none matching). */
  accountIsEmpty: boolean
  baseUrl: string
}

/** Stands in the path for a service whose name a URL would read as a dot segment ("." or ".."). */
export const DOT_NAME_SEGMENT = '-'

/**
 * The address of a service's page (or of `rest` under it): the name is one encoded path segment.
 * Browsers resolve "." and ".." (also as %2E) as dot segments, so those two names travel in the
 * query instead, under the segment "-".
 */
export function servicePath(service: string, rest = '', query: Record<string, string> = {}): string {
  const dots = service === '.' || service === '..'
  const segment = dots ? DOT_NAME_SEGMENT : encodeURIComponent(service)
  const qs = new URLSearchParams(dots ? { name: service, ...query } : query).toString()
  return `/services/${segment}/${rest}${qs ? `?${qs}` : ''}`
}

/** "5 min ago" from the server's clock; the script keeps it fresh and puts local time in the title. */
export function relativeTime(ms: number, now: number): string {
  const seconds = Math.round((now - ms) / 1000)
  if (seconds < 0) return 'just now'
  if (seconds < 60) return `${seconds} s ago`
  const minutes = Math.floor(seconds / 60)
  if (minutes < 60) return `${minutes} min ago`
  const hours = Math.floor(minutes / 60)
  if (hours < 48) return `${hours} h ago`
  return `${Math.floor(hours / 24)} days ago`
}

/** "2026-11-20T14:00:00.123Z" and "2026-11-20 14:00:00 UTC": the machine and the hover forms. */
function instantTexts(ms: number): { iso: string; utc: string } {
  const iso = new Date(ms).toISOString()
  return { iso, utc: `${iso.slice(0, 10)} ${iso.slice(11, 19)} UTC` }
}

/** A relative time with the exact time (UTC; the viewer's zone once the script runs) on hover. */
export function sinceTag(ms: number, now: number): SafeHtml {
  const { iso, utc } = instantTexts(ms)
  return html`<time datetime="${iso}" title="${utc}" data-relative>${relativeTime(ms, now)}</time>`
}

export const ALERT_LABELS: Record<Alert, string> = {
  in_progress: 'In progress',
  failed: 'Failed',
  stalled: 'Stalled',
}

/** Versions longer than this may be cut short by the cell's width: they carry the full text on hover. */
const LONG_VERSION = 18

/**
 * The board's cells, rendered with fragments that repeat across the table (versions, senders,
 * drift marks, environment attributes) built once per page: 3000 cells are most of the page.
 */
class CellRenderer {
  readonly #versions = new Map<string, SafeHtml>()
  readonly #senders = new Map<string, SafeHtml>()
  readonly #drifts = new Map<string, SafeHtml>()

  constructor(private readonly now: number) {}

  version(version: string): SafeHtml {
    let out = this.#versions.get(version)
    if (!out) {
      out =
        version.length > LONG_VERSION
          ? html`<span class="version mono" title="${version}">${version}</span>`
          : html`<span class="version mono">${version}</span>`
      this.#versions.set(version, out)
    }
    return out
  }

  sender(sender: string): SafeHtml {
    let out = this.#senders.get(sender)
    if (!out) {
      out = html` · ${sender}`
      this.#senders.set(sender, out)
    }
    return out
  }

  /**
   * The quiet drift mark: "≠ staging" to the eye, the whole sentence on hover and, once, for
   * screen readers.
   */
  drift(drift: Drift): SafeHtml {
    const key = `${drift.kind}\u0000${drift.environment}\u0000${drift.version}`
    let out = this.#drifts.get(key)
    if (!out) {
      const text =
        drift.kind === 'behind'
          ? `Differs from ${drift.environment}, which runs ${drift.version}: waiting to be promoted`
          : `Differs from ${drift.environment}, which runs ${drift.version}: deployed here more recently`
      out = html` <span class="drift" title="${text}"><span aria-hidden="true">≠ ${drift.environment}</span><span class="sr-only">${text}</span></span>`
      this.#drifts.set(key, out)
    }
    return out
  }

  since(ms: number): SafeHtml {
    return sinceTag(ms, this.now)
  }

  alert(alert: NonNullable<BoardEntry['alert']>): SafeHtml {
    return html`<div class="alert ${alert.outcome}"><span class="state ${alert.outcome}">${ALERT_LABELS[alert.outcome]}</span> <span class="mono">${alert.version}</span> <span class="hint">started ${this.since(alert.startedAt)}</span></div>`
  }

  /**
   * A cell's guardrail marks: a lock on the service alone, a version marked bad, a deployment that
   * broke a guardrail. A mark about another version than the one running names it.
   */
  guard(entry: BoardEntry, guard: CellGuard): SafeHtml {
    const other = (version: string) => (version === entry.version ? null : version)
    return html`<div class="guards">${guard.locks.map((l) => lockMark(l, this.now))}${guard.bad.map((b) => badMarkHtml(b.mark, other(b.version)))}${guard.flagged.map((f) => flagMark(f.flags, f.latest ? other(f.version) : null))}</div>`
  }

  body(entry: BoardEntry | null, guard: CellGuard | undefined): SafeHtml {
    if (!entry) return html`<span class="none" aria-label="nothing deployed">—</span>`
    const running =
      entry.version === null
        ? html`<span class="hint">nothing running yet</span>`
        : html`<div class="running">${this.version(entry.version)}${entry.drift ? this.drift(entry.drift) : ''}</div><div class="hint">${entry.since === null ? '' : this.since(entry.since)}${entry.sender ? this.sender(entry.sender) : ''}</div>`
    const marks = guard ? this.guard(entry, guard) : ''
    return entry.alert ? html`${running}${this.alert(entry.alert)}${marks}` : html`${running}${marks}`
  }
}

function cellClass(entry: BoardEntry | null, guard: CellGuard | undefined): string {
  if (!entry) return 'cell empty-cell'
  const guarded = guard
    ? ` guarded${guard.locks.length > 0 ? ' locked' : ''}${guard.bad.length > 0 ? ' bad' : ''}`
    : ''
  return entry.alert ? `cell attention ${entry.alert.outcome}${guarded}` : `cell${guarded}`
}

/** The opening of each column's cell, escaped once: `<td class="cell" data-environment="prod">`. */
function openings(environments: readonly string[]) {
  return environments.map((environment) => ({
    plain: html`<td class="cell" data-environment="${environment}">`,
    environment,
  }))
}

function rowHtml(
  row: BoardRow,
  cells: CellRenderer,
  opening: ReturnType<typeof openings>,
  guards: BoardGuards,
): SafeHtml {
  const noGuards = guards.cells.size === 0
  return html`<tr data-service="${row.service}"><th scope="row" class="service-col"><a href="${servicePath(row.service)}" title="${row.service}">${row.service}</a>${row.team ? html`<div class="hint">${row.team}</div>` : ''}</th>${row.entries.map(
    (entry, i) => {
      const open = opening[i]
      const guard = noGuards || !entry ? undefined : guards.cells.get(cellKey(row.service, entry.environment))
      const cls = cellClass(entry, guard)
      const td =
        open && cls === 'cell'
          ? open.plain
          : html`<td class="${cls}" data-environment="${open?.environment ?? ''}">`
      return html`${td}${cells.body(entry, guard)}</td>`
    },
  )}</tr>
`
}

/**
 * One row of the board as the page draws it (the live board fetches it when a deployment there
 * changes, so the sender and the drift marks of the whole row are the server's).
 */
export function boardRowHtml(
  row: BoardRow,
  environments: readonly string[],
  now: number,
  guards: BoardGuards = NO_BOARD_GUARDS,
): SafeHtml {
  return rowHtml(row, new CellRenderer(now), openings(environments), guards)
}

function table(d: BoardPageData): SafeHtml {
  // "5 min ago" counts back from the instant shown: the board as it was then, read as it was then.
  const cells = new CellRenderer(d.at ?? d.now)
  const opening = openings(d.environments)
  const columns = d.guards.columns
  const heading = (e: string) => {
    const guard = columns.get(e)
    return guard
      ? html`<th scope="col" class="guarded-col">${e}${environmentMarks(guard, d.now)}</th>`
      : html`<th scope="col">${e}</th>`
  }
  // Live updates (public/app.js) only for the board as it is now, not as it was at an instant.
  return html`${guardNotice([...columns.values()], [], d.now, { id: 'board-guards', heading: 'Locked and frozen now', className: 'phone-only' })}<div class="live-bar" role="status" hidden></div><div class="table-wrap board-wrap" ${d.at === null ? html`data-live-board` : html`data-relative-base="${new Date(d.at).toISOString()}"`}><table class="board">
    <caption class="sr-only">What runs where: services by environment</caption>
    <thead><tr><th scope="col" class="service-col">Service</th>${d.environments.map(heading)}</tr></thead>
    <tbody>${d.rows.map((row) => rowHtml(row, cells, opening, d.guards))}</tbody>
  </table></div>`
}

/** `2026-11-21T22:40:00`: an instant as a datetime-local field holds it, in UTC. */
function utcLocalValue(ms: number): string {
  return new Date(ms - (ms % 1000)).toISOString().slice(0, 19)
}

/**
 * "As it was at": a date-time picker read in the viewer's zone, as the log's From and To. A time
 * typed without zone is shown as typed (it was read in the zone the label names: the viewer's, sent
 * by the script, else UTC); one that came with a zone (a link) is shown in UTC, and `data-utc` lets
 * the script show it in the viewer's zone. A refused time is said beside the field.
 */
function atField(d: BoardPageData): SafeHtml {
  const { text, zone, error } = d.atForm
  const zoneless = readInstant(text)?.offsetMinutes === undefined
  const value = d.at === null || zoneless ? text : utcLocalValue(d.at)
  const utc = d.at === null || zoneless ? '' : new Date(d.at).toISOString()
  return html`<div class="field"><label for="f-at">As it was at <span class="zone" data-zone-label>(${zone ?? 'UTC'})</span></label>
        ${error ? html`<p class="field-error" id="f-at-error"><span class="sr-only">Error:</span> ${error.message}.</p>` : ''}
        <input id="f-at" name="at" type="datetime-local" step="1" value="${value}" ${utc ? html`data-utc="${utc}"` : ''} ${error ? html`aria-invalid="true" aria-describedby="f-at-error f-at-hint"` : html`aria-describedby="f-at-hint"`}>
        <p class="hint" id="f-at-hint">Empty for now.</p></div>`
}

function filters(d: BoardPageData): SafeHtml {
  const active = [
    d.filter.team ? html`<span>team: ${d.filter.team}</span>` : '',
    d.filter.name ? html`<span>name contains “${d.filter.name}”</span>` : '',
    d.at === null ? '' : html`<span>as at ${timeTag(d.at)}</span>`,
    d.atForm.error ? html`<span>invalid time</span>` : '',
  ]
  const any = d.filter.team !== '' || d.filter.name !== ''
  const shown = any || d.at !== null || d.atForm.error !== null
  // An error keeps the box open on a phone (app.js folds it unless #filter-errors is on the page).
  return html`<details class="filter-box" data-collapse-on-phone open ${d.atForm.error ? html`id="filter-errors"` : ''}>
    <summary class="filter-summary">Filters${shown ? html`: <span class="active">${active}</span>` : html` <span class="hint">(none)</span>`}</summary>
    <form method="get" action="/services/" class="filters board-filters">
      <input type="hidden" name="tz" value="${d.atForm.zone ?? ''}" data-viewer-zone>
      <div class="field"><label for="f-name">Service name contains</label>
        <input id="f-name" name="name" type="search" value="${d.filter.name}" maxlength="100"></div>
      <div class="field"><label for="f-team">Team</label>
        <select id="f-team" name="team"><option value="">All teams</option>${d.teams.map(
          (t) => html`<option value="${t}" ${t === d.filter.team ? html`selected` : ''}>${t}</option>`,
        )}</select></div>
      ${atField(d)}
      <div class="actions"><button type="submit">Filter</button> ${any ? html`<a href="/services/${d.at === null ? '' : `?at=${encodeURIComponent(new Date(d.at).toISOString())}`}">Clear</a>` : ''}</div>
    </form>
  </details>`
}

/** A time before the first deployment: nothing ran yet, and when the first one started. */
function beforeAnyData(first: number, retentionDays: number | null): SafeHtml {
  const iso = new Date(first).toISOString()
  const said =
    retentionDays === null
      ? html`<strong>Nothing had been deployed yet at that time.</strong>
    The earliest deployment Shiplog holds started at ${timeTag(first)}.`
      : html`<strong>Shiplog holds no deployment from that time.</strong>
    This account keeps ${counted(retentionDays, 'day')} of history (Settings → Retention); the earliest deployment it still holds started at ${timeTag(first)}.`
  return html`<div class="panel empty before-data"><p>${said}</p>
    <p><a href="/services/?at=${encodeURIComponent(iso)}">Show the board as it was then</a> · <a href="/services/">Back to now</a></p></div>`
}

function emptyState(baseUrl: string): SafeHtml {
  return html`<div class="panel empty">
    <h2>Nothing deployed yet</h2>
    <p>The board shows what runs where once your pipelines send events. Create an API key in
      <a href="/settings/#keys-heading">Settings → API keys</a>, then send your first event:</p>
    <pre class="snippet"><code>curl -X POST ${baseUrl}/deploy \\
  -H "Content-Type: application/json" -H "x-api-key: $SHIPLOG_API_KEY" \\
  -d '{"service":"App1","environment":"prod","version":"1.0.3","status":"Deployed"}'</code></pre>
  </div>`
}

export function boardPage(d: BoardPageData): SafeHtml {
  const iso = d.at === null ? '' : new Date(d.at).toISOString()
  const body = d.accountIsEmpty
    ? emptyState(d.baseUrl)
    : html`${filters(d)}
      ${
        d.firstDeployment !== null
          ? beforeAnyData(d.firstDeployment, d.retentionDays ?? null)
          : d.rows.length === 0
            ? html`<p class="panel">No service matches these filters. <a href="/services/">Show all services</a></p>`
            : html`<p class="hint board-count">${d.rows.length} ${d.rows.length === 1 ? 'service' : 'services'} · ${d.environments.length} ${d.environments.length === 1 ? 'environment' : 'environments'}</p>
            ${table(d)}`
      }`
  return layout({
    title: 'Board',
    user: d.user,
    current: 'board',
    csrfToken: d.csrfToken,
    body: html`<h1>What runs where</h1>
      ${
        d.at === null
          ? ''
          : html`<div class="notice at-notice" role="status"><p><strong>Showing the board as it was at <time datetime="${iso}" data-local>${iso.slice(0, 19).replace('T', ' ')} UTC</time>.</strong>
            Times such as “5 min ago” count back from then. <a href="/services/">Back to now</a></p></div>`
      }
      ${body}`,
  })
}
