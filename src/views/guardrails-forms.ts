// Settings → Guardrails: the four admin forms (lock, freeze window, promotion rule, bad version), each
// a plain form that works without JavaScript; a refused one comes back filled in, each bad field
// saying why between its label and its input (GOV.UK's error message pattern).
import type { FieldError } from '../domain/events/event.js'
import { html, type SafeHtml } from './html.js'

/** The form a refused submission came from, what it held, and why it was refused. */
export interface RefusedForm {
  form: 'lock' | 'freeze' | 'promotion' | 'bad_version'
  values: Readonly<Record<string, string>>
  errors: readonly FieldError[]
}

export interface GuardrailFormsData {
  csrfToken: string
  environments: readonly string[]
  services: readonly string[]
  timeZones: readonly string[]
  refused?: RefusedForm | undefined
}

/** Each form's fields by name, with the id of its input (the error summary links to them). */
export const FIELD_IDS: Readonly<Record<RefusedForm['form'], Readonly<Record<string, string>>>> = {
  lock: {
    environment: 'gl-environment',
    service: 'gl-service',
    reason: 'gl-reason',
    until: 'gl-until',
    tz: 'gl-until',
  },
  freeze: {
    environment: 'gf-environment',
    kind: 'gf-kind-once',
    from: 'gf-from',
    to: 'gf-to',
    weekly: 'gf-weekly',
    cron: 'gf-cron',
    duration_minutes: 'gf-duration',
    time_zone: 'gf-time-zone',
    tz: 'gf-from',
    reason: 'gf-reason',
  },
  promotion: {
    environment: 'gp-environment',
    after_environment: 'gp-after',
    min_minutes: 'gp-min',
    require_good: 'gp-require-good',
  },
  bad_version: { service: 'gb-service', version: 'gb-version', reason: 'gb-reason' },
}

/** One form's view of the refusal: its values and the errors of its fields (none if another form's). */
class FormState {
  constructor(
    readonly form: RefusedForm['form'],
    private readonly refused: RefusedForm | undefined,
  ) {}

  private get mine(): RefusedForm | undefined {
    return this.refused?.form === this.form ? this.refused : undefined
  }

  value(field: string, fallback = ''): string {
    return this.mine?.values[field] ?? fallback
  }

  /** The field's messages between its label and input, and the input's error attributes. */
  problem(field: string): { message: SafeHtml; attrs: SafeHtml } {
    const messages = (this.mine?.errors ?? []).filter((e) => e.field === field).map((e) => e.message)
    if (messages.length === 0) return { message: html``, attrs: html`` }
    const id = `${FIELD_IDS[this.form][field] ?? field}-error`
    return {
      message: html`<p class="field-error" id="${id}"><span class="sr-only">Error:</span> ${messages.join('; ')}</p>`,
      attrs: html`aria-invalid="true" aria-describedby="${id}"`,
    }
  }
}

function csrf(token: string): SafeHtml {
  return html`<input type="hidden" name="_csrf" value="${token}">`
}

/** The viewer's zone, filled in by public/app.js: a date-time typed here is read in it (UTC without it). */
function viewerZoneField(state: FormState): SafeHtml {
  return html`<input type="hidden" name="tz" value="${state.value('tz')}" data-viewer-zone>`
}

function options(
  names: readonly string[],
  chosen: string,
  first?: { value: string; label: string },
): SafeHtml {
  return html`${first ? html`<option value="${first.value}" ${chosen === first.value ? html`selected` : ''}>${first.label}</option>` : ''}${names.map(
    (n) => html`<option value="${n}" ${n === chosen ? html`selected` : ''}>${n}</option>`,
  )}`
}

function environmentSelect(
  state: FormState,
  id: string,
  name: string,
  label: string,
  envs: readonly string[],
) {
  const p = state.problem(name)
  return html`<label for="${id}">${label}</label>${p.message}
    <select id="${id}" name="${name}" required ${p.attrs}>${options(envs, state.value(name), { value: '', label: 'Choose…' })}</select>`
}

function reasonField(state: FormState, id: string, hint: string): SafeHtml {
  const p = state.problem('reason')
  return html`<label for="${id}">Reason</label>${p.message}
    <input id="${id}" name="reason" type="text" class="wide" required maxlength="500" value="${state.value('reason')}" placeholder="${hint}" ${p.attrs}>`
}

export function lockForm(d: GuardrailFormsData): SafeHtml {
  const s = new FormState('lock', d.refused)
  const service = s.problem('service')
  const until = s.problem('until')
  const tz = s.problem('tz')
  return html`<form method="post" action="/settings/guardrails/locks" class="panel spaced guardrail-form" id="lock-form">
      ${csrf(d.csrfToken)}${viewerZoneField(s)}
      <h3>Lock an environment</h3>
      <div class="form-grid">
        <div>${environmentSelect(s, 'gl-environment', 'environment', 'Environment', d.environments)}</div>
        <div><label for="gl-service">Service</label>${service.message}
          <select id="gl-service" name="service" ${service.attrs}>${options(d.services, s.value('service'), { value: '', label: 'All services' })}</select></div>
        <div><label for="gl-until">Until <span class="zone" data-zone-label>(UTC)</span></label>${until.message}${tz.message}
          <input id="gl-until" name="until" type="text" value="${s.value('until')}" placeholder="2h, 3d or 2026-12-24T18:00" aria-describedby="gl-until-hint" ${until.attrs}>
          <p class="hint" id="gl-until-hint">Empty: until someone unlocks it. A span (30m, 2h, 3d) counts from now; a date and time is read in the zone named above and stored in UTC.</p></div>
      </div>
      ${reasonField(s, 'gl-reason', 'e.g. database migration in progress')}
      <p><button type="submit">Lock</button></p>
    </form>`
}

export function freezeForm(d: GuardrailFormsData): SafeHtml {
  const s = new FormState('freeze', d.refused)
  const kind = s.value('kind', 'weekly')
  const field = (name: string, id: string, label: SafeHtml | string, attrs: SafeHtml, hint = '') => {
    const p = s.problem(name)
    return html`<div><label for="${id}">${label}</label>${p.message}
      <input id="${id}" name="${name}" ${attrs} value="${s.value(name)}" ${hint ? html`aria-describedby="${id}-hint"` : ''} ${p.attrs}>
      ${hint ? html`<p class="hint" id="${id}-hint">${hint}</p>` : ''}</div>`
  }
  const radio = (value: string, label: string) =>
    html`<div class="choice"><input type="radio" id="gf-kind-${value}" name="kind" value="${value}" ${kind === value ? html`checked` : ''}>
      <label for="gf-kind-${value}">${label}</label></div>`
  const zone = s.problem('time_zone')
  const chosenZone = s.value('time_zone')
  const zoneLabel = html`<span class="zone" data-zone-label>(UTC)</span>`
  return html`<form method="post" action="/settings/guardrails/freezes" class="panel spaced guardrail-form" id="freeze-form">
      ${csrf(d.csrfToken)}${viewerZoneField(s)}
      <h3>Add a freeze window</h3>
      <div class="form-grid"><div>${environmentSelect(s, 'gf-environment', 'environment', 'Environment', d.environments)}</div></div>
      <fieldset><legend>Kind of window</legend>${s.problem('kind').message}
        ${radio('weekly', 'Every week (a range of days and times)')}${radio('cron', 'Recurring by cron expression, for a duration')}${radio('once', 'One-off, from one time to another')}
      </fieldset>
      <fieldset><legend>Every week</legend>
        ${field('weekly', 'gf-weekly', 'Weekly range', html`type="text" maxlength="100" placeholder="Fri 16:00-Mon 08:00"`, 'Days Mon to Sun and 24-hour times, in the time zone chosen below.')}
      </fieldset>
      <fieldset><legend>By cron expression</legend>
        <div class="form-grid">
          ${field('cron', 'gf-cron', 'Cron (minute hour day month weekday)', html`type="text" maxlength="100" placeholder="0 18 * * 5" spellcheck="false"`)}
          ${field('duration_minutes', 'gf-duration', 'Lasting (minutes)', html`type="number" min="1" max="10080" step="1" inputmode="numeric"`)}
        </div>
      </fieldset>
      <label for="gf-time-zone">Time zone of a weekly or cron window</label>${zone.message}
      <select id="gf-time-zone" name="time_zone" aria-describedby="gf-time-zone-hint" ${zone.attrs}>${options(d.timeZones, chosenZone, { value: '', label: 'Your time zone (as your browser says; UTC without it)' })}</select>
      <p class="hint" id="gf-time-zone-hint">The window follows this zone's clock across daylight-saving changes.</p>
      <fieldset><legend>One-off</legend>
        <div class="form-grid">
          ${field('from', 'gf-from', html`From ${zoneLabel}`, html`type="datetime-local"`)}
          ${field('to', 'gf-to', html`To ${zoneLabel}`, html`type="datetime-local"`)}
        </div>
        ${s.problem('tz').message}
      </fieldset>
      ${reasonField(s, 'gf-reason', 'e.g. Black Friday code freeze')}
      <p><button type="submit">Add freeze window</button></p>
    </form>`
}

export function promotionForm(d: GuardrailFormsData): SafeHtml {
  const s = new FormState('promotion', d.refused)
  const min = s.problem('min_minutes')
  // Checked by default; a refused submission keeps what was sent (an unchecked box sends nothing).
  const requireGood = d.refused?.form === 'promotion' ? s.value('require_good') !== '' : true
  return html`<form method="post" action="/settings/guardrails/promotions" class="panel spaced guardrail-form" id="promotion-form">
      ${csrf(d.csrfToken)}
      <h3>Set a promotion rule</h3>
      <div class="form-grid">
        <div>${environmentSelect(s, 'gp-environment', 'environment', 'Deploying to', d.environments)}</div>
        <div>${environmentSelect(s, 'gp-after', 'after_environment', 'needs success first in', d.environments)}</div>
        <div><label for="gp-min">at least this many minutes before</label>${min.message}
          <input id="gp-min" name="min_minutes" type="number" min="0" max="525600" step="1" inputmode="numeric" value="${s.value('min_minutes', '0')}" ${min.attrs}></div>
      </div>
      <div class="choice"><input type="checkbox" id="gp-require-good" name="require_good" value="on" ${requireGood ? html`checked` : ''}>
        <label for="gp-require-good">and the version must not be marked bad</label></div>
      <p class="hint">Setting a rule for the same two environments again replaces it.</p>
      <p><button type="submit">Set rule</button></p>
    </form>`
}

export function badVersionForm(d: GuardrailFormsData): SafeHtml {
  const s = new FormState('bad_version', d.refused)
  const service = s.problem('service')
  const version = s.problem('version')
  return html`<form method="post" action="/settings/guardrails/bad-versions" class="panel spaced guardrail-form" id="bad-version-form">
      ${csrf(d.csrfToken)}
      <h3>Mark a version bad</h3>
      <div class="form-grid">
        <div><label for="gb-service">Service</label>${service.message}
          <select id="gb-service" name="service" required ${service.attrs}>${options(d.services, s.value('service'), { value: '', label: 'Choose…' })}</select></div>
        <div><label for="gb-version">Version</label>${version.message}
          <input id="gb-version" name="version" type="text" class="mono" required maxlength="200" spellcheck="false" value="${s.value('version')}" ${version.attrs}></div>
      </div>
      ${reasonField(s, 'gb-reason', 'e.g. corrupts invoices, see INC-42')}
      <p><button type="submit">Mark bad</button></p>
    </form>`
}
