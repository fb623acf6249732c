// Frozen: user emails unique per account instead of per installation, and a one-time flash per session.
import { type Kysely, type Migration, sql } from 'kysely'
import type { DialectName } from '../../config.js'

export function accountEmailsAndFlash(dialect: DialectName): Migration {
  return {
    async up(db: Kysely<unknown>) {
      // The result of the last form (a notice, a new key shown once) until the next page view.
      await db.schema.alterTable('sessions').addColumn('flash', 'text').execute()

      if (dialect === 'postgres') {
        await sql`alter table users drop constraint if exists users_email_key`.execute(db)
        await sql`alter table users add constraint users_account_email_key unique (account_id, email)`.execute(
          db,
        )
      } else {
        await rebuildSqliteUsers(db)
      }
      // Login looks a person up by address across accounts.
      await db.schema.createIndex('users_email_idx').on('users').columns(['email']).execute()
    },
  }
}

/**
 * SQLite cannot drop the column-level UNIQUE of users.email, so the table is rebuilt. Foreign keys
 * are on and cannot be turned off inside the migration's transaction, and dropping `users` would
 * cascade to sessions and clear api_keys.created_by_user_id: both are kept aside and put back.
 * Children name the parent table as "users", so they point at the new table once it has that name.
 */
async function rebuildSqliteUsers(db: Kysely<unknown>): Promise<void> {
  await sql`create table users_rebuilt (
    id integer primary key autoincrement,
    account_id bigint not null references accounts(id) on delete cascade,
    email text not null,
    password_hash text not null,
    role text not null check (role in ('admin', 'member')),
    created_at bigint not null,
    must_change_password integer not null default 0,
    unique (account_id, email)
  )`.execute(db)
  await sql`insert into users_rebuilt (id, account_id, email, password_hash, role, created_at, must_change_password)
    select id, account_id, email, password_hash, role, created_at, must_change_password from users`.execute(
    db,
  )
  await sql`create table sessions_kept as select * from sessions`.execute(db)
  await sql`create table key_creators_kept as
    select id, created_by_user_id from api_keys where created_by_user_id is not null`.execute(db)
  // AUTOINCREMENT never hands out an id twice: carry the old table's high-water mark over.
  await sql`create table users_seq_kept as select seq from sqlite_sequence where name = 'users'`.execute(db)
  await sql`drop table users`.execute(db)
  await sql`alter table users_rebuilt rename to users`.execute(db)
  await sql`update sqlite_sequence set seq = max(seq, (select seq from users_seq_kept))
    where name = 'users' and exists (select 1 from users_seq_kept)`.execute(db)
  await sql`insert into sqlite_sequence (name, seq) select 'users', seq from users_seq_kept
    where not exists (select 1 from sqlite_sequence where name = 'users')`.execute(db)
  await sql`drop table users_seq_kept`.execute(db)
  await sql`insert into sessions (id, user_id, created_at, last_seen_at, expires_at)
    select id, user_id, created_at, last_seen_at, expires_at from sessions_kept`.execute(db)
  await sql`update api_keys set created_by_user_id =
    (select k.created_by_user_id from key_creators_kept k where k.id = api_keys.id)
    where id in (select id from key_creators_kept)`.execute(db)
  await sql`drop table sessions_kept`.execute(db)
  await sql`drop table key_creators_kept`.execute(db)
  await sql`create index users_account_idx on users (account_id)`.execute(db)
}
