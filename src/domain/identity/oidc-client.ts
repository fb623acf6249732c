// The OpenID Connect relying party: discovery, the authorization request (PKCE, state, nonce) and the checked answer.
import { randomBytes } from 'node:crypto'
import type { Kysely } from 'kysely'
import * as oidc from 'openid-client'
import type { OidcConfig } from '../../config.js'
import type { DB } from '../../db/schema.js'
import { sha256Hex } from '../../text-rules.js'
import type { RefusalReason } from './mapping.js'

/** How long a person may take at the provider between leaving Shiplog and coming back. */
export const LOGIN_LIFETIME_MS = 10 * 60 * 1000
const DISCOVERY_TIMEOUT_SECONDS = 10

export interface StartedLogin {
  /** Where to send the browser: the provider's authorization endpoint with every parameter. */
  readonly url: string
  /** The value for the browser-binding cookie (the same as before when the browser had one). */
  readonly browserToken: string
}

export type FinishedLogin =
  | {
      readonly ok: true
      readonly issuer: string
      readonly subject: string
      readonly claims: Readonly<Record<string, unknown>>
      readonly idToken: string
      readonly next: string | null
    }
  | {
      readonly ok: false
      readonly reason: RefusalReason
      /** What failed, for the audit entry and the log (never a token). */
      readonly detail: string
    }

export interface SsoClient {
  readonly settings: OidcConfig
  /** Records a pending login and returns the provider's authorization URL for it. */
  start(
    db: Kysely<DB>,
    options: { next: string | null; browserToken: string | undefined },
  ): Promise<StartedLogin>
  /**
   * Checks the provider's answer (the callback's query string) against the pending login it names,
   * which is used up whatever the outcome, then redeems the code and verifies the ID token.
   */
  finish(
    db: Kysely<DB>,
    options: { query: URLSearchParams; browserToken: string | undefined },
  ): Promise<FinishedLogin>
  /** The provider's logout URL for a session opened with this ID token; null when it has none. */
  endSessionUrl(idToken: string): Promise<string | null>
}

function isLoopbackIssuer(issuer: URL): boolean {
  return (
    issuer.protocol === 'http:' &&
    (issuer.hostname === 'localhost' || issuer.hostname === '[::1]' || issuer.hostname.startsWith('127.'))
  )
}

/**
 * A readable one-line reason from a library or network error: openid-client wraps the precise
 * check that failed (oauth4webapi's message, e.g. `unexpected JWT "aud" (audience) claim value`) as
 * the cause. Messages only: the causes' other fields hold the token's claims.
 */
function describe(err: unknown): string {
  if (!(err instanceof Error)) return String(err).slice(0, 200)
  let innermost: Error = err
  for (let depth = 0; depth < 4 && innermost.cause instanceof Error; depth++) innermost = innermost.cause
  const code = (err as { code?: unknown }).code
  const outer = `${typeof code === 'string' ? `${code}: ` : ''}${err.message}`
  return (innermost === err ? outer : `${outer}: ${innermost.message}`).slice(0, 300)
}

function isNetworkError(err: unknown): boolean {
  if (!(err instanceof Error)) return false
  const code = (err as { code?: unknown }).code
  return (
    (err instanceof TypeError && /fetch failed/i.test(err.message)) ||
    err.name === 'TimeoutError' ||
    err.name === 'AbortError' ||
    code === 'OAUTH_RESPONSE_IS_NOT_CONFORM' ||
    code === 'OAUTH_RESPONSE_IS_NOT_JSON'
  )
}

export function createSsoClient(settings: OidcConfig): SsoClient {
  let discovered: Promise<oidc.Configuration> | null = null

  // Discovery is lazy and retried: Shiplog starts even while the provider is down, and the first
  // sign-in after it is back finds it. openid-client keeps the JWKS and fetches it again when a
  // token names a key it does not know (the provider rotated its keys).
  // openid-client trusts an ID token from the token endpoint on the strength of TLS alone unless
  // told otherwise (OIDC Core 3.1.3.7 allows it); Shiplog verifies the signature against the JWKS too.
  const configuration = (): Promise<oidc.Configuration> => {
    const execute = [oidc.enableNonRepudiationChecks]
    if (isLoopbackIssuer(new URL(settings.issuer))) execute.push(oidc.allowInsecureRequests)
    discovered ??= oidc
      .discovery(new URL(settings.issuer), settings.clientId, settings.clientSecret, undefined, {
        timeout: DISCOVERY_TIMEOUT_SECONDS,
        execute,
      })
      .catch((err: unknown) => {
        discovered = null
        throw err
      })
    return discovered
  }

  return {
    settings,

    async start(db, { next, browserToken }) {
      const config = await configuration()
      const token =
        browserToken && /^[A-Za-z0-9_-]{43}$/.test(browserToken)
          ? browserToken
          : randomBytes(32).toString('base64url')
      const state = oidc.randomState()
      const nonce = oidc.randomNonce()
      const codeVerifier = oidc.randomPKCECodeVerifier()
      const now = Date.now()
      // Abandoned logins would pile up: each new one clears the expired.
      await db.deleteFrom('oidc_logins').where('expires_at', '<=', now).execute()
      await db
        .insertInto('oidc_logins')
        .values({
          state_digest: sha256Hex(state),
          browser_digest: sha256Hex(token),
          code_verifier: codeVerifier,
          nonce,
          next,
          created_at: now,
          expires_at: now + LOGIN_LIFETIME_MS,
        })
        .execute()
      const url = oidc.buildAuthorizationUrl(config, {
        redirect_uri: settings.redirectUri,
        scope: settings.scopes.join(' '),
        response_type: 'code',
        code_challenge: await oidc.calculatePKCECodeChallenge(codeVerifier),
        code_challenge_method: 'S256',
        state,
        nonce,
      })
      return { url: url.href, browserToken: token }
    },

    async finish(db, { query, browserToken }) {
      const state = query.get('state')
      if (!state || query.getAll('state').length !== 1 || state.length > 512) {
        return { ok: false, reason: 'unknown_state', detail: 'the answer carries no single state' }
      }
      // Taken and deleted in one statement: of two requests with the same state only one gets it.
      const pending = await db
        .deleteFrom('oidc_logins')
        .where('state_digest', '=', sha256Hex(state))
        .returningAll()
        .executeTakeFirst()
      if (!pending) return { ok: false, reason: 'unknown_state', detail: 'state unknown or already used' }
      if (pending.expires_at <= Date.now()) {
        return {
          ok: false,
          reason: 'expired_state',
          detail: 'the login was started more than 10 minutes earlier',
        }
      }
      if (!browserToken || sha256Hex(browserToken) !== pending.browser_digest) {
        return { ok: false, reason: 'other_browser', detail: 'the state belongs to another browser' }
      }
      const error = query.get('error')
      if (error !== null) {
        return { ok: false, reason: 'provider_error', detail: `the provider answered ${error.slice(0, 100)}` }
      }
      let config: oidc.Configuration
      try {
        config = await configuration()
      } catch (err) {
        return { ok: false, reason: 'provider_unavailable', detail: describe(err) }
      }
      // The URL the provider sent the browser to, rebuilt from the public address (a proxy in front
      // of Shiplog changes what the request itself says): its origin and path are the redirect_uri.
      const callback = new URL(settings.redirectUri)
      for (const [name, value] of query) callback.searchParams.append(name, value)
      try {
        const tokens = await oidc.authorizationCodeGrant(config, callback, {
          pkceCodeVerifier: pending.code_verifier,
          expectedState: state,
          expectedNonce: pending.nonce,
          idTokenExpected: true,
        })
        const claims = tokens.claims()
        const idToken = tokens.id_token
        if (!claims || !idToken)
          return { ok: false, reason: 'invalid_response', detail: 'no ID token in the answer' }
        return {
          ok: true,
          issuer: claims.iss,
          subject: claims.sub,
          claims: claims as Readonly<Record<string, unknown>>,
          idToken,
          next: pending.next,
        }
      } catch (err) {
        return {
          ok: false,
          reason: isNetworkError(err) ? 'provider_unavailable' : 'invalid_response',
          detail: describe(err),
        }
      }
    },

    async endSessionUrl(idToken) {
      let config: oidc.Configuration
      try {
        config = await configuration()
      } catch {
        // Shiplog's own session still ends; the provider's cannot be offered now.
        return null
      }
      if (!config.serverMetadata().end_session_endpoint) return null
      return oidc.buildEndSessionUrl(config, {
        id_token_hint: idToken,
        post_logout_redirect_uri: settings.postLogoutRedirectUri,
      }).href
    },
  }
}

const clients = new WeakMap<OidcConfig, SsoClient>()

/** The one client for this configuration (discovery and keys are fetched once per process); null without SSO. */
export function ssoClientFor(config: { readonly oidc: OidcConfig | null }): SsoClient | null {
  if (!config.oidc) return null
  let client = clients.get(config.oidc)
  if (!client) {
    client = createSsoClient(config.oidc)
    clients.set(config.oidc, client)
  }
  return client
}
