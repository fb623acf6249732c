// README badges (SPEC §6.3): an SVG drawn here, and the shields.io "endpoint" document.
import { escapeHtml } from './html.js'

export type BadgeTone = 'ok' | 'progress' | 'failed' | 'none'

const COLOURS: Record<BadgeTone, string> = {
  ok: '#1f6feb', // blue: running
  progress: '#9a6700', // amber: a deployment in progress or stalled
  failed: '#cf222e', // red: the latest deployment failed
  none: '#6e7781', // grey: nothing deployed
}

/** shields.io's named colours for the same tones. */
const SHIELDS_COLOURS: Record<BadgeTone, string> = {
  ok: 'blue',
  progress: 'yellow',
  failed: 'red',
  none: 'lightgrey',
}

const MAX_TEXT = 40

/** Width of text in 11 px Verdana, near enough to size the badge: narrow, wide and other characters. */
export function textWidth(text: string): number {
  let width = 0
  for (const c of text) {
    if ("iljtfI.,:;!|'()[]{} ".includes(c)) width += 4
    else if ('mwMW@%'.includes(c)) width += 10
    else if (c >= 'A' && c <= 'Z') width += 8
    else if ((c.codePointAt(0) ?? 0) > 0x2e80) width += 11
    else width += 7
  }
  return width
}

function clip(text: string): string {
  const chars = [...text]
  return chars.length > MAX_TEXT ? `${chars.slice(0, MAX_TEXT - 1).join('')}…` : text
}

/** A flat two-part badge: label on grey, message on the tone's colour. Text is escaped. */
export function badgeSvg(label: string, message: string, tone: BadgeTone): string {
  const left = clip(label)
  const right = clip(message)
  const lw = textWidth(left) + 12
  const rw = textWidth(right) + 12
  const total = lw + rw
  const title = escapeHtml(`${label}: ${message}`)
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" width="${total}" height="20" role="img" aria-label="${title}">` +
    `<title>${title}</title>` +
    `<linearGradient id="s" x2="0" y2="100%"><stop offset="0" stop-color="#bbb" stop-opacity=".1"/><stop offset="1" stop-opacity=".1"/></linearGradient>` +
    `<clipPath id="r"><rect width="${total}" height="20" rx="3" fill="#fff"/></clipPath>` +
    `<g clip-path="url(#r)"><rect width="${lw}" height="20" fill="#555"/><rect x="${lw}" width="${rw}" height="20" fill="${COLOURS[tone]}"/>` +
    `<rect width="${total}" height="20" fill="url(#s)"/></g>` +
    `<g fill="#fff" text-anchor="middle" font-family="Verdana,Geneva,DejaVu Sans,sans-serif" font-size="11">` +
    `<text x="${lw / 2}" y="15" fill="#010101" fill-opacity=".3">${escapeHtml(left)}</text>` +
    `<text x="${lw / 2}" y="14">${escapeHtml(left)}</text>` +
    `<text x="${lw + rw / 2}" y="15" fill="#010101" fill-opacity=".3">${escapeHtml(right)}</text>` +
    `<text x="${lw + rw / 2}" y="14">${escapeHtml(right)}</text></g></svg>`
  )
}

/** The shields.io endpoint document for the same badge. */
export function shieldsEndpoint(label: string, message: string, tone: BadgeTone): Record<string, unknown> {
  return { schemaVersion: 1, label: clip(label), message: clip(message), color: SHIELDS_COLOURS[tone] }
}
