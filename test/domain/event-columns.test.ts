// The one description of the event's columns (db/event-columns.ts, issue 26.6): the table a fresh
// database migrates to has exactly these columns, the chain's frozen v1 list names them in table
// order, and the shapes that come from the description are the fixed ones of SPEC §3.1.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { sql } from 'kysely'
import { parseDatabaseUrl } from '../../src/config.js'
import { openDatabase } from '../../src/db/connect.js'
import {
  API_COLUMNS,
  EVENT_COLUMN_NAMES,
  EVENT_COLUMNS,
  EXPORTED_COLUMNS,
  INSERTED_COLUMNS,
} from '../../src/db/event-columns.js'
import { migrateToLatest } from '../../src/db/migrate.js'
import type { EventRow } from '../../src/db/schema.js'
import { streamSpec } from '../../src/domain/chain/canonical.js'
import {
  ApiEventSchema,
  EXPORT_COLUMNS,
  PublicEventSchema,
  toApiEvent,
  toPublicEvent,
} from '../../src/domain/events/event.js'
import { CSV_HEADER } from '../../src/domain/events/export/format.js'
import { freshDatabaseUrl } from '../helper.js'

/** The chain's events v1 columns, frozen: the links made since the first release hash these. */
const CHAIN_V1 = [
  'id',
  'account_id',
  'service',
  'environment',
  'version',
  'status',
  'url',
  'commit_sha',
  'description',
  'deployer',
  'source',
  'api_key_id',
  'api_key_name',
  'received_at',
]

test('the chain keeps its frozen v1 list, which is the description up to received_at, and the later columns as its tail', () => {
  const spec = streamSpec('events')
  assert.deepEqual(spec.columns, CHAIN_V1)
  const v1 = EVENT_COLUMN_NAMES.indexOf('received_at') + 1
  assert.deepEqual(spec.columns, EVENT_COLUMN_NAMES.slice(0, v1))
  // Every column after v1 is in a tail, in table order: a new column must come with a new tail
  // (canonical.ts), and this fails until it does.
  assert.deepEqual(
    spec.tails.flatMap((tail) => tail.columns),
    EVENT_COLUMN_NAMES.slice(v1),
  )
})

test('an insert names every column but the id', () => {
  assert.deepEqual(INSERTED_COLUMNS, EVENT_COLUMN_NAMES.slice(1))
  assert.equal(EVENT_COLUMN_NAMES[0], 'id')
})

test('the export and the API answers keep their fixed keys and order (SPEC §3.1)', () => {
  assert.equal(
    CSV_HEADER,
    'id,received_at,service,environment,version,status,url,commit,description,deployer,source,api_key_name\r\n',
  )
  assert.deepEqual(EXPORT_COLUMNS, Object.keys(PublicEventSchema.properties))
  assert.deepEqual(
    EXPORTED_COLUMNS.map(({ key }) => key),
    EXPORT_COLUMNS,
  )
  assert.deepEqual(
    API_COLUMNS.map(({ key }) => key),
    [
      'id',
      'received_at',
      'occurred_at',
      'service',
      'environment',
      'version',
      'status',
      'url',
      'commit',
      'commit_time',
      'description',
      'deployer',
      'source',
      'guardrails',
      'override_reason',
      'api_key_name',
    ],
  )
  assert.deepEqual(
    Object.keys(ApiEventSchema.properties),
    API_COLUMNS.map(({ key }) => key),
  )
  const row: EventRow = {
    id: 9,
    account_id: 1,
    service: 'api',
    environment: 'prod',
    version: '2.0',
    status: 'Failed',
    url: 'https://ci.example/9',
    commit_sha: null,
    description: 'x',
    deployer: null,
    source: 'put-get',
    api_key_id: 4,
    api_key_name: null,
    received_at: 1_700_000_000_000,
    occurred_at: 1_699_999_000_000,
    commit_time: 1_699_990_000_000,
    guardrails: 'lock,bad_version',
    override_reason: 'hotfix',
  }
  assert.equal(
    JSON.stringify(toApiEvent(row)),
    '{"id":9,"received_at":"2023-11-14T22:13:20.000Z","occurred_at":"2023-11-14T21:56:40.000Z",' +
      '"service":"api","environment":"prod","version":"2.0","status":"Failed","url":"https://ci.example/9",' +
      '"commit":null,"commit_time":"2023-11-14T19:26:40.000Z","description":"x","deployer":null,' +
      '"source":"put-get","guardrails":["lock","bad_version"],"override_reason":"hotfix","api_key_name":null}',
  )
  assert.equal(
    JSON.stringify(toPublicEvent(row)),
    '{"id":9,"received_at":"2023-11-14T22:13:20.000Z","service":"api","environment":"prod","version":"2.0",' +
      '"status":"Failed","url":"https://ci.example/9","commit":null,"description":"x","deployer":null,' +
      '"source":"put-get","api_key_name":null}',
  )
  // No time of its own: occurred_at is the arrival's text, commit_time null.
  const plain = toApiEvent({
    ...row,
    occurred_at: row.received_at,
    commit_time: null,
    guardrails: null,
    override_reason: null,
  })
  assert.equal(plain.occurred_at, plain.received_at)
  assert.equal(plain.commit_time, null)
  // Nothing broken: an empty list, never null, so a client can always iterate it.
  assert.deepEqual(plain.guardrails, [])
  assert.equal(plain.override_reason, null)
})

test('a freshly migrated database has exactly the described columns, in table order, nullable as described', async (t) => {
  const url = await freshDatabaseUrl(t)
  const database = openDatabase(parseDatabaseUrl(url))
  t.after(() => database.close())
  await migrateToLatest(database)
  const { rows } =
    database.dialect === 'sqlite'
      ? await sql<{ name: string; nullable: number }>`select name, "notnull" = 0 as nullable
          from pragma_table_info('events') order by cid`.execute(database.db)
      : await sql<{
          name: string
          nullable: boolean
        }>`select column_name as name, is_nullable = 'YES' as nullable
          from information_schema.columns where table_schema = current_schema() and table_name = 'events'
          order by ordinal_position`.execute(database.db)
  assert.deepEqual(
    rows.map((r) => r.name),
    EVENT_COLUMN_NAMES,
  )
  for (const r of rows) {
    const described = EVENT_COLUMNS[r.name as keyof typeof EVENT_COLUMNS]
    // SQLite reports an INTEGER PRIMARY KEY as nullable; it is the rowid, never null.
    if (described.type === 'serial') continue
    assert.equal(Boolean(r.nullable), described.nullable, `events.${r.name} nullable`)
  }
})
