// The Download CSV / Download JSON links of /logs/ and the audit log, with the "for Excel" choice (a UTF-8 byte-order mark).
import { html, type SafeHtml } from './html.js'

export interface DownloadChoice {
  /** The page the links sit on (`/logs/`): the choice is a GET back to it. */
  pagePath: string
  /** The page's query string as pairs, `bom` left out: the form sends them back unchanged. */
  pageQuery: Record<string, string>
  /** The CSV download, with `bom=1` when the box is ticked. */
  csvHref: string
  jsonHref: string
  /** Whether the CSV carries the byte-order mark (the box is ticked). */
  bom: boolean
}

/**
 * The two links the SPEC names, and beside them a checkbox that puts a byte-order mark in the CSV
 * (Excel on Windows reads UTF-8 only with one). Without JavaScript the box is a small GET form
 * back to the page, which then links to the CSV with `bom=1`; with it (public/app.js), ticking the
 * box changes the link at once and the Apply button goes away. Either way the one Download CSV
 * link downloads what the box says.
 */
export function downloadLinks(d: DownloadChoice): SafeHtml {
  const hidden = Object.entries(d.pageQuery).map(
    ([name, value]) => html`<input type="hidden" name="${name}" value="${value}">`,
  )
  return html`<div class="downloads">
          <a class="button secondary" href="${d.csvHref}" download data-bom-link>Download CSV</a>
          <a class="button secondary" href="${d.jsonHref}" download>Download JSON</a>
          <form method="get" action="${d.pagePath}" class="bom-choice" data-bom-form>
            ${hidden}
            <div class="choice">
              <input type="checkbox" id="csv-bom" name="bom" value="1" ${d.bom ? html`checked` : ''} data-bom-toggle>
              <label for="csv-bom">CSV for Excel (adds a UTF-8 byte-order mark)</label>
            </div>
            <button type="submit" class="secondary" data-bom-apply>Apply</button>
          </form>
        </div>`
}
