// The commit, CI link and description of a deployment, as one table cell of the service page and
// of an insights list. Every value is escaped; only http(s) addresses become links.
import type { DeploymentDetails } from '../domain/deployments/details.js'
import { isWebAddress } from '../domain/services.js'
import { html, type SafeHtml } from './html.js'

/** A commit is shown by its first 12 characters (a sha's usual short form), whole on hover. */
const SHORT_COMMIT = 12

export function detailsCell(details: DeploymentDetails | undefined): SafeHtml {
  // Flags alone (details.flags) are shown beside the outcome, not here: the cell stays empty.
  if (!details || (details.commit === null && details.url === null && details.description === null))
    return html`<td class="details"></td>`
  const { commit, url, description } = details
  const parts: SafeHtml[] = []
  if (commit !== null) {
    parts.push(
      html`<span class="mono commit" title="commit ${commit}">${commit.length > SHORT_COMMIT ? `${commit.slice(0, SHORT_COMMIT)}…` : commit}</span>`,
    )
  }
  if (url !== null) {
    parts.push(
      isWebAddress(url)
        ? html`<a href="${url}" rel="noopener noreferrer nofollow" title="${url}">CI run</a>`
        : html`<span class="hint" title="not an http(s) address, not linked">${url}</span>`,
    )
  }
  // One block inside the cell: on a phone the cell is a row of label and value (app.css).
  return html`<td class="details"><div>${parts.length > 0 ? html`<span class="detail-line">${parts.map((p, i) => (i === 0 ? p : html` · ${p}`))}</span>` : ''}${
    description !== null ? html`<div class="hint description">${description}</div>` : ''
  }</div></td>`
}
