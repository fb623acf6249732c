// "No service is named bill. Did you mean billing, billing-api?" above the log (issue 28 point 6),
// each suggestion a link to the same filter with that name.
import type { NameHint } from '../domain/events/name-hints.js'
import { html, type SafeHtml } from './html.js'

export function nameHintsBlock(hints: readonly NameHint[], query: Record<string, string>): SafeHtml {
  if (hints.length === 0) return html``
  return html`<div class="panel name-hints" role="status">${hints.map((h) => {
    const link = (name: string) =>
      html`<a href="/logs/?${new URLSearchParams({ ...query, [h.field]: name }).toString()}">${name}</a>`
    return html`<p>No ${h.field} is named <b>${h.typed}</b> (a ${h.field} filter matches whole names, ignoring case).${
      h.suggestions.length > 0
        ? html` Did you mean ${h.suggestions.map((s, i) => html`${i > 0 ? ', ' : ''}${link(s)}`)}?`
        : ''
    }</p>`
  })}</div>`
}
