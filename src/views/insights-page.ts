// /insights/: the §6.2 metrics of one environment (and service) over a window, each with its
// numerator, denominator and a link to what it counted; charts per local day and their numbers.

import { type DataCoverage, frequencyPerDay } from '../domain/deployments/coverage.js'
import type { DayBucket, FlagCounts, InsightsWindow, ListKind } from '../domain/deployments/insights.js'
import type { Metrics, Spread } from '../domain/deployments/metrics.js'
import type { FieldError } from '../domain/events/event.js'
import type { SessionUser } from '../domain/sessions.js'
import { lineChart, NARROW, type Series, stackedBarChart, WIDE } from './charts.js'
import { deploymentsListHref, type WindowQuery } from './deployments-list.js'
import { durationScale, formatAxisDuration, formatDuration } from './duration.js'
import { html, type SafeHtml } from './html.js'
import { failureNumerator, failureRateMarks, guardrailFigure, restoreMarks } from './insights-marks.js'
import { layout, timeTag } from './layout.js'

export interface InsightsResult {
  query: WindowQuery
  window: InsightsWindow
  metrics: Metrics
  buckets: DayBucket[]
  /** How many finished deployments carry each guardrail flag (SPEC §11). */
  flags: FlagCounts
  /** The window's days the account's data covers (first event or retention cut-off, up to now). */
  coverage: DataCoverage
}

export interface InsightsPageData {
  user: SessionUser
  csrfToken: string
  /** The form as typed (refilled after an error). */
  form: { environment: string; service: string; range: string; from: string; to: string }
  environments: string[]
  services: string[]
  /** The zone days are bucketed in, and whether the viewer's browser named it (else UTC by default). */
  zone: string
  zoneGiven: boolean
  errors: FieldError[]
  result: InsightsResult | null
  /** The account has no deployments at all yet. */
  empty: boolean
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec']
const WEEKDAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat']

function parts(date: string): { y: number; m: number; d: number; weekday: number } {
  const [y, m, d] = date.split('-').map(Number) as [number, number, number]
  return { y, m, d, weekday: new Date(Date.UTC(y, m - 1, d)).getUTCDay() }
}

/** "29 Mar" */
export function shortDate(date: string): string {
  const p = parts(date)
  return `${p.d} ${MONTHS[p.m - 1]}`
}

/** "Sun 29 Mar 2026" */
export function longDate(date: string): string {
  const p = parts(date)
  return `${WEEKDAYS[p.weekday]} ${p.d} ${MONTHS[p.m - 1]} ${p.y}`
}

/** The window as people read it: its first and last day (the `to` date is not included). */
export function windowText(w: InsightsWindow): string {
  const first = w.days[0]?.date ?? w.fromDate
  const last = w.days.at(-1)?.date ?? w.fromDate
  const span = first === last ? longDate(first) : `${longDate(first)} – ${longDate(last)}`
  return `${span} (${w.days.length} ${w.days.length === 1 ? 'day' : 'days'})`
}

function plural(n: number, one: string, many: string): string {
  return `${n} ${n === 1 ? one : many}`
}

function fixed(n: number, digits: number): string {
  return n.toFixed(digits)
}

export const OUTCOME_SERIES: readonly Series[] = [
  { key: 'succeeded', name: 'Succeeded', colour: '#0072b2', pattern: 'solid' },
  { key: 'failed', name: 'Failed', colour: '#d55e00', pattern: 'hatch' },
  { key: 'rolledBack', name: 'Rolled back', colour: '#6e6e6e', pattern: 'dots' },
]

function link(q: WindowQuery, kind: ListKind, text: string | SafeHtml): SafeHtml {
  return html`<a href="${deploymentsListHref(q, kind)}">${text}</a>`
}

function spreadFigure(
  q: WindowQuery,
  kind: ListKind,
  spread: Spread | null,
  over: string,
  none: string,
): SafeHtml {
  if (!spread) {
    return html`<p class="figure-value none">No value</p>
      <p class="figure-sum">${none} ${link(q, kind, 'See the list')}</p>`
  }
  return html`<p class="figure-value spread"><span class="pair"><span class="label">median</span> ${formatDuration(spread.median)}</span>
      <span class="pair"><span class="label">p90</span> ${formatDuration(spread.p90)}</span></p>
    <p class="figure-sum">over ${link(q, kind, plural(spread.count, over.replace(/s$/, ''), over))}</p>`
}

/** Deployments a figure left out because their value would be negative (clocks that disagree). */
function skewNote(skewed: number): SafeHtml | string {
  if (skewed === 0) return ''
  return html`<p class="figure-sum">${plural(skewed, 'deployment', 'deployments')} left out: <span class="mark clock-skew">clock skew</span> (an end received with an earlier time than its start)</p>`
}

/** "Data covers 3 of 30 days": said when the data starts inside the window or the window is not over. */
function coverageLine(c: DataCoverage): SafeHtml | string {
  if (c.daysCovered === c.daysInWindow) return ''
  const of = `${c.daysCovered} of ${plural(c.daysInWindow, 'day', 'days')}`
  if (c.covered === null) {
    return html`<p class="coverage" id="coverage">Data covers <strong>${of}</strong>: nothing was recorded in this window (or it was removed by retention).</p>`
  }
  // The data starts inside the window (rather than the window being not over yet): say where.
  const since = c.covered.from === c.dataFrom ? html` (since ${timeTag(c.covered.from)})` : ''
  return html`<p class="coverage" id="coverage">Data covers <strong>${of}</strong>${since}: deployment frequency divides by the ${plural(c.daysCovered, 'day', 'days')} with data (the first event kept, or the retention limit, up to now).</p>`
}

function figures(r: InsightsResult): SafeHtml {
  const { metrics: m, query: q } = r
  const days = r.coverage.daysCovered
  const succeeded = m.succeeded.length
  const failed = m.failed.length
  const rolledBack = m.rolledBack.length
  const frequency = frequencyPerDay(succeeded, r.coverage)
  const rate = m.changeFailureRate
  const restore = m.timeToRestore
  const unrestored = restore.unrestored.length
  return html`<div class="figures">
    <section class="figure" id="figure-frequency" aria-labelledby="h-frequency">
      <h3 id="h-frequency">Deployment frequency</h3>
      <p class="figure-value">${fixed(frequency, 2)} <span class="unit">/ day</span></p>
      <p class="figure-sum">${link(q, 'succeeded', `${succeeded} succeeded`)} ÷ ${plural(days, 'day', 'days')}${days < r.coverage.daysInWindow ? ' with data' : ''} = ${fixed(frequency, 2)} / day</p>
      ${days < r.coverage.daysInWindow ? html`<p class="figure-sum" id="frequency-whole-window">Over the whole window: ${succeeded} ÷ ${plural(r.coverage.daysInWindow, 'day', 'days')} = ${fixed(m.deploymentFrequencyPerDay, 2)} / day</p>` : ''}
    </section>
    <section class="figure" id="figure-failure-rate" aria-labelledby="h-failure-rate">
      <h3 id="h-failure-rate">Change failure rate</h3>
      ${
        rate === null
          ? html`<p class="figure-value none">No value</p>
            <p class="figure-sum">Nothing finished in this window (0 succeeded, 0 failed), so there is nothing to divide by.</p>`
          : html`<p class="figure-value">${Math.round(rate * 100)} <span class="unit">%</span></p>
            <p class="figure-sum">(${failureNumerator(q, m)}) ÷ (${link(q, 'succeeded', `${succeeded} succeeded`)} + ${failed} failed) = ${Math.round(rate * 100)} %</p>`
      }
      ${failureRateMarks(q, m)}
    </section>
    <section class="figure" id="figure-restore" aria-labelledby="h-restore">
      <h3 id="h-restore">Time to restore</h3>
      ${spreadFigure(
        q,
        'restore',
        restore.spread,
        'restored deployments',
        failed + rolledBack + m.incidents.failures.length === 0
          ? 'Nothing failed or was rolled back in this window.'
          : 'Nothing that failed or was rolled back here has been restored yet.',
      )}
      ${restoreMarks(q, m)}
      ${unrestored > 0 ? html`<p class="figure-sum">${link(q, 'restore', `${unrestored} not restored yet`)} (not counted)</p>` : ''}
      ${skewNote(restore.skewed.length)}
    </section>
    <section class="figure" id="figure-duration" aria-labelledby="h-duration">
      <h3 id="h-duration">Deployment duration</h3>
      ${spreadFigure(
        q,
        'duration',
        m.duration.spread,
        'deployments',
        'Nothing finished here with a start and an end (instant deployments, sent only as Deployed or Failed, have no duration).',
      )}
      ${skewNote(m.duration.skewed.length)}
    </section>
    <section class="figure" id="figure-lead-time" aria-labelledby="h-lead-time">
      <h3 id="h-lead-time">Lead time</h3>
      ${spreadFigure(q, 'lead_time', m.leadTime.spread, 'succeeded deployments', 'Nothing succeeded in this window.')}
      <p class="hint" id="lead-time-from">${leadTimeFrom(m.leadTime.from)}</p>
      ${skewNote(m.leadTime.skewed.length)}
    </section>
    ${guardrailFigure(q, m, r.flags)}
  </div>
  <p class="hint" id="spread-rule"><strong>Median</strong>: the middle value when the values are sorted; for an even count, the mean of the two middle values. <strong>p90</strong>: the nearest rank, the value at position ⌈0.9 × n⌉ in ascending order (so always a measured value, with at least 90 % of the values at or below it).</p>`
}

/** Which definition each lead-time value used: from the commit (DORA) or the first deployment. */
function leadTimeFrom(from: { commit: number; first_deployment: number }): string {
  if (from.commit === 0) return 'From the first start of a version in any environment to its success here.'
  if (from.first_deployment === 0) return 'From the commit (commit_time) to the success here.'
  return `${from.commit} from the commit (commit_time), ${from.first_deployment} from the first start of the version in any environment (no commit time sent); each to its success here.`
}

function charts(r: InsightsResult): SafeHtml {
  const q = r.query
  const dayHref = (b: DayBucket, kind: ListKind) =>
    deploymentsListHref(q, kind, { from: b.day.date, to: nextDate(b.day.date) })
  const bars = r.buckets.map((b) => ({
    label: shortDate(b.day.date),
    longLabel: longDate(b.day.date),
    values: { succeeded: b.succeeded, failed: b.failed, rolledBack: b.rolledBack },
    href: dayHref(b, 'finished'),
  }))
  const points = r.buckets.map((b) => ({
    label: shortDate(b.day.date),
    longLabel: `${longDate(b.day.date)}, median of ${b.durationCount}`,
    value: b.durationMedianMs,
    href: b.durationCount > 0 ? dayHref(b, 'duration') : null,
  }))
  const zone = r.query.tz
  const barOptions = {
    title: 'Deployments per day, by outcome',
    yLabel: 'Deployments',
    xLabel: `Day they finished (${zone})`,
    series: OUTCOME_SERIES,
    bars,
  }
  const lineOptions = {
    title: 'Deployment duration: median per day',
    yLabel: 'Median duration',
    xLabel: `Day they finished (${zone})`,
    points,
    format: formatAxisDuration,
    scale: durationScale,
    colour: '#0072b2',
    seriesName: 'Median duration',
  }
  const anyDuration = r.buckets.some((b) => b.durationCount > 0)
  const rows = r.buckets.map(
    (b) => html`<tr>
      <th scope="row">${b.succeeded + b.failed + b.rolledBack > 0 ? html`<a href="${dayHref(b, 'finished')}">${dayName(b.day.date)}</a>` : dayName(b.day.date)}${
        b.day.end - b.day.start !== 86_400_000
          ? html` <span class="hint">(${Math.round((b.day.end - b.day.start) / 3_600_000)} h)</span>`
          : ''
      }</th>
      <td class="num">${b.succeeded}</td><td class="num">${b.failed}</td><td class="num">${b.rolledBack}</td>
      <td class="num all">${b.succeeded + b.failed + b.rolledBack}</td>
      <td class="num">${b.durationCount > 0 ? html`<a href="${dayHref(b, 'duration')}">${formatDuration(b.durationMedianMs)}</a> <span class="hint">(${b.durationCount})</span>` : '—'}</td>
    </tr>`,
  )
  return html`<h2>Charts</h2>
    <div class="charts">
      <figure class="chart-box" id="chart-outcomes">
        <h3 class="chart-title">${barOptions.title}</h3>
        <div class="chart-wide">${stackedBarChart({ ...barOptions, id: 'outcomes-wide', size: WIDE })}</div>
        <div class="chart-narrow">${stackedBarChart({ ...barOptions, id: 'outcomes-narrow', size: NARROW })}</div>
        <figcaption class="hint">Each bar is one day in ${zone}; a rolled-back deployment is drawn once, as rolled back. Select a bar for its deployments.</figcaption>
      </figure>
      <figure class="chart-box" id="chart-duration">
        <h3 class="chart-title">${lineOptions.title}</h3>
        ${
          anyDuration
            ? html`<div class="chart-wide">${lineChart({ ...lineOptions, id: 'duration-wide', size: WIDE })}</div>
              <div class="chart-narrow">${lineChart({ ...lineOptions, id: 'duration-narrow', size: NARROW })}</div>`
            : html`<p class="panel empty">No durations to draw: nothing with a start and an end finished in this window.</p>`
        }
        <figcaption class="hint">Median of the deployments that finished that day (instant ones have no duration); the line breaks on days without any. Select a point for its deployments.</figcaption>
      </figure>
    </div>
    <details class="panel day-table">
      <summary>The same numbers as a table</summary>
      <div class="table-wrap"><table class="days">
        <caption class="sr-only">Deployments per day in ${zone}</caption>
        <thead><tr><th scope="col">Day <span class="head-zone">(${zone})</span></th><th scope="col" class="num">Succeeded</th><th scope="col" class="num">Failed</th>
          <th scope="col" class="num">Rolled back</th><th scope="col" class="num all">All</th><th scope="col" class="num">Median duration <span class="head-n">(n)</span></th></tr></thead>
        <tbody>${rows}</tbody>
      </table></div>
    </details>`
}

/** A day in the table: written out, or short on a phone (the long form stays for screen readers). */
function dayName(date: string): SafeHtml {
  return html`<span class="day-long">${longDate(date)}</span><span class="day-short" aria-hidden="true">${shortDate(date)}</span>`
}

function nextDate(date: string): string {
  const p = parts(date)
  return new Date(Date.UTC(p.y, p.m - 1, p.d + 1)).toISOString().slice(0, 10)
}

function activeFilters(d: InsightsPageData): SafeHtml {
  if (d.errors.length > 0 || !d.result) return html`<span class="active">invalid filter</span>`
  const q = d.result.query
  const range = q.range === 'custom' ? windowText(d.result.window) : `last ${q.range} days`
  return html`<span class="active"><span>environment <b>${q.environment}</b></span><span>${
    q.service === null ? 'all services' : html`service <b>${q.service}</b>`
  }</span><span>${range}</span></span>`
}

function filterForm(d: InsightsPageData): SafeHtml {
  const f = d.form
  const bad = new Set(d.errors.map((e) => e.field))
  const invalid = (name: string) => (bad.has(name) ? html`aria-invalid="true"` : '')
  const environments =
    d.environments.includes(f.environment) || f.environment === ''
      ? d.environments
      : [f.environment, ...d.environments]
  const services =
    d.services.includes(f.service) || f.service === '' ? d.services : [f.service, ...d.services]
  const rangeOption = (value: string, label: string) =>
    html`<option value="${value}" ${f.range === value ? html`selected` : ''}>${label}</option>`
  return html`<details class="panel filter-box" open data-collapse-on-phone>
    <summary class="filter-summary"><span class="summary-title">Filters</span> ${activeFilters(d)}</summary>
    <form method="get" action="/insights/" class="filters" role="search" aria-label="Choose what the insights cover">
      <input type="hidden" name="tz" value="${d.zoneGiven ? d.zone : ''}" data-viewer-zone>
      <div class="field"><label for="i-environment">Environment</label>
        <select id="i-environment" name="environment" ${invalid('environment')}>${environments.map(
          (e) => html`<option value="${e}" ${e === f.environment ? html`selected` : ''}>${e}</option>`,
        )}</select></div>
      <div class="field"><label for="i-service">Service</label>
        <select id="i-service" name="service" ${invalid('service')}><option value="">All services</option>${services.map(
          (s) => html`<option value="${s}" ${s === f.service ? html`selected` : ''}>${s}</option>`,
        )}</select></div>
      <div class="field"><label for="i-range">Range</label>
        <select id="i-range" name="range" ${invalid('range')}>
          ${rangeOption('7', 'Last 7 days')}${rangeOption('30', 'Last 30 days')}${rangeOption('90', 'Last 90 days')}${rangeOption('custom', 'Custom: From and To')}
        </select></div>
      <div class="field"><label for="i-from">From (first day)</label>
        <input id="i-from" name="from" type="date" value="${f.from}" ${invalid('from')} aria-describedby="i-dates-hint"></div>
      <div class="field"><label for="i-to">To (not included)</label>
        <input id="i-to" name="to" type="date" value="${f.to}" ${invalid('to')} aria-describedby="i-dates-hint"></div>
      <div class="actions"><button type="submit">Show</button></div>
      <p class="hint wide-field" id="i-dates-hint">From and To are used when Range is Custom; days run midnight to midnight in ${d.zone}.</p>
    </form>
  </details>`
}

export function insightsPage(d: InsightsPageData): SafeHtml {
  const errors =
    d.errors.length > 0
      ? html`<div class="error-box" role="alert" id="filter-errors">
          <p><strong>These insights cannot be shown, so no figures are given.</strong></p>
          <ul>${d.errors.map((e) => html`<li>${e.message}.</li>`)}</ul>
        </div>`
      : ''
  const zoneNote = d.zoneGiven
    ? html`Days are counted in <strong>${d.zone}</strong>.`
    : html`Days are counted in <strong>UTC</strong> (your browser did not say its time zone).`
  let body: SafeHtml | string = ''
  if (d.empty) {
    body = html`<div class="panel empty"><h2>No deployments yet</h2>
      <p>Insights appear once deployments are recorded: send Deploying and then Deployed or Failed for a service and environment (see <a href="/logs/">Logs</a>).</p></div>`
  } else if (d.result) {
    const r = d.result
    const where =
      r.query.service === null
        ? html`all services in <strong>${r.query.environment}</strong>`
        : html`<strong>${r.query.service}</strong> in <strong>${r.query.environment}</strong>`
    body = html`<p class="window-line">${where} · ${windowText(r.window)} · <span id="zone-note">${zoneNote}</span></p>
      ${coverageLine(r.coverage)}
      <p class="hint">Counting the deployments that finished in the window. Each number links to the deployments behind it.</p>
      <h2 class="sr-only">Figures</h2>
      ${figures(r)}
      ${charts(r)}`
  }
  return layout({
    title: 'Insights',
    user: d.user,
    current: 'insights',
    csrfToken: d.csrfToken,
    body: html`<h1>Insights</h1>
      ${d.zoneGiven ? '' : html`<span hidden data-zone-redirect></span>`}
      ${filterForm(d)}
      ${errors}
      ${body}`,
  })
}
