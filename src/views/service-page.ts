// A service's page /services/<service>/: its metadata (editable by admins), the guardrails over it
// (locks, freezes, versions marked bad; admins mark and unmark versions), and, per environment, the
// timeline of its deployments with paging, bad versions and deployments that broke a guardrail marked.

import type { DeploymentDetails } from '../domain/deployments/details.js'
import { clockSkewed, type Deployment, type DeploymentOutcome } from '../domain/deployments/rules.js'
import type { FieldError } from '../domain/events/event.js'
import type { EnvironmentGuard, UpcomingFreeze } from '../domain/guardrails/marks.js'
import type { BadVersion, Lock } from '../domain/guardrails/rules.js'
import type { ServiceMeta } from '../domain/services.js'
import type { SessionUser } from '../domain/sessions.js'
import { servicePath } from './board-page.js'
import { detailsCell } from './deployment-details.js'
import { deploymentPath } from './deployments-list.js'
import { CLOCK_SKEW } from './duration.js'
import { badMarkHtml, flagMark, guardNotice } from './guard-marks.js'
import { html, type SafeHtml } from './html.js'
import { layout, timeTag } from './layout.js'

export interface TimelineSection {
  environment: string
  deployments: {
    deployment: Deployment
    outcome: DeploymentOutcome
    durationMs: number | null
    /** Commit, CI link and description from its events, when they carried any. */
    details?: DeploymentDetails | undefined
    /** Its version's bad mark, when the version is marked bad. */
    bad?: BadVersion | undefined
  }[]
  /** Link to the next (older) page of this environment, if any. */
  olderHref: string | null
  /** Set when this page is not the first one of the environment. */
  newestHref: string | null
}

export interface ServicePageData {
  user: SessionUser
  csrfToken: string
  meta: ServiceMeta
  sections: TimelineSection[]
  /** The environment the page is narrowed to, if any. */
  environment: string | null
  notice?: string
  errors: string[]
  /** The form's values after a refused save, to put back. */
  form?: Record<string, string>
  /** What guards the service now: locks and freezes over its environments, its versions marked bad. */
  guards: {
    now: number
    environments: readonly EnvironmentGuard[]
    serviceLocks: readonly Lock[]
    /** Freeze windows of its environments that open within the next week. */
    upcoming: readonly UpcomingFreeze[]
    badVersions: readonly BadVersion[]
  }
  /** The mark-bad (or mark-good) form after it was refused: what was typed and why not. */
  versionForm?: { version: string; reason: string; errors: readonly FieldError[] }
}

const OUTCOME_LABELS: Record<DeploymentOutcome, string> = {
  succeeded: 'Succeeded',
  failed: 'Failed',
  in_progress: 'In progress',
  stalled: 'Stalled',
}

/** "2 min 5 s", "1 h 3 min", "850 ms". */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${ms} ms`
  const s = Math.round(ms / 1000)
  if (s < 60) return `${s} s`
  const m = Math.floor(s / 60)
  if (m < 60) return `${m} min${s % 60 ? ` ${s % 60} s` : ''}`
  const h = Math.floor(m / 60)
  return `${h} h${m % 60 ? ` ${m % 60} min` : ''}`
}

function metaBlock(meta: ServiceMeta): SafeHtml {
  const links = [
    ['Repository', meta.repositoryUrl],
    ['Runbook', meta.runbookUrl],
    ['Dashboard', meta.dashboardUrl],
  ].filter((l): l is [string, string] => l[1] !== null)
  return html`<dl class="meta">
    <div><dt>Team</dt><dd>${meta.team ?? html`<span class="hint">not set</span>`}</dd></div>
    ${meta.description ? html`<div><dt>Description</dt><dd>${meta.description}</dd></div>` : ''}
    ${
      links.length > 0
        ? html`<div><dt>Links</dt><dd>${links.map(
            ([label, url]) => html`<a href="${url}" rel="noopener noreferrer nofollow">${label}</a> `,
          )}</dd></div>`
        : ''
    }
  </dl>`
}

function editForm(d: ServicePageData): SafeHtml {
  const v = (field: string, current: string | null) => d.form?.[field] ?? current ?? ''
  const m = d.meta
  return html`<details class="meta-edit" ${d.errors.length > 0 ? html`open` : ''}>
    <summary>Edit team, description and links…</summary>
    <form method="post" action="${servicePath(m.name, 'meta')}" class="panel">
      <input type="hidden" name="_csrf" value="${d.csrfToken}">
      <label for="m-team">Team</label>
      <input id="m-team" name="team" type="text" maxlength="100" value="${v('team', m.team)}">
      <label for="m-description">Description</label>
      <textarea id="m-description" name="description" maxlength="500" rows="2">${v('description', m.description)}</textarea>
      <label for="m-repository">Repository link</label>
      <input id="m-repository" name="repository_url" type="url" class="wide" placeholder="https://…" value="${v('repository_url', m.repositoryUrl)}">
      <label for="m-runbook">Runbook link</label>
      <input id="m-runbook" name="runbook_url" type="url" class="wide" placeholder="https://…" value="${v('runbook_url', m.runbookUrl)}">
      <label for="m-dashboard">Dashboard link</label>
      <input id="m-dashboard" name="dashboard_url" type="url" class="wide" placeholder="https://…" value="${v('dashboard_url', m.dashboardUrl)}">
      <p class="hint">Links must start with http:// or https://. Leave a field empty to remove it.</p>
      <p><button type="submit">Save</button></p>
    </form>
  </details>`
}

/** The versions shown on the page, newest first, once each: the mark-bad form offers them. */
function versionsShown(d: ServicePageData): string[] {
  const versions = d.sections
    .flatMap((s) => s.deployments.map((r) => r.deployment))
    .sort((a, b) => b.id - a.id)
    .map((dep) => dep.version)
  return [...new Set(versions)]
}

function fieldErrors(errors: readonly FieldError[], field: string): SafeHtml {
  const mine = errors.filter((e) => e.field === field || (field === 'version' && e.field === 'service'))
  return html`${mine.map((e) => html`<p class="field-error" id="vf-${field}-error"><span class="sr-only">Error:</span> ${e.message}</p>`)}`
}

/**
 * The versions marked bad, for everyone; for admins a Mark good button on each and the form that
 * marks a version bad (open, with the fields' messages, when it was refused).
 */
function badVersions(d: ServicePageData, isAdmin: boolean): SafeHtml {
  const marked = d.guards.badVersions
  if (marked.length === 0 && !isAdmin) return html``
  const form = d.versionForm
  const errors = form?.errors ?? []
  const hasError = (field: string) =>
    errors.some((e) => e.field === field || (field === 'version' && e.field === 'service'))
  const attrs = (field: string) =>
    hasError(field) ? html`aria-invalid="true" aria-describedby="vf-${field}-error"` : html``
  const action = (what: 'bad' | 'good') => servicePath(d.meta.name, `versions/${what}`)
  const list =
    marked.length === 0
      ? html`<p class="hint">No version of ${d.meta.name} is marked bad.</p>`
      : html`<ul class="bad-versions">${marked.map(
          (b) =>
            html`<li><span class="guard-label bad">Bad</span> <span class="mono">${b.version}</span>: ${b.reason} <span class="hint">(${b.createdBy}, ${timeTag(b.createdAt)})</span>${
              isAdmin
                ? html` <form method="post" action="${action('good')}" class="inline-form"><input type="hidden" name="_csrf" value="${d.csrfToken}"><input type="hidden" name="version" value="${b.version}"><button type="submit" class="secondary">Mark ${b.version} good</button></form>`
                : ''
            }</li>`,
        )}</ul>`
  const versions = versionsShown(d)
  return html`<section class="panel bad-versions-panel" aria-labelledby="bad-heading">
    <h2 id="bad-heading">Versions marked bad</h2>
    ${errors.length > 0 ? html`<div class="error-box" role="alert"><p>Not saved:</p>${errors.map((e) => html`<p>${e.message}</p>`)}</div>` : ''}
    ${list}
    ${
      isAdmin
        ? html`<details class="mark-bad" id="mark-bad" ${errors.length > 0 ? html`open` : ''}>
      <summary>Mark a version bad…</summary>
      <form method="post" action="${action('bad')}">
        <input type="hidden" name="_csrf" value="${d.csrfToken}">
        <p class="hint">A version marked bad is shown on the board and here, and the check (and promotion rules that ask for it) refuses it. Deployments of it are still recorded.</p>
        <label for="vf-version">Version</label>
        ${fieldErrors(errors, 'version')}
        <input id="vf-version" name="version" type="text" class="mono" maxlength="200" required list="vf-versions" value="${form?.version ?? ''}" ${attrs('version')}>
        <datalist id="vf-versions">${versions.map((v) => html`<option value="${v}"></option>`)}</datalist>
        <label for="vf-reason">Reason</label>
        ${fieldErrors(errors, 'reason')}
        <input id="vf-reason" name="reason" type="text" class="wide" maxlength="500" required value="${form?.reason ?? ''}" ${attrs('reason')}>
        <p><button type="submit">Mark bad</button></p>
      </form>
    </details>`
        : ''
    }
  </section>`
}

function timeline(service: string, s: TimelineSection, index: number): SafeHtml {
  const envLink = servicePath(service, '', { environment: s.environment })
  return html`<section class="timeline" aria-labelledby="env-${index}">
    <h2 id="env-${index}"><a href="${envLink}">${s.environment}</a></h2>
    ${
      s.deployments.length === 0
        ? html`<p class="hint">No deployments here.</p>`
        : html`<div class="table-wrap"><table class="deployments stack-on-phone">
      <caption class="sr-only">Deployments of ${service} in ${s.environment}, newest first</caption>
      <thead><tr><th scope="col">Version</th><th scope="col">Outcome</th><th scope="col">Started</th><th scope="col">Finished</th><th scope="col" class="num">Duration</th><th scope="col">Sender</th><th scope="col">Commit, CI and description</th></tr></thead>
      <tbody>${s.deployments.map(
        ({
          deployment: dep,
          outcome,
          durationMs,
          details,
          bad,
        }) => html`<tr${bad || details?.flags ? html` class="guarded"` : ''}>
          <td class="mono">${dep.version}</td>
          <td><div><span class="state ${outcome}">${OUTCOME_LABELS[outcome]}</span>${dep.rollback ? html` <span class="mark rollback">rollback</span>` : ''}${dep.rolledBack ? html` <span class="mark rolled-back">rolled back</span>` : ''}${dep.instant ? html` <span class="hint">instant</span>` : ''}${bad ? badMarkHtml(bad) : ''}${details?.flags ? flagMark(details.flags) : ''} <a href="${deploymentPath(dep.id)}" class="deployment-link" aria-label="Deployment #${dep.id}: its page and incident mark">#${dep.id}</a></div></td>
          <td>${timeTag(dep.startedAt)}</td>
          <td>${dep.finishedAt === null ? html`<span class="hint">—</span>` : timeTag(dep.finishedAt)}</td>
          <td class="num">${clockSkewed(dep) ? CLOCK_SKEW : durationMs === null ? html`<span class="hint">—</span>` : formatDuration(durationMs)}</td>
          <td>${dep.deployer ?? dep.apiKeyName ?? '—'}${dep.deployer && dep.apiKeyName ? html` <span class="hint">(key ${dep.apiKeyName})</span>` : ''}</td>
          ${detailsCell(details)}
        </tr>`,
      )}</tbody>
    </table></div>`
    }
    <nav class="pager" aria-label="Pages of ${s.environment}">
      ${s.newestHref ? html`<a href="${s.newestHref}">Newest</a>` : ''}
      ${s.olderHref ? html`<a href="${s.olderHref}" rel="next">Older in ${s.environment}</a>` : ''}
    </nav>
  </section>`
}

export function servicePage(d: ServicePageData): SafeHtml {
  const isAdmin = d.user.role === 'admin'
  return layout({
    title: d.meta.name,
    user: d.user,
    current: 'board',
    csrfToken: d.csrfToken,
    body: html`<p class="crumbs"><a href="/services/">Board</a> ›</p>
      <h1 class="service-name">${d.meta.name}</h1>
      ${d.notice ? html`<div class="notice" role="status"><p>${d.notice}</p></div>` : ''}
      ${d.errors.length > 0 ? html`<div class="error-box" role="alert">${d.errors.map((e) => html`<p>${e}</p>`)}</div>` : ''}
      ${guardNotice(d.guards.environments, d.guards.serviceLocks, d.guards.now, {
        id: 'guards-heading',
        heading: 'Guardrails: locks and freezes',
        upcoming: d.guards.upcoming,
      })}
      ${metaBlock(d.meta)}
      ${isAdmin ? editForm(d) : ''}
      ${badVersions(d, isAdmin)}
      ${isAdmin ? html`<p class="name-actions"><a href="${servicePath(d.meta.name, 'rename')}">Rename or merge…</a> · <a href="${servicePath(d.meta.name, 'delete')}">Delete history…</a></p>` : ''}
      ${d.environment === null ? '' : html`<p>Showing ${d.environment} only. <a href="${servicePath(d.meta.name)}">All environments</a></p>`}
      ${d.sections.map((s, i) => timeline(d.meta.name, s, i))}`,
  })
}
