// Creating and revoking an API key with its audit entry, in one transaction: what Settings and
// `shiplog keys` call (an entry exists exactly when the change does).
import type { Kysely } from 'kysely'
import type { Database } from '../../db/connect.js'
import type { ApiKeyRow, DB } from '../../db/schema.js'
import { type AuditSource, createdByOf, keyLabel, recordAudit } from '../audit/log.js'
import {
  type ApiKeyVerifier,
  type CreatedApiKey,
  createApiKey,
  type KeyScope,
  revokeApiKeyEverywhere,
  scopesFromColumn,
} from '../keys.js'

/** A new key of the account, credited to the actor (a user by email and id, the CLI as `cli`). */
export function createApiKeyAudited(
  db: Kysely<DB>,
  accountId: number,
  key: { name: string; scopes: readonly KeyScope[] },
  who: AuditSource,
): Promise<CreatedApiKey> {
  return db.transaction().execute(async (trx) => {
    const created = await createApiKey(trx, {
      accountId,
      name: key.name,
      scopes: key.scopes,
      ...createdByOf(who.actor),
    })
    await recordAudit(trx, {
      accountId,
      ...who,
      action: 'key.created',
      target: keyLabel(created.row),
      details: { scopes: [...key.scopes] },
    })
    return created
  })
}

/**
 * Revokes one of the account's keys, named by its id or by the full key, everywhere (see
 * revokeApiKeyEverywhere); undefined when the account has no such key. Revoking a revoked key
 * keeps its first time and is logged again, as the attempt it is.
 */
export function revokeApiKeyAudited(
  database: Database,
  accountId: number,
  idOrKey: string,
  who: AuditSource,
  verifier?: ApiKeyVerifier,
): Promise<ApiKeyRow | undefined> {
  return revokeApiKeyEverywhere(database, accountId, idOrKey, verifier, (trx, revoked) =>
    recordAudit(trx, {
      accountId,
      ...who,
      action: 'key.revoked',
      target: keyLabel(revoked),
      details: { scopes: scopesFromColumn(revoked.scopes) },
    }),
  )
}
