// Seals webhook secrets and Grafana tokens at rest with a key derived from the app secret.
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto'

function keyFrom(appSecret: string): Buffer {
  return Buffer.from(hkdfSync('sha256', appSecret, 'shiplog', 'webhook secrets at rest', 32))
}

/** `v1.<iv>.<tag>.<ciphertext>` (base64url): useless without the app secret. */
export function sealSecret(appSecret: string, plain: string): string {
  const iv = randomBytes(12)
  const cipher = createCipheriv('aes-256-gcm', keyFrom(appSecret), iv)
  const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()])
  return ['v1', iv, cipher.getAuthTag(), body]
    .map((p) => (typeof p === 'string' ? p : p.toString('base64url')))
    .join('.')
}

/** The plain secret; throws when it was sealed with another app secret. */
export function openSecret(appSecret: string, sealed: string): string {
  const [version, iv, tag, body] = sealed.split('.')
  if (version !== 'v1' || !iv || !tag || body === undefined) throw new Error('not a sealed webhook secret')
  const decipher = createDecipheriv('aes-256-gcm', keyFrom(appSecret), Buffer.from(iv, 'base64url'))
  decipher.setAuthTag(Buffer.from(tag, 'base64url'))
  return Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]).toString('utf8')
}

/** Whether `sealed` opens with `appSecret` (false when it was sealed with another secret). */
export function opensWith(appSecret: string, sealed: string): boolean {
  try {
    openSecret(appSecret, sealed)
    return true
  } catch {
    return false
  }
}

/** What a webhook that cannot be unsealed says, in the delivery log and in Settings. */
export const UNSEALABLE =
  'its signing secret cannot be unsealed with this server\'s secret (it was sealed under another SHIPLOG_SECRET or data/secret; see README "The secret")'

/** Whether the webhook's sealed signing secret and Grafana token open with `appSecret`. */
export function webhookOpens(appSecret: string, webhook: { secret: string; grafana_token: string | null }) {
  return (
    opensWith(appSecret, webhook.secret) &&
    (webhook.grafana_token === null || opensWith(appSecret, webhook.grafana_token))
  )
}
