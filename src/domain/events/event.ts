// Deployment events: validating what callers send and turning stored rows into the public shape.
import { type TSchema, Type } from 'typebox'
import {
  API_COLUMNS,
  type EVENT_COLUMNS,
  type EventColumnName,
  EXPORTED_COLUMNS,
  eventColumn,
  type ShownColumn,
  type StoredValue,
} from '../../db/event-columns.js'
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
  /**
   * Why the sender records it although the guardrail check said no (`override_reason`, sent by
   * `shiplog-deploy --force --reason`); absent or null when not sent.
   */
  overrideReason?: string | null
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
  override_reason: 500,
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
  const overrideReason = take('override_reason', LIMITS.override_reason, false)

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
      overrideReason,
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

/** A value as an answer or the export shows it: times as ISO 8601 text, the rest as stored. */
type Shown<C> = C extends { type: 'time' }
  ? C extends { nullable: true }
    ? string | null
    : string
  : C extends { type: 'words'; choices: readonly (infer V)[] }
    ? V[]
    : StoredValue<C>

type Described<C extends EventColumnName> = (typeof EVENT_COLUMNS)[C]

/** The exported shape of a stored event (SPEC §3.1, fixed), as event-columns.ts describes it. */
export type PublicEvent = {
  -readonly [C in EventColumnName as Described<C> extends { shown: { key: infer K extends string } }
    ? K
    : never]: Shown<Described<C>>
}

/** The API's shape: the export's keys plus the columns shown in API answers only. */
export type ApiEvent = PublicEvent & {
  -readonly [C in EventColumnName as Described<C> extends { api: { key: infer K extends string } }
    ? K
    : never]: Shown<Described<C>>
}

/** The JSON schema of one shown column, from how it is stored. */
function shownSchema(name: EventColumnName): TSchema {
  const column = eventColumn(name)
  const example = column.shown?.example ?? column.api?.example
  const examples = example === undefined ? {} : { examples: [example] }
  const described = column.api ? { description: column.api.description } : {}
  if (column.type === 'words') {
    return Type.Array(Type.Union((column.choices ?? []).map((choice) => Type.Literal(choice))), {
      uniqueItems: true,
      ...described,
      examples: [[example]],
    })
  }
  if (column.choices) return Type.Union(column.choices.map((choice) => Type.Literal(choice)))
  switch (column.type) {
    case 'serial':
      return Type.Integer({ minimum: 1, ...examples })
    case 'integer':
      return Type.Integer(examples)
    case 'text':
      return column.nullable ? Type.Union([Type.String(), Type.Null()]) : Type.String(examples)
    case 'time':
      return column.nullable
        ? Type.Union([Type.String({ format: 'date-time', ...examples }), Type.Null()], described)
        : Type.String({ format: 'date-time', ...described, ...examples })
  }
}

function schemaOf(columns: readonly ShownColumn[]) {
  return Type.Object(Object.fromEntries(columns.map(({ column, key }) => [key, shownSchema(column)])))
}

/**
 * The exported shape of a stored event (SPEC §3.1, fixed): one JSON export record, and (its keys in
 * order) the CSV export's columns. The API's shape (ApiEventSchema) adds the event's own times.
 */
export const PublicEventSchema = schemaOf(EXPORTED_COLUMNS)

/**
 * The shape of a stored event as the API answers it, defined once: the 201 answer of every ingest
 * form, the read API's events and the live stream. The export's keys plus `occurred_at` (when it
 * happened; received_at when the sender gave none) and `commit_time` (null when not sent).
 */
export const ApiEventSchema = schemaOf(API_COLUMNS)

/** Column order of the CSV header and key order of each JSON object (SPEC §3.1). */
export const EXPORT_COLUMNS = EXPORTED_COLUMNS.map(({ key }) => key) as readonly (keyof PublicEvent)[]

/** How a shape is written: its keys in order, as a template to copy, and for each its column. */
interface Shape {
  /** Every key, null: a copy has the keys in order before any value is set (one object layout). */
  template: Readonly<Record<string, null>>
  steps: readonly { key: string; column: EventColumnName; time: boolean; words: boolean }[]
}

function shapeOf(columns: readonly ShownColumn[]): Shape {
  return {
    template: Object.fromEntries(columns.map(({ key }) => [key, null])),
    steps: columns.map(({ column, key }) => ({
      key,
      column,
      time: eventColumn(column).type === 'time',
      words: eventColumn(column).type === 'words',
    })),
  }
}

const PUBLIC_SHAPE = shapeOf(EXPORTED_COLUMNS)
const API_SHAPE = shapeOf(API_COLUMNS)

/** The list shown for a 'words' column that holds none: one shared, frozen list (most events). */
const NO_WORDS: string[] = Object.freeze([]) as unknown as string[]

/** A stored row in a shown shape, its keys in the shape's order. */
function show(shape: Shape, row: EventRow): Record<string, string | number | string[] | null> {
  const shown: Record<string, string | number | string[] | null> = { ...shape.template }
  // Most senders give no time of their own: the arrival's text serves twice (one less per answer).
  let lastTime = Number.NaN
  let lastText = ''
  for (const step of shape.steps) {
    const value = row[step.column]
    if (step.time && value !== null) {
      const ms = Number(value)
      if (ms !== lastTime) {
        lastTime = ms
        lastText = new Date(ms).toISOString()
      }
      shown[step.key] = lastText
    } else if (step.words)
      shown[step.key] = typeof value === 'string' && value !== '' ? value.split(',') : NO_WORDS
    else shown[step.key] = value
  }
  return shown
}

export function toPublicEvent(row: EventRow): PublicEvent {
  return show(PUBLIC_SHAPE, row) as PublicEvent
}

export function toApiEvent(row: EventRow): ApiEvent {
  return show(API_SHAPE, row) as ApiEvent
}
