// Creating, deleting, enabling a webhook and redelivering one of its deliveries, each with its
// audit entry in one transaction: what Settings and `shiplog webhooks` call (an entry exists
// exactly when the change does).
import type { Kysely } from 'kysely'
import type { DB, WebhookRow } from '../../db/schema.js'
import { type AuditSource, createdByOf, recordAudit, webhookDetails, webhookLabel } from '../audit/log.js'
import {
  createWebhook,
  deleteWebhook,
  enableWebhook,
  getWebhook,
  type NewWebhook,
  redeliver,
} from './queries.js'

/**
 * Validates and stores a webhook credited to the actor; returns it with its signing secret, shown
 * only now. Input a person got wrong is a WebhookInputError and changes nothing.
 */
export function createWebhookAudited(
  db: Kysely<DB>,
  appSecret: string,
  input: Omit<NewWebhook, 'createdBy'>,
  options: { allowPrivate: boolean },
  who: AuditSource,
): Promise<{ webhook: WebhookRow; secret: string }> {
  return db.transaction().execute(async (trx) => {
    const created = await createWebhook(
      trx,
      appSecret,
      { ...input, createdBy: createdByOf(who.actor).createdBy },
      options,
    )
    await recordAudit(trx, {
      accountId: input.accountId,
      ...who,
      action: 'webhook.created',
      target: webhookLabel(created.webhook.url),
      details: webhookDetails(created.webhook),
    })
    return created
  })
}

/** Deletes a webhook and its delivery log; false when the account has no such webhook. */
export function deleteWebhookAudited(
  db: Kysely<DB>,
  accountId: number,
  id: number,
  who: AuditSource,
): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const before = await getWebhook(trx, accountId, id)
    if (!before || !(await deleteWebhook(trx, accountId, id))) return false
    await recordAudit(trx, {
      accountId,
      ...who,
      action: 'webhook.deleted',
      target: webhookLabel(before.url),
      details: { id, ...webhookDetails(before) },
    })
    return true
  })
}

/** Turns a webhook back on (see enableWebhook); false when the account has no such webhook. */
export function enableWebhookAudited(
  db: Kysely<DB>,
  accountId: number,
  id: number,
  who: AuditSource,
): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const before = await getWebhook(trx, accountId, id)
    if (!before || !(await enableWebhook(trx, accountId, id))) return false
    await recordAudit(trx, {
      accountId,
      ...who,
      action: 'webhook.enabled',
      target: webhookLabel(before.url),
      details: { id, wasEnabled: Number(before.enabled) === 1 },
    })
    return true
  })
}

/**
 * Queues one of a webhook's deliveries again (see redeliver); false when the account has no such
 * webhook or the webhook no such delivery.
 */
export function redeliverAudited(
  db: Kysely<DB>,
  accountId: number,
  webhookId: number,
  deliveryId: number,
  who: AuditSource,
): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const webhook = await getWebhook(trx, accountId, webhookId)
    if (!webhook) return false
    const found = await trx
      .selectFrom('webhook_deliveries')
      .select('id')
      .where('id', '=', deliveryId)
      .where('webhook_id', '=', webhookId)
      .executeTakeFirst()
    if (!found || !(await redeliver(trx, accountId, deliveryId))) return false
    await recordAudit(trx, {
      accountId,
      ...who,
      action: 'webhook.redelivered',
      target: webhookLabel(webhook.url),
      details: { id: webhookId, delivery: deliveryId },
    })
    return true
  })
}
