// API keys: the verifier (cached, forgetting a key another instance revoked) and the recorder of
// when each key was last used, written by a background task and flushed at shutdown.
import fp from 'fastify-plugin'
import { ApiKeyVerifier, KeyUsageRecorder, keyUsageTask } from '../domain/keys.js'

declare module 'fastify' {
  interface FastifyInstance {
    keyVerifier: ApiKeyVerifier
    keyUsage: KeyUsageRecorder
  }
}

export const keys = fp(
  async (app) => {
    const { config, database } = app
    const verifier = new ApiKeyVerifier(database, { ttlMs: config.keyCacheMs })
    const usage = new KeyUsageRecorder(database.db)
    app.tasks.add(keyUsageTask(usage))
    app.revocations?.subscribe({
      onRevoked: (digest) => verifier.forgetDigest(digest),
      onGap: () => verifier.clear(),
    })
    app.decorate('keyVerifier', verifier)
    app.decorate('keyUsage', usage)
    // After the event writer's hook (registered later, so run earlier): its last batch is recorded.
    app.addHook('onClose', async () => {
      await usage.flush().catch((err) => app.log.warn({ err }, 'could not record API key last-used times'))
    })
  },
  { name: 'keys', dependencies: ['platform'] },
)
