// The deployments behind one insights figure: version, service, start, finish, duration, outcome,
// rollback marks, the guardrails it broke when recorded and, for measured figures, the value and
// what it was measured to (cards on a phone).
import type { DeploymentDetails } from '../domain/deployments/details.js'
import type { ListedDeployment, ListKind } from '../domain/deployments/insights.js'
import { clockSkewed, type Deployment, durationMs } from '../domain/deployments/rules.js'
import type { SessionUser } from '../domain/sessions.js'
import { detailsCell } from './deployment-details.js'
import { CLOCK_SKEW, formatDuration } from './duration.js'
import { flagMark } from './guard-marks.js'
import { html, type SafeHtml } from './html.js'
import { layout, timeTag } from './layout.js'

/** The query that names an insights window; every link of the pages carries it. */
export interface WindowQuery {
  environment: string
  service: string | null
  /** 7, 30, 90, or custom with from and to (YYYY-MM-DD, to not included). */
  range: string
  from: string | null
  to: string | null
  tz: string
}

function windowPairs(q: WindowQuery): [string, string][] {
  const pairs: [string, string][] = [['environment', q.environment]]
  if (q.service !== null) pairs.push(['service', q.service])
  pairs.push(['range', q.range])
  if (q.range === 'custom') {
    if (q.from !== null) pairs.push(['from', q.from])
    if (q.to !== null) pairs.push(['to', q.to])
  }
  pairs.push(['tz', q.tz])
  return pairs
}

/** A deployment's own page (its facts and incident mark). */
export function deploymentPath(id: number): string {
  return `/deployments/${id}/`
}

/** /insights/ for a window (names of services and environments encoded, whatever they hold). */
export function insightsHref(q: WindowQuery): string {
  return `/insights/?${new URLSearchParams(windowPairs(q)).toString()}`
}

/** The list of what a figure counted, for the window or for one day of it. */
export function deploymentsListHref(
  q: WindowQuery,
  kind: ListKind,
  day?: { from: string; to: string },
): string {
  const window = day ? { ...q, range: 'custom', from: day.from, to: day.to } : q
  return `/insights/deployments?${new URLSearchParams([...windowPairs(window), ['kind', kind]]).toString()}`
}

export const KIND_TITLES: Record<ListKind, string> = {
  finished: 'Deployments that finished',
  succeeded: 'Succeeded deployments',
  failed: 'Failed deployments',
  rolled_back: 'Rolled-back deployments',
  restore: 'Time to restore',
  duration: 'Deployment duration',
  lead_time: 'Lead time',
  incident: 'Marked as having caused an incident',
  freeze: 'Deployed during a freeze',
  lock: 'Deployed into a locked environment',
  bad_version: 'Deployed a version marked bad',
  promotion: 'Deployed against a promotion rule',
  override: 'Deployed with the check overridden',
}

const KIND_EXPLAINED: Record<ListKind, string> = {
  finished: 'Every deployment that succeeded or failed in the window.',
  succeeded:
    'Deployments that succeeded in the window: the numerator of deployment frequency (rolled-back ones included: they succeeded first).',
  failed: 'Deployments that failed in the window.',
  rolled_back:
    'Deployments that succeeded in the window and were later replaced by a rollback to an earlier version.',
  restore:
    'Each failed or rolled-back deployment, and the time from its finish to the finish of the next success in its service and environment (for a rolled-back one: the rollback).',
  duration: 'Each finished deployment that was not instant, from its start (Deploying) to its finish.',
  lead_time:
    'Each succeeded deployment, from its commit (when its events carry commit_time) or else from the start of the first deployment of its version of the service (in any environment), to its finish here.',
  incident:
    'Deployments that finished in the window and were marked as having caused an incident. A marked success counts as a failure in change failure rate; its time to restore runs to the fix the mark names, else to the next success.',
  freeze:
    'Deployments that finished in the window whose events arrived during a freeze window (recorded all the same).',
  lock: 'Deployments that finished in the window whose events arrived while the environment (or the service in it) was locked.',
  bad_version: 'Deployments that finished in the window whose events carried a version marked bad.',
  promotion: 'Deployments that finished in the window whose events broke a promotion rule.',
  override:
    'Deployments that finished in the window whose events were sent with the check overridden (shiplog-deploy --force --reason).',
}

export interface DeploymentsListData {
  user: SessionUser
  csrfToken: string
  query: WindowQuery
  kind: ListKind
  /** The window as people read it, e.g. "1 Nov 2026 – 30 Nov 2026". */
  windowText: string
  rows: ListedDeployment[]
  /** Commit, CI link and description of the rows, by deployment id (absent: their events had none). */
  details: ReadonlyMap<number, DeploymentDetails>
  /** The rows marked as having caused an incident, by deployment id. */
  incidents: ReadonlySet<number>
  /** Every row the figure counted; `rows` may hold fewer (the bound). */
  total: number
  limit: number
}

function outcomeLabel(d: Deployment): SafeHtml {
  if (d.result === 'succeeded') return html`<span class="badge outcome-succeeded">succeeded</span>`
  if (d.result === 'failed') return html`<span class="badge outcome-failed">failed</span>`
  return html`<span class="badge outcome-open">open</span>`
}

function marks(d: Deployment, incident: boolean): SafeHtml[] {
  const out: SafeHtml[] = []
  if (incident) out.push(html`<span class="mark incident-mark">incident</span>`)
  if (d.rollback) out.push(html`<span class="mark">↩ rollback</span>`)
  if (d.rolledBack) out.push(html`<span class="mark">rolled back</span>`)
  if (d.instant) out.push(html`<span class="mark">instant</span>`)
  if (d.eventIds.length > 2) out.push(html`<span class="mark">${d.eventIds.length} events</span>`)
  return out
}

/** What the deployment broke when it was recorded, and the override reason (SPEC §11). */
function flagged(details: DeploymentDetails | undefined): SafeHtml | string {
  return details?.flags ? flagMark(details.flags) : ''
}

function measuredTo(row: ListedDeployment, kind: ListKind): SafeHtml | string {
  if (row.unrestored) return html`<span class="mark">not restored yet</span>`
  if (!row.measured) return ''
  const value = html`<strong>${formatDuration(row.measured.valueMs)}</strong>`
  const r = row.related
  if (kind === 'restore') {
    return r
      ? html`${value} <span class="hint">until <span class="mono">${r.version}</span> finished ${r.finishedAt === null ? '' : timeTag(r.finishedAt)}</span>`
      : value
  }
  if (kind === 'lead_time') {
    if (row.measured.from === 'commit') return html`${value} <span class="hint">since its commit</span>`
    return r
      ? html`${value} <span class="hint">since <span class="mono">${r.version}</span> first started in ${r.environment} ${timeTag(r.startedAt)}</span>`
      : value
  }
  return value
}

export function deploymentsListPage(d: DeploymentsListData): SafeHtml {
  const measured = d.kind === 'restore' || d.kind === 'duration' || d.kind === 'lead_time'
  const where =
    d.query.service === null ? d.query.environment : `${d.query.service} in ${d.query.environment}`
  const rows = d.rows.map(
    (r) => html`<tr data-deployment-id="${r.deployment.id}">
      <td class="mono">${r.deployment.version}</td>
      <td>${r.deployment.service} <a href="${deploymentPath(r.deployment.id)}" aria-label="Deployment #${r.deployment.id}: its page and incident mark">#${r.deployment.id}</a></td>
      <td>${timeTag(r.deployment.startedAt)}</td>
      <td>${r.deployment.finishedAt === null ? '—' : timeTag(r.deployment.finishedAt)}</td>
      <td class="num">${clockSkewed(r.deployment) ? CLOCK_SKEW : formatDuration(durationMs(r.deployment))}</td>
      <td>${outcomeLabel(r.deployment)} ${marks(r.deployment, d.incidents.has(r.deployment.id))}${flagged(d.details.get(r.deployment.id))}</td>
      ${measured ? html`<td>${measuredTo(r, d.kind)}</td>` : ''}
      ${detailsCell(d.details.get(r.deployment.id))}
    </tr>`,
  )
  const bound =
    d.total > d.rows.length
      ? html`<p class="notice" role="status">Showing the ${d.rows.length} most recent of ${d.total} deployments. Choose a shorter window to see the others.</p>`
      : ''
  const table =
    d.rows.length === 0
      ? html`<div class="panel empty"><p>None in this window.</p></div>`
      : html`<div class="table-wrap"><table class="deploy-list">
        <caption class="sr-only">${KIND_TITLES[d.kind]}, latest finished first</caption>
        <thead><tr>
          <th scope="col">Version</th><th scope="col">Service</th><th scope="col">Started</th>
          <th scope="col">Finished</th><th scope="col" class="num">Duration</th><th scope="col">Outcome</th>
          ${measured ? html`<th scope="col">${KIND_TITLES[d.kind]}</th>` : ''}
          <th scope="col">Commit, CI and description</th>
        </tr></thead>
        <tbody>${rows}</tbody>
      </table></div>`
  return layout({
    title: KIND_TITLES[d.kind],
    user: d.user,
    current: 'insights',
    csrfToken: d.csrfToken,
    body: html`<p class="crumbs"><a href="${insightsHref(d.query)}">← Insights</a></p>
      <h1>${KIND_TITLES[d.kind]}: ${d.total}</h1>
      <p class="window-line"><strong>${where}</strong> · ${d.windowText} · <span>time zone ${d.query.tz}</span></p>
      <p class="hint">${KIND_EXPLAINED[d.kind]} Latest finished first. Times are shown in your browser's time zone; hover for UTC.</p>
      ${bound}
      ${table}`,
  })
}
