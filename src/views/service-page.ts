// A service's page /services/<service>/: its metadata (editable by admins) and, per environment,
// the timeline of its deployments with paging.

import type { DeploymentDetails } from '../domain/deployments/details.js'
import { clockSkewed, type Deployment, type DeploymentOutcome } from '../domain/deployments/rules.js'
import type { ServiceMeta } from '../domain/services.js'
import type { SessionUser } from '../domain/sessions.js'
import { servicePath } from './board-page.js'
import { detailsCell } from './deployment-details.js'
import { CLOCK_SKEW } from './duration.js'
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
        ({ deployment: dep, outcome, durationMs, details }) => html`<tr>
          <td class="mono">${dep.version}</td>
          <td><span class="state ${outcome}">${OUTCOME_LABELS[outcome]}</span>${dep.rollback ? html` <span class="mark rollback">rollback</span>` : ''}${dep.rolledBack ? html` <span class="mark rolled-back">rolled back</span>` : ''}${dep.instant ? html` <span class="hint">instant</span>` : ''}</td>
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
      ${metaBlock(d.meta)}
      ${isAdmin ? editForm(d) : ''}
      ${isAdmin ? html`<p class="name-actions"><a href="${servicePath(d.meta.name, 'rename')}">Rename or merge…</a> · <a href="${servicePath(d.meta.name, 'delete')}">Delete history…</a></p>` : ''}
      ${d.environment === null ? '' : html`<p>Showing ${d.environment} only. <a href="${servicePath(d.meta.name)}">All environments</a></p>`}
      ${d.sections.map((s, i) => timeline(d.meta.name, s, i))}`,
  })
}
