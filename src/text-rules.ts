// The rules for text that people and pipelines send: characters allowed, how length is counted,
// status spelling, names and roles. Ingest, filters, accounts, keys, Settings, the CLI and the
// configuration all use these, so the module sits below them all (the database layer too: the
// events table's description takes its statuses from here) and imports nothing of the project's.
import { createHash } from 'node:crypto'

/** An event's status, spelled as stored; ingest takes any case (canonicalStatus). */
/**
 * The guardrails an event can break (SPEC §11), in the order they are listed wherever they are
 * shown or stored: an environment lock, a freeze window, a version marked bad, a promotion rule.
 */
export const GUARDRAIL_RULES = ['lock', 'freeze', 'bad_version', 'promotion'] as const
export type GuardrailRule = (typeof GUARDRAIL_RULES)[number]

export const EVENT_STATUSES = ['Deploying', 'Deployed', 'Failed'] as const
export type EventStatus = (typeof EVENT_STATUSES)[number]
export const USER_ROLES = ['admin', 'member'] as const
export type UserRole = (typeof USER_ROLES)[number]

/** Longest account name, key name and the like, in characters (code points). */
export const NAME_MAX = 100

/**
 * The plain definition of the characters no text Shiplog keeps may hold: C0 controls and DEL (SPEC
 * §1.1), C1 controls (U+0080–U+009F; U+0085 is a line break to some readers, U+009B starts a
 * terminal escape sequence) and the bidirectional embeddings, overrides and isolates (U+202A–U+202E,
 * U+2066–U+2069), which make text read differently from what it is. Refusing more than the SPEC's
 * C0 rule is a default tightened in issue 25 (docs/API.md lists it). `hasControlCharacter` is the
 * fast form of this, property-tested against it.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: the control characters are what this matches
export const REFUSED_CHARACTER = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/

/** The line breaks and tab a multi-line field (a textarea) may hold; every other control is refused. */
const LINE_BREAKS = /[\t\n\r]/g

/**
 * Whether the text holds a character of REFUSED_CHARACTER: one pass over UTF-16 units with no
 * allocation, for ingest's hot path. Every refused character is a single unit below U+D800.
 */
export function hasControlCharacter(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i)
    if (c < 0xa0) {
      if (c <= 0x1f || c >= 0x7f) return true
    } else if (c >= 0x202a && c <= 0x2069 && (c <= 0x202e || c >= 0x2066)) {
      return true
    }
  }
  return false
}

/** Whether the text holds U+0000, which PostgreSQL cannot store in text at all. */
export function hasNul(value: string): boolean {
  return value.includes('\u0000')
}

/**
 * Why a value of a form or path (already trimmed) cannot be kept as text, in words that follow the
 * field's label ("must not contain control characters"), or null. `multiline` lets a textarea keep
 * its line breaks and tabs.
 */
export function textProblem(value: string, options: { multiline?: boolean } = {}): string | null {
  const checked = options.multiline ? value.replace(LINE_BREAKS, ' ') : value
  if (hasControlCharacter(checked)) return 'must not contain control characters or text-direction overrides'
  if (!isWellFormedText(value)) return 'must be valid Unicode text'
  return null
}

/**
 * Characters a name (account, key, user) must not hold beyond REFUSED_CHARACTER: the line and
 * paragraph separators, which break a name across lines in terminals and tables.
 */
const UNSAFE_IN_NAMES = /[\u2028\u2029]/

/**
 * Whether a name in a URL path can name nothing: a C0 control, DEL or an unpaired surrogate, which
 * no stored name could ever hold (SPEC §1.1 refused them from the start). C1 controls and
 * text-direction overrides are refused from new text only, and names stored before that may hold
 * them, so a path may still name one.
 */
export function namesNothing(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i)
    if (c <= 0x1f || c === 0x7f) return true
  }
  return !isWellFormedText(value)
}

/** Unpaired UTF-16 surrogates cannot be stored as UTF-8 text. */
export function isWellFormedText(value: string): boolean {
  return value.isWellFormed()
}

/** Length as people count it: code points, not UTF-16 units. */
export function characterCount(value: string): number {
  let n = 0
  for (const _ of value) n++
  return n
}

/** The canonical spelling of a status matched case-insensitively, or undefined. */
export function canonicalStatus(value: string): EventStatus | undefined {
  const lower = value.toLowerCase()
  return EVENT_STATUSES.find((s) => s.toLowerCase() === lower)
}

export const STATUS_CHOICES = `status must be one of ${EVENT_STATUSES.join(', ')}`

export function isUserRole(value: string): value is UserRole {
  return (USER_ROLES as readonly string[]).includes(value)
}

/**
 * Why a name (already trimmed) is not acceptable, in words that follow the field's label
 * ("must not be empty"), or null when it is.
 */
export function nameProblem(name: string, max = NAME_MAX): string | null {
  if (name === '') return 'must not be empty'
  if (characterCount(name) > max) return `must be at most ${max} characters`
  if (hasControlCharacter(name) || UNSAFE_IN_NAMES.test(name)) {
    return 'must not contain control characters or text-direction overrides'
  }
  if (!isWellFormedText(name)) return 'must be valid Unicode text'
  return null
}

/**
 * A stored name made safe to print to a terminal: anything `nameProblem` refuses (names stored
 * before the rule existed may hold it) is shown as a \u escape.
 */
export function printableName(name: string): string {
  let out = ''
  for (const c of name) {
    out +=
      hasControlCharacter(c) || UNSAFE_IN_NAMES.test(c)
        ? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`
        : c
  }
  return out
}

/** SHA-256 of a secret (API key, session token) as lowercase hex: what the database stores. */
export function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex')
}
