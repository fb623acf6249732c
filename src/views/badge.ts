// README badges (SPEC §6.3): an SVG drawn here, and the shields.io "endpoint" document.
import { escapeHtml } from './html.js'

export type BadgeTone = 'ok' | 'progress' | 'failed' | 'none'

/** One coloured segment after the label: its text and tone. */
export interface BadgePart {
  text: string
  tone: BadgeTone
}

const COLOURS: Record<BadgeTone, string> = {
  ok: '#1a7f37', // green: the running version (it succeeded)
  progress: '#9a6700', // amber: a deployment in progress or stalled
  failed: '#cf222e', // red: the latest deployment failed
  none: '#6e7781', // grey: nothing deployed
}

/** shields.io's named colours for the same tones. */
const SHIELDS_COLOURS: Record<BadgeTone, string> = {
  ok: 'green',
  progress: 'yellow',
  failed: 'red',
  none: 'lightgrey',
}

const MAX_TEXT = 40
/** The label holds the service and the environment: room for both. */
const MAX_LABEL = 60
/** Between the service and the environment, and between the running version and a failure. */
export const BADGE_SEPARATOR = ' · '

/** Width of text in 11 px Verdana, near enough to size the badge: narrow, wide and other characters. */
export function textWidth(text: string): number {
  let width = 0
  for (const c of text) {
    if ("iljtfI.,:;!|'()[]{} ·".includes(c)) width += 4
    else if ('mwMW@%'.includes(c)) width += 10
    else if (c >= 'A' && c <= 'Z') width += 8
    else if ((c.codePointAt(0) ?? 0) > 0x2e80) width += 11
    else width += 7
  }
  return width
}

function clip(text: string, max = MAX_TEXT): string {
  const chars = [...text]
  return chars.length > max ? `${chars.slice(0, max - 1).join('')}…` : text
}

/** The badge's message as one text: the parts joined, as the SVG's title and shields.io show it. */
export function badgeMessage(parts: readonly BadgePart[]): string {
  return parts.map((p) => p.text).join(BADGE_SEPARATOR)
}

/**
 * A flat badge: the label on grey, then each part on its tone's colour (the running version, and
 * beside it a failed or unfinished latest deployment). Text is escaped.
 */
export function badgeSvg(label: string, parts: readonly BadgePart[]): string {
  const left = clip(label, MAX_LABEL)
  const lw = textWidth(left) + 12
  const segments: { x: number; w: number; text: string; colour: string }[] = []
  let x = lw
  for (const part of parts) {
    const text = clip(part.text)
    const w = textWidth(text) + 12
    segments.push({ x, w, text, colour: COLOURS[part.tone] })
    x += w
  }
  const total = x
  const title = escapeHtml(`${label}: ${badgeMessage(parts)}`)
  const texts = [{ x: lw / 2, text: left }, ...segments.map((s) => ({ x: s.x + s.w / 2, text: s.text }))]
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" width="${total}" height="20" role="img" aria-label="${title}">` +
    `<title>${title}</title>` +
    `<linearGradient id="s" x2="0" y2="100%"><stop offset="0" stop-color="#bbb" stop-opacity=".1"/><stop offset="1" stop-opacity=".1"/></linearGradient>` +
    `<clipPath id="r"><rect width="${total}" height="20" rx="3" fill="#fff"/></clipPath>` +
    `<g clip-path="url(#r)"><rect width="${lw}" height="20" fill="#555"/>` +
    segments.map((s) => `<rect x="${s.x}" width="${s.w}" height="20" fill="${s.colour}"/>`).join('') +
    `<rect width="${total}" height="20" fill="url(#s)"/></g>` +
    `<g fill="#fff" text-anchor="middle" font-family="Verdana,Geneva,DejaVu Sans,sans-serif" font-size="11">` +
    texts
      .map(
        (t) =>
          `<text x="${t.x}" y="15" fill="#010101" fill-opacity=".3">${escapeHtml(t.text)}</text>` +
          `<text x="${t.x}" y="14">${escapeHtml(t.text)}</text>`,
      )
      .join('') +
    `</g></svg>`
  )
}

/**
 * The shields.io endpoint document for the same badge: one message, coloured as the first part
 * (the running version), so a failure beside it does not repaint what runs.
 */
export function shieldsEndpoint(label: string, parts: readonly BadgePart[]): Record<string, unknown> {
  return {
    schemaVersion: 1,
    label: clip(label, MAX_LABEL),
    message: parts.map((p) => clip(p.text)).join(BADGE_SEPARATOR),
    color: SHIELDS_COLOURS[parts[0]?.tone ?? 'none'],
  }
}
