// Settings → Guardrails (SPEC §11): the account's locks, freeze windows (with their next occurrence),
// promotion rules and bad versions as tables, and for admins the buttons and forms that change them.
import type { Occurrence } from '../domain/guardrails/freeze-calendar.js'
import type { BadVersion, Freeze, Lock, PromotionRule } from '../domain/guardrails/rules.js'
import { recurringWords } from '../domain/guardrails/schedule-words.js'
import type { SessionUser } from '../domain/sessions.js'
import {
  badVersionForm,
  FIELD_IDS,
  freezeForm,
  type GuardrailFormsData,
  lockForm,
  promotionForm,
  type RefusedForm,
} from './guardrails-forms.js'
import { html, type SafeHtml } from './html.js'
import { layout, timeTag } from './layout.js'

export type { RefusedForm }

/** A freeze window with what the calendar says of it now. */
export interface FreezeRow {
  freeze: Freeze
  /** The occurrence holding now, if any. */
  active: Occurrence | null
  /** The next one to begin after now (null: none, or not known). */
  next: Occurrence | null
}

export interface GuardrailsPageData extends GuardrailFormsData {
  user: SessionUser
  now: number
  locks: readonly Lock[]
  freezes: readonly FreezeRow[]
  promotions: readonly PromotionRule[]
  badVersions: readonly BadVersion[]
  notice?: string | undefined
}

const wallFormats = new Map<string, Intl.DateTimeFormat>()

/** "Fri 24 Apr 2026, 16:00" on the wall clock of `zone`. */
function wallText(at: number, zone: string): string {
  let format = wallFormats.get(zone)
  if (!format) {
    format = new Intl.DateTimeFormat('en-GB', {
      timeZone: zone,
      weekday: 'short',
      day: 'numeric',
      month: 'short',
      year: 'numeric',
      hour: '2-digit',
      minute: '2-digit',
      hourCycle: 'h23',
    })
    if (wallFormats.size < 500) wallFormats.set(zone, format)
  }
  return format.format(at)
}

function scheduleCell(f: Freeze): SafeHtml {
  const s = f.schedule
  if (s.kind === 'once') return html`one-off, ${timeTag(s.startsAt)} to ${timeTag(s.endsAt)}`
  return html`${recurringWords(s.cron, s.durationMinutes)}`
}

/** An instant for the viewer (their zone once the script runs, UTC on hover) and on the window's clock. */
function bothClocks(at: number, zone: string | null): SafeHtml {
  return html`${timeTag(at)}${zone ? html`<br><span class="hint">${wallText(at, zone)} ${zone}</span>` : ''}`
}

function whenCell(row: FreezeRow, now: number): SafeHtml {
  const zone = row.freeze.schedule.kind === 'recurring' ? row.freeze.schedule.timeZone : null
  const active = row.active
    ? html`<span class="guard-state active">active now</span> until ${bothClocks(row.active.end, zone)}`
    : ''
  if (row.next) {
    return html`${active}${active ? html`<br>then ` : ''}${bothClocks(row.next.start, zone)}`
  }
  if (active) return active
  const s = row.freeze.schedule
  if (s.kind === 'once' && s.endsAt <= now) return html`<span class="guard-state ended">ended</span>`
  return html`<span class="hint">not known</span>`
}

function inlineButton(action: string, token: string, label: string, hidden: SafeHtml = html``): SafeHtml {
  return html`<form method="post" action="${action}" class="inline">
      <input type="hidden" name="_csrf" value="${token}">${hidden}<button type="submit" class="secondary">${label}</button></form>`
}

/**
 * The table of a section. At phone width a cell is a flex row of its label and its content, so a
 * cell of mixed text and times wraps its content in one span.
 */
function table(
  className: string,
  caption: string,
  heads: readonly string[],
  rows: readonly SafeHtml[],
  isAdmin: boolean,
): SafeHtml {
  return html`<div class="table-wrap"><table class="stack-on-phone guardrails-table ${className}">
      <caption class="sr-only">${caption}</caption>
      <thead><tr>${heads.map((h) => html`<th scope="col">${h}</th>`)}
        ${isAdmin ? html`<th scope="col"><span class="sr-only">Actions</span></th>` : ''}</tr></thead>
      <tbody>${rows}</tbody></table></div>`
}

function locksSection(d: GuardrailsPageData, isAdmin: boolean): SafeHtml {
  const rows = d.locks.map((l) => {
    const ended = l.endsAt !== null && l.endsAt <= d.now
    return html`<tr>
      <td data-label="Environment">${l.environment}</td>
      <td data-label="Service">${l.service ?? html`<span class="hint">all services</span>`}</td>
      <td data-label="Reason" class="guard-reason">${l.reason}</td>
      <td data-label="By">${l.createdBy}</td>
      <td data-label="Since">${timeTag(l.createdAt)}</td>
      <td data-label="Until">${l.endsAt === null ? 'until unlocked' : timeTag(l.endsAt)}</td>
      <td data-label="State"><span class="guard-state ${ended ? 'ended' : 'active'}">${ended ? 'ended' : 'active'}</span></td>
      ${isAdmin ? html`<td>${inlineButton(`/settings/guardrails/locks/${l.id}/unlock`, d.csrfToken, ended ? 'Remove' : 'Unlock')}</td>` : ''}
    </tr>`
  })
  return html`<section aria-labelledby="locks-heading">
      <h2 id="locks-heading">Locks</h2>
      <p class="hint">While an environment (or one service in it) is locked, the check tells pipelines not to deploy there.</p>
      ${
        d.locks.length === 0
          ? html`<p>No locks.</p>`
          : table(
              'locks-table',
              'Locks',
              ['Environment', 'Service', 'Reason', 'By', 'Since', 'Until', 'State'],
              rows,
              isAdmin,
            )
      }
      ${isAdmin ? lockForm(d) : ''}
    </section>`
}

function freezesSection(d: GuardrailsPageData, isAdmin: boolean): SafeHtml {
  const rows = d.freezes.map((row) => {
    const f = row.freeze
    return html`<tr>
      <td data-label="Environment">${f.environment}</td>
      <td data-label="Schedule"><span>${scheduleCell(f)}</span></td>
      <td data-label="Time zone">${f.schedule.kind === 'recurring' ? f.schedule.timeZone : html`<span class="hint">fixed instants</span>`}</td>
      <td data-label="Next"><span>${whenCell(row, d.now)}</span></td>
      <td data-label="Reason" class="guard-reason">${f.reason}</td>
      <td data-label="By">${f.createdBy}</td>
      ${isAdmin ? html`<td>${inlineButton(`/settings/guardrails/freezes/${f.id}/remove`, d.csrfToken, 'Remove')}</td>` : ''}
    </tr>`
  })
  return html`<section aria-labelledby="freezes-heading">
      <h2 id="freezes-heading">Freeze windows</h2>
      <p class="hint"><span data-zone-note>Times are in UTC.</span> Under each time of a recurring window, the same moment on the window's own clock.</p>
      ${
        d.freezes.length === 0
          ? html`<p>No freeze windows.</p>`
          : table(
              'freezes-table',
              'Freeze windows',
              ['Environment', 'Schedule', 'Time zone', 'Next', 'Reason', 'By'],
              rows,
              isAdmin,
            )
      }
      ${isAdmin ? freezeForm(d) : ''}
    </section>`
}

/** "prod needs success in staging at least 30 minutes before; not bad": the table's and the notice's words. */
export function promotionText(
  p: Pick<PromotionRule, 'environment' | 'afterEnvironment' | 'minMinutes' | 'requireGood'>,
): string {
  const wait =
    p.minMinutes === 0 ? '' : ` at least ${p.minMinutes} ${p.minMinutes === 1 ? 'minute' : 'minutes'}`
  return `${p.environment} needs success in ${p.afterEnvironment}${wait} before${p.requireGood ? '; not bad' : ''}`
}

function promotionsSection(d: GuardrailsPageData, isAdmin: boolean): SafeHtml {
  const rows = d.promotions.map(
    (p) => html`<tr>
      <td data-label="Rule">${promotionText(p)}</td>
      <td data-label="By">${p.createdBy}</td>
      <td data-label="Set">${timeTag(p.createdAt)}</td>
      ${
        isAdmin
          ? html`<td>${inlineButton(
              '/settings/guardrails/promotions/remove',
              d.csrfToken,
              'Remove',
              html`<input type="hidden" name="environment" value="${p.environment}"><input type="hidden" name="after_environment" value="${p.afterEnvironment}">`,
            )}</td>`
          : ''
      }
    </tr>`,
  )
  return html`<section aria-labelledby="promotions-heading">
      <h2 id="promotions-heading">Promotion rules</h2>
      <p class="hint">A version may go to an environment only after it succeeded in the one named first (dev → staging → prod).</p>
      ${
        d.promotions.length === 0
          ? html`<p>No promotion rules.</p>`
          : table('promotions-table', 'Promotion rules', ['Rule', 'By', 'Set'], rows, isAdmin)
      }
      ${isAdmin ? promotionForm(d) : ''}
    </section>`
}

function badVersionsSection(d: GuardrailsPageData, isAdmin: boolean): SafeHtml {
  const rows = d.badVersions.map(
    (b) => html`<tr>
      <td data-label="Service">${b.service}</td>
      <td data-label="Version" class="mono">${b.version}</td>
      <td data-label="Reason" class="guard-reason">${b.reason}</td>
      <td data-label="By">${b.createdBy}</td>
      <td data-label="When">${timeTag(b.createdAt)}</td>
      ${
        isAdmin
          ? html`<td>${inlineButton(
              '/settings/guardrails/bad-versions/good',
              d.csrfToken,
              'Mark good',
              html`<input type="hidden" name="service" value="${b.service}"><input type="hidden" name="version" value="${b.version}">`,
            )}</td>`
          : ''
      }
    </tr>`,
  )
  return html`<section aria-labelledby="bad-versions-heading">
      <h2 id="bad-versions-heading">Bad versions</h2>
      <p class="hint">The check refuses a version marked bad, in every environment.</p>
      ${
        d.badVersions.length === 0
          ? html`<p>No versions are marked bad.</p>`
          : table(
              'bad-versions-table',
              'Versions marked bad',
              ['Service', 'Version', 'Reason', 'By', 'When'],
              rows,
              isAdmin,
            )
      }
      ${isAdmin ? badVersionForm(d) : ''}
    </section>`
}

/** The GOV.UK error summary: nothing was changed, and each problem, linked to its field. */
function errorSummary(refused: RefusedForm | undefined): SafeHtml {
  if (!refused || refused.errors.length === 0) return html``
  const ids = FIELD_IDS[refused.form]
  return html`<div class="error-box" role="alert" id="guardrail-errors">
      <p>Nothing was changed: ${refused.errors.length === 1 ? 'one field needs' : 'some fields need'} attention.</p>
      <ul>${refused.errors.map((e) => {
        const id = ids[e.field]
        return html`<li>${id ? html`<a href="#${id}">${e.message}</a>` : e.message}</li>`
      })}</ul></div>`
}

export function guardrailsPage(d: GuardrailsPageData): SafeHtml {
  const isAdmin = d.user.role === 'admin'
  return layout({
    title: 'Guardrails',
    user: d.user,
    current: 'settings',
    csrfToken: d.csrfToken,
    body: html`<p><a href="/settings/">← Settings</a></p>
      <h1>Guardrails</h1>
      ${d.notice ? html`<div class="notice" role="status"><p>${d.notice}</p></div>` : ''}
      ${errorSummary(d.refused)}
      <p class="hint">What pipelines are told before they deploy (<code>GET /api/v1/check</code>, <code>shiplog-deploy --check</code>).
        Deployments that break a guardrail are still recorded, and marked. ${isAdmin ? 'Every change here is in the audit log.' : 'Only admins can change guardrails.'}</p>
      <nav class="guard-jump" aria-label="On this page"><a href="#locks-heading">Locks</a> · <a href="#freezes-heading">Freeze windows</a> ·
        <a href="#promotions-heading">Promotion rules</a> · <a href="#bad-versions-heading">Bad versions</a></nav>
      ${locksSection(d, isAdmin)}
      ${freezesSection(d, isAdmin)}
      ${promotionsSection(d, isAdmin)}
      ${badVersionsSection(d, isAdmin)}`,
  })
}
