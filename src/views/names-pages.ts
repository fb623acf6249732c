// Tidying names (admins): rename or merge a service or an environment, and delete a service's
// history with a typed confirmation. Each form is a page of its own, so a refused value comes back
// with its reason beside the field it belongs to.
import type { SessionUser } from '../domain/sessions.js'
import { servicePath } from './board-page.js'
import { html, type SafeHtml } from './html.js'
import { layout } from './layout.js'

export interface NameFormData {
  user: SessionUser
  csrfToken: string
  /** Values to put back after a refused submission. */
  form: Record<string, string>
  /** The reason a field was refused, by field name. */
  problems: Record<string, string>
}

function csrf(token: string): SafeHtml {
  return html`<input type="hidden" name="_csrf" value="${token}">`
}

/** An input's error attributes and the message beside it. */
function problemOf(d: NameFormData, field: string, id: string): { attrs: SafeHtml; message: SafeHtml } {
  const problem = d.problems[field]
  if (!problem) return { attrs: html``, message: html`` }
  return {
    attrs: html`aria-invalid="true" aria-describedby="${id}-problem"`,
    message: html`<p class="field-error" id="${id}-problem">${problem}</p>`,
  }
}

function errorSummary(d: NameFormData): SafeHtml {
  const list = Object.values(d.problems)
  return list.length === 0
    ? html``
    : html`<div class="error-box" role="alert"><p>Nothing was changed: ${list.length === 1 ? 'one field needs' : 'some fields need'} attention.</p></div>`
}

export function renameServicePage(d: NameFormData & { service: string; others: string[] }): SafeHtml {
  const to = problemOf(d, 'to', 'rn-to')
  return layout({
    title: `Rename ${d.service}`,
    user: d.user,
    current: 'board',
    csrfToken: d.csrfToken,
    body: html`<p class="crumbs"><a href="/services/">Board</a> › <a href="${servicePath(d.service)}">${d.service}</a> ›</p>
      <h1>Rename or merge ${d.service}</h1>
      ${errorSummary(d)}
      <p>The board, the service page, insights, the read API, badges and webhooks follow the new name.
        Recorded events keep the name they were sent with (the log and exports show it as sent), and
        events still sent as <strong>${d.service}</strong> go under the new name too.</p>
      <p>If a service of the new name exists already, the two are <strong>merged</strong> into one.</p>
      <form method="post" action="${servicePath(d.service, 'rename')}" class="panel">
        ${csrf(d.csrfToken)}
        <label for="rn-to">New name</label>
        <input id="rn-to" name="to" type="text" required maxlength="100" list="rn-others" value="${d.form.to ?? ''}" ${to.attrs}>
        ${to.message}
        <datalist id="rn-others">${d.others.map((n) => html`<option value="${n}"></option>`)}</datalist>
        <p><button type="submit">Rename or merge</button> <a class="button secondary" href="${servicePath(d.service)}">Cancel</a></p>
      </form>`,
  })
}

export function deleteServicePage(d: NameFormData & { service: string; events: number }): SafeHtml {
  const confirm = problemOf(d, 'confirm', 'del-confirm')
  return layout({
    title: `Delete ${d.service}`,
    user: d.user,
    current: 'board',
    csrfToken: d.csrfToken,
    body: html`<p class="crumbs"><a href="/services/">Board</a> › <a href="${servicePath(d.service)}">${d.service}</a> ›</p>
      <h1>Delete the history of ${d.service}</h1>
      ${errorSummary(d)}
      <div class="error-box"><p>This deletes <strong>${d.events}</strong> ${d.events === 1 ? 'event' : 'events'} of
        ${d.service} and every deployment derived from them, for good. The audit log records it, and
        <code>shiplog verify</code> reports the deleted events as deleted by an admin.</p></div>
      <form method="post" action="${servicePath(d.service, 'delete')}" class="panel">
        ${csrf(d.csrfToken)}
        <label for="del-confirm">Type the service name, <strong class="mono">${d.service}</strong>, to confirm</label>
        <input id="del-confirm" name="confirm" type="text" required autocomplete="off" spellcheck="false" value="${d.form.confirm ?? ''}" ${confirm.attrs}>
        ${confirm.message}
        <p><button type="submit" class="danger">Delete history</button> <a class="button secondary" href="${servicePath(d.service)}">Cancel</a></p>
      </form>`,
  })
}

export function renameEnvironmentPage(d: NameFormData & { environments: string[] }): SafeHtml {
  const from = problemOf(d, 'from', 'env-from')
  const to = problemOf(d, 'to', 'env-to')
  const chosen = d.form.from ?? ''
  return layout({
    title: 'Rename an environment',
    user: d.user,
    current: 'settings',
    csrfToken: d.csrfToken,
    body: html`<p class="crumbs"><a href="/settings/#environments-heading">Settings</a> ›</p>
      <h1>Rename or merge an environment</h1>
      ${errorSummary(d)}
      <p>The board's column, insights, the read API, badges and webhooks follow the new name. Recorded
        events keep the name they were sent with. If the new name is an environment already, the two are
        <strong>merged</strong> into one column (e.g. <code>Dev</code> into <code>dev</code>).</p>
      <form method="post" action="/settings/environments/rename" class="panel">
        ${csrf(d.csrfToken)}
        <label for="env-from">Environment</label>
        <select id="env-from" name="from" ${from.attrs}>
          ${d.environments.map((e) => html`<option value="${e}" ${e === chosen ? html`selected` : ''}>${e}</option>`)}
        </select>
        ${from.message}
        <label for="env-to">New name</label>
        <input id="env-to" name="to" type="text" required maxlength="100" list="env-names" value="${d.form.to ?? ''}" ${to.attrs}>
        ${to.message}
        <datalist id="env-names">${d.environments.map((n) => html`<option value="${n}"></option>`)}</datalist>
        <p><button type="submit">Rename or merge</button> <a class="button secondary" href="/settings/#environments-heading">Cancel</a></p>
      </form>`,
  })
}
