// Helpers for the board tests: read the board's cells and columns out of the page.
import { unescapeHtml } from './ui.js'

export interface ShownCell {
  version: string | null
  /** The status label of the latest deployment when it needs attention. */
  state: string | null
  /** The accessible text of the drift mark. */
  drift: string | null
  text: string
}

/** The board table's column headings after "Service". */
export function boardColumns(page: string): string[] {
  const head = /<table class="board">[\s\S]*?<thead><tr>([\s\S]*?)<\/tr><\/thead>/.exec(page)?.[1] ?? ''
  return [...head.matchAll(/<th scope="col"[^>]*>([^<]*)<\/th>/g)]
    .map((m) => unescapeHtml(m[1] ?? ''))
    .slice(1)
}

/** service → environment → what its cell shows (empty cells are left out). */
export function boardTable(page: string): Map<string, Map<string, ShownCell>> {
  const table = /<table class="board">([\s\S]*?)<\/table>/.exec(page)?.[1] ?? ''
  const rows = new Map<string, Map<string, ShownCell>>()
  for (const row of table.matchAll(/<tr data-service="([^"]*)">([\s\S]*?)<\/tr>/g)) {
    const cells = new Map<string, ShownCell>()
    for (const td of (row[2] ?? '').matchAll(
      /<td class="([^"]*)" data-environment="([^"]*)">([\s\S]*?)<\/td>/g,
    )) {
      const body = td[3] ?? ''
      if ((td[1] ?? '').includes('empty-cell')) continue
      const pick = (re: RegExp) => {
        const m = re.exec(body)
        return m?.[1] === undefined ? null : unescapeHtml(m[1])
      }
      cells.set(unescapeHtml(td[2] ?? ''), {
        version: pick(/class="version mono"[^>]*>([^<]*)</),
        state: pick(/<span class="state [^"]*">([^<]*)</),
        drift: pick(/<span class="sr-only">(Differs[^<]*)</),
        text: unescapeHtml(
          body
            .replace(/<[^>]*>/g, ' ')
            .replace(/\s+/g, ' ')
            .trim(),
        ),
      })
    }
    rows.set(unescapeHtml(row[1] ?? ''), cells)
  }
  return rows
}

/** A strict enough XML check for the badge: balanced tags, quoted attributes, only known entities. */
export function assertWellFormedXml(xml: string): void {
  const stack: string[] = []
  let i = 0
  if (!xml.startsWith('<svg ')) throw new Error('the document does not start with <svg')
  while (i < xml.length) {
    const lt = xml.indexOf('<', i)
    const textPart = xml.slice(i, lt === -1 ? xml.length : lt)
    checkText(textPart)
    if (lt === -1) break
    const gt = xml.indexOf('>', lt)
    if (gt === -1) throw new Error('an unclosed tag')
    const tag = xml.slice(lt + 1, gt)
    if (tag.startsWith('/')) {
      const name = tag.slice(1)
      if (stack.pop() !== name) throw new Error(`</${name}> closes the wrong element`)
    } else {
      const selfClosing = tag.endsWith('/')
      const inner = selfClosing ? tag.slice(0, -1) : tag
      const m = /^([A-Za-z][\w:-]*)((?:\s+[A-Za-z][\w:-]*="[^"<]*")*)\s*$/.exec(inner)
      if (!m?.[1]) throw new Error(`a malformed tag <${tag}>`)
      for (const attr of (m[2] ?? '').matchAll(/="([^"]*)"/g)) checkText(attr[1] ?? '')
      if (!selfClosing) stack.push(m[1])
    }
    i = gt + 1
  }
  if (stack.length > 0) throw new Error(`unclosed elements: ${stack.join(', ')}`)
}

function checkText(text: string): void {
  for (const m of text.matchAll(/&([^;]*);?/g)) {
    if (!/^(amp|lt|gt|quot|apos|#\d+|#x[0-9a-fA-F]+)$/.test(m[1] ?? '') || !m[0].endsWith(';')) {
      throw new Error(`a bad entity ${m[0]}`)
    }
  }
}
