// HTML templating with escaping on by default: every interpolated value is escaped unless it is
// already SafeHtml, which only this module's `html` tag produces (there is no raw-HTML escape hatch).

export class SafeHtml {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value
  }
}

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
  '`': '&#96;',
}

export function escapeHtml(value: string): string {
  return value.replace(/[&<>"'`]/g, (c) => ESCAPES[c] ?? c)
}

type Interpolation = SafeHtml | string | number | boolean | null | undefined | readonly Interpolation[]

function render(value: Interpolation): string {
  if (value === null || value === undefined || value === false) return ''
  if (value instanceof SafeHtml) return value.value
  if (Array.isArray(value)) return value.map(render).join('')
  return escapeHtml(String(value))
}

/** Tagged template: `html\`<p>${text}</p>\`` escapes `text`; nested `html` results pass through. */
export function html(strings: TemplateStringsArray, ...values: Interpolation[]): SafeHtml {
  let out = strings[0] ?? ''
  for (let i = 0; i < values.length; i++) out += render(values[i] as Interpolation) + (strings[i + 1] ?? '')
  return new SafeHtml(out)
}
