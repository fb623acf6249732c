// Frozen: an index for the version text search of /logs/ and the exports, which read every event.
import { type Kysely, type Migration, sql } from 'kysely'
import type { DialectName } from '../../config.js'

/**
 * The search is a case-insensitive substring match (event-queries.ts), which no B-tree serves.
 *
 * PostgreSQL: a pg_trgm GIN index on version. ILIKE is one of the operators gin_trgm_ops supports,
 * so the planner uses it by itself where it is cheaper, and rechecks every row: results do not
 * change. pg_trgm is a contrib extension that any role with CREATE on the database may install
 * (it is "trusted"); it lives in the schema it was first created in, which may be another
 * installation's, so the operator class is named with that schema. Where it cannot be installed
 * the migration leaves the index out and searching stays a scan; `CREATE EXTENSION pg_trgm` and
 * `CREATE INDEX events_version_trgm_idx ON events USING gin (version gin_trgm_ops)` add it later.
 *
 * SQLite: an FTS5 table with the trigram tokenizer over casefold(version), case-sensitive over the
 * casefolded text, so a query for casefold(needle) matches exactly the events whose casefold(version)
 * contains it: a superset of what the search matches, which still decides (event-queries.ts explains
 * why). Contentless (the text is not stored twice) with contentless_delete, so removing an event
 * needs only its id. The table starts empty: events are added in batches, oldest first, by
 * src/domain/version-index.ts, and `events_version_index.through` says how far it got; searches scan
 * the events past it. Indexing by trigger in the inserting transaction would have cost ingest about
 * a third of its throughput (a new FTS5 segment at every commit), and a backfill here would have
 * held up start-up on a large database. Triggers keep indexed events in step when they are deleted
 * (by hand, or by the account's ON DELETE CASCADE) or changed; a change calls casefold(), which
 * connect.ts registers on every connection Shiplog opens.
 */
export function versionSearchIndex(dialect: DialectName): Migration {
  return {
    async up(db: Kysely<unknown>) {
      if (dialect === 'postgres') await postgresUp(db)
      else await sqliteUp(db)
    },
  }
}

async function postgresUp(db: Kysely<unknown>): Promise<void> {
  // Kysely runs PostgreSQL migrations in a transaction: a failed CREATE EXTENSION must not abort it.
  await sql`savepoint pg_trgm`.execute(db)
  try {
    await sql`create extension if not exists pg_trgm`.execute(db)
    await sql`release savepoint pg_trgm`.execute(db)
  } catch {
    await sql`rollback to savepoint pg_trgm`.execute(db)
  }
  const { rows } = await sql<{ schema: string }>`
    select n.nspname as schema from pg_extension e join pg_namespace n on n.oid = e.extnamespace
    where e.extname = 'pg_trgm'`.execute(db)
  const schema = rows[0]?.schema
  if (schema === undefined) return
  await sql`create index if not exists events_version_trgm_idx on events
    using gin (version ${sql.id(schema, 'gin_trgm_ops')})`.execute(db)
}

async function sqliteUp(db: Kysely<unknown>): Promise<void> {
  // Kysely does not wrap SQLite migrations in a transaction, nor record one in the same transaction
  // as its work: the schema is made in one transaction, and found complete if the process stopped
  // before Kysely wrote down that it was.
  const { rows } = await sql`select 1 from sqlite_master where name = 'events_version_index'`.execute(db)
  if (rows.length > 0) return
  await sql`begin immediate`.execute(db)
  try {
    await sql`create virtual table events_version_fts using fts5(
      version, content='', contentless_delete=1, tokenize='trigram case_sensitive 1')`.execute(db)
    await sql`create table events_version_index (through integer not null)`.execute(db)
    await sql`insert into events_version_index (through) values (0)`.execute(db)
    await sql`create trigger events_version_fts_delete after delete on events begin
      delete from events_version_fts where rowid = old.id;
    end`.execute(db)
    await sql`create trigger events_version_fts_update after update of id, version on events begin
      delete from events_version_fts where rowid = old.id;
      insert into events_version_fts (rowid, version) select new.id, casefold(new.version)
        where new.id <= (select through from events_version_index);
    end`.execute(db)
    await sql`commit`.execute(db)
  } catch (err) {
    await sql`rollback`.execute(db)
    throw err
  }
}
