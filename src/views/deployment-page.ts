// /deployments/<id>/: one deployment's facts, and its incident mark (issue 27): what it caused, what
// fixed it, what it fixed. Admins mark, change and remove marks here (plain forms with CSRF).
import type { DeploymentDetails } from '../domain/deployments/details.js'
import type { Incident } from '../domain/deployments/incident-store.js'
import {
  clockSkewed,
  type Deployment,
  type DeploymentOutcome,
  durationMs,
} from '../domain/deployments/rules.js'
import { isWebAddress } from '../domain/services.js'
import type { SessionUser } from '../domain/sessions.js'
import { servicePath } from './board-page.js'
import { deploymentPath } from './deployments-list.js'
import { CLOCK_SKEW, formatDuration } from './duration.js'
import { html, type SafeHtml } from './html.js'
import { layout, timeTag } from './layout.js'

export interface DeploymentPageData {
  user: SessionUser
  csrfToken: string
  deployment: Deployment
  outcome: DeploymentOutcome
  details: DeploymentDetails | undefined
  incident: Incident | null
  /** The deployment the mark names as its fix, when it still exists. */
  fix: Deployment | null
  /** The marks that name this deployment as their fix, with the marked deployments. */
  fixes: { incident: Incident; deployment: Deployment }[]
  /** Later successes of its service and environment: what may have fixed it. */
  laterSuccesses: Deployment[]
  /** Earlier finished deployments there: what it may have fixed. */
  earlier: Deployment[]
  notice?: string
  /** Values and problems of a refused form, to show again beside their fields. */
  form?: Record<string, string>
  problems?: Record<string, string>
}

const OUTCOME_TEXT: Record<DeploymentOutcome, string> = {
  succeeded: 'succeeded',
  failed: 'failed',
  in_progress: 'in progress',
  stalled: 'stalled',
}

function choice(d: Deployment): string {
  const finished =
    d.finishedAt === null
      ? ''
      : ` · ${new Date(d.finishedAt).toISOString().slice(0, 16).replace('T', ' ')} UTC`
  return `#${d.id} · ${d.version}${d.result === 'failed' ? ' (failed)' : ''}${finished}`
}

function deploymentLink(d: Deployment): SafeHtml {
  return html`<a href="${deploymentPath(d.id)}">#${d.id}</a> <span class="mono">${d.version}</span>`
}

function facts(d: DeploymentPageData): SafeHtml {
  const x = d.deployment
  const marks = [
    x.rollback ? 'rollback' : null,
    x.rolledBack ? 'rolled back' : null,
    x.instant ? 'instant (sent only as Deployed or Failed)' : null,
  ].filter((m): m is string => m !== null)
  const detail = d.details
  return html`<dl class="meta" id="deployment-facts">
    <div><dt>Outcome</dt><dd><span class="badge outcome-${x.result ?? 'open'}">${OUTCOME_TEXT[d.outcome]}</span>${marks.map((m) => html` <span class="mark">${m}</span>`)}</dd></div>
    <div><dt>Started</dt><dd>${timeTag(x.startedAt)}</dd></div>
    <div><dt>Finished</dt><dd>${x.finishedAt === null ? '—' : timeTag(x.finishedAt)}</dd></div>
    <div><dt>Duration</dt><dd>${clockSkewed(x) ? CLOCK_SKEW : formatDuration(durationMs(x))}</dd></div>
    <div><dt>Sent by</dt><dd>${x.deployer ?? html`<span class="hint">no deployer named</span>`}${x.apiKeyName ? html` <span class="hint">(key ${x.apiKeyName})</span>` : ''}</dd></div>
    ${detail?.commit ? html`<div><dt>Commit</dt><dd class="mono">${detail.commit}</dd></div>` : ''}
    ${
      detail?.url
        ? html`<div><dt>CI run</dt><dd>${isWebAddress(detail.url) ? html`<a href="${detail.url}" rel="noopener noreferrer nofollow">${detail.url}</a>` : detail.url}</dd></div>`
        : ''
    }
    ${detail?.description ? html`<div><dt>Description</dt><dd>${detail.description}</dd></div>` : ''}
    <div><dt>Events</dt><dd class="mono">${x.eventIds.join(', ')}</dd></div>
  </dl>`
}

function problem(d: DeploymentPageData, field: string, id: string): { attrs: SafeHtml; message: SafeHtml } {
  const text = d.problems?.[field]
  if (!text) return { attrs: html``, message: html`` }
  return {
    attrs: html`aria-invalid="true" aria-describedby="${id}-problem"`,
    message: html`<p class="field-error" id="${id}-problem">${text}</p>`,
  }
}

/** The mark as everyone sees it. */
function markText(d: DeploymentPageData): SafeHtml {
  const i = d.incident
  if (!i) {
    return html`<p id="incident-state">Not marked as having caused an incident.${
      d.deployment.result === null ? ' Only a finished deployment can be marked.' : ''
    }</p>`
  }
  const fixed = i.fixedBy === null ? null : d.fix
  return html`<div class="error-box" id="incident-state">
    <p><strong>Caused an incident</strong>${
      i.link !== null && isWebAddress(i.link)
        ? html`: <a href="${i.link}" rel="noopener noreferrer nofollow">${i.link}</a>`
        : ''
    }</p>
    ${i.note !== null ? html`<p>${i.note}</p>` : ''}
    <p>${
      i.fixedBy === null
        ? 'No fix named: time to restore runs to the next success here.'
        : fixed
          ? html`Fixed by ${deploymentLink(fixed)}${fixed.finishedAt === null ? '' : html`, finished ${timeTag(fixed.finishedAt)}`}.`
          : html`Fixed by #${i.fixedBy} (no longer kept).`
    }</p>
    <p class="hint">Marked by ${i.createdBy} ${timeTag(i.createdAt)}. It counts as a failure in change failure rate.</p>
  </div>`
}

/** Admins: mark or change the mark (link, note, fix), and remove it. */
function markForms(d: DeploymentPageData): SafeHtml | string {
  const x = d.deployment
  if (d.user.role !== 'admin' || x.result === null) return ''
  const i = d.incident
  const value = (field: string, stored: string | null) => d.form?.[field] ?? stored ?? ''
  const link = problem(d, 'link', 'inc-link')
  const note = problem(d, 'note', 'inc-note')
  const fixedBy = problem(d, 'fixed_by', 'inc-fixed-by')
  const chosen = value('fixed_by', i?.fixedBy === null || i === null ? null : String(i.fixedBy))
  const options = [...d.laterSuccesses]
  if (d.fix && !options.some((o) => o.id === d.fix?.id)) options.unshift(d.fix)
  return html`<form method="post" action="${deploymentPath(x.id)}incident" class="panel incident-form" id="incident-form">
      <input type="hidden" name="_csrf" value="${d.csrfToken}">
      <h3>${i ? 'Change the mark' : 'Mark as having caused an incident'}</h3>
      <label for="inc-link">Incident link <span class="hint">(optional, http or https)</span></label>
      <input id="inc-link" name="link" type="url" class="wide" maxlength="2000" placeholder="https://status.example.com/incidents/42" value="${value('link', i?.link ?? null)}" ${link.attrs}>
      ${link.message}
      <label for="inc-note">Note <span class="hint">(optional, up to 500 characters)</span></label>
      <input id="inc-note" name="note" type="text" class="wide" maxlength="500" value="${value('note', i?.note ?? null)}" ${note.attrs}>
      ${note.message}
      <label for="inc-fixed-by">Fixed by deployment</label>
      <select id="inc-fixed-by" name="fixed_by" ${fixedBy.attrs}>
        <option value="">not named: the next success here</option>
        ${options.map((o) => html`<option value="${o.id}" ${String(o.id) === chosen ? html`selected` : ''}>${choice(o)}</option>`)}
      </select>
      ${fixedBy.message}
      <p class="hint">Later successes of ${x.service} in ${x.environment}, nearest first.</p>
      <p><button type="submit">${i ? 'Save the mark' : 'Mark as incident'}</button></p>
    </form>
    ${
      i
        ? html`<form method="post" action="${deploymentPath(x.id)}incident/remove" class="inline" id="incident-remove">
            <input type="hidden" name="_csrf" value="${d.csrfToken}">
            <button type="submit" class="secondary">Remove the mark</button>
          </form>`
        : ''
    }`
}

/** What this deployment fixed, and (admins, for a success) "this fixed #N". */
function fixesSection(d: DeploymentPageData): SafeHtml | string {
  const x = d.deployment
  const admin = d.user.role === 'admin' && x.result === 'succeeded'
  if (d.fixes.length === 0 && !admin) return ''
  const chosen = d.form?.incident ?? ''
  const incident = problem(d, 'incident', 'fix-incident')
  return html`<h3 id="h-fixes">Fixes</h3>
    ${
      d.fixes.length === 0
        ? html`<p id="fixes-state">Not named as the fix of any incident.</p>`
        : html`<ul id="fixes-state">${d.fixes.map((f) => html`<li>Fixed ${deploymentLink(f.deployment)}${f.incident.link !== null && isWebAddress(f.incident.link) ? html` (<a href="${f.incident.link}" rel="noopener noreferrer nofollow">incident</a>)` : ''}</li>`)}</ul>`
    }
    ${
      admin && d.earlier.length > 0
        ? html`<form method="post" action="${deploymentPath(x.id)}fixed" class="panel" id="fixed-form">
            <input type="hidden" name="_csrf" value="${d.csrfToken}">
            <label for="fix-incident">This fixed deployment</label>
            <select id="fix-incident" name="incident" required ${incident.attrs}>
              ${d.earlier.map((o) => html`<option value="${o.id}" ${String(o.id) === chosen ? html`selected` : ''}>${choice(o)}</option>`)}
            </select>
            ${incident.message}
            <p class="hint">Earlier deployments of ${x.service} in ${x.environment}, nearest first. The one chosen is marked as having caused an incident (if it is not yet) and fixed by this one.</p>
            <p><button type="submit">This fixed it</button></p>
          </form>`
        : ''
    }`
}

export function deploymentPage(d: DeploymentPageData): SafeHtml {
  const x = d.deployment
  const refused = Object.keys(d.problems ?? {}).length > 0
  return layout({
    title: `${x.service} ${x.version} in ${x.environment}`,
    user: d.user,
    current: 'board',
    csrfToken: d.csrfToken,
    body: html`<p class="crumbs"><a href="/services/">Board</a> › <a href="${servicePath(x.service)}">${x.service}</a> ›</p>
      <h1><span class="service-name">${x.service}</span> <span class="mono">${x.version}</span> in ${x.environment}</h1>
      <p class="hint">Deployment #${x.id}. Times in your browser's time zone; hover for UTC.</p>
      ${d.notice ? html`<div class="notice" role="status"><p>${d.notice}</p></div>` : ''}
      ${refused ? html`<div class="error-box" role="alert"><p>Nothing was changed: the form below says why.</p></div>` : ''}
      ${facts(d)}
      <section id="incident" aria-labelledby="h-incident">
        <h2 id="h-incident">Incident</h2>
        ${markText(d)}
        ${markForms(d)}
        ${fixesSection(d)}
      </section>`,
  })
}
