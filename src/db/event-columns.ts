// The events table's columns, described once (issue 26). The table's type (schema.ts), the store's
// inserts and PostgreSQL's array types (domain/events/store.ts), the export's columns and the
// public schemas (domain/events/event.ts, export/) all come from this list; the chain's frozen v1
// list (domain/chain/canonical.ts) is held to it by test/domain/event-columns.test.ts. A column
// added to the table is added here, in table order, and nowhere else names the columns again
// (test/domain/architecture.test.ts looks for a second list).

import { EVENT_STATUSES, GUARDRAIL_RULES } from '../text-rules.js'

/** How a column is stored, and so how it is typed, bound and shown. */
export type ColumnType =
  /** The identity: a whole number the database gives. */
  | 'serial'
  /** A whole number (an id of another table). */
  | 'integer'
  | 'text'
  /** Milliseconds since the Unix epoch, UTC (BIGINT on both databases); shown as ISO 8601 text. */
  | 'time'
  /**
   * Some of a few words (`choices`), stored as text joined by commas in the choices' order, null
   * for none; shown as a list (empty for none).
   */
  | 'words'

export interface EventColumn {
  readonly type: ColumnType
  readonly nullable: boolean
  /** The only values the column holds, when it is one of a few words. */
  readonly choices?: readonly string[]
  /**
   * The key it has in the export (SPEC §3.1) and in every API answer, when it is shown there.
   * The export's order is table order, except that the columns marked `leads` (the id and the
   * arrival) come first.
   */
  readonly shown?: { readonly key: string; readonly leads?: boolean; readonly example?: string | number }
  /**
   * Shown in API answers only (the export's format is fixed): its key, the shown column it is
   * written right after, and what it means.
   */
  readonly api?: {
    readonly key: string
    readonly follows: string
    readonly description: string
    readonly example: string
  }
}

export const EVENT_SOURCES = ['put-get', 'put-post', 'deploy'] as const

/** Every column of the events table, in table order. */
export const EVENT_COLUMNS = {
  id: { type: 'serial', nullable: false, shown: { key: 'id', leads: true, example: 123 } },
  account_id: { type: 'integer', nullable: false },
  service: { type: 'text', nullable: false, shown: { key: 'service', example: 'App1' } },
  environment: { type: 'text', nullable: false, shown: { key: 'environment', example: 'Prod' } },
  version: { type: 'text', nullable: false, shown: { key: 'version', example: '1.0.3' } },
  status: { type: 'text', nullable: false, choices: EVENT_STATUSES, shown: { key: 'status' } },
  url: { type: 'text', nullable: true, shown: { key: 'url' } },
  commit_sha: { type: 'text', nullable: true, shown: { key: 'commit' } },
  description: { type: 'text', nullable: true, shown: { key: 'description' } },
  deployer: { type: 'text', nullable: true, shown: { key: 'deployer' } },
  /** Which request form stored it. */
  source: { type: 'text', nullable: false, choices: EVENT_SOURCES, shown: { key: 'source' } },
  api_key_id: { type: 'integer', nullable: true },
  /** Copied from the key at write time so exports need no join and survive key renames. */
  api_key_name: { type: 'text', nullable: true, shown: { key: 'api_key_name' } },
  /** The server's clock when it arrived; with `id`, the order of arrival. */
  received_at: {
    type: 'time',
    nullable: false,
    shown: { key: 'received_at', leads: true, example: '2026-11-21T22:40:00.123Z' },
  },
  /** When it happened, as the sender said (SPEC §1.2); received_at when it said nothing. */
  occurred_at: {
    type: 'time',
    nullable: false,
    api: {
      key: 'occurred_at',
      follows: 'received_at',
      description: 'When it happened, as the sender said (`occurred_at`); `received_at` when it gave none.',
      example: '2026-11-21T22:39:58.000Z',
    },
  },
  /** When the change was committed, as the sender said; null when it said nothing. */
  commit_time: {
    type: 'time',
    nullable: true,
    api: {
      key: 'commit_time',
      follows: 'commit_sha',
      description: 'When the change was committed, as the sender said; null when it gave none.',
      example: '2026-11-21T22:40:00.123Z',
    },
  },
  /** The guardrails it broke when it was recorded (SPEC §11); it was stored all the same. */
  guardrails: {
    type: 'words',
    nullable: true,
    choices: GUARDRAIL_RULES,
    api: {
      key: 'guardrails',
      follows: 'source',
      description:
        'The guardrails the event broke when it was recorded (an environment lock, a freeze window, a version marked bad, a promotion rule); empty when none. It was stored all the same.',
      example: 'freeze',
    },
  },
  /** Why the sender recorded it although the check said no (`shiplog-deploy --force --reason`). */
  override_reason: {
    type: 'text',
    nullable: true,
    api: {
      key: 'override_reason',
      follows: 'source',
      description:
        'Why the sender recorded the event although the guardrail check said no (`override_reason`, sent by `shiplog-deploy --force --reason`); null when not sent.',
      example: 'hotfix for INC-42, approved by the on-call lead',
    },
  },
} as const satisfies Record<string, EventColumn>

export type EventColumnName = keyof typeof EVENT_COLUMNS

/** The column names in table order. */
export const EVENT_COLUMN_NAMES = Object.keys(EVENT_COLUMNS) as readonly EventColumnName[]

/** The description of one column. */
export function eventColumn(name: EventColumnName): EventColumn {
  return EVENT_COLUMNS[name]
}

/** A column an insert names: every one but the identity, which the database gives. */
export type InsertedColumn = {
  [K in EventColumnName]: (typeof EVENT_COLUMNS)[K] extends { type: 'serial' } ? never : K
}[EventColumnName]

/** The columns an insert names, in table order. */
export const INSERTED_COLUMNS = EVENT_COLUMN_NAMES.filter(
  (name): name is InsertedColumn => eventColumn(name).type !== 'serial',
)

/** One column of the export: the stored column and the key it has there. */
export interface ShownColumn {
  readonly column: EventColumnName
  readonly key: string
}

/** The export's columns, in its order (SPEC §3.1): the leading ones, then the rest in table order. */
export const EXPORTED_COLUMNS: readonly ShownColumn[] = (() => {
  const shown = EVENT_COLUMN_NAMES.flatMap((column) => {
    const key = eventColumn(column).shown?.key
    return key === undefined ? [] : [{ column, key, leads: eventColumn(column).shown?.leads === true }]
  })
  return [...shown.filter((c) => c.leads), ...shown.filter((c) => !c.leads)].map(({ column, key }) => ({
    column,
    key,
  }))
})()

/** An API answer's columns, in its order: the export's, each API-only column after the one it follows. */
export const API_COLUMNS: readonly ShownColumn[] = EXPORTED_COLUMNS.flatMap((shown) => [
  shown,
  ...EVENT_COLUMN_NAMES.flatMap((column) => {
    const api = eventColumn(column).api
    return api?.follows === shown.column ? [{ column, key: api.key }] : []
  }),
])

/** The TypeScript type of a stored value of the column. */
type StoredType<C> = C extends { type: 'words' }
  ? string
  : C extends { choices: readonly (infer V)[] }
    ? V
    : C extends { type: 'text' }
      ? string
      : number

/** A column's stored value, null included when the column allows it. */
export type StoredValue<C> = C extends { nullable: true } ? StoredType<C> | null : StoredType<C>
