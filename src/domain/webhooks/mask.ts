// How a webhook's target is shown: the path of a Slack (or any) incoming-webhook URL is the secret
// that lets anyone post, so members see the origin only and admins a masked path.
import type { UserRole } from '../../db/schema.js'

const MASK = '•••'
/** A first path segment this long may itself be a token (a bare `https://host/<token>`). */
const KEPT_SEGMENT_MAX = 15
/** Segments at least this long show their first two characters, so similar targets differ. */
const HINTED_SEGMENT_MIN = 8

/** scheme://host[:port], without user info, path, query or fragment. */
export function webhookOrigin(url: string): string {
  try {
    const parsed = new URL(url)
    return parsed.origin === 'null' ? '(unreadable URL)' : parsed.origin
  } catch {
    return '(unreadable URL)'
  }
}

function maskSegment(segment: string): string {
  return segment.length >= HINTED_SEGMENT_MIN ? `${segment.slice(0, 2)}${MASK}` : MASK
}

/**
 * The origin, the first path segment when it is short (`/services`, `/api`, `/hooks`), and every
 * other segment masked (its first two characters kept when it is long enough that two say
 * nothing); a query or fragment shows only that there is one. Enough to tell targets apart,
 * never enough to post to one.
 */
export function maskedWebhookUrl(url: string): string {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return '(unreadable URL)'
  }
  const origin = webhookOrigin(url)
  const segments = parsed.pathname.split('/').slice(1)
  const shown = segments.map((segment, i) => {
    if (segment === '') return ''
    if (i === 0 && segment.length <= KEPT_SEGMENT_MAX) return segment
    return maskSegment(segment)
  })
  const path = segments.length === 0 ? '' : `/${shown.join('/')}`
  return `${origin}${path}${parsed.search ? `?${MASK}` : ''}${parsed.hash ? `#${MASK}` : ''}`
}

/** What a person with this role may see of a webhook's target. */
export function shownWebhookUrl(url: string, role: UserRole): string {
  return role === 'admin' ? maskedWebhookUrl(url) : webhookOrigin(url)
}
