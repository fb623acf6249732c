// A real OpenID Connect provider (oidc-provider) on 127.0.0.1 for the single sign-on tests, with hooks to forge its answers.
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { decodeJwt, exportJWK, generateKeyPair, type JWTPayload, SignJWT } from 'jose'
import type ProviderClass from 'oidc-provider'

type Cleanup = { after(fn: () => Promise<void> | void): void }

/** What the provider says about a person: the claims Shiplog reads. */
export interface PersonClaims {
  email?: string
  email_verified?: boolean | string
  groups?: string[]
}

/** Rewrites the ID token of the next token response (the payload as the provider signed it). */
export type IdTokenForgery = (payload: JWTPayload) => Promise<string>

export interface TestProvider {
  readonly issuer: string
  readonly clientId: string
  readonly clientSecret: string
  /** The environment that points Shiplog at this provider (mapping included). */
  readonly env: Record<string, string>
  /** Sets who a login name is at the provider (any other name is `<name>` with a verified address). */
  person(login: string, claims: PersonClaims): void
  /** The next ID token the token endpoint hands out is replaced by what `forge` returns. */
  forgeNextIdToken(forge: IdTokenForgery): void
  /** Signs a payload with the provider's own key (kid included), as the provider would. */
  signAsProvider(payload: JWTPayload): Promise<string>
  /** Signs with a key the provider does not have, under the provider's key id (or the one given). */
  signWithForeignKey(payload: JWTPayload, keyId?: string): Promise<string>
  /**
   * Plays the browser at the provider without one: follows the authorization URL, submits the
   * development login form as `login`, and returns the callback URL it redirects to.
   */
  authorize(authorizationUrl: string, login: string): Promise<URL>
}

export const CLIENT_ID = 'shiplog-test'

/** How oidc-provider starts each of its warnings (after a colour code on a terminal). */
const PROVIDER_WARNING = 'oidc-provider WARNING: '

function isProviderWarning(text: string): boolean {
  const at = text.indexOf(PROVIDER_WARNING)
  return at === 0 || (at > 0 && at <= 8 && text.startsWith(String.fromCharCode(27)))
}

/**
 * oidc-provider warns, on console.warn, that this runtime is not the Node LTS it prefers and that
 * a development store and development login screens are in use: all true of a test provider, and
 * they filled every `npm test` run. Its own warnings are dropped, before it is first loaded (one
 * warns on import); everything else written to console.warn passes unchanged.
 */
let quieted = false
async function loadProvider(): Promise<typeof ProviderClass> {
  if (!quieted) {
    quieted = true
    const warn = console.warn.bind(console)
    console.warn = (...args: unknown[]) => {
      if (typeof args[0] === 'string' && isProviderWarning(args[0])) return
      warn(...args)
    }
  }
  return (await import('oidc-provider')).default
}

/**
 * Starts the provider; Shiplog must be reachable (for the browser) at `shiplogUrl`, whose
 * `/login/oidc/callback` is the registered redirect URI.
 */
export async function startTestProvider(
  t: Cleanup,
  options: { shiplogUrl: string; env?: Record<string, string> },
): Promise<TestProvider> {
  const clientSecret = randomBytes(24).toString('hex')
  const people = new Map<string, PersonClaims>()
  let forgery: IdTokenForgery | null = null

  const { privateKey } = await generateKeyPair('RS256', { extractable: true })
  const kid = `test-${randomBytes(4).toString('hex')}`
  const privateJwk = { ...(await exportJWK(privateKey)), kid, alg: 'RS256', use: 'sig' }
  const foreign = await generateKeyPair('RS256')

  // Listening first gives the port, and so the issuer, before the provider is made with it.
  let handler: ((req: IncomingMessage, res: ServerResponse) => void) | null = null
  const server = createServer((req, res) => {
    if (handler) handler(req, res)
    else res.writeHead(503).end()
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  )
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`

  const Provider = await loadProvider()
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: CLIENT_ID,
        client_secret: clientSecret,
        redirect_uris: [`${options.shiplogUrl}/login/oidc/callback`],
        post_logout_redirect_uris: [`${options.shiplogUrl}/login?bye=1`],
        response_types: ['code'],
        grant_types: ['authorization_code'],
        token_endpoint_auth_method: 'client_secret_post',
      },
    ],
    jwks: { keys: [privateJwk] },
    cookies: { keys: [randomBytes(16).toString('hex')] },
    claims: { openid: ['sub'], email: ['email', 'email_verified'], groups: ['groups'], profile: ['name'] },
    // Shiplog reads the ID token only, as most providers can be set up to put everything in it.
    conformIdTokenClaims: false,
    features: { devInteractions: { enabled: true }, rpInitiatedLogout: { enabled: true } },
    // Set, not left to the library's defaults, which print a NOTICE each time they are used.
    ttl: {
      Interaction: 3600,
      Grant: 3600,
      Session: 3600,
      AccessToken: 3600,
      IdToken: 3600,
      AuthorizationCode: 600,
    },
    async findAccount(_ctx, id) {
      const claims = people.get(id) ?? { email: id, email_verified: true }
      return { accountId: id, claims: () => ({ sub: id, ...claims }) }
    },
    // No consent screen: the tests sign in as first-party users of a company's own provider.
    async loadExistingGrant(ctx) {
      const accountId = ctx.oidc.session?.accountId
      const clientId = ctx.oidc.client?.clientId
      if (!accountId || !clientId) return undefined
      const grant = new ctx.oidc.provider.Grant({ accountId, clientId })
      grant.addOIDCScope('openid email profile groups')
      grant.addOIDCClaims(['email', 'email_verified', 'groups'])
      await grant.save()
      return grant
    },
  })
  provider.use(async (ctx, next) => {
    await next()
    if (ctx.path === '/token' && ctx.status === 200 && forgery) {
      const forge = forgery
      forgery = null
      const body = ctx.body as { id_token?: string }
      assert.ok(body.id_token, 'the provider issued an ID token to forge')
      body.id_token = await forge(decodeJwt(body.id_token))
    }
  })
  handler = provider.callback()

  const signAsProvider = (payload: JWTPayload) =>
    new SignJWT(payload).setProtectedHeader({ alg: 'RS256', kid }).sign(privateKey)

  return {
    issuer,
    clientId: CLIENT_ID,
    clientSecret,
    env: {
      SHIPLOG_OIDC_ISSUER: issuer,
      SHIPLOG_OIDC_CLIENT_ID: CLIENT_ID,
      SHIPLOG_OIDC_CLIENT_SECRET: clientSecret,
      SHIPLOG_OIDC_NAME: 'Test IdP',
      SHIPLOG_OIDC_SCOPES: 'openid email profile groups',
      SHIPLOG_OIDC_ACCOUNT_BY_DOMAIN: 'acme.example=Acme',
      SHIPLOG_OIDC_ACCOUNT_BY_GROUP: 'shiplog-beta=Beta',
      SHIPLOG_OIDC_ADMIN_GROUPS: 'shiplog-admins',
      SHIPLOG_PUBLIC_URL: options.shiplogUrl,
      ...options.env,
    },
    person: (login, claims) => void people.set(login, claims),
    forgeNextIdToken: (forge) => {
      forgery = forge
    },
    signAsProvider,
    signWithForeignKey: (payload, keyId = kid) =>
      new SignJWT(payload).setProtectedHeader({ alg: 'RS256', kid: keyId }).sign(foreign.privateKey),
    authorize: (authorizationUrl, login) => driveLogin(authorizationUrl, login, options.shiplogUrl),
  }
}

/** Follows redirects by hand with a cookie jar, filling in the development login form once. */
async function driveLogin(authorizationUrl: string, login: string, shiplogUrl: string): Promise<URL> {
  const jar = new Map<string, string>()
  const remember = (res: Response) => {
    for (const line of res.headers.getSetCookie()) {
      const [pair = ''] = line.split(';')
      const eq = pair.indexOf('=')
      const name = pair.slice(0, eq).trim()
      const value = pair.slice(eq + 1).trim()
      if (value === '' || /expires=Thu, 01 Jan 1970/i.test(line)) jar.delete(name)
      else jar.set(name, value)
    }
  }
  const cookie = () => [...jar].map(([n, v]) => `${n}=${v}`).join('; ')
  let url = authorizationUrl
  let submitted = false
  for (let hop = 0; hop < 12; hop++) {
    if (url.startsWith(`${shiplogUrl}/`)) return new URL(url)
    const res = await fetch(url, { redirect: 'manual', headers: { cookie: cookie() } })
    remember(res)
    const location = res.headers.get('location')
    if (res.status >= 300 && res.status < 400 && location) {
      await res.arrayBuffer()
      url = new URL(location, url).href
      continue
    }
    const page = await res.text()
    assert.equal(res.status, 200, `provider page ${url}: ${page.slice(0, 300)}`)
    assert.ok(!submitted, 'the provider asked to log in twice')
    const action = /<form[^>]*action="([^"]+)"/.exec(page)?.[1]
    assert.ok(action, `a login form at ${url}`)
    const post = await fetch(new URL(action.replace(/&amp;/g, '&'), url), {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie: cookie(), 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ prompt: 'login', login, password: 'any' }).toString(),
    })
    remember(post)
    await post.arrayBuffer()
    const next = post.headers.get('location')
    assert.ok(next, `the login form answered ${post.status}`)
    url = new URL(next, url).href
    submitted = true
  }
  throw new Error('the provider never sent the browser back to Shiplog')
}
