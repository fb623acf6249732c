// Webhooks: the sender that delivers queued deliveries in the background, with its metrics. The
// Settings pages that manage webhooks are the web UI's.
import fp from 'fastify-plugin'
import { WebhookSender } from '../domain/webhooks/sender.js'
import { packageVersion } from './platform.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** Sends queued webhook deliveries (a background task; tests call `runOnce`). */
    webhooks: WebhookSender
  }
}

export const webhooks = fp(
  async (app) => {
    const { config, metrics } = app
    const sender = new WebhookSender(app.database, {
      appSecret: app.appSecret,
      allowPrivate: config.webhookAllowPrivate,
      timeoutMs: config.webhookTimeoutMs,
      retryBaseMs: config.webhookRetryBaseMs,
      publicUrl: config.publicUrl,
      version: packageVersion(),
      onAttempt: (outcome) => metrics.webhookDelivered(outcome),
      log: app.log,
    })
    metrics.onWebhookQueueDepth(() => sender.queueDepth())
    app.tasks.add(sender.task())
    app.decorate('webhooks', sender)
  },
  { name: 'webhooks', dependencies: ['platform', 'metrics'] },
)
