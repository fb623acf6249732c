// The rules for text that people and pipelines send: characters allowed, how length is counted,
// status spelling, names and roles. Ingest, filters, accounts, keys, Settings and the CLI all use these.
import { createHash } from 'node:crypto'
import type { EventStatus, UserRole } from '../db/schema.js'

export const EVENT_STATUSES: readonly EventStatus[] = ['Deploying', 'Deployed', 'Failed']
export const USER_ROLES: readonly UserRole[] = ['admin', 'member']

/** Longest account name, key name and the like, in characters (code points). */
export const NAME_MAX = 100

/** A C0 control character (U+0000–U+001F) or DEL: refused in every value (SPEC §1.1). */
export function hasControlCharacter(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i)
    if (c <= 0x1f || c === 0x7f) return true
  }
  return false
}

/**
 * Characters a name (account, key, user) must not hold beyond control characters: C1 controls
 * (U+0080–U+009F; U+009B starts a terminal escape sequence), line and paragraph separators, and the
 * bidirectional embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069), which make a
 * name read differently from what it is. Names are shown in terminals and tables, events are not
 * names: their contract keeps only the C0 rule.
 */
const UNSAFE_IN_NAMES = /[\u0080-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/

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
