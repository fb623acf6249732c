// Deployment events: validating what callers send and turning stored rows into the public shape.
import { type Static, Type } from 'typebox'
import type { EventRow, EventStatus } from '../../db/schema.js'
import { canonicalStatus, characterCount, STATUS_CHOICES, textProblem } from '../../text-rules.js'
import { checkEventTime, type EventTimeBounds } from './event-time.js'

/** A validated event, ready to store. */
export interface EventInput {
  service: string
  environment: string
  version: string
  status: EventStatus
  url: string | null
  commit: string | null
  description: string | null
  deployer: string | null
  /** When it happened (epoch ms), as the sender said; null: when it arrived (received_at). */
  occurredAt: number | null
  /** When the change was committed (epoch ms), for lead time; null when not sent. */
  commitTime: number | null
}

export interface FieldError {
  field: string
  message: string
}

export type Validation<T> = { ok: true; value: T } | { ok: false; errors: FieldError[] }

/** The names one request form uses for the two fields that differ between forms. */
export interface FieldNames {
  service: 'app' | 'service'
  environment: 'env' | 'environment'
}

export const LEGACY_NAMES: FieldNames = { service: 'app', environment: 'env' }
export const DEPLOY_NAMES: FieldNames = { service: 'service', environment: 'environment' }

export const LIMITS = {
  service: 100,
  environment: 100,
  version: 200,
  url: 2048,
  commit: 200,
  description: 500,
  deployer: 200,
} as const

type FieldCheck = { value: string | null; error?: string }

function checkText(raw: unknown, limit: number, required: boolean): FieldCheck {
  if (raw === undefined || raw === null)
    return required ? { value: null, error: 'is required' } : { value: null }
  // A list comes from a repeated query or form parameter, or from a JSON array: say both.
  if (Array.isArray(raw))
    return { value: null, error: 'must be a single string, not a list or a repeated field' }
  if (typeof raw !== 'string') return { value: null, error: 'must be a string' }
  const value = raw.trim()
  if (value === '') return required ? { value: null, error: 'must not be empty' } : { value: null }
  // The one rule for text (control characters, text-direction overrides, unpaired surrogates).
  const problem = textProblem(value)
  if (problem) return { value: null, error: problem }
  if (characterCount(value) > limit) return { value: null, error: `must be at most ${limit} characters` }
  return { value }
}

function own(fields: Record<string, unknown>, name: string): unknown {
  return Object.hasOwn(fields, name) ? fields[name] : undefined
}

/**
 * Checks the fields of one request and lists every problem at once. Values are trimmed; extras the
 * service does not know are ignored.
 */
export function validateEventFields(
  fields: Record<string, unknown>,
  names: FieldNames,
  now: number,
  bounds: EventTimeBounds,
): Validation<EventInput> {
  const errors: FieldError[] = []
  const take = (field: string, limit: number, required: boolean): string | null => {
    const result = checkText(own(fields, field), limit, required)
    if (result.error) errors.push({ field, message: `${field} ${result.error}` })
    return result.value
  }

  const service = take(names.service, LIMITS.service, true)
  const environment = take(names.environment, LIMITS.environment, true)
  const version = take('version', LIMITS.version, true)
  const statusText = take('status', 100, true)
  let status: EventStatus | undefined
  if (statusText !== null) {
    status = canonicalStatus(statusText)
    if (!status) {
      errors.push({ field: 'status', message: STATUS_CHOICES })
    }
  } else if (!errors.some((e) => e.field === 'status')) {
    errors.push({ field: 'status', message: STATUS_CHOICES })
  }

  const url = take('url', LIMITS.url, false)
  if (url !== null && !isWebUrl(url)) {
    errors.push({ field: 'url', message: 'url must be an absolute http:// or https:// URL' })
  }
  const commit = take('commit', LIMITS.commit, false)
  const description = take('description', LIMITS.description, false)
  const deployer = take('deployer', LIMITS.deployer, false)
  const time = (field: string): number | null => {
    const raw = own(fields, field)
    if (raw === undefined) return null
    const result = checkEventTime(raw, now, bounds)
    if (result.error) errors.push({ field, message: `${field} ${result.error}` })
    return result.value
  }
  const occurredAt = time('occurred_at')
  const commitTime = time('commit_time')

  if (errors.length > 0 || service === null || environment === null || version === null || !status) {
    return { ok: false, errors }
  }
  return {
    ok: true,
    value: {
      service,
      environment,
      version,
      status,
      url,
      commit,
      description,
      deployer,
      occurredAt,
      commitTime,
    },
  }
}

function isWebUrl(value: string): boolean {
  try {
    const u = new URL(value)
    return u.protocol === 'http:' || u.protocol === 'https:'
  } catch {
    return false
  }
}

const NullableString = Type.Union([Type.String(), Type.Null()])

/**
 * The exported shape of a stored event (SPEC §3.1, fixed): one JSON export record, and (its keys in
 * order) the CSV export's columns. The API's shape (ApiEventSchema) adds the event's own times.
 */
export const PublicEventSchema = Type.Object({
  id: Type.Integer({ minimum: 1, examples: [123] }),
  received_at: Type.String({ format: 'date-time', examples: ['2026-11-21T22:40:00.123Z'] }),
  service: Type.String({ examples: ['App1'] }),
  environment: Type.String({ examples: ['Prod'] }),
  version: Type.String({ examples: ['1.0.3'] }),
  status: Type.Union([Type.Literal('Deploying'), Type.Literal('Deployed'), Type.Literal('Failed')]),
  url: NullableString,
  commit: NullableString,
  description: NullableString,
  deployer: NullableString,
  source: Type.Union([Type.Literal('put-get'), Type.Literal('put-post'), Type.Literal('deploy')]),
  api_key_name: NullableString,
})

export type PublicEvent = Static<typeof PublicEventSchema>

const Instant = Type.String({ format: 'date-time', examples: ['2026-11-21T22:40:00.123Z'] })

/**
 * The shape of a stored event as the API answers it, defined once: the 201 answer of every ingest
 * form, the read API's events and the live stream. The export's keys plus `occurred_at` (when it
 * happened; received_at when the sender gave none) and `commit_time` (null when not sent).
 */
export const ApiEventSchema = Type.Object({
  id: PublicEventSchema.properties.id,
  received_at: PublicEventSchema.properties.received_at,
  occurred_at: Type.String({
    format: 'date-time',
    description: 'When it happened, as the sender said (`occurred_at`); `received_at` when it gave none.',
    examples: ['2026-11-21T22:39:58.000Z'],
  }),
  service: PublicEventSchema.properties.service,
  environment: PublicEventSchema.properties.environment,
  version: PublicEventSchema.properties.version,
  status: PublicEventSchema.properties.status,
  url: NullableString,
  commit: NullableString,
  commit_time: Type.Union([Instant, Type.Null()], {
    description: 'When the change was committed, as the sender said; null when it gave none.',
  }),
  description: NullableString,
  deployer: NullableString,
  source: PublicEventSchema.properties.source,
  api_key_name: NullableString,
})

export type ApiEvent = Static<typeof ApiEventSchema>

/** Column order of the CSV header and key order of each JSON object (SPEC §3.1). */
export const EXPORT_COLUMNS = Object.keys(PublicEventSchema.properties) as readonly (keyof PublicEvent)[]

export function toPublicEvent(row: EventRow): PublicEvent {
  return {
    id: row.id,
    received_at: new Date(row.received_at).toISOString(),
    service: row.service,
    environment: row.environment,
    version: row.version,
    status: row.status,
    url: row.url,
    commit: row.commit_sha,
    description: row.description,
    deployer: row.deployer,
    source: row.source,
    api_key_name: row.api_key_name,
  }
}

export function toApiEvent(row: EventRow): ApiEvent {
  const receivedAt = new Date(row.received_at).toISOString()
  return {
    id: row.id,
    received_at: receivedAt,
    // Most senders give no time of their own: the arrival's text serves twice (one less per answer).
    occurred_at:
      Number(row.occurred_at) === Number(row.received_at)
        ? receivedAt
        : new Date(row.occurred_at).toISOString(),
    service: row.service,
    environment: row.environment,
    version: row.version,
    status: row.status,
    url: row.url,
    commit: row.commit_sha,
    commit_time: row.commit_time === null ? null : new Date(row.commit_time).toISOString(),
    description: row.description,
    deployer: row.deployer,
    source: row.source,
    api_key_name: row.api_key_name,
  }
}
