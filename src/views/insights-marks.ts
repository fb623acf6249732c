// The parts of /insights/ that incident marks and guardrails add (issue 27): which failures and
// restore times came from marks, and the "deployed during a freeze" figure with the other flags.
import type { FlagCounts, ListKind } from '../domain/deployments/insights.js'
import type { Metrics } from '../domain/deployments/metrics.js'
import { deploymentsListHref, type WindowQuery } from './deployments-list.js'
import { html, type SafeHtml } from './html.js'

function plural(n: number, one: string, many: string): string {
  return `${n} ${n === 1 ? one : many}`
}

function link(q: WindowQuery, kind: ListKind, text: string): SafeHtml {
  return html`<a href="${deploymentsListHref(q, kind)}">${text}</a>`
}

/** The change failure rate's numerator as a sum, with the marked successes when there are any. */
export function failureNumerator(q: WindowQuery, m: Metrics): SafeHtml {
  const failed = link(q, 'failed', `${m.failed.length} failed`)
  const rolledBack = link(q, 'rolled_back', `${m.rolledBack.length} rolled back`)
  const marked = m.incidents.failures.length
  if (marked === 0) return html`${failed} + ${rolledBack}`
  return html`${failed} + ${rolledBack} + ${link(q, 'incident', `${marked} marked incident${marked === 1 ? '' : 's'}`)}`
}

/** "2 of 3 failures from incident marks", said only when marks count here. */
export function failureRateMarks(q: WindowQuery, m: Metrics): SafeHtml | string {
  const marked = m.incidents.marked.length
  if (marked === 0) return ''
  const fromMarks = m.incidents.failures.length
  const failures = m.failed.length + m.rolledBack.length + fromMarks
  const already = marked - fromMarks
  return html`<p class="figure-sum from-marks" id="failure-rate-marks"><strong>${fromMarks} of ${plural(failures, 'failure', 'failures')}</strong> from incident marks: successes ${link(q, 'incident', 'marked as having caused an incident')}${
    already > 0
      ? html` (${plural(already, 'more marked deployment was', 'more marked deployments were')} already counted as failed or rolled back)`
      : ''
  }.</p>`
}

/** How many restore times came from marks, and how many ran to the fix a mark names. */
export function restoreMarks(q: WindowQuery, m: Metrics): SafeHtml | string {
  if (m.incidents.marked.length === 0) return ''
  const markedIds = new Set(m.incidents.failures.map((d) => d.id))
  const fromMarks = m.timeToRestore.values.filter((v) => markedIds.has(v.deploymentId)).length
  const fixes = m.incidents.restoredByFix
  return html`<p class="figure-sum from-marks" id="restore-marks"><strong>${fromMarks} of ${m.timeToRestore.values.length}</strong> restore times from ${link(q, 'incident', 'incident marks')}; ${plural(fixes, 'was', 'were')} measured to the fix a mark names (the others to the next success).</p>`
}

const OTHER_FLAGS: [kind: 'lock' | 'bad_version' | 'promotion' | 'override', text: string][] = [
  ['lock', 'into a locked environment'],
  ['bad_version', 'of a version marked bad'],
  ['promotion', 'against a promotion rule'],
  ['override', 'with the check overridden'],
]

/** The figure "deployed during a freeze", and the other guardrails broken, each with its list. */
export function guardrailFigure(q: WindowQuery, m: Metrics, flags: FlagCounts): SafeHtml {
  const finished = m.succeeded.length + m.failed.length
  const others = OTHER_FLAGS.filter(([kind]) => flags[kind] > 0)
  return html`<section class="figure" id="figure-freeze" aria-labelledby="h-freeze">
      <h3 id="h-freeze">Deployed during a freeze</h3>
      <p class="figure-value">${flags.freeze}</p>
      <p class="figure-sum">${link(q, 'freeze', plural(flags.freeze, 'deployment', 'deployments'))} of ${link(q, 'finished', `${finished} finished`)} arrived during a freeze window and were recorded all the same.</p>
      <p class="figure-sum" id="guardrail-flags">${
        others.length === 0
          ? 'No other guardrail was broken.'
          : html`Also: ${others.map(([kind, text], i) => html`${i === 0 ? '' : ' · '}${link(q, kind, `${flags[kind]} ${text}`)}`)}.`
      }</p>
    </section>`
}
